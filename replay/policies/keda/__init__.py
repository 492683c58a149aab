"""`keda`, `keda-cached`: a KEDA ScaledObject with upstream's defaults and one Prometheus trigger,
on the replay's fleet.

    scaledobject.py  the ScaledObject's scaling fields and their defaults
    prometheus.py    the Prometheus scaler: the query's value, the trigger's activity
    fallback.py      fallback replicas after failureThreshold errors
    executor.py      KEDA's own 0 <-> minReplicaCount scaling, pure

Two loops, as in a cluster. Every HPA sync (15 s) the HPA KEDA owns (the policy core's exact
HPA: upstream defaults, AverageValue target `threshold` = --target requests per replica,
minReplicas max(minReplicaCount, 1)) reads the metric from KEDA's metrics server, which runs the
scaler's query at that moment (`keda`) or serves the value cached at the last polling
(`keda-cached`, `useCachedMetrics: true`). Every pollingInterval (30 s) KEDA runs the query itself:
above activationThreshold (0) the target is active, and KEDA scales 0 -> 1; inactive for
cooldownPeriod (300 s) with minReplicaCount 0, it scales to 0. Scaler errors count towards the
fallback (none by default).

The query is the one to write for scale from zero:
`(sum(vllm:num_requests_running + vllm:num_requests_waiting) or vector(0)) + sum(infscale_gateway_pending)`
-- the engines' in-flight requests plus those held at the gateway; with no pod the engines have no
series, and only the gateway's can wake the fleet. It is evaluated on what the scenario's metric
pipeline serves at the sync (replay/metrics), before the first scrape as an empty result (0).
Within a sync the HPA acts first, then (every pollingInterval) KEDA's loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import NamedTuple

from autoscaler.policy.decide import Decision, decide, record_rescale
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.spec import AutoscalerSpec
from autoscaler.policy.state import PolicyState
from replay.policies.base import GATEWAY_METRIC, METRIC, PolicyContext
from replay.policies.hpa import hpa_spec
from replay.policies.keda.executor import KedaStatus, ScaleOutcome, request_scale
from replay.policies.keda.fallback import FallbackResult, with_fallback
from replay.policies.keda.prometheus import (
    ScalerError,
    instant_vector_body,
    is_active,
    metric_milli,
    query_value,
)
from replay.policies.keda.scaledobject import PrometheusTrigger, ScaledObject
from replay.policies.sizing import warm_start_replicas

QUERY = (
    "(sum(vllm:num_requests_running + vllm:num_requests_waiting) or vector(0))"
    " + sum(infscale_gateway_pending)"
)


class ScalerReading(NamedTuple):
    value_milli: int | None
    error: str
    age_s: float


class KedaDecision(NamedTuple):
    """One sync, for reports and tests."""

    t_s: float
    hpa_metric: FallbackResult | None  # what the HPA got (None: the HPA is idle at 0 replicas)
    hpa: Decision | None
    poll: FallbackResult | None  # KEDA's own query this sync (None: not a polling time)
    keda: ScaleOutcome | None
    replicas: int


@dataclass(slots=True)
class KedaPolicy:
    name: str
    so: ScaledObject
    hpa_spec: AutoscalerSpec
    initial_replicas: int = 1
    period_s: float = 15.0  # the HPA's sync period
    fresh_metrics: bool = False
    metric_names: tuple[str, ...] = (METRIC, GATEWAY_METRIC)
    lead_quantile: float | None = None
    epoch_s: float = 1_704_067_200.0  # as DecidePolicy: replay time 0 on a Monday
    hpa_state: PolicyState = field(default_factory=PolicyState)
    # the fleet was serving before the replay: active until now, created long ago
    status: KedaStatus = field(default_factory=lambda: KedaStatus(last_active_time=0.0, created_at=-1e9))
    failures: int = 0  # the trigger's consecutive failures (its health)
    decisions: list[KedaDecision] = field(default_factory=list)
    _cache: ScalerReading | None = None
    _next_poll: float = 0.0

    def desired(self, now: float, obs: Observation) -> int:
        current = obs.spec_replicas
        replicas = current
        hpa_metric = decision = None
        if current > 0:  # at 0 the HPA is disabled (ScalingDisabled) and reads nothing
            use_cache = self.so.trigger.use_cached_metrics and self._cache is not None
            raw = self._cache if use_cache and self._cache is not None else self._query(now, obs)
            hpa_metric = self._fallback(raw, current)
            reading = (
                MetricReading((hpa_metric.value_milli,), age_s=raw.age_s)
                if hpa_metric.value_milli is not None
                else MetricReading.failed(hpa_metric.error)
            )
            at = self.epoch_s + now
            decision, self.hpa_state = decide(
                self.hpa_spec, self.hpa_state, replace(obs, metrics={METRIC: reading}), at
            )
            if decision.desired_replicas != current:
                self.hpa_state = record_rescale(
                    self.hpa_spec, self.hpa_state, at, current, decision.desired_replicas
                )
            replicas = decision.desired_replicas
        poll = outcome = None
        if now + 1e-9 >= self._next_poll:
            self._next_poll += self.so.polling_interval_s
            raw = self._query(now, obs)
            poll = self._fallback(raw, replicas)
            if self.so.trigger.use_cached_metrics:
                self._cache = ScalerReading(poll.value_milli, poll.error, raw.age_s)
            active = poll.fallback_active or (
                poll.value_milli is not None
                and is_active(poll.value_milli / 1000.0, self.so.trigger.activation_threshold)
            )
            outcome = request_scale(self.so, self.status, replicas, active, bool(poll.error), now)
            self.status = outcome.status
            if outcome.write is not None:
                replicas = outcome.write
        self.decisions.append(KedaDecision(now, hpa_metric, decision, poll, outcome, replicas))
        return replicas

    def _query(self, now: float, obs: Observation) -> ScalerReading:
        """The trigger's query on what Prometheus holds now, through the scaler's parsing."""
        pods = obs.metrics.get(METRIC)
        held = obs.metrics.get(GATEWAY_METRIC)
        value: float | None = None
        age = 0.0
        if held is not None and held.values_milli:  # the gateway's series exists
            in_pods = sum(pods.values_milli) if pods is not None and pods.values_milli else 0
            value = (in_pods + sum(held.values_milli)) / 1000.0
            age = held.age_s
        try:
            v = query_value(
                200, instant_vector_body(value, now), ignore_null_values=self.so.trigger.ignore_null_values
            )
        except ScalerError as e:
            return ScalerReading(None, str(e), age)
        return ScalerReading(metric_milli(v), "", age)

    def _fallback(self, raw: ScalerReading, current: int) -> FallbackResult:
        result = with_fallback(
            self.so.fallback,
            self.failures,
            raw.value_milli,
            raw.error,
            target_average_value=self.so.trigger.threshold,
            current_replicas=current,
        )
        self.failures = result.failures
        return result


def scaled_object(ctx: PolicyContext, *, cached: bool) -> ScaledObject:
    scenario, params = ctx.scenario, ctx.params
    return ScaledObject(
        PrometheusTrigger(threshold=params.target, use_cached_metrics=cached),
        min_replica_count=0 if params.scale_to_zero else scenario.min_replicas,
        max_replica_count=scenario.max_replicas,
        polling_interval_s=params.keda_poll_interval_s,
    )


def _build(ctx: PolicyContext, *, cached: bool) -> KedaPolicy:
    so = scaled_object(ctx, cached=cached)
    spec = replace(hpa_spec(ctx.scenario, ctx.params), min_replicas=so.hpa_min_replicas)
    return KedaPolicy(
        "keda-cached" if cached else "keda",
        so,
        spec,
        initial_replicas=warm_start_replicas(ctx.trace, ctx.scenario, ctx.params.target),
        period_s=ctx.scenario.sync_period_s,
    )


def build(ctx: PolicyContext) -> KedaPolicy:
    return _build(ctx, cached=False)


def build_cached(ctx: PolicyContext) -> KedaPolicy:
    return _build(ctx, cached=True)
