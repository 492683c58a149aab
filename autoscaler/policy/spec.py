"""What the user asked for: a frozen, validated autoscaling spec, shaped like an autoscaling/v2 HPA.

Defaults mirror upstream (`pkg/apis/autoscaling/v2/defaults.go` and the kube-controller-manager
flags); they live here once. Parsing from JSON/CRDs happens at the edges and produces these values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache

DEFAULT_TOLERANCE = 0.1  # --horizontal-pod-autoscaler-tolerance
DEFAULT_DOWNSCALE_STABILIZATION_S = 300  # --horizontal-pod-autoscaler-downscale-stabilization
SYNC_PERIOD_S = 15  # --horizontal-pod-autoscaler-sync-period
LEGACY_SCALE_UP_FACTOR = 2.0  # hard-coded in horizontal.go (the upstream tests use 8)
LEGACY_SCALE_UP_MINIMUM = 4.0
# --horizontal-pod-autoscaler-sync-period: upstream decides once per period, so the legacy cap
# (factor x current) holds per period; infscale decides more often and keeps it per period
DEFAULT_SYNC_PERIOD_S = 15


class SelectPolicy(StrEnum):
    MAX = "Max"
    MIN = "Min"
    DISABLED = "Disabled"


class RatePolicyType(StrEnum):
    PODS = "Pods"
    PERCENT = "Percent"


class TargetType(StrEnum):
    VALUE = "Value"
    AVERAGE_VALUE = "AverageValue"


@dataclass(frozen=True, slots=True)
class RatePolicy:
    type: RatePolicyType
    value: int
    period_s: int


@dataclass(frozen=True, slots=True)
class ScalingRules:
    """One direction of `behavior`, already defaulted."""

    stabilization_window_s: int
    select_policy: SelectPolicy
    policies: tuple[RatePolicy, ...]
    tolerance: float | None = None  # None: the cluster-wide tolerance applies

    @property
    def longest_period_s(self) -> int:
        return max((p.period_s for p in self.policies), default=0)


def default_scale_up(
    *,
    stabilization_window_s: int | None = None,
    select_policy: SelectPolicy | None = None,
    policies: tuple[RatePolicy, ...] | None = None,
    tolerance: float | None = None,
) -> ScalingRules:
    """scaleUp defaults: no window, Max of Pods 4 / 15 s and Percent 100 / 15 s."""
    return ScalingRules(
        stabilization_window_s=0 if stabilization_window_s is None else stabilization_window_s,
        select_policy=select_policy or SelectPolicy.MAX,
        policies=policies
        if policies is not None
        else (RatePolicy(RatePolicyType.PODS, 4, 15), RatePolicy(RatePolicyType.PERCENT, 100, 15)),
        tolerance=tolerance,
    )


def default_scale_down(
    *,
    stabilization_window_s: int | None = None,
    select_policy: SelectPolicy | None = None,
    policies: tuple[RatePolicy, ...] | None = None,
    tolerance: float | None = None,
    cluster_window_s: int = DEFAULT_DOWNSCALE_STABILIZATION_S,
) -> ScalingRules:
    """scaleDown defaults: the cluster's downscale window, Max of Percent 100 / 15 s."""
    return ScalingRules(
        stabilization_window_s=cluster_window_s if stabilization_window_s is None else stabilization_window_s,
        select_policy=select_policy or SelectPolicy.MAX,
        policies=policies if policies is not None else (RatePolicy(RatePolicyType.PERCENT, 100, 15),),
        tolerance=tolerance,
    )


@dataclass(frozen=True, slots=True)
class Behavior:
    scale_up: ScalingRules = field(default_factory=default_scale_up)
    scale_down: ScalingRules = field(default_factory=default_scale_down)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """An External metric with a Value or AverageValue target, in milli-units as upstream stores it."""

    name: str
    target_type: TargetType
    target_milli: int
    selector: str = ""  # the label selector the metric is read with; the policy never parses it

    def __post_init__(self) -> None:
        if self.target_milli <= 0:
            raise ValueError(f"metric {self.name!r}: target must be > 0, got {self.target_milli / 1000:g}")


class CompileCache(StrEnum):
    """Where torch.compile / CUDA-graph artifacts are kept between starts."""

    NONE = "none"  # every start compiles (compile_s)
    NODE = "node"  # on the node's disk: a node where the model compiled once hits (compile_cached_s)
    CLUSTER = "cluster"  # a shared volume: hits everywhere once any replica compiled


