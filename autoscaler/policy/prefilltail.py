"""The prefill times' far tail, from the engines' prefill-time histograms: how long one long
prompt's prefill holds a replica past the slack a waiting request has.

A request that arrives while a replica is prefilling one long prompt waits out what is left of it
(the light-load TTFT tail, capacity.py and leastloaded.py: u·P(R > slack)). Its share of a
prefill, E[(S - τ)+] / E[S], had been read from a gamma of the prompts' mean and cv²
(lengths.residual_share), whose tail is two orders of magnitude too thin on real prompt lengths:
ServeGen m-large's 24,000-token prompts (0.05 % of its requests) hold a 70B replica for 4 s, where
a gamma of the same mean and cv² puts 1e-6 of its mass (docs/policy.md, "The prefill times' far
tail"). vLLM observes every request's prefill time (first token - first scheduled) in
vllm:request_prefill_time_seconds when the request finishes; the adapter serves its buckets' rates as
`prefill_time_bucket_rate`, one item per `le` bound, which is what this module reads.

The survival P(S > s) is known at the bounds (the share of prefills above each) and read as linear
between them (each bucket's prefills spread evenly over it, 1 at s = 0); past the last finite bound
nothing is counted. The bounds' shares are averages over MEMORY_S: a far tail is rare (one prefill
in 2,000 on m-large, one every few minutes at 10 requests/s), so a window of minutes holds none.
Pure arithmetic on floats.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Final, NamedTuple

from autoscaler.policy.observation import MetricReading

# the shares' memory: at 10 requests/s and one prefill in 2,000 past the slack, ~20 of them (a
# 22 % error); a trace whose tail comes and goes within the hour is read at its hour's mean
MEMORY_S: Final = 3600.0
MAX_BOUNDS: Final = 64  # vLLM has 21 finite bounds; a histogram of more is read up to its first 64
LE: Final = "le"


class PrefillTail(NamedTuple):
    """The prefill times' survival at the histogram's bounds, time-averaged: `over[i]` the
    prefills per second above bounds[i] and `total` all prefills per second, both exponential
    averages over MEMORY_S started from 0 (their ratio is the share, unbiased from the first tick)."""

    at: float
    bounds: tuple[float, ...]  # the finite `le` bounds, increasing, in seconds
    over: tuple[float, ...]
    total: float


class BucketsError(ValueError):
    pass


def buckets(reading: MetricReading) -> tuple[tuple[float, ...], tuple[float, ...], float]:
    """(bounds, prefills/s above each, prefills/s) from a reading of cumulative bucket rates, one
    item per `le` label; BucketsError names what is wrong with a reading that is no histogram. A
    bucket's rate below a lower bound's (two pods' rates read at different moments, rounding) is
    read as that rate: cumulative counts never fall."""
    values = reading.values_milli
    if values is None:
        raise BucketsError(reading.error or "no reading")
    if len(reading.labels) != len(values):
        raise BucketsError(f"{len(values)} items but {len(reading.labels)} with labels: no `le` to read")
    pairs: list[tuple[float, float]] = []
    total = None
    for labels, milli in zip(reading.labels, values, strict=True):
        le = labels.get(LE)
        if le is None:
            raise BucketsError(f"an item without an `{LE}` label: {dict(labels)}")
        try:
            bound = float(le)
        except ValueError:
            raise BucketsError(f"`{LE}` is not a number: {le!r}") from None
        rate = milli / 1000.0
        if not math.isfinite(rate) or rate < 0.0:
            raise BucketsError(f"the rate at {LE}={le} is {rate!r}: a bucket rate is finite and >= 0")
        if bound == math.inf:
            total = rate
        elif not bound > 0.0 or not math.isfinite(bound):
            raise BucketsError(f"`{LE}`={le!r}: a bound is a finite number of seconds > 0, or +Inf")
        else:
            pairs.append((bound, rate))
    if total is None:
        raise BucketsError(f"no `{LE}`=+Inf item: the prefills' total is not known")
    pairs.sort()
    bounds: list[float] = []
    over: list[float] = []
    below = 0.0
    for bound, rate in pairs[:MAX_BOUNDS]:
        if bounds and bound == bounds[-1]:
            raise BucketsError(f"the bound {bound:g} s comes twice")
        below = min(max(below, rate), total)
        bounds.append(bound)
        over.append(total - below)
    return tuple(bounds), tuple(over), total


def track(
    prior: PrefillTail | None, reading: MetricReading | None, now: float, period_s: float
) -> tuple[PrefillTail | None, str]:
    """The tail with this tick's reading folded in (weight 1 - exp(-dt / MEMORY_S), dt the time
    since the last reading, `period_s` at the first), and why a reading was not read ("" when it
    was): a failed or malformed read keeps the prior as it is, and the capacity stage says why; a
    histogram with other bounds than the prior's starts afresh."""
    if reading is None:
        return prior, "no reading"
    try:
        bounds, over, total = buckets(reading)
    except BucketsError as e:
        return prior, str(e)
    dt = period_s if prior is None or now <= prior.at else now - prior.at
    w = -math.expm1(-dt / MEMORY_S)
    if prior is None or prior.bounds != bounds:
        return PrefillTail(now, bounds, tuple(w * x for x in over), w * total), ""
    keep = 1.0 - w
    averaged = tuple(keep * a + w * x for a, x in zip(prior.over, over, strict=True))
    return PrefillTail(now, bounds, averaged, keep * prior.total + w * total), ""


