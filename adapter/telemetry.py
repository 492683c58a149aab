"""The adapter's own metrics: how fresh each served metric is and how the sources behave.

One `Telemetry` owns one `CollectorRegistry`. The sources (adapter/sources/) and the catalog write to
it; the server (adapter/server.py) adds its request metrics to the same registry and serves it on
`/metrics`. Keeping a private registry (not the process-global one) lets tests build several adapters
in one process and read exact values back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from threading import Lock

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

# Scrapes of a healthy engine take milliseconds; a timeout is seconds. Buckets cover both ends.
_LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _AgeCollector(Collector):
    """Age of the newest fresh data behind each served metric, computed when /metrics is read.

    A stored gauge would freeze the age at the moment of the last scrape; computing it at collection
    time makes a stuck source visible as a growing age.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._newest: dict[str, float] = {}
        self._lock = Lock()  # collect() runs on the server's thread; updates come from the event loop

    def observe(self, metric: str, newest_timestamp: float) -> None:
        with self._lock:
            self._newest[metric] = newest_timestamp

    def newest(self, metric: str) -> float | None:
        with self._lock:
            return self._newest.get(metric)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = self._clock()
        family = GaugeMetricFamily(
            "infscale_adapter_metric_age_seconds",
            "Seconds since the newest fresh sample behind each served external metric.",
            labels=["metric"],
        )
        with self._lock:
            items = sorted(self._newest.items())
        for metric, newest in items:
            family.add_metric([metric], max(0.0, now - newest))
        yield family


class Telemetry:
    """Metrics about the adapter itself, all in `registry`."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._ages = _AgeCollector(clock)
        self.registry.register(self._ages)
        self.scrape_duration_s = Histogram(
            "infscale_adapter_scrape_duration_seconds",
            "Duration of one source request (a pod /metrics scrape or one PromQL query).",
            ["source"],
            buckets=_LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.scrape_round_duration_s = Histogram(
            "infscale_adapter_scrape_round_duration_seconds",
            "Duration of one scrape round over all discovered pods.",
            buckets=_LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.scrape_errors = Counter(
            "infscale_adapter_scrape_errors",
            "Failed source requests, by source and reason (timeout, connect, http_status, parse, "
            "too_many_lines, too_many_series, body_too_large, query).",
            ["source", "reason"],
            registry=self.registry,
        )
        self.targets = Gauge(
            "infscale_adapter_targets",
            "Engine pods (or static endpoints) the scrape source currently knows.",
            registry=self.registry,
        )
        self.stale_targets = Gauge(
            "infscale_adapter_stale_targets",
            "Targets without a successful scrape within max-age after the last round.",
            registry=self.registry,
        )
        self.stale_exclusions = Counter(
            "infscale_adapter_stale_pods_excluded",
            "Pods left out of a metric read because their data was older than max-age.",
            ["metric"],
            registry=self.registry,
        )
        self.invalid_exclusions = Counter(
            "infscale_adapter_invalid_pods_excluded",
            "Pods left out of a metric read because their value is no valid reading of the signal, by "
            "reason: not_finite, out_of_range, negative, above_one (a fraction over 1); a histogram's "
            "bucket rates also le_missing, le_not_numeric, duplicate_le, not_cumulative, no_inf_bucket, "
            "bucket_layouts_differ (adapter/buckets.py).",
            ["metric", "reason"],
            registry=self.registry,
        )
        self.no_data_reads = Counter(
            "infscale_adapter_no_data_reads",
            "Metric reads that failed because no fresh value existed (answered with an error, never 0).",
            ["metric"],
            registry=self.registry,
        )
        self.discovery_restarts = Counter(
            "infscale_adapter_discovery_restarts",
            "Kubernetes pod watches restarted, by reason (expired, error).",
            ["reason"],
            registry=self.registry,
        )

    def observe_freshness(self, metric: str, newest_timestamp: float) -> None:
        """Record the timestamp of the newest fresh sample served for `metric`."""
        previous = self._ages.newest(metric)
        if previous is None or newest_timestamp > previous:
            self._ages.observe(metric, newest_timestamp)