class Router(StrEnum):
    """How requests reach the replicas: what the TTFT tail's prefill queues see (capacity.py)."""

    RANDOM = "Random"  # a Service's random or round-robin pick: each replica an M/G/1 queue fed λ/n
    # the replica with the fewest requests in flight (the replay's router; load-aware gateways'):
    # a request finds a replica with nothing in flight unless every replica holds one
    LEAST_REQUESTS = "LeastRequests"


class GateScope(StrEnum):
    """What a load-gate slot covers (see docs/coldstart.md)."""

    LOAD = "load"  # the weight load only: taken after engine init, given back when the weights are in
    STARTUP = "startup"  # engine start to ready, as a sidecar gating the engine container holds it


@dataclass(frozen=True, slots=True)
class ColdStartSpec:
    """How long a new replica takes to become ready. GB are 10^9 bytes; bandwidths in GB/s.

    Phases: node provisioning -> image pull -> engine init -> [load gate] -> weight load ->
    compile / CUDA-graph capture -> warm-up -> ready. Every default keeps the phase out (0 s, no
    cache, no gate), so a spec with only weights and storage is the plain shared-storage model.
    Checked by coldstart.check_spec (each error names its field).
    """

    weights_gb: float
    storage_gbps: float  # shared storage: split by every replica loading from it at the same time
    per_loader_gbps: float | None = None  # cap of one loader on shared storage; None: no cap
    local_cache_gbps: float | None = None  # speed from a node-local weights cache; None: no cache
    image_pull_s: float = 0.0  # skipped on a node that has the image
    warmup_s: float = 0.0  # after compile: warm-up requests until the readiness probe passes
    node_provision_s: float = 0.0  # when no node has the replica's GPUs free
    gpus_per_replica: int = 1
    gpus_per_node: int = 8
    engine_init_s: float = 0.0  # process start, imports, CUDA/NCCL init, before the weights load
    compile_s: float = 0.0  # torch.compile + CUDA-graph capture on a compile-cache miss
    compile_cached_s: float = 0.0  # the same on a hit (used only with compile_cache)
    compile_cache: CompileCache = CompileCache.NONE
    node_cache_gb: float | None = None  # capacity of the node-local cache; None: unlimited
    peer_gbps: float | None = None  # one loader's speed reading from a ready replica; None: no peer-to-peer
    # the load gate (`infscale loadgate`): at most this many replicas load weights at once, the
    # others wait in line; None: no gate, every replica loads when it gets there
    max_concurrent_loads: int | None = None
    load_gate_scope: GateScope = GateScope.LOAD  # what a slot covers


class ForecasterKind(StrEnum):
    LAST = "last"  # reactive: the latest value
    LINEAR = "linear"  # least-squares trend over a window
    HOLT = "holt"  # double exponential smoothing
    SEASONAL = "seasonal"  # value one season ago (daily/weekly), falling back to Holt


@dataclass(frozen=True, slots=True)
class PredictionSpec:
    forecaster: ForecasterKind = ForecasterKind.HOLT
    window_s: float = 300.0  # LINEAR: how much history the trend is fitted on
    alpha: float = 0.5  # HOLT: level smoothing
    beta: float = 0.3  # HOLT: trend smoothing
    season_s: float = 86_400.0  # SEASONAL: 86,400 (daily) or 604,800 (weekly)
    lead_time_s: float | None = None  # fixed horizon; None: the cold-start model's time to ready
    # HOLT: alpha and beta are the weights of a sample arriving this long after the previous one;
    # other gaps get 1 - (1 - alpha) ** (gap / smoothing_period_s) (see docs/forecasting.md)
    smoothing_period_s: float = 15.0
    season_bucket_s: float = 300.0  # SEASONAL: history resolution (288 buckets a day, 2016 a week)
    season_fallback: ForecasterKind = ForecasterKind.HOLT  # SEASONAL: used when that history is missing

    def __post_init__(self) -> None:
        def bad(name: str, value: object, allowed: str) -> ValueError:
            return ValueError(f"prediction.{name} must be {allowed}, got {value!r}")

        if not 0.0 < self.alpha <= 1.0:
            raise bad("alpha", self.alpha, "in (0, 1]")
        if not 0.0 <= self.beta <= 1.0:
            raise bad("beta", self.beta, "in [0, 1]")
        # upper bounds keep the regression's sums of squared seconds far from overflow
        for name, value, limit in (
            ("window_s", self.window_s, 1e7),
            ("smoothing_period_s", self.smoothing_period_s, 1e7),
            ("season_bucket_s", self.season_bucket_s, 1e7),
            ("season_s", self.season_s, 1e9),
        ):
            if not 0.0 < value <= limit:
                raise bad(name, value, f"> 0 and <= {limit:g}")
        if self.season_bucket_s < 1.0:  # keeps the bucket index floor(at / bucket) finite for any time
            raise bad("season_bucket_s", self.season_bucket_s, ">= 1 and <= 1e+07")
        buckets = self.season_s / self.season_bucket_s
        if abs(buckets - round(buckets)) > 1e-9 * buckets or not 1 <= round(buckets) <= 100_000:
            raise bad(
                "season_s", self.season_s, f"1 to 100000 times season_bucket_s={self.season_bucket_s:g}"
            )
        if self.season_fallback == ForecasterKind.SEASONAL:
            raise bad("season_fallback", str(self.season_fallback), "last, linear or holt")
        if self.lead_time_s is not None and not 0.0 <= self.lead_time_s <= 1e7:
            raise bad("lead_time_s", self.lead_time_s, "None or in [0, 1e7]")