def excess_s(tail: PrefillTail, slack_s: float) -> float:
    """E[(S - slack)+] per prefill, seconds: ∫ P(S > s) ds from the slack to the last finite
    bound, the survival linear between the bounds (1 at 0)."""
    got = 0.0
    for lo_s, lo_p, hi_s, hi_p in _segments(tail):
        if hi_s > slack_s:
            start = lo_s if lo_s > slack_s else slack_s
            got += 0.5 * (_on(lo_s, lo_p, hi_s, hi_p, start) + hi_p) * (hi_s - start)  # a trapezoid
    return got


def missed(tail: PrefillTail | None, ttft_s: float, ttft_tokens: float | None) -> float:
    """The share of prefills past the TTFT target itself: requests no fleet serves in time, as
    idlemiss reads them from the prompt lengths' gamma (0 without a tail, or with a token-aware
    target, which a long prompt's own length extends and the histogram does not show)."""
    if tail is None or ttft_tokens is not None:
        return 0.0
    return past_share(tail, ttft_s)


def past_share(tail: PrefillTail, slack_s: float) -> float:
    """P(S > slack), the survival at the slack on the same lines: for the capacity stage's words."""
    for lo_s, lo_p, hi_s, hi_p in _segments(tail):
        if hi_s >= slack_s:
            return _on(lo_s, lo_p, hi_s, hi_p, slack_s)
    return 0.0


def _segments(tail: PrefillTail) -> Iterator[tuple[float, float, float, float]]:
    """The survival's linear pieces (from s, P(S > s), to s, P(S > s)), from (0, 1) through each
    bound's share, never rising (none without a prefill)."""
    total = tail.total
    if total <= 0.0:
        return
    lo_s, lo_p = 0.0, 1.0
    for bound, over in zip(tail.bounds, tail.over, strict=True):
        p = over / total
        if p > lo_p:
            p = lo_p
        yield lo_s, lo_p, bound, p
        lo_s, lo_p = bound, p


def _on(lo_s: float, lo_p: float, hi_s: float, hi_p: float, s: float) -> float:
    """The survival at s on the piece from (lo_s, lo_p) to (hi_s, hi_p)."""
    return lo_p + (hi_p - lo_p) * (s - lo_s) / (hi_s - lo_s)
