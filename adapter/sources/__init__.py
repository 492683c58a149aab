"""Where the numbers come from: one module per source, all behind `Source`.

- `scrape`: the adapter scrapes engine pods' `/metrics` itself (pods found by `discovery` or a static
  URL list) and keeps the newest value per pod;
- `prometheus`: instant PromQL queries against an existing Prometheus.

Both return per-pod values; the catalog (adapter/catalog.py) filters by namespace, aggregates across
pods and matches label selectors, so the two sources give the same answer for the same pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from adapter.presets import Signal

# Canonical label names on a pod's value. A value without NAMESPACE (a static endpoint configured
# without one) is served in every namespace.
NAMESPACE = "namespace"
DEPLOYMENT = "deployment"
POD = "pod"
MODEL = "model"


@dataclass(frozen=True, slots=True)
class PodValue:
    """One pod's (or one endpoint's) value of one signal."""

    labels: Mapping[str, str]
    value: float
    timestamp: float  # unix seconds the value was observed
    window_s: int | None = None  # for rates: the interval the increase was measured over


@dataclass(frozen=True, slots=True)
class SourceReading:
    """What a source knows about one signal right now."""

    values: tuple[PodValue, ...]  # fresh values only
    stale: int = 0  # pods left out because their last good scrape is older than max-age
    failing: int = 0  # pods whose last scrape failed
    targets: int = 0  # pods known to the source
    # pods left out because what they expose is no reading of the signal (a malformed
    # histogram), by reason; the catalog counts them beside the values it finds invalid
    invalid: Mapping[str, int] = field(default_factory=dict)


class SourceError(Exception):
    """The source itself failed (Prometheus down, bad query); maps to SourceUnavailable."""


class Source(Protocol):
    def generation(self) -> int | None:
        """A number that changes whenever the source's data may have changed, so the catalog can
        reuse an answer until then; None: no such promise (ask every time)."""
        ...

    async def read(
        self, signal: Signal | None, query: str | None, namespace: str, now: float, max_age_s: float
    ) -> SourceReading:
        """Per-pod values of `signal` (or of the explicit PromQL `query`) in `namespace`, none older
        than `max_age_s`. Raises SourceError when the source itself fails."""
        ...


def in_namespace(labels: Mapping[str, str], namespace: str) -> bool:
    """A value without a namespace label (static endpoint) belongs to every namespace."""
    return labels.get(NAMESPACE, namespace) == namespace
