"""HPA-shaped documents (camelCase, as users paste them) validated and turned into the frozen spec.

Used by `infscale explain` and by the controller for its CRD. Every validation error names the
field path (`spec.metrics[0].external.target.value: ...`), so a typo never silently becomes a default.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    ValidationError,
    model_validator,
)

from autoscaler import quantity
from autoscaler.policy.spec import (
    DEFAULT_DOWNSCALE_STABILIZATION_S,
    DEFAULT_TOLERANCE,
    AutoscalerSpec,
    Behavior,
    FloorSpec,
    MetricSpec,
    RatePolicy,
    RatePolicyType,
    SelectPolicy,
    TargetType,
    default_scale_down,
    default_scale_up,
)
from autoscaler.specbase import QuantityValue, StrictModel
from autoscaler.specsections import CapacityModel, ColdStartModel, FloorsModel, PredictionModel


class MatchExpressionModel(StrictModel):
    key: Annotated[str, Field(min_length=1)]
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _values_fit_operator(self) -> MatchExpressionModel:
        # the apiserver's rule: In/NotIn need values, Exists/DoesNotExist take none
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values, got {self.values}")
        return self

    def as_string(self) -> str:
        if self.operator == "Exists":
            return self.key
        if self.operator == "DoesNotExist":
            return f"!{self.key}"
        op = "in" if self.operator == "In" else "notin"
        return f"{self.key} {op} ({','.join(self.values)})"


class LabelSelectorModel(StrictModel):
    match_labels: dict[str, str] = Field(default_factory=dict, alias="matchLabels")
    match_expressions: list[MatchExpressionModel] = Field(default_factory=list, alias="matchExpressions")

    def as_string(self) -> str:
        """The selector in the string form the External Metrics API takes as `labelSelector`."""
        parts = [f"{k}={v}" for k, v in sorted(self.match_labels.items())]
        return ",".join([*parts, *(expr.as_string() for expr in self.match_expressions)])


class MetricIdentifierModel(StrictModel):
    name: Annotated[str, Field(min_length=1)]
    selector: LabelSelectorModel | None = None


class MetricTargetModel(StrictModel):
    type: Literal["Value", "AverageValue"]
    value: QuantityValue | None = None
    average_value: QuantityValue | None = Field(default=None, alias="averageValue")


class ExternalMetricSourceModel(StrictModel):
    metric: MetricIdentifierModel
    target: MetricTargetModel


class MetricSpecModel(StrictModel):
    type: Literal["External"]
    external: ExternalMetricSourceModel

    @property
    def metric_name(self) -> str:
        return self.external.metric.name

    def to_spec(self) -> MetricSpec:
        target = self.external.target
        # Upstream picks the branch by which field is filled, averageValue first, not by target.type.
        if target.average_value is not None:
            kind, raw = TargetType.AVERAGE_VALUE, target.average_value
        elif target.value is not None:
            kind, raw = TargetType.VALUE, target.value
        else:
            raise ValueError("target: one of value or averageValue is required")
        selector = self.external.metric.selector
        return MetricSpec(
            name=self.external.metric.name,
            target_type=kind,
            target_milli=quantity.to_milli(raw),
            selector=selector.as_string() if selector else "",
        )


def _selector(metric: MetricIdentifierModel) -> str:
    return metric.selector.as_string() if metric.selector else ""


class PodsMetricSourceModel(StrictModel):
    metric: MetricIdentifierModel
    target: MetricTargetModel


class PodsMetricSpecModel(StrictModel):
    """A Pods metric (custom.metrics.k8s.io, one value per pod): upstream's GetMetricReplicas.

    Its formula is `ceil(mean / target × pods)`, inside the tolerance unchanged: the core's Value
    formula on the mean, which is what to_spec asks for (explain hands the core the mean).
    """

    type: Literal["Pods"]
    pods: PodsMetricSourceModel

    @property
    def metric_name(self) -> str:
        return self.pods.metric.name

    def to_spec(self) -> MetricSpec:
        target = self.pods.target
        if target.type != "AverageValue" or target.average_value is None:  # the apiserver's rule
            raise ValueError("pods.target: a Pods metric takes type AverageValue with an averageValue")
        return MetricSpec(
            self.metric_name,
            TargetType.VALUE,
            quantity.to_milli(target.average_value),
            _selector(self.pods.metric),
        )


class ObjectReferenceModel(StrictModel):
    kind: Annotated[str, Field(min_length=1)]
    name: Annotated[str, Field(min_length=1)]
    api_version: str = Field(default="", alias="apiVersion")


class ObjectMetricSourceModel(StrictModel):
    described_object: ObjectReferenceModel = Field(alias="describedObject")
    metric: MetricIdentifierModel
    target: MetricTargetModel


class ObjectMetricSpecModel(StrictModel):
    """An Object metric (one value describing one object): upstream's GetObjectMetricReplicas
    (Value: the External Value formula) or GetObjectPerPodMetricReplicas (AverageValue: the
    External AverageValue formula), picked by target.type as upstream does for Object metrics."""

    type: Literal["Object"]
    object: ObjectMetricSourceModel

    @property
    def metric_name(self) -> str:
        return self.object.metric.name

    def to_spec(self) -> MetricSpec:
        target = self.object.target
        raw = target.value if target.type == "Value" else target.average_value
        if raw is None:
            field = "value" if target.type == "Value" else "averageValue"
            raise ValueError(f"object.target: type {target.type} needs {field}")
        kind = TargetType.VALUE if target.type == "Value" else TargetType.AVERAGE_VALUE
        return MetricSpec(self.metric_name, kind, quantity.to_milli(raw), _selector(self.object.metric))


class RatePolicyModel(StrictModel):
    type: Literal["Pods", "Percent"]
    value: Annotated[int, Field(gt=0)]
    period_seconds: Annotated[int, Field(ge=1, le=1800, alias="periodSeconds")]


class ScalingRulesModel(StrictModel):
    stabilization_window_seconds: Annotated[
        int | None, Field(ge=0, le=3600, alias="stabilizationWindowSeconds")
    ] = None
    select_policy: Literal["Max", "Min", "Disabled"] | None = Field(default=None, alias="selectPolicy")
    policies: list[RatePolicyModel] | None = None
    tolerance: QuantityValue | None = None

    def parts(self) -> dict[str, object]:
        tolerance = None
        if self.tolerance is not None:
            tolerance = float(quantity.parse(self.tolerance))
            if tolerance < 0:
                raise ValueError(f"tolerance must be >= 0, got {self.tolerance!r}")
        return {
            "stabilization_window_s": self.stabilization_window_seconds,
            "select_policy": SelectPolicy(self.select_policy) if self.select_policy else None,
            "policies": None
            if self.policies is None
            else tuple(RatePolicy(RatePolicyType(p.type), p.value, p.period_seconds) for p in self.policies),
            "tolerance": tolerance,
        }


class BehaviorModel(StrictModel):
    scale_up: ScalingRulesModel | None = Field(default=None, alias="scaleUp")
    scale_down: ScalingRulesModel | None = Field(default=None, alias="scaleDown")

    def to_spec(self, cluster_window_s: int) -> Behavior:
        up = self.scale_up.parts() if self.scale_up else {}
        down = self.scale_down.parts() if self.scale_down else {}
        return Behavior(
            scale_up=default_scale_up(**up),  # type: ignore[arg-type]
            scale_down=default_scale_down(cluster_window_s=cluster_window_s, **down),  # type: ignore[arg-type]
        )


class AutoscalerSpecModel(StrictModel):
    """autoscaling/v2 HorizontalPodAutoscalerSpec (External metrics) plus infscale's own fields."""

    min_replicas: Annotated[int, Field(ge=0, alias="minReplicas")] = 1
    max_replicas: Annotated[int, Field(ge=1, alias="maxReplicas")]
    metrics: Annotated[list[MetricSpecModel], Field(min_length=1)]
    behavior: BehaviorModel | None = None
    cold_start: ColdStartModel | None = Field(default=None, alias="coldStart")
    prediction: PredictionModel | None = None
    floors: FloorsModel | None = None
    capacity: CapacityModel | None = None
    scale_target_ref: dict[str, str] | None = Field(
        default=None, alias="scaleTargetRef"
    )  # carried, unused here

    def to_spec(
        self,
        *,
        tolerance: float = DEFAULT_TOLERANCE,
        downscale_stabilization_s: int = DEFAULT_DOWNSCALE_STABILIZATION_S,
        max_metric_age_s: float | None = None,
    ) -> AutoscalerSpec:
        if self.max_replicas < self.min_replicas:
            raise ValueError(
                f"maxReplicas ({self.max_replicas}) must be >= minReplicas ({self.min_replicas})"
            )
        names = [m.metric_name for m in self.metrics]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"metrics: each metric name may appear once, repeated: {duplicates}")
        return AutoscalerSpec(
            min_replicas=self.min_replicas,
            max_replicas=self.max_replicas,
            metrics=tuple(m.to_spec() for m in self.metrics),
            behavior=self.behavior.to_spec(downscale_stabilization_s) if self.behavior else None,
            tolerance=tolerance,
            downscale_stabilization_s=downscale_stabilization_s,
            max_metric_age_s=max_metric_age_s,
            cold_start=self.cold_start.to_spec() if self.cold_start else None,
            prediction=self.prediction.to_spec() if self.prediction else None,
            floors=self.floors.to_spec() if self.floors else FloorSpec(),
            capacity=self.capacity.to_spec() if self.capacity else None,
        )


_METRIC_TYPES = {"External", "Pods", "Object"}


def describe_validation_error(exc: ValidationError, root: str = "") -> str:
    """pydantic's errors as `path: message` lines, using the document's own (camelCase) names."""
    lines = []
    for err in exc.errors():
        path = root
        for part in err["loc"]:
            if part in _METRIC_TYPES:  # a discriminated union's tag: not part of the document's path
                continue
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        message = err["msg"].removeprefix("Value error, ")
        lines.append(f"{path}: {message}")
    return "\n".join(lines)


AnyMetricSpecModel = Annotated[
    MetricSpecModel | PodsMetricSpecModel | ObjectMetricSpecModel, Field(discriminator="type")
]


class HpaSpecModel(AutoscalerSpecModel):
    """The spec `infscale explain` reads: External, Pods and Object metrics. The controller's
    InferenceAutoscaler reads External metrics only, so it keeps AutoscalerSpecModel."""

    metrics: Annotated[list[AnyMetricSpecModel], Field(min_length=1)]  # type: ignore[assignment]
