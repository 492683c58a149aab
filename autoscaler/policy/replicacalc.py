"""Upstream's replica_calculator.go for External metrics (one metric's proposal), apart as upstream's is."""

from __future__ import annotations

import math
from typing import Final, NamedTuple, final

from autoscaler.policy.observation import MetricReading
from autoscaler.policy.record import Record
from autoscaler.policy.spec import MetricSpec, TargetType

MAX_INT32: Final = 2**31 - 1
_AVERAGE_VALUE: Final = TargetType.AVERAGE_VALUE  # an enum member read from its class costs a lookup
MIN_INT32 = -(2**31)
MAX_INT64: Final = 2**63 - 1


@final
class MetricProposal(Record):
    FIELDS = ("replicas", "ratio", "current_milli")

    replicas: int
    ratio: float
    current_milli: int  # what upstream reports: the sum (Value) or ceil(sum / status replicas) (AverageValue)

    def __init__(self, replicas: int, ratio: float, current_milli: int) -> None:
        self.replicas = replicas
        self.ratio = ratio
        self.current_milli = current_milli


class MetricError(NamedTuple):
    reason: str  # FailedGetExternalMetric
    message: str


def within_tolerance(ratio: float, tolerances: tuple[float, float]) -> bool:
    """`1 - down <= ratio <= 1 + up`, ends included; NaN is never within."""
    down, up = tolerances
    return (1.0 - down) <= ratio <= (1.0 + up)


def _ceil_replicas(x: float) -> int:
    """int32(math.Ceil(x)) with upstream's saturation at MaxInt32."""
    if math.isnan(x):
        return 0
    if x >= MAX_INT32:
        return MAX_INT32
    return math.ceil(x)


def external_metric_replicas(
    reading: MetricReading,
    metric: MetricSpec,
    *,
    spec_replicas: int,
    status_replicas: int,
    ready_pods: int | None,
    tolerances: tuple[float, float],
) -> MetricProposal | MetricError:
    """One External metric, as GetExternalMetricReplicas / GetExternalPerPodMetricReplicas."""
    if reading.values_milli is None:
        return MetricError(
            "FailedGetExternalMetric",
            f"unable to get external metric {metric.name}: {reading.error or 'read failed'}",
        )
    if not reading.values_milli:
        return MetricError(
            "FailedGetExternalMetric",
            f"unable to get external metric {metric.name}: no metrics returned from external metrics API",
        )
    values = reading.values_milli
    usage = values[0] if len(values) == 1 else sum(values)  # (planner._total: no builtin's call)
    if usage > MAX_INT64:
        usage = MAX_INT64
    target = metric.target_milli

    if metric.target_type is _AVERAGE_VALUE:
        if status_replicas == 0:
            ratio = math.inf if usage else math.nan
        else:
            ratio = usage / (target * status_replicas)
        replicas = status_replicas
        if not within_tolerance(ratio, tolerances):
            replicas = _ceil_replicas(usage / target)
        per_pod = 0 if status_replicas == 0 else math.ceil(usage / status_replicas)
        if per_pod > MAX_INT64:  # min(), without the builtin's call
            per_pod = MAX_INT64
        return MetricProposal(replicas, ratio, per_pod)

    ratio = usage / target
    if spec_replicas == 0:  # scale from zero: tolerance and readiness are skipped
        return MetricProposal(_ceil_replicas(ratio), ratio, usage)
    if within_tolerance(ratio, tolerances):
        return MetricProposal(spec_replicas, ratio, usage)
    if ready_pods is None:
        return MetricError(
            "FailedGetExternalMetric",
            f"unable to calculate ready pods for {metric.name}: "
            "no pods returned by selector while calculating replica count",
        )
    return MetricProposal(_ceil_replicas(ratio * ready_pods), ratio, usage)