def _check_range(owner: str, name: str, value: float, low: float, high: float, allowed: str) -> None:
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{owner}.{name} must be {allowed}, got {value!r}")


@dataclass(frozen=True, slots=True)
class ReplicaProfile:
    """One replica's engine as a step-time model: the capacity model's input (docs/policy.md).

    A continuous-batching step that prefills `p` prompt tokens (with `P` attention pairs: a chunk of
    c tokens after k computed has c·k + c(c+1)/2) and decodes one token for each of `B` running
    requests, which read `K` context tokens, takes
        step_base_s + prefill_s_per_token × p + prefill_s_per_attention_pair × P
                    + decode_s_per_request × B + decode_s_per_context_token × K.
    vLLM V1 caps p + B at `max_batched_tokens` per step (None: whole prompts, no token budget);
    `prefill_first` engines (SGLang, TGI) run a step of prompt chunks or a step of decodes, never both.
    """

    step_base_s: float
    prefill_s_per_token: float
    prefill_s_per_attention_pair: float = 0.0
    decode_s_per_request: float = 0.0
    decode_s_per_context_token: float = 0.0
    max_batched_tokens: int | None = None
    max_num_seqs: int = 256
    kv_cache_tokens: int | None = None  # None: KV never binds
    prefill_first: bool = False

    def __post_init__(self) -> None:
        own = "capacity.profile"
        _check_range(own, "step_base_s", self.step_base_s, 1e-6, 60.0, "in [1e-06, 60] s")
        _check_range(own, "prefill_s_per_token", self.prefill_s_per_token, 1e-9, 1.0, "in [1e-09, 1] s")
        for name in ("decode_s_per_request", "decode_s_per_context_token", "prefill_s_per_attention_pair"):
            _check_range(own, name, getattr(self, name), 0.0, 1.0, "in [0, 1] s")
        if self.max_batched_tokens is not None and self.max_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"{own}.max_batched_tokens must be >= max_num_seqs ({self.max_num_seqs}), as vLLM requires,"
                f" got {self.max_batched_tokens}"
            )
        if self.max_num_seqs < 1:
            raise ValueError(f"{own}.max_num_seqs must be >= 1, got {self.max_num_seqs}")
        if self.kv_cache_tokens is not None and self.kv_cache_tokens < 1:
            raise ValueError(f"{own}.kv_cache_tokens must be >= 1 or unset, got {self.kv_cache_tokens}")


@dataclass(frozen=True, slots=True)
class SloTarget:
    """The targets a request must meet to count as good, and the share of good requests to plan for.

    TTFT target = ttft_s + prompt tokens / ttft_tokens_per_s (None: absolute), as llm-d's token-aware
    and DistServe-style SLOs; TPOT is the mean time per output token after the first.
    """

    ttft_s: float = 2.0  # MLPerf llama-70b server scenario
    tpot_s: float | None = 0.2  # MLPerf llama-70b server scenario; None: no TPOT target
    ttft_tokens_per_s: float | None = None
    attainment: float = 0.99  # the capacity model's TTFT tail: at most 1 % of requests wait too long

    def __post_init__(self) -> None:
        _check_range("capacity.slo", "ttft_s", self.ttft_s, 1e-3, 3600.0, "in [0.001, 3600] s")
        if self.tpot_s is not None:
            _check_range("capacity.slo", "tpot_s", self.tpot_s, 1e-4, 60.0, "unset or in [0.0001, 60] s")
        _check_range("capacity.slo", "attainment", self.attainment, 0.5, 0.9999, "in [0.5, 0.9999]")
        if self.ttft_tokens_per_s is not None:
            _check_range(
                "capacity.slo", "ttft_tokens_per_s", self.ttft_tokens_per_s, 1.0, 1e9, "unset or in [1, 1e9]"
            )


