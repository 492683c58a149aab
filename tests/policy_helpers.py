"""Builders shared by the policy tests: intent-named, with upstream's defaults."""

from __future__ import annotations

from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.spec import AutoscalerSpec, MetricSpec, TargetType

QUEUE = "infscale_queue_size"


def avg_spec(target: float = 10, *, max_replicas: int = 100, **kwargs: object) -> AutoscalerSpec:
    """One AverageValue metric on the queue size."""
    metric = MetricSpec(QUEUE, TargetType.AVERAGE_VALUE, round(target * 1000))
    return AutoscalerSpec(max_replicas=max_replicas, metrics=(metric,), **kwargs)  # type: ignore[arg-type]


def value_spec(target: float = 10, *, max_replicas: int = 100, **kwargs: object) -> AutoscalerSpec:
    metric = MetricSpec(QUEUE, TargetType.VALUE, round(target * 1000))
    return AutoscalerSpec(max_replicas=max_replicas, metrics=(metric,), **kwargs)  # type: ignore[arg-type]


def observe(
    replicas: int, *values: float, ready: int | None = None, status: int | None = None
) -> Observation:
    return Observation(
        spec_replicas=replicas,
        status_replicas=replicas if status is None else status,
        ready_pods=replicas if ready is None else ready,
        metrics={QUEUE: MetricReading.of(*values)},
    )
