"""One pod's signal read from its samples by a preset's Rule: the presets' arithmetic, apart from data."""

from __future__ import annotations

from collections.abc import Sequence

from adapter import buckets, histogram
from adapter.exposition import Sample, Samples
from adapter.presets import Combine, EnginePreset, Kind, Rule, Series, Term


def wanted_names(preset: EnginePreset) -> frozenset[str]:
    """Every sample name the preset reads (with the `_total` spelling the parser may produce)."""
    names = {alt.name for rule in preset.rules.values() for term in rule.terms for alt in term.alternatives}
    return frozenset(names | {f"{n}_total" for n in names})


def _find(samples: Samples, series: Series, keep_nan: bool = False) -> list[Sample]:
    for name in (series.name, f"{series.name}_total"):  # see parse_exposition on `_total`
        found = [
            s
            for s in samples.get(name, ())
            if all(s.labels.get(k) == v for k, v in series.match.items()) and (keep_nan or s.value == s.value)
        ]
        if found:
            return found
    return []


def _term_samples(samples: Samples, term: Term) -> list[Sample]:
    for alternative in term.alternatives:
        found = _find(samples, alternative)
        if found:
            return found
    return []


def combine(values: Sequence[float], how: Combine) -> float:
    """Sum, mean or max of a non-empty sequence: a pod's series here, a label group's pods in the
    catalog."""
    if how is Combine.SUM:
        return sum(values)
    if how is Combine.MEAN:
        return sum(values) / len(values)
    return max(values)


_COUNTERS = frozenset({Kind.RATE, Kind.SQUARE_RATE, Kind.BUCKET_RATE})


def is_counter(rule: Rule) -> bool:
    """Read across two scrapes (counter_total, counter_rate), not from one (gauge_value)."""
    return rule.kind in _COUNTERS


def gauge_value(rule: Rule, samples: Samples) -> float | None:
    """One pod's value of a GAUGE or RATIO rule; None when the engine does not expose it."""
    if rule.kind in _COUNTERS:
        raise ValueError("gauge_value() needs a gauge or ratio rule; rates need two scrapes (counter_total)")
    found = [_term_samples(samples, term) for term in rule.terms]
    if rule.kind is Kind.RATIO:
        numerator, denominator = found
        if not numerator or not denominator:
            return None
        total = sum(s.value for s in denominator)
        # a zero capacity means the engine has not sized its batch yet: no data, not 0 % or infinity
        return sum(s.value for s in numerator) / total if total > 0 else None
    present = [f for f in found if f]
    if not present:
        return None
    return sum(combine([s.value for s in f], rule.combine) for f in present)


def counter_total(rule: Rule, samples: Samples) -> float | None:
    """The summed counter behind a RATE rule, for `counter_rate` across two scrapes."""
    if rule.kind is not Kind.RATE:
        raise ValueError(f"counter_total() needs a rate rule, got {rule.kind.value}")
    found = [_term_samples(samples, term) for term in rule.terms]
    present = [f for f in found if f]
    if not present:
        return None
    return sum(s.value for f in present for s in f)


def histogram_total(rule: Rule, samples: Samples) -> histogram.Moments | None:
    """The totals behind a SQUARE_RATE rule (histogram.Moments), for histogram.square_rate across
    two scrapes; None when the engine exposes no such histogram."""
    if rule.kind is not Kind.SQUARE_RATE:
        raise ValueError(f"histogram_total() needs a square_rate rule, got {rule.kind.value}")
    buckets, sums = (_term_samples(samples, term) for term in rule.terms)
    estimated = histogram.bucket_moments(buckets) if buckets and sums else None
    if estimated is None:
        return None
    return histogram.Moments(*estimated, sum(s.value for s in sums))


def bucket_counts(rule: Rule, samples: Samples) -> buckets.Buckets | None:
    """The cumulative counts behind a BUCKET_RATE rule, for buckets.rates_between across two
    scrapes; None when the engine exposes no such histogram. Raises buckets.BucketError for one
    that is malformed (a NaN bucket too: a gap in the bounds is no histogram)."""
    if rule.kind is not Kind.BUCKET_RATE:
        raise ValueError(f"bucket_counts() needs a bucket_rate rule, got {rule.kind.value}")
    for alternative in rule.terms[0].alternatives:
        found = _find(samples, alternative, keep_nan=True)
        if found:
            return buckets.counts_of(found)
    return None


def counter_rate(previous: float, previous_t: float, current: float, current_t: float) -> float | None:
    """Per-second increase between two readings; a drop is a counter reset (engine restart).

    As Prometheus' rate() does, after a reset the new value is all increase: 100 -> 30 over 10 s is
    30 / 10 = 3/s, not -7/s. None when no time passed.
    """
    dt = current_t - previous_t
    if dt <= 0:
        return None
    increase = current - previous if current >= previous else current
    return increase / dt


def model_of(preset: EnginePreset, samples: Samples) -> str | None:
    """The model a pod serves, when its engine labels it and it serves exactly one."""
    if preset.model_label is None:
        return None
    models = {
        s.labels[preset.model_label]
        for rule in preset.rules.values()
        for term in rule.terms
        for alt in term.alternatives
        for s in _find(samples, alt)
        if preset.model_label in s.labels
    }
    return models.pop() if len(models) == 1 else None
