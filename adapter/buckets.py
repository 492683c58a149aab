"""A histogram's cumulative buckets, one count per `le` bound, and their per-second rates.

Pipeline position: presetread.bucket_counts reads a BUCKET_RATE rule's `_bucket` samples of one
scrape into `Buckets` (`counts_of`); the scrape source keeps them as it keeps a counter and
`rates_between` turns two scrapes into one rate per bound. The Prometheus source gets the same
rates from rate() by `le` and checks each pod's with `in_bound_order`. Bounds keep the engine's own
spelling ("0.3", "1.0", "+Inf"): they are served as the items' `le` label.

Whatever is not a histogram raises `BucketError`, whose `problem` is the telemetry reason the pod
is left out for (catalog: `infscale_adapter_invalid_pods_excluded_total`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from adapter.exposition import Sample
from adapter.presets import LE

# Rates from Prometheus are sums of floats over a pod's series, added in any order: two equal
# bounds may differ in their last bits. Anything past this is a real decrease.
_REL_TOL = 1e-9


class BucketProblem(StrEnum):
    LE_MISSING = "le_missing"
    LE_NOT_NUMERIC = "le_not_numeric"  # also NaN and -Inf: no upper bound
    DUPLICATE_LE = "duplicate_le"
    NOT_FINITE = "not_finite"
    NEGATIVE = "negative"
    NOT_CUMULATIVE = "not_cumulative"  # a bound counts less than a lower one
    NO_INF_BUCKET = "no_inf_bucket"  # +Inf is the count of every observation: the policy needs it
    LAYOUTS_DIFFER = "bucket_layouts_differ"  # a pod's series (data-parallel engines) bound apart


class BucketError(ValueError):
    def __init__(self, problem: BucketProblem, message: str) -> None:
        super().__init__(message)
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Buckets:
    """One pod's histogram by bound, in increasing bound order, +Inf last."""

    bounds: tuple[str, ...]  # `le` as exposed
    values: tuple[float, ...]  # cumulative counts, or their rates per second


def _bound(le: str | None) -> float:
    if le is None:
        raise BucketError(BucketProblem.LE_MISSING, "a _bucket series without an le label")
    try:
        upper = float(le)
    except ValueError:
        upper = math.nan
    if math.isnan(upper) or upper == -math.inf:
        raise BucketError(BucketProblem.LE_NOT_NUMERIC, f"le={le!r} is not a bucket bound")
    return upper


def check_cumulative(bounds: Sequence[str], values: Sequence[float], what: str) -> None:
    """Values in bound order must be finite, >= 0 and never decrease (`what` names them)."""
    below, below_le = 0.0, None
    for le, v in zip(bounds, values, strict=True):
        if not math.isfinite(v):
            raise BucketError(BucketProblem.NOT_FINITE, f"{what} at le={le!r} is {v}")
        if v < 0:
            raise BucketError(BucketProblem.NEGATIVE, f"{what} at le={le!r} is {v:g}")
        if v < below and not math.isclose(v, below, rel_tol=_REL_TOL):
            raise BucketError(
                BucketProblem.NOT_CUMULATIVE,
                f"{what} at le={le!r} ({v:g}) is below the {what} at le={below_le!r} ({below:g})",
            )
        below, below_le = max(below, v), le


def in_bound_order(pairs: Iterable[tuple[str | None, float]], what: str = "rate") -> Buckets:
    """One histogram's (le, value) pairs in any order, checked and put in bound order."""
    by_bound: dict[float, tuple[str, float]] = {}
    for le, value in pairs:
        upper = _bound(le)
        assert le is not None  # _bound refused it
        if upper in by_bound:
            raise BucketError(
                BucketProblem.DUPLICATE_LE, f"le={by_bound[upper][0]!r} and le={le!r} are one bound"
            )
        by_bound[upper] = (le, value)
    if math.inf not in by_bound:
        raise BucketError(BucketProblem.NO_INF_BUCKET, 'no le="+Inf" bucket')
    ordered = [by_bound[u] for u in sorted(by_bound)]
    bounds, values = tuple(le for le, _ in ordered), tuple(v for _, v in ordered)
    check_cumulative(bounds, values, what)
    return Buckets(bounds, values)


def counts_of(samples: Iterable[Sample]) -> Buckets:
    """A pod's `_bucket` samples checked series by series (the labels apart from `le`: one per
    data-parallel engine) and added up per bound; the series must share their bounds."""
    series: dict[tuple[tuple[str, str], ...], list[tuple[str | None, float]]] = {}
    for s in samples:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != LE))
        series.setdefault(key, []).append((s.labels.get(LE), s.value))
    checked = [in_bound_order(pairs, "count") for pairs in series.values()]
    if not checked:
        raise BucketError(BucketProblem.NO_INF_BUCKET, "no _bucket series")
    bounds = checked[0].bounds
    for other in checked[1:]:
        if other.bounds != bounds:
            raise BucketError(
                BucketProblem.LAYOUTS_DIFFER, f"one series has bounds {bounds}, another {other.bounds}"
            )
    return Buckets(bounds, tuple(sum(c) for c in zip(*(b.values for b in checked), strict=True)))


def rates_between(previous: Buckets, previous_t: float, current: Buckets, current_t: float) -> Buckets | None:
    """Per-second increase of each bound between two scrapes; None when no time passed.

    A drop in any bound, or other bounds, is an engine restart: the new counts are all increase,
    as presetread.counter_rate reads a counter (bucket by bucket, a restart could leave a low
    bound's old count standing against a high bound's new one: a tail that is not there).
    """
    dt = current_t - previous_t
    if dt <= 0:
        return None
    restarted = previous.bounds != current.bounds or any(
        c < p for c, p in zip(current.values, previous.values, strict=True)
    )
    increases = (
        current.values if restarted else [c - p for c, p in zip(current.values, previous.values, strict=True)]
    )
    # counts that each grew can still grow apart: more new observations under 1 s than in all
    check_cumulative(current.bounds, increases, "increase")
    return Buckets(current.bounds, tuple(i / dt for i in increases))
