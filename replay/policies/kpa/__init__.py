"""`kpa`: Knative's Pod Autoscaler as upstream runs it, on the replay's fleet.

    aggregation.py  the 1 s metric buckets and their window averages (linear or weighted)
    decider.py      the decider (autoscaler.go Scale), pure
    reconciler.py   bounds, scale to zero and activation (kpa/scaler.go, kpa.go), pure
    config.py       config-autoscaler with upstream's defaults and validation

Every second the collector records the revision's concurrency: the in-flight requests of the
ready pods (what their queue-proxies report; a draining pod has left the endpoints) plus the
requests the activator holds (the replay's gateway, while no pod is ready). Every 2 s the decider
reads the stable (60 s) and panic (6 s) window averages and the ready pods and decides; the
reconciler then bounds the result and applies scale to zero. The per-pod target is the
autoscaling.knative.dev/target annotation (the params' target, in-flight requests per replica)
x container-concurrency-target-percentage (70 %).

What is not modelled: the queue-proxy's time-averaged concurrency (the replay samples the
in-flight count at each second), the activator's own load balancing (the replay's router is
always in front), the scraper's pod sampling for large revisions (every pod is read).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from autoscaler.policy.observation import MetricReading, Observation
from replay.policies.base import GATEWAY_METRIC, METRIC, PolicyContext
from replay.policies.kpa.aggregation import TimedBuckets, WeightedBuckets
from replay.policies.kpa.config import BUCKET_SIZE_S, Aggregation, KpaConfig
from replay.policies.kpa.decider import (
    TICK_INTERVAL_S,
    DeciderSpec,
    DeciderState,
    ScaleResult,
    new_state,
    scale,
)
from replay.policies.kpa.reconciler import SCALE_UNKNOWN, PaState, reconcile, warm_state
from replay.policies.sizing import warm_start_replicas


class KpaDecision(NamedTuple):
    """One decider tick, for reports and tests."""

    t_s: float
    stable: float | None  # window averages of the revision's concurrency (None: no data)
    panic: float | None
    ready: int
    result: ScaleResult
    panicking: bool
    applied: int | None  # the scale written to the Deployment (None: left as it was)
    active: str


@dataclass(slots=True)
class KpaPolicy:
    config: KpaConfig
    decider: DeciderSpec
    initial_replicas: int = 1
    name: str = "kpa"
    period_s: float = float(BUCKET_SIZE_S)  # the collector's scrape; the decider runs every 2 s
    fresh_metrics: bool = True  # Knative's autoscaler scrapes the pods itself, every second
    metric_names: tuple[str, ...] = (METRIC, GATEWAY_METRIC)
    lead_quantile: float | None = None
    state: DeciderState = field(init=False)
    pa: PaState = field(init=False)
    decisions: list[KpaDecision] = field(default_factory=list)
    _stable: TimedBuckets = field(init=False)
    _panic: TimedBuckets = field(init=False)
    _next_tick: float = 0.0
    _status: tuple[int, int] = (
        SCALE_UNKNOWN,
        0,
    )  # the decider's status: desired scale, excess burst capacity
    _scale: int = 0  # what the Deployment was last set to

    def __post_init__(self) -> None:
        buckets = (
            WeightedBuckets if self.config.aggregation == Aggregation.WEIGHTED_EXPONENTIAL else TimedBuckets
        )
        self._stable = buckets(self.config.stable_window_s, BUCKET_SIZE_S)
        self._panic = buckets(self.config.panic_window_s, BUCKET_SIZE_S)
        self.state = new_state(self.decider, self.initial_replicas)  # starts in panic above one pod
        self.pa = warm_state()
        self._scale = self.initial_replicas

    def desired(self, now: float, obs: Observation) -> int:
        pods = obs.metrics.get(METRIC)
        held = obs.metrics.get(GATEWAY_METRIC)
        in_pods = _values(pods)
        at_gateway = sum(_values(held))
        ready = len(in_pods)
        if ready or at_gateway:  # no pod and nothing at the activator: no stat at all
            self._stable.record(now, sum(in_pods) + at_gateway)
            self._panic.record(now, sum(in_pods) + at_gateway)
        self._scale = obs.spec_replicas
        if now + 1e-9 < self._next_tick:
            return self._scale
        self._next_tick += TICK_INTERVAL_S
        stable = panic = None
        if not self._stable.is_empty(now):  # ErrNoData
            stable, panic = self._stable.window_average(now), self._panic.window_average(now)
        result, self.state = scale(self.decider, self.state, stable, panic, ready, now)
        if result.scale_valid:
            self._status = (result.desired_pod_count, result.excess_burst_capacity)
        applied, self.pa = reconcile(self.config, self.pa, *self._status, ready, now)
        if applied is not None:
            self._scale = applied
        self.decisions.append(
            KpaDecision(
                now, stable, panic, ready, result, self.state.panic_time is not None, applied, self.pa.active
            )
        )
        return self._scale


def _values(reading: MetricReading | None) -> tuple[float, ...]:
    if reading is None or not reading.values_milli:
        return ()
    return tuple(v / 1000.0 for v in reading.values_milli)


def build(ctx: PolicyContext) -> KpaPolicy:
    scenario, params = ctx.scenario, ctx.params
    config = KpaConfig(
        min_scale=0 if params.scale_to_zero else scenario.min_replicas,
        max_scale=scenario.max_replicas,
    )
    return KpaPolicy(
        config,
        config.decider_spec(target=params.target),
        initial_replicas=warm_start_replicas(ctx.trace, scenario, params.target),
    )
