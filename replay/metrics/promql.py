"""PromQL's `rate()` over a float counter and its instant-vector selection, as Prometheus computes them.

`rate` transcribes `extrapolatedRate` of prometheus/prometheus promql/functions.go (v3.x, the float
case, no start timestamps): the increase between the first and last sample in the range, counter
resets added back, extrapolated to the range's ends when the samples come close to them (within
1.1 average sample intervals; else by half an interval), never to below zero, divided by the range.
`instant` is an instant selector's choice: the newest sample within the lookback delta (5 m).

Two behaviours changed across releases; `Semantics` picks them so the replay can model the
Prometheus a cluster runs, and the tests can compare against the Debian package's version:
- ranges are left-open, (t - range, t], from 3.0; before, [t - range, t] (a sample exactly on the
  range's start counted);
- from 2.51 (commit 7f912db "Fix limiting of extrapolation to negative values") the start is first
  cut to half an interval when the first sample is far from it, *then* limited by the zero point;
  before, the zero point came first and could lengthen the extrapolation.

Times are seconds (float), as the replay's clock; Prometheus' are integer milliseconds, so a replay
clock on multiples of a millisecond gives Prometheus' answers exactly.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Semantics:
    left_open: bool = True  # 3.0+: (t - range, t]; before: [t - range, t]
    cut_before_zero: bool = True  # 2.51+: half-interval cut first, then the zero-point limit


PROMETHEUS_3 = Semantics()
PROMETHEUS_2_51 = Semantics(left_open=False)
PROMETHEUS_2_42 = Semantics(left_open=False, cut_before_zero=False)  # Debian 12's package


def semantics_for(version: tuple[int, int]) -> Semantics:
    """The behaviour of Prometheus `major.minor`."""
    if version >= (3, 0):
        return PROMETHEUS_3
    return PROMETHEUS_2_51 if version >= (2, 51) else PROMETHEUS_2_42


DEFAULT_LOOKBACK_S = 300.0  # --query.lookback-delta


def in_range(times: Sequence[float], start: float, end: float, semantics: Semantics) -> tuple[int, int]:
    """Indices [lo, hi) of the sorted `times` inside the range selector (start, end] (or [start, end])."""
    lo = bisect.bisect_right(times, start) if semantics.left_open else bisect.bisect_left(times, start)
    return lo, bisect.bisect_right(times, end)


def rate(
    times: Sequence[float],
    values: Sequence[float],
    at: float,
    range_s: float,
    semantics: Semantics = PROMETHEUS_3,
) -> float | None:
    """`rate(counter[range_s])` evaluated at `at` over one series (samples sorted by time);
    None where Prometheus returns no element (fewer than two samples in the range)."""
    range_start = at - range_s
    lo, hi = in_range(times, range_start, at, semantics)
    if hi - lo < 2:
        return None
    first_t, last_t = times[lo], times[hi - 1]
    first_v = values[lo]
    result = values[hi - 1] - first_v
    for i in range(lo + 1, hi):  # a drop is a reset: the counter restarted from 0
        if values[i] < values[i - 1]:
            result += values[i - 1]
    duration_to_start = first_t - range_start
    duration_to_end = at - last_t
    sampled = last_t - first_t
    average = sampled / (hi - lo - 1)
    threshold = average * 1.1
    if semantics.cut_before_zero:
        if duration_to_start >= threshold:
            duration_to_start = average / 2
        if result > 0 and first_v >= 0:
            duration_to_start = min(duration_to_start, sampled * (first_v / result))
    else:
        if result > 0 and first_v >= 0:
            duration_to_start = min(duration_to_start, sampled * (first_v / result))
        if duration_to_start >= threshold:
            duration_to_start = average / 2
    if duration_to_end >= threshold:
        duration_to_end = average / 2
    factor = (sampled + duration_to_start + duration_to_end) / sampled if sampled != 0 else 1.0
    return result * factor / range_s


def instant(
    times: Sequence[float],
    at: float,
    lookback_s: float = DEFAULT_LOOKBACK_S,
    semantics: Semantics = PROMETHEUS_3,
) -> int | None:
    """Index of the sample an instant selector returns at `at`: the newest within the lookback
    delta (left-open from 3.0, as ranges); None: no sample that recent. (Staleness markers, which
    also hide a series, are the caller's: they are not samples here.)"""
    lo, hi = in_range(times, at - lookback_s, at, semantics)
    return hi - 1 if hi > lo else None