@dataclass(frozen=True, slots=True)
class DemandSpec:
    """Where demand is read and how it is forecast (docs/policy.md, "Defaults and why").

    The metric names are the adapter's (adapter/presets.py): engine counters as rates, summed over
    the target's pods, and the in-flight gauge whose growth is the demand the counters miss.
    """

    request_rate_metric: str = "infscale_request_rate"
    prompt_token_rate_metric: str = "infscale_prompt_token_rate"
    generation_token_rate_metric: str = "infscale_generation_token_rate"
    inflight_metric: str = "infscale_inflight"
    queue_metric: str | None = "infscale_queue_size"  # waiting requests: saturation, for learning
    # Σ prompt tokens² per second, from the engines' prompt-length histograms (the adapter's
    # prompt_token_square_rate): the lengths' spread (lengths.py). None (the default: a catalog
    # without it would warn every sync), or no reading: exponential lengths, TTFT tail cs² 1
    prompt_square_metric: str | None = None
    # the inference gateway's arrivals counter as a rate (the adapter's gateway preset): the count
    # the arrivals' dispersion is read from. None (the default: engines alone), or no reading: the
    # finishes + the in-flight growth, whose finishes come in clumps (docs/policy.md, "Defaults")
    arrival_rate_metric: str | None = None
    alpha: float = 0.3  # level weight of a sample smoothing_period_s after the last (policy.md, Defaults)
    beta: float = 0.05  # trend weight, same gap: a trend must persist minutes to count
    smoothing_period_s: float = 15.0  # the HPA sync period
    damping_s: float = 120.0  # the trend's effect fades with this time constant (damped Holt)
    quantile: float = 0.98  # plan on this upper quantile of the forecast (docs/policy.md, "Defaults")
    prior_error: float = 0.3  # the error quantile assumed before errors were scored (band.upper)
    prior_weight: float = 8.0  # scored errors that weigh as much as the prior

    def __post_init__(self) -> None:
        own = "capacity.demand"
        if self.arrival_rate_metric == "":
            raise ValueError(f"{own}.arrival_rate_metric: a metric name, or None (not read)")
        _check_range(own, "alpha", self.alpha, 1e-3, 1.0, "in [0.001, 1]")
        _check_range(own, "beta", self.beta, 0.0, 1.0, "in [0, 1]")
        _check_range(own, "smoothing_period_s", self.smoothing_period_s, 1e-3, 1e6, "in [0.001, 1e6] s")
        _check_range(own, "damping_s", self.damping_s, 1.0, 1e7, "in [1, 1e7] s")
        _check_range(own, "quantile", self.quantile, 0.5, 0.999, "in [0.5, 0.999]")
        _check_range(own, "prior_error", self.prior_error, 0.0, 5.0, "in [0, 5]")
        _check_range(own, "prior_weight", self.prior_weight, 0.0, 1e6, "in [0, 1e6]")


@dataclass(frozen=True, slots=True)
class CapacitySpec:
    """Demand x capacity sizing: set, the predictive stages size from demand (decide.py)."""

    profile: ReplicaProfile
    slo: SloTarget = field(default_factory=SloTarget)
    demand: DemandSpec = field(default_factory=DemandSpec)
    learn: bool = True  # refine the profile's speed from what saturated replicas achieve
    learn_prior_weight: float = 8.0  # saturated samples that weigh as much as the profile
    panic_threshold: float = 2.0  # demand this many times the forecast's upper band: panic (Knative's 200 %)
    panic_window_s: float = 60.0  # no scale-down this long after a panic (Knative's stable window)
    decision_period_s: float = SYNC_PERIOD_S  # how often the caller decides: scale-up staggers by it
    # the sizing plans at these shares of the TPOT and TTFT targets (1: at the targets themselves;
    # the per-request TPOT tail and the per-replica TTFT tail are within +-1 replica of the replay
    # on stationary load, docs/policy.md "Defaults and why"); below 1 buys headroom on top
    plan_tpot_share: float = 1.0
    plan_ttft_share: float = 1.0
    router: Router = Router.RANDOM  # how requests reach the replicas (the TTFT tail's queues)

    def __post_init__(self) -> None:
        _check_range("capacity", "decision_period_s", self.decision_period_s, 0.1, 3600.0, "in [0.1, 3600] s")
        _check_range("capacity", "learn_prior_weight", self.learn_prior_weight, 0.0, 1e6, "in [0, 1e6]")
        _check_range("capacity", "panic_threshold", self.panic_threshold, 1.0, 1e3, "in [1, 1000]")
        _check_range("capacity", "panic_window_s", self.panic_window_s, 0.0, 1e5, "in [0, 1e5] s")
        _check_range("capacity", "plan_tpot_share", self.plan_tpot_share, 0.01, 1.0, "in [0.01, 1]")
        _check_range("capacity", "plan_ttft_share", self.plan_ttft_share, 0.01, 1.0, "in [0.01, 1]")

    @property
    def planning_slo(self) -> SloTarget:
        """The targets the sizing plans on: the SLO's, tightened by the planning shares."""
        return _planning_slo(self.slo, self.plan_tpot_share, self.plan_ttft_share)

    @property
    def metric_names(self) -> tuple[str, ...]:
        """Every metric the demand stage reads (the caller fetches them beside spec.metrics)."""
        d = self.demand
        names: tuple[str, ...] = (
            d.request_rate_metric,
            d.prompt_token_rate_metric,
            d.generation_token_rate_metric,
            d.inflight_metric,
        )
        if d.queue_metric is not None:
            names = (*names, d.queue_metric)
        if d.arrival_rate_metric is not None:
            names = (*names, d.arrival_rate_metric)
        return names if d.prompt_square_metric is None else (*names, d.prompt_square_metric)


