"""Builders shared by the policy tests: intent-named, with upstream's defaults."""

from __future__ import annotations

from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.spec import AutoscalerSpec, MetricSpec, TargetType

QUEUE = "infscale_queue_size"
PROFILE_70B = {  # reference-70b's engine: the replay's step model in the CRD's words
    "stepBaseSeconds": 0.0185,
    "prefillSecondsPerToken": 5.55e-5,
    "prefillSecondsPerAttentionPair": 8.85e-9,
    "decodeSecondsPerRequest": 4.0e-5,
    "decodeSecondsPerContextToken": 3.3e-8,
    "maxBatchedTokens": 8192,
    "maxNumSeqs": 1024,
    "kvCacheTokens": 440000,
}


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
