"""`hpa`: the controller's own decision code with upstream's defaults, and the replay wrapper that
runs any AutoscalerSpec through decide() (the predictive and KEDA policies use it too)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from autoscaler.policy.decide import Decision, decide, record_rescale
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.spec import AutoscalerSpec, MetricSpec, TargetType
from autoscaler.policy.state import PolicyState
from replay.policies.base import METRIC, PolicyContext
from replay.policies.params import PolicyParams
from replay.policies.sizing import warm_start_replicas
from replay.profiles import Scenario


@dataclass(slots=True)
class DecidePolicy:
    """The controller's decision code: decide(), then record_rescale() as after a successful write.

    `epoch_s` maps replay time 0 onto a Unix time (schedules read the wall clock from `now`); the
    observation's predicted ready times move with it.
    `decisions` keeps every (now, observation, decision) for reports and the parity test.
    """

    name: str
    spec: AutoscalerSpec
    period_s: float = 15.0
    epoch_s: float = 1_704_067_200.0  # 2024-01-01 00:00 UTC, a Monday
    poll_interval_s: float = 0.0  # > 0: KEDA-like, the metric is refreshed only this often
    fresh_metrics: bool = False
    initial_replicas: int = 1
    lead_quantile: float | None = None
    # False: drop the cluster's lead time from the observation so the spec's fixed one applies
    cluster_lead_time: bool = True
    state: PolicyState = field(default_factory=PolicyState)
    decisions: list[tuple[float, Observation, Decision]] = field(default_factory=list)
    _cached: tuple[float, Mapping[str, MetricReading]] | None = None

    @property
    def metric_names(self) -> tuple[str, ...]:
        names = [m.name for m in self.spec.metrics]
        if self.spec.capacity is not None:  # the predictive stages read demand beside the HPA's metrics
            names += [n for n in self.spec.capacity.metric_names if n not in names]
        return tuple(names)

    @property
    def reads_cold_start(self) -> bool:
        """decide() reads the starting replicas' ready times and the lead time only to predict."""
        return self.spec.prediction is not None or self.spec.capacity is not None

    def desired(self, now: float, obs: Observation) -> int:
        if self.poll_interval_s > 0:
            obs = self._polled(now, obs)
        if not self.cluster_lead_time:
            obs = replace(obs, lead_time_s=None)
        if obs.starting_ready_at:  # absolute times, on the same clock as `now`
            obs = replace(obs, starting_ready_at=tuple(self.epoch_s + x for x in obs.starting_ready_at))
        at = self.epoch_s + now
        decision, self.state = decide(self.spec, self.state, obs, at)
        if decision.desired_replicas != decision.current_replicas:
            self.state = record_rescale(
                self.spec, self.state, at, decision.current_replicas, decision.desired_replicas
            )
        self.decisions.append((now, obs, decision))
        return decision.desired_replicas

    def _polled(self, now: float, obs: Observation) -> Observation:
        """KEDA polls its scaler every pollingInterval and serves the cached value in between."""
        if self._cached is None or now - self._cached[0] >= self.poll_interval_s:
            self._cached = (now, obs.metrics)
            return obs
        polled_at, metrics = self._cached
        aged = {k: v._replace(age_s=v.age_s + now - polled_at) for k, v in metrics.items()}
        return replace(obs, metrics=aged)


def hpa_spec(scenario: Scenario, params: PolicyParams) -> AutoscalerSpec:
    """An HPA with upstream defaults (no `behavior`: the legacy path, as kube-controller-manager)
    on an AverageValue target of `inflight` per replica."""
    return AutoscalerSpec(
        max_replicas=scenario.max_replicas,
        min_replicas=scenario.min_replicas,
        metrics=(MetricSpec(METRIC, TargetType.AVERAGE_VALUE, round(params.target * 1000)),),
        tolerance=params.tolerance,
        downscale_stabilization_s=params.downscale_window_s,
        # the replay's decision period plays upstream's sync period (whole seconds, as the flag)
        legacy_sync_period_s=max(1, math.floor(scenario.sync_period_s)),
    )


def build(ctx: PolicyContext) -> DecidePolicy:
    return DecidePolicy(
        "hpa",
        hpa_spec(ctx.scenario, ctx.params),
        period_s=ctx.scenario.sync_period_s,
        initial_replicas=warm_start_replicas(ctx.trace, ctx.scenario, ctx.params.target),
    )
