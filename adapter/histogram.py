"""Σ x² of a histogram's observations per second, from its buckets' deltas between two scrapes.

Pipeline position: presetread.histogram_total reads a SQUARE_RATE rule's `_bucket` and `_sum`
samples of one scrape into `Moments`; the scrape source keeps them as it keeps a counter and
`square_rate` turns two scrapes into Σ x² per second, so the policy gets Σ prompt tokens² per
second beside the prompt tokens per second, and from the two the prompt lengths' spread
(autoscaler/policy/lengths.py).

Each bucket's observations are taken as spread evenly over (the previous bound, its bound], whose
mean is (l + u) / 2 and mean square (l² + l·u + u²) / 3; the +Inf bucket's at the last finite
bound (engines end their buckets near the model's context length, vLLM at max_model_len). On
vLLM's 1-2-5 buckets the midpoints overstate the mean, and the mean square by up to 70 %, so the
rate scales the window's squares by the window's exact mean (the `_sum` series) over the
buckets' own: E[x²] ≈ est E[x²] · (E[x] / est E[x])², the buckets' own cv², which reads gamma
lengths within 20 % (1.19 for 1.0, 0.60 for 0.50, 1.98 for 2.0; tests/adapter/test_histogram.py).

The Prometheus source cannot compute it (PromQL cannot weigh a series by its `le` label): the
catalog refuses a SQUARE_RATE signal there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

from adapter.exposition import Sample

LE = "le"


class Moments(NamedTuple):
    """Running totals of one pod's histogram, each growing as observations come."""

    first: float  # Σ x as the buckets estimate it
    squares: float  # Σ x² as the buckets estimate it
    exact: float  # Σ x, the `_sum` series


def bucket_moments(buckets: Iterable[Sample]) -> tuple[float, float] | None:
    """(Σ x, Σ x²) estimated from cumulative `_bucket` samples, summed over the series they make
    apart from `le` (data-parallel engines); None without a bucket or with a malformed one."""
    series: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
    for s in buckets:
        bound = s.labels.get(LE)
        if bound is None:
            return None
        try:
            upper = float(bound)
        except ValueError:
            return None
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != LE))
        series.setdefault(key, []).append((upper, s.value))
    if not series:
        return None
    first = squares = 0.0
    for points in series.values():
        points.sort()
        lower, below = 0.0, 0.0
        for upper, cumulative in points:
            count = cumulative - below
            if count < 0.0 or not math.isfinite(cumulative):  # buckets are cumulative and finite
                return None
            if math.isinf(upper):
                first += count * lower
                squares += count * lower * lower
            else:
                first += count * 0.5 * (lower + upper)
                squares += count * (lower * lower + lower * upper + upper * upper) / 3.0
                lower = upper
            below = cumulative
    return first, squares


def square_rate(previous: Moments, previous_t: float, current: Moments, current_t: float) -> float | None:
    """Σ x² per second between two scrapes: the squares' increase, scaled by the exact over the
    estimated Σ x of the same observations squared; a drop in any total is a restart (the new
    totals are all increase, as presetread.counter_rate reads a counter). None when no time passed."""
    dt = current_t - previous_t
    if dt <= 0:
        return None
    restarted = any(c < p for c, p in zip(current, previous, strict=True))
    first, squares, exact = current if restarted else (c - p for c, p in zip(current, previous, strict=True))
    if first <= 0.0 or exact <= 0.0:
        return 0.0  # nothing observed in between (or only zeros): no square either
    return squares * (exact / first) ** 2 / dt
