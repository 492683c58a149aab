"""A histogram's survival from the engines' bucket rates, averaged over time: what the prefill
times' far tail (prefilltail.py) and the output lengths' shape (outputsteps.py) are read from.

The adapter serves a histogram's buckets as their rates, one item per `le` bound, cumulative as
Prometheus keeps them (`prefill_time_bucket_rate`, `output_length_bucket_rate`). The survival
P(X > bound) is known at the bounds, the share of observations above each. The shares are averages
over MEMORY_S: a far tail is rare (one prefill in 2,000 on ServeGen m-large, one every few minutes
at 10 requests/s), so a window of minutes holds none of it. Pure arithmetic on floats.
"""

from __future__ import annotations

import math
from typing import Final, NamedTuple

from autoscaler.policy.observation import MetricReading

# the shares' memory: at 10 requests/s and one prefill in 2,000 past the slack, ~20 of them (a
# 22 % error); a trace whose tail comes and goes within the hour is read at its hour's mean
MEMORY_S: Final = 3600.0
# vLLM has 21 finite prefill-time bounds and ~16 output-length ones (1, 2, 5, ... to the model's
# length), TGI 100 linear ones: a histogram of more is read up to its first 128
MAX_BOUNDS: Final = 128
LE: Final = "le"


class Units(NamedTuple):
    """A histogram's bounds: their name in the words and the largest one read (a bound past it is
    no engine's, and the planner's state, which keeps the bounds, reads none past it back)."""

    name: str
    most: float


SECONDS: Final = Units("seconds", 1e7)  # prefill times: past 115 days
TOKENS: Final = Units("tokens", 1e9)  # output lengths: past a billion tokens


class Survival(NamedTuple):
    """A histogram's survival at its bounds, time-averaged: `over[i]` the observations per second
    above bounds[i] and `total` all of them per second, both exponential averages over MEMORY_S
    started from 0 (their ratio is the share, unbiased from the first tick)."""

    at: float
    bounds: tuple[float, ...]  # the finite `le` bounds, increasing
    over: tuple[float, ...]
    total: float


class BucketsError(ValueError):
    pass


def buckets(
    reading: MetricReading, units: Units = SECONDS
) -> tuple[tuple[float, ...], tuple[float, ...], float]:
    """(bounds, observations/s above each, observations/s) from a reading of cumulative bucket
    rates, one item per `le` label, its bounds in `units`; BucketsError names what is wrong with a
    reading that is no histogram. A bucket's rate below a lower bound's (two pods' rates read at
    different moments, rounding) is read as that rate: cumulative counts never fall."""
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
        elif not 0.0 < bound <= units.most:
            raise BucketsError(
                f"`{LE}`={le!r}: a bound is a number of {units.name} > 0 and at most {units.most:g}, or +Inf"
            )
        else:
            pairs.append((bound, rate))
    if total is None:
        raise BucketsError(f"no `{LE}`=+Inf item: the observations' total is not known")
    pairs.sort()
    bounds: list[float] = []
    over: list[float] = []
    below = 0.0
    for bound, rate in pairs[:MAX_BOUNDS]:
        if bounds and bound == bounds[-1]:
            raise BucketsError(f"the bound {bound:g} {units.name} comes twice")
        below = min(max(below, rate), total)
        bounds.append(bound)
        over.append(total - below)
    return tuple(bounds), tuple(over), total


def track(
    prior: Survival | None,
    reading: MetricReading | None,
    now: float,
    period_s: float,
    units: Units = SECONDS,
) -> tuple[Survival | None, str]:
    """The survival with this tick's reading folded in (weight 1 - exp(-dt / MEMORY_S), dt the
    time since the last reading, `period_s` at the first), and why a reading was not read ("" when
    it was): a failed or malformed read keeps the prior as it is, and the capacity stage says why;
    a histogram with other bounds than the prior's starts afresh."""
    if reading is None:
        return prior, "no reading"
    try:
        bounds, over, total = buckets(reading, units)
    except BucketsError as e:
        return prior, str(e)
    dt = period_s if prior is None or now <= prior.at else now - prior.at
    w = -math.expm1(-dt / MEMORY_S)
    if prior is None or prior.bounds != bounds:
        return Survival(now, bounds, tuple(w * x for x in over), w * total), ""
    keep = 1.0 - w
    averaged = tuple(keep * a + w * x for a, x in zip(prior.over, over, strict=True))
    return Survival(now, bounds, averaged, keep * prior.total + w * total), ""


def shares(survival: Survival) -> tuple[float, ...]:
    """P(X > bound) at each bound, never rising (all 0 before any observation)."""
    total = survival.total
    if total <= 0.0:
        return tuple(0.0 for _ in survival.bounds)
    got: list[float] = []
    last = 1.0
    for over in survival.over:
        p = over / total
        if p > last:
            p = last
        got.append(p)
        last = p
    return tuple(got)
