"""What the user asked for: a frozen, validated autoscaling spec, shaped like an autoscaling/v2 HPA.

Defaults mirror upstream (`pkg/apis/autoscaling/v2/defaults.go` and the kube-controller-manager
flags); they live here once. Parsing from JSON/CRDs happens at the edges and produces these values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from autoscaler.policy.capacityspec import DEFAULT_SYNC_PERIOD_S, CapacitySpec

DEFAULT_TOLERANCE = 0.1  # --horizontal-pod-autoscaler-tolerance
DEFAULT_DOWNSCALE_STABILIZATION_S = 300  # --horizontal-pod-autoscaler-downscale-stabilization
LEGACY_SCALE_UP_FACTOR = 2.0  # hard-coded in horizontal.go (the upstream tests use 8)
LEGACY_SCALE_UP_MINIMUM = 4.0
# the legacy cap (factor x current) holds per sync period (capacityspec.DEFAULT_SYNC_PERIOD_S);
# infscale decides more often and keeps it per period


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
