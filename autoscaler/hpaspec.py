"""HPA-shaped documents (camelCase, as users paste them) validated and turned into the frozen spec.

Used by `infscale explain` and by the controller for its CRD. Every validation error names the
field path (`spec.metrics[0].external.target.value: ...`), so a typo never silently becomes a default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from autoscaler import quantity
from autoscaler.policy.spec import (
    DEFAULT_DOWNSCALE_STABILIZATION_S,
    DEFAULT_TOLERANCE,
    AutoscalerSpec,
    Behavior,
    CapacitySpec,
    ColdStartSpec,
    CompileCache,
    DemandSpec,
    FloorSpec,
    ForecasterKind,
    GateScope,
    MetricSpec,
    PredictionSpec,
    RatePolicy,
    RatePolicyType,
    ReplicaProfile,
    Schedule,
    SelectPolicy,
    SloTarget,
    TargetType,
    default_scale_down,
    default_scale_up,
)


def _valid_quantity(value: str | int | float) -> str | int | float:
    quantity.parse(value)  # raises QuantityError (a ValueError) naming the bad text
    return value


QuantityValue = Annotated[str | int | float, AfterValidator(_valid_quantity)]
_PREDICTION = PredictionSpec()  # defaults live in the frozen spec, once
_WEEKDAYS = {"mon": 0, "tue": 1, "wed": 2, "thu": 3, "fri": 4, "sat": 5, "sun": 6}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class MatchExpressionModel(_Model):
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


class LabelSelectorModel(_Model):
    match_labels: dict[str, str] = Field(default_factory=dict, alias="matchLabels")
    match_expressions: list[MatchExpressionModel] = Field(default_factory=list, alias="matchExpressions")

    def as_string(self) -> str:
        """The selector in the string form the External Metrics API takes as `labelSelector`."""
        parts = [f"{k}={v}" for k, v in sorted(self.match_labels.items())]
        return ",".join([*parts, *(expr.as_string() for expr in self.match_expressions)])


class MetricIdentifierModel(_Model):
    name: Annotated[str, Field(min_length=1)]
    selector: LabelSelectorModel | None = None


class MetricTargetModel(_Model):
    type: Literal["Value", "AverageValue"]
    value: QuantityValue | None = None
    average_value: QuantityValue | None = Field(default=None, alias="averageValue")


class ExternalMetricSourceModel(_Model):
    metric: MetricIdentifierModel
    target: MetricTargetModel


class MetricSpecModel(_Model):
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


class PodsMetricSourceModel(_Model):
    metric: MetricIdentifierModel
    target: MetricTargetModel


class PodsMetricSpecModel(_Model):
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


class ObjectReferenceModel(_Model):
    kind: Annotated[str, Field(min_length=1)]
    name: Annotated[str, Field(min_length=1)]
    api_version: str = Field(default="", alias="apiVersion")


class ObjectMetricSourceModel(_Model):
    described_object: ObjectReferenceModel = Field(alias="describedObject")
    metric: MetricIdentifierModel
    target: MetricTargetModel


class ObjectMetricSpecModel(_Model):
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


class RatePolicyModel(_Model):
    type: Literal["Pods", "Percent"]
    value: Annotated[int, Field(gt=0)]
    period_seconds: Annotated[int, Field(ge=1, le=1800, alias="periodSeconds")]


class ScalingRulesModel(_Model):
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


class BehaviorModel(_Model):
    scale_up: ScalingRulesModel | None = Field(default=None, alias="scaleUp")
    scale_down: ScalingRulesModel | None = Field(default=None, alias="scaleDown")

    def to_spec(self, cluster_window_s: int) -> Behavior:
        up = self.scale_up.parts() if self.scale_up else {}
        down = self.scale_down.parts() if self.scale_down else {}
        return Behavior(
            scale_up=default_scale_up(**up),  # type: ignore[arg-type]
            scale_down=default_scale_down(cluster_window_s=cluster_window_s, **down),  # type: ignore[arg-type]
        )


_COMPILE_CACHE = {"Disabled": CompileCache.NONE, "Node": CompileCache.NODE, "Cluster": CompileCache.CLUSTER}
_GATE_SCOPE = {"Load": GateScope.LOAD, "Startup": GateScope.STARTUP}


class ColdStartModel(_Model):
    weights_gb: Annotated[float, Field(gt=0, alias="weightsGB")]
    storage_gbps: Annotated[float, Field(gt=0, alias="storageGBps")]
    per_loader_gbps: Annotated[float | None, Field(gt=0, alias="perLoaderGBps")] = None
    local_cache_gbps: Annotated[float | None, Field(gt=0, alias="localCacheGBps")] = None
    image_pull_seconds: Annotated[float, Field(ge=0, alias="imagePullSeconds")] = 0.0
    warmup_seconds: Annotated[float, Field(ge=0, alias="warmupSeconds")] = 0.0
    node_provision_seconds: Annotated[float, Field(ge=0, alias="nodeProvisionSeconds")] = 0.0
    gpus_per_replica: Annotated[int, Field(ge=1, alias="gpusPerReplica")] = 1
    gpus_per_node: Annotated[int, Field(ge=1, alias="gpusPerNode")] = 8
    max_concurrent_loads: Annotated[int | None, Field(ge=1, alias="maxConcurrentLoads")] = None
    engine_init_seconds: Annotated[float, Field(ge=0, alias="engineInitSeconds")] = 0.0
    compile_seconds: Annotated[float, Field(ge=0, alias="compileSeconds")] = 0.0
    compile_cached_seconds: Annotated[float, Field(ge=0, alias="compileCachedSeconds")] = 0.0
    compile_cache: Literal["Disabled", "Node", "Cluster"] = Field(default="Disabled", alias="compileCache")
    node_cache_gb: Annotated[float | None, Field(gt=0, alias="nodeCacheGB")] = None
    peer_gbps: Annotated[float | None, Field(gt=0, alias="peerGBps")] = None
    load_gate_scope: Literal["Load", "Startup"] = Field(default="Load", alias="loadGateScope")

    @model_validator(mode="after")
    def _consistent(self) -> ColdStartModel:
        self.to_spec()
        return self

    @classmethod
    def document_of(cls, spec: ColdStartSpec) -> dict[str, object]:
        """The coldStart block that parses back into `spec` (fields at their default left out)."""
        values = {
            "weights_gb": spec.weights_gb,
            "storage_gbps": spec.storage_gbps,
            "per_loader_gbps": spec.per_loader_gbps,
            "local_cache_gbps": spec.local_cache_gbps,
            "image_pull_seconds": spec.image_pull_s,
            "warmup_seconds": spec.warmup_s,
            "node_provision_seconds": spec.node_provision_s,
            "gpus_per_replica": spec.gpus_per_replica,
            "gpus_per_node": spec.gpus_per_node,
            "max_concurrent_loads": spec.max_concurrent_loads,
            "engine_init_seconds": spec.engine_init_s,
            "compile_seconds": spec.compile_s,
            "compile_cached_seconds": spec.compile_cached_s,
            "compile_cache": next(k for k, v in _COMPILE_CACHE.items() if v == spec.compile_cache),
            "node_cache_gb": spec.node_cache_gb,
            "peer_gbps": spec.peer_gbps,
            "load_gate_scope": next(k for k, v in _GATE_SCOPE.items() if v == spec.load_gate_scope),
        }
        fields = cls.model_fields
        return {
            str(fields[name].alias): value
            for name, value in values.items()
            if value is not None and (fields[name].is_required() or value != fields[name].default)
        }

    def to_spec(self) -> ColdStartSpec:
        if self.gpus_per_replica > self.gpus_per_node:
            raise ValueError(
                f"gpusPerReplica ({self.gpus_per_replica}) exceeds gpusPerNode ({self.gpus_per_node})"
            )
        if self.compile_cached_seconds > self.compile_seconds:
            raise ValueError(
                f"compileCachedSeconds ({self.compile_cached_seconds:g}) exceeds compileSeconds "
                f"({self.compile_seconds:g}): a cache hit is not slower than a miss"
            )
        if self.node_cache_gb is not None and self.local_cache_gbps is None:
            raise ValueError("nodeCacheGB needs localCacheGBps (a capacity needs a cache)")
        return ColdStartSpec(
            weights_gb=self.weights_gb,
            storage_gbps=self.storage_gbps,
            per_loader_gbps=self.per_loader_gbps,
            local_cache_gbps=self.local_cache_gbps,
            image_pull_s=self.image_pull_seconds,
            warmup_s=self.warmup_seconds,
            node_provision_s=self.node_provision_seconds,
            gpus_per_replica=self.gpus_per_replica,
            gpus_per_node=self.gpus_per_node,
            max_concurrent_loads=self.max_concurrent_loads,
            engine_init_s=self.engine_init_seconds,
            compile_s=self.compile_seconds,
            compile_cached_s=self.compile_cached_seconds,
            compile_cache=_COMPILE_CACHE[self.compile_cache],
            node_cache_gb=self.node_cache_gb,
            peer_gbps=self.peer_gbps,
            load_gate_scope=_GATE_SCOPE[self.load_gate_scope],
        )


class PredictionModel(_Model):
    forecaster: Literal["last", "linear", "holt", "seasonal"] = "holt"
    window_seconds: Annotated[float, Field(gt=0, alias="windowSeconds")] = _PREDICTION.window_s
    alpha: Annotated[float, Field(gt=0, le=1)] = _PREDICTION.alpha
    beta: Annotated[float, Field(ge=0, le=1)] = _PREDICTION.beta
    season_seconds: Annotated[float, Field(gt=0, alias="seasonSeconds")] = _PREDICTION.season_s
    lead_time_seconds: Annotated[float | None, Field(ge=0, alias="leadTimeSeconds")] = None
    smoothing_period_seconds: Annotated[float, Field(gt=0, alias="smoothingPeriodSeconds")] = (
        _PREDICTION.smoothing_period_s
    )
    season_bucket_seconds: Annotated[float, Field(gt=0, alias="seasonBucketSeconds")] = (
        _PREDICTION.season_bucket_s
    )
    season_fallback: ForecasterKind = Field(default=_PREDICTION.season_fallback, alias="seasonFallback")

    @model_validator(mode="after")
    def _consistent(self) -> PredictionModel:
        self.to_spec()  # PredictionSpec checks the combinations (season a multiple of its bucket, ...)
        return self

    def to_spec(self) -> PredictionSpec:
        return PredictionSpec(
            forecaster=ForecasterKind(self.forecaster),
            window_s=self.window_seconds,
            alpha=self.alpha,
            beta=self.beta,
            season_s=self.season_seconds,
            lead_time_s=self.lead_time_seconds,
            smoothing_period_s=self.smoothing_period_seconds,
            season_bucket_s=self.season_bucket_seconds,
            season_fallback=ForecasterKind(self.season_fallback),
        )


def _minute_of_day(text: str, field: str) -> int:
    try:
        hours, minutes = text.split(":")
        value = int(hours) * 60 + int(minutes)
    except ValueError:
        raise ValueError(f"{field} must be HH:MM, got {text!r}") from None
    if not 0 <= value <= 24 * 60 or not 0 <= int(minutes) < 60:
        raise ValueError(f"{field} must be between 00:00 and 24:00, got {text!r}")
    return value


class ScheduleModel(_Model):
    min_replicas: Annotated[int, Field(ge=0, alias="minReplicas")]
    weekdays: list[str] = Field(default_factory=lambda: list(_WEEKDAYS))
    start: str = "00:00"
    end: str = "24:00"
    timezone: str = "UTC"

    @field_validator("weekdays")
    @classmethod
    def _known_days(cls, days: list[str]) -> list[str]:
        bad = [d for d in days if d[:3].lower() not in _WEEKDAYS]
        if bad:
            raise ValueError(f"unknown weekday(s) {bad}; use Mon, Tue, Wed, Thu, Fri, Sat, Sun")
        return days

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, zone: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {zone!r} (use an IANA name such as Europe/Paris)") from None
        return zone

    def to_spec(self) -> Schedule:
        return Schedule(
            min_replicas=self.min_replicas,
            weekdays=frozenset(_WEEKDAYS[d[:3].lower()] for d in self.weekdays),
            start_minute=_minute_of_day(self.start, "start"),
            end_minute=_minute_of_day(self.end, "end"),
            timezone=self.timezone,
        )


class FloorsModel(_Model):
    warm_min_replicas: Annotated[int, Field(ge=0, alias="warmMinReplicas")] = 0
    schedules: list[ScheduleModel] = Field(default_factory=list)
    headroom_replicas: Annotated[int, Field(ge=0, alias="headroomReplicas")] = 0
    headroom_fraction: Annotated[float, Field(ge=0, le=10, alias="headroomFraction")] = 0.0

    def to_spec(self) -> FloorSpec:
        return FloorSpec(
            warm_min_replicas=self.warm_min_replicas,
            schedules=tuple(s.to_spec() for s in self.schedules),
            headroom_replicas=self.headroom_replicas,
            headroom_fraction=self.headroom_fraction,
        )


def _given(model: BaseModel, names: Mapping[str, str]) -> dict[str, Any]:
    """The fields the document set, under the frozen spec's names (unset ones keep the spec's
    defaults, which live there once)."""
    return {
        spec_name: getattr(model, field)
        for field, spec_name in names.items()
        if getattr(model, field) is not None
    }


def _document(model: type[BaseModel], spec: Any, names: Mapping[str, str]) -> dict[str, Any]:
    """The block of `model` that parses back into `spec` (unset optional fields left out)."""
    fields = model.model_fields
    return {
        str(fields[field].alias or field): getattr(spec, spec_name)
        for field, spec_name in names.items()
        if getattr(spec, spec_name) is not None
    }


_PROFILE_NAMES = {
    "step_base_seconds": "step_base_s",
    "prefill_seconds_per_token": "prefill_s_per_token",
    "prefill_seconds_per_attention_pair": "prefill_s_per_attention_pair",
    "decode_seconds_per_request": "decode_s_per_request",
    "decode_seconds_per_context_token": "decode_s_per_context_token",
    "max_batched_tokens": "max_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "kv_cache_tokens": "kv_cache_tokens",
    "prefill_first": "prefill_first",
}
_SLO_NAMES = {
    "ttft_seconds": "ttft_s",
    "tpot_seconds": "tpot_s",
    "ttft_tokens_per_second": "ttft_tokens_per_s",
    "attainment": "attainment",
}


class ReplicaProfileModel(_Model):
    """capacity.profile: one replica's step-time model (spec.ReplicaProfile)."""

    step_base_seconds: Annotated[float, Field(gt=0, alias="stepBaseSeconds")]
    prefill_seconds_per_token: Annotated[float, Field(gt=0, alias="prefillSecondsPerToken")]
    prefill_seconds_per_attention_pair: Annotated[
        float | None, Field(ge=0, alias="prefillSecondsPerAttentionPair")
    ] = None
    decode_seconds_per_request: Annotated[float | None, Field(ge=0, alias="decodeSecondsPerRequest")] = None
    decode_seconds_per_context_token: Annotated[
        float | None, Field(ge=0, alias="decodeSecondsPerContextToken")
    ] = None
    max_batched_tokens: Annotated[int | None, Field(ge=1, alias="maxBatchedTokens")] = None
    max_num_seqs: Annotated[int | None, Field(ge=1, alias="maxNumSeqs")] = None
    kv_cache_tokens: Annotated[int | None, Field(ge=1, alias="kvCacheTokens")] = None
    prefill_first: bool | None = Field(default=None, alias="prefillFirst")

    def to_spec(self) -> ReplicaProfile:
        return ReplicaProfile(**_given(self, _PROFILE_NAMES))


