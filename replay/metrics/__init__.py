"""The metric pipeline a cluster has: what a replay policy reads, from where, and how late.

    simulate.py ──(every scrape: ClusterScrape)──► MetricPipeline ──(read(metric, now))──► MetricReading

Two paths, one module each, chosen by the scenario's `metrics.path` (spec.py):
- `direct` (direct.py): the infscale adapter scrapes the engines itself;
- `prometheus` (prometheus.py): Prometheus scrapes them, a recording rule may evaluate the query,
  the adapter queries Prometheus (PromQL's rate() in promql.py).

The loop asks the pipeline when its next scrape is due (`next_scrape_s`) and ends a tick there, so
the pipeline samples the engines at exactly that time, per scrape, never per tick; a read at `now`
returns what that path would return at `now`, staleness included. The metrics are signals.py's.
The replay's cluster is one deployment: every label selector a policy could give matches all of it,
so a read takes only how to combine the pods (their sum, mean or max, or one item per pod); a
bucketed metric (a histogram's buckets) reads one combined item per bucket, labelled `le`.
"""

from __future__ import annotations

from typing import Protocol

from autoscaler.policy.observation import MetricReading
from replay.metrics.direct import DirectPipeline
from replay.metrics.prometheus import PrometheusPipeline
from replay.metrics.signals import (
    METRICS,
    PER_POD,
    Aggregation,
    AggregationError,
    ClusterScrape,
    cluster_scrape,
    live_reading,
)
from replay.metrics.spec import DirectPath, MetricsError, MetricsSpec, PathKind, PrometheusPath

__all__ = [
    "METRICS",
    "PER_POD",
    "Aggregation",
    "AggregationError",
    "ClusterScrape",
    "DirectPath",
    "MetricPipeline",
    "MetricsError",
    "MetricsSpec",
    "PathKind",
    "PrometheusPath",
    "build_pipeline",
    "cluster_scrape",
    "live_reading",
]


class MetricPipeline(Protocol):
    @property
    def next_scrape_s(self) -> float:
        """When the path next samples the engines (the loop ends a tick there and calls scrape)."""
        ...

    def scrape(self, cluster: ClusterScrape) -> None:
        """Record what the path samples at cluster.t (== next_scrape_s)."""
        ...

    def scrapes_before(self, end: float) -> list[float]:
        """The times of the next scrapes before `end`, next_scrape_s first, as scraping at each in
        turn would make them (the loop runs the engines through several in one call)."""
        ...

    def read(self, name: str, now: float, aggregation: Aggregation = None) -> MetricReading:
        """The External Metrics API's answer for metric `name` at `now` (reads come in time
        order); a failed reading when the path has no data, never a made-up 0."""
        ...


def build_pipeline(spec: MetricsSpec, sync_period_s: float) -> MetricPipeline:
    """The scenario's path, phased against a policy synced every `sync_period_s` from t = 0."""
    if spec.path is PathKind.PROMETHEUS:
        return PrometheusPipeline(spec.prometheus, sync_period_s)
    return DirectPipeline(spec.direct, sync_period_s)