@lru_cache(maxsize=64)
def _planning_slo(slo: SloTarget, tpot_share: float, ttft_share: float) -> SloTarget:
    return SloTarget(
        ttft_s=max(slo.ttft_s * ttft_share, 1e-3),
        tpot_s=None if slo.tpot_s is None else max(slo.tpot_s * tpot_share, 1e-4),
        ttft_tokens_per_s=None if slo.ttft_tokens_per_s is None else slo.ttft_tokens_per_s / ttft_share,
        attainment=slo.attainment,
    )


@dataclass(frozen=True, slots=True)
class Schedule:
    """A floor that holds on some weekdays between two times of day, in a time zone."""

    min_replicas: int
    weekdays: frozenset[int] = frozenset(range(7))  # 0 = Monday, as datetime.weekday()
    start_minute: int = 0  # minutes after local midnight, inclusive
    end_minute: int = 24 * 60  # exclusive; end < start wraps past midnight
    timezone: str = "UTC"


@dataclass(frozen=True, slots=True)
class FloorSpec:
    warm_min_replicas: int = 0  # never drop below this many warm replicas
    schedules: tuple[Schedule, ...] = ()
    headroom_replicas: int = 0  # extra replicas on top of the recommendation
    headroom_fraction: float = 0.0  # extra replicas as a fraction of the recommendation, rounded up


@dataclass(frozen=True, slots=True)
class AutoscalerSpec:
    """The whole policy for one scale target. `behavior=None` selects upstream's legacy path."""

    max_replicas: int
    metrics: tuple[MetricSpec, ...]
    min_replicas: int = 1
    behavior: Behavior | None = None
    tolerance: float = DEFAULT_TOLERANCE  # cluster flag; per-direction values live in behavior
    downscale_stabilization_s: int = DEFAULT_DOWNSCALE_STABILIZATION_S  # legacy path window
    legacy_scale_up_factor: float = LEGACY_SCALE_UP_FACTOR  # upstream's tests run with 8
    legacy_sync_period_s: int = DEFAULT_SYNC_PERIOD_S  # the legacy cap's period, whatever the tick
    max_metric_age_s: float | None = None  # older readings count as missing; None: never stale (as the HPA)
    cold_start: ColdStartSpec | None = None
    prediction: PredictionSpec | None = None  # None: purely reactive, exactly the HPA
    floors: FloorSpec = field(default_factory=FloorSpec)
    capacity: CapacitySpec | None = None  # set: size from demand x capacity (the predictive stages)

    def __post_init__(self) -> None:
        if self.min_replicas < 0:
            raise ValueError(f"minReplicas must be >= 0, got {self.min_replicas}")
        if self.max_replicas < max(self.min_replicas, 1):
            raise ValueError(f"maxReplicas must be >= max(minReplicas, 1), got {self.max_replicas}")
        if not self.metrics:
            raise ValueError("metrics: at least one metric is required")
        if self.tolerance < 0:
            raise ValueError(f"tolerance must be >= 0, got {self.tolerance}")

    @property
    def tolerances(self) -> tuple[float, float]:
        """(scale-down, scale-up) tolerance, per-direction values overriding the cluster flag."""
        down = up = self.tolerance
        if self.behavior is not None:
            if self.behavior.scale_down.tolerance is not None:
                down = self.behavior.scale_down.tolerance
            if self.behavior.scale_up.tolerance is not None:
                up = self.behavior.scale_up.tolerance
        return down, up
