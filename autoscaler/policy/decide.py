"""The one decision: (spec, state, observation, now) -> (decision, new state).

Stages run in this order, each recorded with the replica count before and after and why:

  guard         current outside [min, max] or at 0: jump to the bound, nothing else runs (upstream)
  metrics       upstream's per-metric proposals on the current values, max over metrics
  capacity      while replicas are starting, the current value alone adds none (predictive only)
  forecast      the same formula on each metric forecast to grow by now + lead time (predictive only)
  floors        warm minimum, time-of-day schedules, headroom
  stabilization upstream's windows (legacy or behavior path)
  limits        upstream's rate policies and min/max

With `spec.prediction=None` and default floors this is exactly the HPA. `now` is Unix seconds
(schedules read the wall clock from it; the replay maps its trace start onto a date).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final, NamedTuple

from autoscaler.policy import floors, forecast, leadtime, memo, planner, specfacts
from autoscaler.policy.hpa import (
    Condition,
    MetricsRecommendation,
    combine_metrics,
    limit_legacy,
    limit_with_behavior,
    period_start,
    record_scale_event,
    stabilize_behavior,
    stabilize_legacy,
)
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.planstate import Plan, PlannerState
from autoscaler.policy.replicacalc import MetricError, MetricProposal, external_metric_replicas
from autoscaler.policy.spec import AutoscalerSpec
from autoscaler.policy.specfacts import SpecFacts
from autoscaler.policy.stage import Stage
from autoscaler.policy.state import PolicyState, Recommendation


class MetricForecast(NamedTuple):
    metric: str
    current: float  # the summed value now
    predicted: float  # at now + lead time
    method: str
    reason: str


class Decision(NamedTuple):
    current_replicas: int
    desired_replicas: int
    stages: tuple[Stage, ...]
    conditions: tuple[Condition, ...]
    rescale_reason: str = ""  # upstream's event text, e.g. "infscale_queue_size above target"
    lead_time_s: float = 0.0
    forecasts: tuple[MetricForecast, ...] = ()
    # seconds from now until each replica this decision adds is predicted ready
    predicted_ready_s: tuple[float, ...] = ()
    plan: Plan | None = None  # the predictive stages' figures (spec.capacity set)

    @property
    def scale(self) -> bool:
        return self.desired_replicas != self.current_replicas

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


# A NamedTuple built as tuple.__new__(cls, fields) skips its Python-level __new__ (~0.4 against
# ~1.3 µs here): the values every decision builds are made so.
_new: Final = tuple.__new__

_SCALING_DISABLED: Final = Condition(
    "ScalingActive",
    False,
    "ScalingDisabled",
    "scaling is disabled since the replica count of the target is zero",
)
_GOT_SCALE: Final = Condition(
    "AbleToScale", True, "SucceededGetScale", "the HPA controller was able to get the target's current scale"
)


def decide(
    spec: AutoscalerSpec, state: PolicyState, obs: Observation, now: float
) -> tuple[Decision, PolicyState]:
    current = obs.spec_replicas
    if not state.recommendations:
        # First sight (upstream's recordInitialRecommendation, for an HPA it has no entry for): the
        # current count, recorded an instant before this decision as upstream's seed precedes the
        # time.Now() its stabilization reads, so a 0 s window never holds it.
        state = replace(state, recommendations=(Recommendation(math.nextafter(now, -math.inf), current),))

    got = _spec_facts.get(id(spec))  # memo.by_identity's hit inline: once a tick
    facts: SpecFacts = (
        got[1] if got is not None and got[0] is spec else memo.by_identity(_spec_facts, spec, specfacts.of)
    )
    # Guards: upstream evaluates them before reading any metric.
    guard: tuple[int, str] | None = None
    if current == 0:
        if not state.scaled_to_zero:  # put at 0 by someone else: autoscaling is paused
            return Decision(
                current,
                current,
                (Stage("guard", 0, 0, "ScalingDisabled", _SCALING_DISABLED.message),),
                (_GOT_SCALE, _SCALING_DISABLED),
            ), state
        # we scaled it to zero ourselves: compute from the metrics, raised to minReplicas below
    elif current > facts.max_replicas:
        guard = facts.max_replicas, "Current number of replicas above Spec.MaxReplicas"
    elif current < facts.min_replicas:
        guard = facts.min_replicas, "Current number of replicas below Spec.MinReplicas"
    if guard is not None:
        desired, why = guard
        stage = Stage("guard", current, desired, "OutsideBounds", why)
        return Decision(current, desired, (stage,), (_GOT_SCALE,), rescale_reason=why), state

    tolerances = facts.tolerances
    lead_s = leadtime.lead_time_s(spec, obs) if facts.predicting else 0.0  # (its first test)

    proposals: dict[str, MetricProposal | MetricError] = {}
    readings: dict[str, MetricReading] = {}
    metrics = obs.metrics
    # a dict's get is compiled, a Mapping's a method call by name
    observed = metrics if isinstance(metrics, dict) else dict(metrics)
    max_age_s = facts.max_metric_age_s
    status_replicas, ready_pods = obs.status_replicas, obs.ready_pods
    for metric, name in facts.metrics:
        reading = observed.get(name)
        if reading is None or (max_age_s is not None and reading.values_milli is not None):
            reading = _fresh(reading, name, max_age_s)  # missing, or it may be stale
        readings[name] = reading
        proposals[name] = external_metric_replicas(
            reading,
            metric,
            spec_replicas=current,
            status_replicas=status_replicas,
            ready_pods=ready_pods,
            tolerances=tolerances,
        )
    reactive = combine_metrics(proposals, current)
    stages: list[Stage] = []
    forecasts: tuple[MetricForecast, ...] = ()
    raw = reactive.replicas
    active = reactive.condition
    if raw is not None:
        args = (tuple(proposals.items()),)
        stages.append(Stage("metrics", current, raw, "ValidMetricFound", _metrics_message, args))

    forecasters = state.forecasters
    planner_state = state.planner
    plan: Plan | None = None
    cap = facts.capacity
    if cap is not None:
        fixed_lead_s = leadtime.fixed_lead_s(spec, obs)
        outcome = planner.plan(facts, cap, planner_state, obs, raw, fixed_lead_s, now)
        stages.extend(outcome.stages)
        planner_state, plan = outcome.state, outcome.plan
        if outcome.replicas is not None and plan is not None:
            lead_s = plan.horizon_s
            # a failed reactive metric never lets the predictive path scale down (as upstream holds)
            raw = outcome.replicas if raw is not None else max(outcome.replicas, current)
    elif facts.predicting:
        forecasters, forecasts, predicted = _predict(spec, state, obs, readings, tolerances, lead_s, now)
        # Replicas already starting are capacity that arrives before any replica started now
        # would, and spec replicas already count them. The current value was produced without
        # them, so scaling up on it again is a reactive autoscaler's double scale-up.
        horizon = now + lead_s
        arriving = sum(1 for t in obs.starting_ready_at if t <= horizon) if obs.starting_ready_at else 0
        if raw is not None and arriving and raw > current:
            stages.append(
                Stage(
                    "capacity",
                    raw,
                    current,
                    "CapacityArriving",
                    "{} starting replica(s) ready within the {:.0f} s lead time;"
                    " only the forecast may add more",
                    (arriving, lead_s),
                )
            )
            raw = current
        if raw is not None and predicted is not None and predicted.replicas is not None:
            ahead = predicted.replicas > raw
            after = predicted.replicas if ahead else raw
            stages.append(
                Stage(
                    "forecast",
                    raw,
                    after,
                    "ForecastAboveCurrent" if ahead else "ForecastNotAbove",
                    _forecast_message,
                    (forecasts, predicted.metric, lead_s, predicted.replicas),
                )
            )
            raw = after
        elif raw is not None and forecasts:
            stages.append(
                Stage(
                    "forecast",
                    raw,
                    raw,
                    "ForecastNotAbove",
                    "no metric is forecast above its current value in {:.0f} s",
                    (lead_s,),
                )
            )

    if raw is None:  # every metric unusable, or some unusable and the rest would scale down
        stages.append(Stage("metrics", current, current, active.reason, active.message))
        decision = Decision(
            current, current, tuple(stages), (_GOT_SCALE, active), lead_time_s=lead_s, forecasts=forecasts
        )
        return decision, _next_state(state, state.recommendations, forecasters, planner_state)

    if facts.floors:
        floored, floor_reason = floors.apply_floors(spec.floors, raw, now)
        if floored != raw:
            stages.append(Stage("floors", raw, floored, floor_reason[0], floor_reason[1]))
            raw = floored

    rules = facts.rules
    if rules is None:
        stabilized, history, able = stabilize_legacy(
            state.recommendations, raw, now, spec.downscale_stabilization_s
        )
        stages.append(Stage("stabilization", raw, stabilized, able.reason, able.message, ()))
        start = period_start(
            current, state.scale_up_events, state.scale_down_events, now, spec.legacy_sync_period_s
        )
        desired, limited = limit_legacy(
            stabilized, current, spec.min_replicas, spec.max_replicas, spec.legacy_scale_up_factor, start
        )
    else:
        scale_up, scale_down = rules
        stabilized, history, able = stabilize_behavior(
            state.recommendations, raw, current, now, scale_up, scale_down
        )
        stages.append(Stage("stabilization", raw, stabilized, able.reason, able.message, ()))
        desired, limited = limit_with_behavior(
            stabilized,
            current,
            facts.min_replicas,
            facts.max_replicas,
            scale_up,
            scale_down,
            state.scale_up_events,
            state.scale_down_events,
            now,
        )
    stages.append(Stage("limits", stabilized, desired, limited.reason, limited.message, ()))
    if current == 0 and desired < facts.min_replicas:  # scaled from zero with minReplicas > 0
        desired = facts.min_replicas

    ready_in: tuple[float, ...] = ()
    cold = facts.cold_start
    if desired > current and cold is not None:
        ready_in = leadtime.ready_in_s(cold, desired - current, *leadtime.cluster(obs))

    decision = _new(
        Decision,
        (
            current,
            desired,
            tuple(stages),
            (able, active, limited),
            _rescale_reason(raw, current, reactive.metric) if desired != current else "",
            lead_s,
            forecasts,
            ready_in,
            plan,
        ),
    )
    return decision, _next_state(state, history, forecasters, planner_state)


_spec_facts: Final[memo.Table] = {}  # by spec (specfacts.py)


def _rescale_reason(raw: int, current: int, metric: str) -> str:
    """Upstream's event text for the rescale (the floors' count can be the one above target)."""
    if raw > current:
        return f"{metric or 'floors'} above target"
    if raw < current:
        return "All metrics below target"
    return ""


def _next_state(
    state: PolicyState,
    history: tuple[Recommendation, ...],
    forecasters: Mapping[str, Any],
    planner_state: PlannerState | None,
) -> PolicyState:
    # A direct constructor call: dataclasses.replace costs more than the rest of a tick's bookkeeping.
    return PolicyState(
        history,
        state.scale_up_events,
        state.scale_down_events,
        forecasters,
        state.scaled_to_zero,
        planner_state,
    )


def record_rescale(spec: AutoscalerSpec, state: PolicyState, now: float, old: int, new: int) -> PolicyState:
    """Call after the scale write succeeded (upstream stores events only then, and only with
    behavior; without it they are kept for one sync period, for the legacy cap's period start)."""
    scaled_to_zero = new == 0 and old > 0 and spec.min_replicas == 0
    if new == old:
        return replace(state, scaled_to_zero=scaled_to_zero)
    behavior = spec.behavior
    if new > old:
        period = behavior.scale_up.longest_period_s if behavior else spec.legacy_sync_period_s
        events = record_scale_event(state.scale_up_events, new - old, now, period)
        return replace(state, scale_up_events=events, scaled_to_zero=scaled_to_zero)
    period = behavior.scale_down.longest_period_s if behavior else spec.legacy_sync_period_s
    events = record_scale_event(state.scale_down_events, old - new, now, period)
    return replace(state, scale_down_events=events, scaled_to_zero=scaled_to_zero)


# --- helpers ---------------------------------------------------------------------------------


def _fresh(reading: MetricReading | None, name: str, max_age_s: float | None) -> MetricReading:
    if reading is None:
        return MetricReading.failed(f"no reading for metric {name}")
    if max_age_s is not None and reading.values_milli is not None and reading.age_s > max_age_s:
        return MetricReading.failed(
            f"newest sample is {reading.age_s:.0f} s old, more than the {max_age_s:.0f} s allowed"
        )
    return reading


def _predict(
    spec: AutoscalerSpec,
    state: PolicyState,
    obs: Observation,
    readings: dict[str, MetricReading],
    tolerances: tuple[float, float],
    lead_s: float,
    now: float,
) -> tuple[dict[str, Any], tuple[MetricForecast, ...], MetricsRecommendation | None]:
    assert spec.prediction is not None
    forecasters = dict(state.forecasters)
    results: list[MetricForecast] = []
    proposals: dict[str, MetricProposal | MetricError] = {}
    for metric in spec.metrics:
        reading = readings[metric.name]
        if not reading.values_milli:  # missing data is never forecast: the reactive rule decides
            continue
        value = sum(reading.values_milli) / 1000.0
        fstate = forecast.observe(spec.prediction, forecasters.get(metric.name), now, value)
        forecasters[metric.name] = fstate
        fc = forecast.forecast(spec.prediction, fstate, now, lead_s)
        results.append(MetricForecast(metric.name, value, fc.value, fc.method, fc.reason))
        if fc.value > value:  # only predicted growth adds: the current value had its say above
            proposals[metric.name] = external_metric_replicas(
                MetricReading((round(fc.value * 1000),)),
                metric,
                spec_replicas=obs.spec_replicas,
                status_replicas=obs.status_replicas,
                ready_pods=obs.ready_pods,
                tolerances=tolerances,
            )
    predicted = combine_metrics(proposals, obs.spec_replicas) if proposals else None
    return forecasters, tuple(results), predicted


def _metrics_message(proposals: tuple[tuple[str, MetricProposal | MetricError], ...]) -> str:
    parts = []
    for name, p in proposals:
        if isinstance(p, MetricError):
            parts.append(f"{name}: {p.message}")
        else:
            parts.append(f"{name}: ratio {p.ratio:.3g} -> {p.replicas}")
    return "; ".join(parts)


def _forecast_message(
    forecasts: tuple[MetricForecast, ...], metric: str, lead_s: float, replicas: int
) -> str:
    at = next(
        (f"{f.predicted:.4g} (now {f.current:.4g}, {f.method})" for f in forecasts if f.metric == metric), "?"
    )
    return f"{metric} predicted at {at} in {lead_s:.0f} s -> {replicas}"
