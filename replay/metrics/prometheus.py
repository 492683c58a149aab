"""The Prometheus path: Prometheus scrapes the engines, the adapter queries it (sources/prometheus.py).

What a policy sees, and how late:
- each pod is scraped every `scrape_interval_s` at its own offset (Prometheus hashes targets over the
  interval; the replay spreads pods evenly over `floor(interval / offset_step_s)` offsets), so at a
  sync the pods' samples are between 0 and one interval old, half an interval on average;
- every endpoint is scraped until its pod is gone, draining ones included; a gone pod's series is
  marked stale at its next scheduled scrape, but Prometheus writes the marker only 1.1 intervals
  after that (scrape.go endOfRunStaleness), so instant queries keep returning its last value until
  then; an instant query finds no sample older than `lookback_s`;
- rates are PromQL's rate(x[rate_window_s]) per pod (replay/metrics/promql.py), summed by the
  adapter: a new pod has no rate until two samples are in the window, a gone pod's rate lingers
  until its samples leave the window;
- with `rule_interval_s`, the adapter reads a recording rule: the value is the query as evaluated
  at the rule's last evaluation, up to one rule interval older again;
- the adapter reuses an answer for `cache_ttl_s` (a 15 s HPA sync asks after it expired);
- the adapter stamps values with the query time: the reading's age is the cache's, never the
  samples' (the policy cannot tell how stale the data are).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from autoscaler.policy.observation import MetricReading
from replay.metrics import promql
from replay.metrics.signals import Aggregation, ClusterScrape, Kind, Metric, metric, reading
from replay.metrics.spec import PrometheusPath, mid_phase

F64 = npt.NDArray[np.float64]

STALENESS_WRITE_DELAY = 1.1  # intervals after the missed scrape: one more tick, plus 10 %


@dataclass(slots=True)
class _Series:
    """One target's samples: times, and a value list per column."""

    times: list[float] = field(default_factory=list)
    columns: list[list[float]] = field(default_factory=list)
    stale_from: float = math.inf  # queries from this time on find its staleness marker


class PrometheusPipeline:
    def __init__(self, spec: PrometheusPath, sync_period_s: float) -> None:
        self.spec = spec
        interval = spec.scrape_interval_s
        self._groups = max(1, math.floor(interval / spec.offset_step_s)) if spec.offset_step_s > 0 else 1
        self._spacing = interval / self._groups
        offset = spec.scrape_offset_s
        self._first = mid_phase(self._spacing, sync_period_s) if offset is None else offset
        self._event = 0  # scrape events so far; event k scrapes the pods of group k % groups
        self._series: dict[int, _Series] = {}  # pod id -> its series
        self._gateway = _Series()
        self._semantics = promql.semantics_for(spec.version_tuple())
        # samples older than this are never read again: the rate window or the lookback, and a rule
        # evaluation or a cache entry late
        self._keep_s = (
            max(spec.rate_window_s, spec.lookback_s) + (spec.rule_interval_s or 0) + spec.cache_ttl_s
        )
        self._rule_first: float | None = None  # the recording rule's first evaluation (None: no rule)
        if spec.rule_interval_s is not None:
            offset = spec.rule_offset_s
            self._rule_first = mid_phase(spec.rule_interval_s, sync_period_s) if offset is None else offset
        self._cache: dict[str, tuple[float, F64]] = {}  # the adapter's: metric -> (asked at, values)
        self._rule_memo: dict[str, tuple[float, F64]] = {}  # metric -> (evaluated at, values)

    @property
    def next_scrape_s(self) -> float:
        return self._first + self._event * self._spacing

    def scrapes_before(self, end: float) -> list[float]:
        times, event = [], self._event
        while (t := self._first + event * self._spacing) < end:
            times.append(t)
            event += 1
        return times

    def scrape(self, cluster: ClusterScrape) -> None:
        t = cluster.t
        group = self._event % self._groups
        self._event += 1
        targets = np.concatenate((cluster.ready, cluster.draining))
        mine = np.flatnonzero(targets % self._groups == group)
        scraped = set()
        for i in mine.tolist():
            pod = int(targets[i])
            scraped.add(pod)
            series = self._series.get(pod)
            if series is None:
                series = self._series[pod] = _Series()
            _append(series, t, cluster.rows[i].tolist())
            series.stale_from = math.inf
        horizon = t - self._keep_s
        for pod in [p for p in self._series if p % self._groups == group]:
            series = self._series[pod]
            if pod not in scraped and math.isinf(series.stale_from):  # gone since its last scrape
                series.stale_from = t + STALENESS_WRITE_DELAY * self.spec.scrape_interval_s
            _trim(series, horizon)
            if not series.times:
                del self._series[pod]
        if group == 0:  # the gateway is one more target
            _append(self._gateway, t, list(cluster.gateway))
            _trim(self._gateway, horizon)

    def read(self, name: str, now: float, aggregation: Aggregation = None) -> MetricReading:
        m = metric(name, aggregation)
        cached = self._cache.get(name)
        if cached is not None and now - cached[0] <= self.spec.cache_ttl_s:
            return reading(cached[1], m, aggregation, now - cached[0], self.spec.rate_window_s)
        if self._rule_first is None:
            values = self._evaluate(m, now)
        else:
            rule = self.spec.rule_interval_s
            assert rule is not None
            if now < self._rule_first:
                return MetricReading.failed(f"the recording rule for {name} has not been evaluated yet")
            at = self._rule_first + math.floor((now - self._rule_first) / rule) * rule
            memo = self._rule_memo.get(name)
            if memo is None or memo[0] != at:
                memo = self._rule_memo[name] = (at, self._evaluate(m, at))
            values = memo[1]
        self._cache[name] = (now, values)
        return reading(values, m, aggregation, 0.0, self.spec.rate_window_s)

    def _evaluate(self, m: Metric, at: float) -> F64:
        """The per-pod values of `m`'s PromQL query evaluated at `at` (the adapter's promql_for); a
        bucketed metric's one row per bucket, each bucket its own rate()."""
        spec, semantics = self.spec, self._semantics
        series = [self._gateway] if m.gateway else list(self._series.values())
        columns = range(m.column, m.column + (len(m.labels) or 1))
        out = []
        for s in series:
            if m.kind is Kind.GAUGE:
                if at >= s.stale_from:
                    continue
                i = promql.instant(s.times, at, spec.lookback_s, semantics)
                if i is not None:
                    out.append([s.columns[c][i] for c in columns])
            else:  # a range vector keeps a gone series' samples: its rate lingers
                rates = [
                    promql.rate(s.times, s.columns[c], at, spec.rate_window_s, semantics) for c in columns
                ]
                got = [r for r in rates if r is not None]  # every column or none: the same samples
                if len(got) == len(columns):
                    out.append(got)
        values = np.array(out, dtype=np.float64).reshape(len(out), len(columns)).T
        return values if m.labels else values[0]


def _append(series: _Series, t: float, row: list[float]) -> None:
    if not series.columns:
        series.columns = [[] for _ in row]
    series.times.append(t)
    for col, v in zip(series.columns, row, strict=True):
        col.append(v)


def _trim(series: _Series, horizon: float) -> None:
    k = 0
    while k < len(series.times) and series.times[k] < horizon:
        k += 1
    if k:
        del series.times[:k]
        for col in series.columns:
            del col[:k]