class SloTargetModel(_Model):
    ttft_seconds: Annotated[float | None, Field(gt=0, alias="ttftSeconds")] = None
    tpot_seconds: Annotated[float | None, Field(gt=0, alias="tpotSeconds")] = None
    ttft_tokens_per_second: Annotated[float | None, Field(gt=0, alias="ttftTokensPerSecond")] = None
    attainment: Annotated[float | None, Field(ge=0.5, le=0.9999)] = None

    def to_spec(self) -> SloTarget:
        return SloTarget(**_given(self, _SLO_NAMES))


class DemandModel(_Model):
    request_rate_metric: str | None = Field(default=None, alias="requestRateMetric", min_length=1)
    prompt_token_rate_metric: str | None = Field(default=None, alias="promptTokenRateMetric", min_length=1)
    generation_token_rate_metric: str | None = Field(
        default=None, alias="generationTokenRateMetric", min_length=1
    )
    inflight_metric: str | None = Field(default=None, alias="inflightMetric", min_length=1)
    queue_metric: str | None = Field(default=None, alias="queueMetric", min_length=1)
    alpha: float | None = None
    beta: float | None = None
    smoothing_period_seconds: float | None = Field(default=None, alias="smoothingPeriodSeconds")
    damping_seconds: float | None = Field(default=None, alias="dampingSeconds")
    quantile: float | None = None
    prior_error: float | None = Field(default=None, alias="priorError")
    prior_weight: float | None = Field(default=None, alias="priorWeight")

    def to_spec(self) -> DemandSpec:
        names = {
            "request_rate_metric": "request_rate_metric",
            "prompt_token_rate_metric": "prompt_token_rate_metric",
            "generation_token_rate_metric": "generation_token_rate_metric",
            "inflight_metric": "inflight_metric",
            "queue_metric": "queue_metric",
            "alpha": "alpha",
            "beta": "beta",
            "smoothing_period_seconds": "smoothing_period_s",
            "damping_seconds": "damping_s",
            "quantile": "quantile",
            "prior_error": "prior_error",
            "prior_weight": "prior_weight",
        }
        return DemandSpec(**_given(self, names))


