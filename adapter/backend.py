"""The seam between the API server and where the numbers come from.

The server (adapter/server.py) knows HTTP, auth and the wire format; a backend (adapter/catalog.py)
knows metric names, sources and freshness. Tests put a scripted backend behind the real server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from common.selector import Selector


@dataclass(frozen=True, slots=True)
class MetricSample:
    """One item of an ExternalMetricValueList."""

    labels: Mapping[str, str]  # metricLabels
    value: float
    timestamp: float  # unix seconds of the newest data behind the value
    window_s: int | None = None  # the window a rate was computed over; None for gauges


class BackendError(Exception):
    """Base of the errors a backend raises; the server maps each to a metav1.Status."""


class UnknownMetric(BackendError):  # -> 404 NotFound
    pass


class NoData(BackendError):  # no fresh value matches -> 404 NotFound, never a made-up 0
    pass


class SourceUnavailable(BackendError):  # the source itself failed -> 503 ServiceUnavailable
    pass


class MetricsBackend(Protocol):
    def metric_names(self) -> Sequence[str]:
        """Names served, for discovery."""
        ...

    async def read(self, namespace: str, metric: str, selector: Selector) -> Sequence[MetricSample]:
        """Current values of `metric` in `namespace` whose labels match `selector`; raises BackendError."""
        ...
