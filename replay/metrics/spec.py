"""How metrics reach a policy in the replay's cluster: the scenario's `metrics` section.

    metrics:
      path: direct            # or prometheus
      direct: {scrape_interval_s: 5}
      prometheus: {scrape_interval_s: 30, rule_interval_s: 30}

Every default is the upstream default of the component it models (named beside it), so a
scenario that says only `path: prometheus` is a stock kube-prometheus-stack cluster with the
infscale adapter querying it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


class MetricsError(ValueError):
    """A metrics field out of range; the message names the field and value."""


class PathKind(StrEnum):
    DIRECT = "direct"  # the adapter scrapes the engines itself (adapter/sources/scrape.py)
    # Prometheus scrapes them, the adapter queries it (adapter/sources/prometheus.py)
    PROMETHEUS = "prometheus"


@dataclass(frozen=True, slots=True)
class DirectPath:
    """The adapter's own scrape loop: every pod in one round, each value kept until the next."""

    scrape_interval_s: float = 5.0  # the adapter's scrape.interval_s
    # when the rounds fall (the first at this time): the adapter's loop and the policy's syncs start
    # independently; None: mid_phase, the mean age a randomly phased loop shows
    scrape_offset_s: float | None = None
    delay_s: float = 0.0  # a round's values reach the API this much later (a 1,000-pod round: < 0.4 s)
    max_age_s: float = 30.0  # the adapter's max_age_s: older values are left out (no data)


@dataclass(frozen=True, slots=True)
class PrometheusPath:
    """Prometheus scrapes every engine pod (targets spread over the interval, as its scrape offsets
    are), optionally a recording rule evaluates the query, and the adapter queries Prometheus."""

    scrape_interval_s: float = 30.0  # the Prometheus Operator's default scrapeInterval
    # Prometheus offsets each target by a hash within the interval; the replay spreads pods evenly
    # over offsets on this grid (a coarser grid keeps the replay's ticks long; 0: one offset, all at once)
    offset_step_s: float = 5.0
    scrape_offset_s: float | None = None  # the first offset's first scrape; None: mid_phase of the grid
    rate_window_s: float = 60.0  # the adapter's prometheus.rate_window_s: rate(x[60s])
    # set: the adapter reads a recording rule evaluated this often (the Prometheus Operator's
    # default evaluationInterval is 30 s); None: it queries the raw series
    rule_interval_s: float | None = None
    rule_offset_s: float | None = None  # the rule group's first evaluation; None: mid_phase
    cache_ttl_s: float = 5.0  # the adapter's prometheus.cache_ttl_s: an answer is reused this long
    lookback_s: float = 300.0  # --query.lookback-delta
    version: str = "3"  # PromQL behaviour of this release ("3", "2.51", "2.42": replay/metrics/promql.py)

    def version_tuple(self) -> tuple[int, int]:
        major, _, minor = self.version.partition(".")
        return int(major), int(minor or 0)


@dataclass(frozen=True, slots=True)
class MetricsSpec:
    path: PathKind = PathKind.DIRECT
    direct: DirectPath = DirectPath()
    prometheus: PrometheusPath = PrometheusPath()

    def __post_init__(self) -> None:
        path: object = self.path
        if not isinstance(path, PathKind):  # a plain string from a file
            try:
                object.__setattr__(self, "path", PathKind(str(path)))
            except ValueError:
                known = ", ".join(k.value for k in PathKind)
                raise MetricsError(f"metrics.path must be one of {known}, got {path!r}") from None
        d, p = self.direct, self.prometheus
        _positive("metrics.direct.scrape_interval_s", d.scrape_interval_s)
        _positive("metrics.direct.max_age_s", d.max_age_s)
        _at_least_zero("metrics.direct.delay_s", d.delay_s)
        if d.scrape_offset_s is not None:
            _at_least_zero("metrics.direct.scrape_offset_s", d.scrape_offset_s)
        _positive("metrics.prometheus.scrape_interval_s", p.scrape_interval_s)
        _at_least_zero("metrics.prometheus.offset_step_s", p.offset_step_s)
        if p.scrape_offset_s is not None:
            _at_least_zero("metrics.prometheus.scrape_offset_s", p.scrape_offset_s)
        _positive("metrics.prometheus.rate_window_s", p.rate_window_s)
        if p.rate_window_s < 2 * p.scrape_interval_s:
            raise MetricsError(
                f"metrics.prometheus.rate_window_s must be >= 2 x scrape_interval_s "
                f"({2 * p.scrape_interval_s:g}: rate() needs two samples), got {p.rate_window_s:g}"
            )
        if p.rule_interval_s is not None:
            _positive("metrics.prometheus.rule_interval_s", p.rule_interval_s)
        if p.rule_offset_s is not None:
            _at_least_zero("metrics.prometheus.rule_offset_s", p.rule_offset_s)
        _at_least_zero("metrics.prometheus.cache_ttl_s", p.cache_ttl_s)
        _positive("metrics.prometheus.lookback_s", p.lookback_s)
        try:
            p.version_tuple()
        except ValueError:
            raise MetricsError(
                f"metrics.prometheus.version must be MAJOR or MAJOR.MINOR (e.g. 3, 2.42), got {p.version!r}"
            ) from None


def _positive(field: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise MetricsError(f"{field} must be a finite number > 0, got {value!r}")


def _at_least_zero(field: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise MetricsError(f"{field} must be a finite number >= 0, got {value!r}")


def mid_phase(interval_s: float, sync_period_s: float) -> float:
    """The default offset of a loop of `interval_s` against a policy synced every `sync_period_s`
    from t = 0: half their common period (gcd, to the millisecond). Then the samples' ages at the
    syncs average interval_s / 2, what two independently started loops show on average: e.g. a 5 s
    scrape seen at 15 s syncs is always 2.5 s old; a 30 s one, 7.5 s and 22.5 s old in turn."""
    a, b = round(interval_s * 1000), round(sync_period_s * 1000)
    return (math.gcd(a, b) or a) / 2000


DEFAULT_METRICS = MetricsSpec()