class CapacityModel(_Model):
    """capacity: demand x capacity sizing (spec.CapacitySpec); ranges are checked by the spec."""

    profile: ReplicaProfileModel
    slo: SloTargetModel | None = None
    demand: DemandModel | None = None
    learn: bool | None = None
    learn_prior_weight: float | None = Field(default=None, alias="learnPriorWeight")
    panic_threshold: float | None = Field(default=None, alias="panicThreshold")
    panic_window_seconds: float | None = Field(default=None, alias="panicWindowSeconds")
    decision_period_seconds: float | None = Field(default=None, alias="decisionPeriodSeconds")
    plan_tpot_share: float | None = Field(default=None, alias="planTpotShare")
    plan_ttft_share: float | None = Field(default=None, alias="planTtftShare")

    @classmethod
    def document_of(cls, spec: CapacitySpec) -> dict[str, Any]:
        """The capacity block (profile, slo, decision period) that parses back into `spec`'s
        profile, SLO and period; demand and learning keep their defaults."""
        return {
            "profile": _document(ReplicaProfileModel, spec.profile, _PROFILE_NAMES),
            "slo": _document(SloTargetModel, spec.slo, _SLO_NAMES),
            "decisionPeriodSeconds": spec.decision_period_s,
        }

    @model_validator(mode="after")
    def _consistent(self) -> CapacityModel:
        self.to_spec()  # the frozen spec checks every range, naming the field
        return self

    def to_spec(self) -> CapacitySpec:
        return CapacitySpec(
            profile=self.profile.to_spec(),
            slo=self.slo.to_spec() if self.slo else SloTarget(),
            demand=self.demand.to_spec() if self.demand else DemandSpec(),
            **_given(
                self,
                {
                    "learn": "learn",
                    "learn_prior_weight": "learn_prior_weight",
                    "panic_threshold": "panic_threshold",
                    "panic_window_seconds": "panic_window_s",
                    "decision_period_seconds": "decision_period_s",
                    "plan_tpot_share": "plan_tpot_share",
                    "plan_ttft_share": "plan_ttft_share",
                },
            ),
        )


class AutoscalerSpecModel(_Model):
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
