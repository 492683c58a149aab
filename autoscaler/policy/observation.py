"""What the caller saw this tick: the scale subresource, pod readiness and metric values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple


class MetricReading(NamedTuple):
    """The items the External Metrics API returned for one metric, in milli-units.

    `values_milli=None` means the read failed (`error` says why); an empty tuple is an empty list,
    which upstream also treats as an error, never as 0.
    """

    values_milli: tuple[int, ...] | None
    error: str = ""
    age_s: float = 0.0  # how old the newest sample is; stale data is treated as missing
    # the seconds a rate was measured over (the API's `window`): its noise at the caller's period
    # (demand.observe); None: a gauge, or not said
    window_s: float | None = None
    # each item's metricLabels, in the order of values_milli (empty: not given): a histogram's
    # bucket rates are one item per `le` bound (the prefill-time tail, prefilltail.py)
    labels: tuple[Mapping[str, str], ...] = ()

    @classmethod
    def of(cls, *values: float) -> MetricReading:
        return cls(tuple(round(v * 1000) for v in values))

    @classmethod
    def failed(cls, error: str) -> MetricReading:
        return cls(None, error)


@dataclass(frozen=True, slots=True)
class Observation:
    spec_replicas: int  # scale.spec.replicas: guards, normalisation, Value targets
    status_replicas: int  # scale.status.replicas: AverageValue targets
    ready_pods: int | None  # Running and Ready pods of the target; None: no pod matched the selector
    metrics: Mapping[str, MetricReading] = field(default_factory=dict)
    # predicted ready times (absolute seconds) of replicas that are starting right now
    starting_ready_at: tuple[float, ...] = ()
    # time to ready of a replica started now, when the caller knows better than the model
    # (e.g. a quantile of observed startups); None: ask the cold-start model
    lead_time_s: float | None = None
    # what the cold-start model needs to know of the cluster (empty: a cold cluster, the slow case)
    free_gpus_per_node: tuple[int, ...] = ()
    image_cached_nodes: tuple[int, ...] = ()  # indices into free_gpus_per_node
    weights_cached_nodes: tuple[int, ...] = ()  # nodes whose local cache holds the weights
    loading_remaining_gb: tuple[float, ...] = ()  # replicas reading weights from shared storage now
    # seconds until each starting replica that has not begun its load (provisioning, pulling the
    # image) begins reading from shared storage: loads that will compete with any started now
    upcoming_loads_s: tuple[float, ...] = ()
    # (seconds until up, free GPUs) of each node on its way (asked for, not up yet): a replica no
    # up node fits waits for the first with room, as the cluster autoscaler counts pending pods
    # onto the nodes it is bringing up. Empty: none, or unknown (each then counts as a new node)
    coming_nodes: tuple[tuple[float, int], ...] = ()
