"""infscale's own sections of an InferenceAutoscaler spec, beside the HPA's fields (hpaspec.py):
`coldStart`, `prediction` (with schedules), `floors` and `capacity`, each validated with field paths and
turned into its frozen spec (autoscaler/policy/spec.py), where the defaults live once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    field_validator,
    model_validator,
)

from autoscaler.policy.capacityspec import CapacitySpec, DemandSpec, ReplicaProfile, Router, SloTarget
from autoscaler.policy.spec import (
    ColdStartSpec,
    CompileCache,
    FloorSpec,
    ForecasterKind,
    GateScope,
    PredictionSpec,
    Schedule,
)
from autoscaler.specbase import StrictModel

_PREDICTION = PredictionSpec()  # defaults live in the frozen spec, once
_WEEKDAYS = {"mon": 0, "tue": 1, "wed": 2, "thu": 3, "fri": 4, "sat": 5, "sun": 6}


_COMPILE_CACHE = {"Disabled": CompileCache.NONE, "Node": CompileCache.NODE, "Cluster": CompileCache.CLUSTER}
_GATE_SCOPE = {"Load": GateScope.LOAD, "Startup": GateScope.STARTUP}


class ColdStartModel(StrictModel):
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


class PredictionModel(StrictModel):
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


class ScheduleModel(StrictModel):
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


class FloorsModel(StrictModel):
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


class ReplicaProfileModel(StrictModel):
    """capacity.profile: one replica's step-time model (capacityspec.ReplicaProfile)."""

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


class SloTargetModel(StrictModel):
    ttft_seconds: Annotated[float | None, Field(gt=0, alias="ttftSeconds")] = None
    tpot_seconds: Annotated[float | None, Field(gt=0, alias="tpotSeconds")] = None
    ttft_tokens_per_second: Annotated[float | None, Field(gt=0, alias="ttftTokensPerSecond")] = None
    attainment: Annotated[float | None, Field(ge=0.5, le=0.9999)] = None

    def to_spec(self) -> SloTarget:
        return SloTarget(**_given(self, _SLO_NAMES))


class DemandModel(StrictModel):
    request_rate_metric: str | None = Field(default=None, alias="requestRateMetric", min_length=1)
    prompt_token_rate_metric: str | None = Field(default=None, alias="promptTokenRateMetric", min_length=1)
    generation_token_rate_metric: str | None = Field(
        default=None, alias="generationTokenRateMetric", min_length=1
    )
    inflight_metric: str | None = Field(default=None, alias="inflightMetric", min_length=1)
    queue_metric: str | None = Field(default=None, alias="queueMetric", min_length=1)
    prompt_square_metric: str | None = Field(default=None, alias="promptSquareMetric", min_length=1)
    output_square_metric: str | None = Field(default=None, alias="outputSquareMetric", min_length=1)
    output_sum_metric: str | None = Field(default=None, alias="outputSumMetric", min_length=1)
    arrival_rate_metric: str | None = Field(default=None, alias="arrivalRateMetric", min_length=1)
    kv_usage_metric: str | None = Field(default=None, alias="kvUsageMetric", min_length=1)
    prefill_time_metric: str | None = Field(default=None, alias="prefillTimeMetric", min_length=1)
    output_length_metric: str | None = Field(default=None, alias="outputLengthMetric", min_length=1)
    ttft_metric: str | None = Field(default=None, alias="ttftMetric", min_length=1)
    alpha: float | None = None
    beta: float | None = None
    smoothing_period_seconds: float | None = Field(default=None, alias="smoothingPeriodSeconds")
    damping_seconds: float | None = Field(default=None, alias="dampingSeconds")
    quantile: float | None = None
    prior_error: float | None = Field(default=None, alias="priorError")
    prior_weight: float | None = Field(default=None, alias="priorWeight")
    level_requests: float | None = Field(default=None, alias="levelRequests")

    def to_spec(self) -> DemandSpec:
        names = {
            "request_rate_metric": "request_rate_metric",
            "prompt_token_rate_metric": "prompt_token_rate_metric",
            "generation_token_rate_metric": "generation_token_rate_metric",
            "inflight_metric": "inflight_metric",
            "queue_metric": "queue_metric",
            "prompt_square_metric": "prompt_square_metric",
            "output_square_metric": "output_square_metric",
            "output_sum_metric": "output_sum_metric",
            "arrival_rate_metric": "arrival_rate_metric",
            "kv_usage_metric": "kv_usage_metric",
            "prefill_time_metric": "prefill_time_metric",
            "output_length_metric": "output_length_metric",
            "ttft_metric": "ttft_metric",
            "alpha": "alpha",
            "beta": "beta",
            "smoothing_period_seconds": "smoothing_period_s",
            "damping_seconds": "damping_s",
            "quantile": "quantile",
            "prior_error": "prior_error",
            "prior_weight": "prior_weight",
            "level_requests": "level_requests",
        }
        return DemandSpec(**_given(self, names))


class CapacityModel(StrictModel):
    """capacity: demand x capacity sizing (capacityspec.CapacitySpec); ranges are checked by the spec."""

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
    router: Literal["Random", "LeastRequests"] | None = None

    @classmethod
    def document_of(cls, spec: CapacitySpec) -> dict[str, Any]:
        """The capacity block (profile, slo, decision period, the lengths', the gateway's arrivals
        and the KV usage metrics if set) that parses back into `spec`'s; the rest of demand and
        learning keep their defaults."""
        doc: dict[str, Any] = {
            "profile": _document(ReplicaProfileModel, spec.profile, _PROFILE_NAMES),
            "slo": _document(SloTargetModel, spec.slo, _SLO_NAMES),
            "decisionPeriodSeconds": spec.decision_period_s,
        }
        demand = {
            key: value
            for key, value in (
                ("promptSquareMetric", spec.demand.prompt_square_metric),
                ("outputSquareMetric", spec.demand.output_square_metric),
                ("outputSumMetric", spec.demand.output_sum_metric),
                ("arrivalRateMetric", spec.demand.arrival_rate_metric),
                ("kvUsageMetric", spec.demand.kv_usage_metric),
                ("prefillTimeMetric", spec.demand.prefill_time_metric),
                ("outputLengthMetric", spec.demand.output_length_metric),
                ("ttftMetric", spec.demand.ttft_metric),
            )
            if value is not None
        }
        if demand:
            doc["demand"] = demand
        if spec.router != Router.RANDOM:
            doc["router"] = str(spec.router)
        return doc

    @model_validator(mode="after")
    def _consistent(self) -> CapacityModel:
        self.to_spec()  # the frozen spec checks every range, naming the field
        return self

    def to_spec(self) -> CapacitySpec:
        given: dict[str, Any] = {} if self.router is None else {"router": Router(self.router)}
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
            **given,
        )
