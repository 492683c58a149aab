"""The predictive stages: demand x capacity sizing over the marginal replica's horizon.

Called by decide.py when the spec has a `capacity` section, after upstream's per-metric
proposals (the reactive floor) and before floors, stabilization and limits. Each stage is
recorded as a Stage (before and after replicas, reason, message):

  demand      arrivals and token rates from the engine counters plus the in-flight growth
              (demand.py); forecast with a damped trend; the band from the scored errors (band.py)
  capacity    the replicas the band's upper quantile needs under the SLO (capacity.py), with
              each replica's capacity at this mix and the learned speed
  horizon     the ready time of the marginal replica (horizon.py): the forecast is read there
  panic       a burst far above the band: sized on this tick's demand, bounded by what is ready
              in time (panic.py) — only when it fires or holds
  scale-up    how many of the missing replicas start now under storage sharing (scaleup.py)
  scale-down  rent or buy (scaledown.py): what is kept, what is released

The reactive floor — upstream's proposal on queue and batch — joins at scale-up (capped while
replicas are arriving, as the reactive path does). Pure: (spec, state, observation, now) in,
stages, recommendation and new state out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

from autoscaler.policy import (
    band,
    burstsize,
    capacity,
    demand,
    horizon,
    lengths,
    memo,
    panic,
    scaledown,
    scaleup,
    speedlearn,
)
from autoscaler.policy.capacity import Demand, Sizing
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.planstate import Outcome, Plan, PlannerState
from autoscaler.policy.spec import AutoscalerSpec, CapacitySpec, ColdStartSpec, ReplicaProfile, SloTarget
from autoscaler.policy.stage import Stage

# A NamedTuple built as tuple.__new__(cls, fields) skips its Python-level __new__: a third of the
# cost of cls(*fields) (~0.4 against ~1.3 µs here), and plan() builds a dozen a tick.
_new = tuple.__new__
FALL_TOLERANCE = (
    0.1  # demand counts as fallen 10 % below its level at the last scale-up (the HPA's tolerance)
)


# the stages' messages, formatted only when read (stage.Stage)
_DEMAND_MESSAGE = (
    "arrivals {:.3g}/s (finished {:.3g} + in-flight growth {:+.3g}), prompt {:.4g} tok/s,"
    " output {:.4g} tok/s; in {:.0f} s: {:.3g}/s, upper {:.3g}/s (band x{:.3g})"
)
_CAPACITY_MESSAGE = (
    "per replica at the SLO: prefill {:,.0f} tok/s, decode {:,.0f} tok/s, {:.3g} req/s at this mix"
    " (speed x{:.2f}); {:.3g}/s needs {}; arrivals' dispersion over the TTFT target {:.3g}"
    " (ca² {:.3g} a replica)"
)
_HORIZON_MESSAGE = "replica {} of those asked for now is ready in {:.0f} s ({} loading now, {} round(s))"
_PANIC_MESSAGE = "{:.3g}/s now is over {:g}x the band's {:.3g}/s: {} needed, {} can be ready within {:.0f} s"


def _total(reading: MetricReading | None) -> float | None:
    if reading is None or not reading.values_milli:
        return None
    return sum(reading.values_milli) / 1000.0


def load_of(profile: ReplicaProfile, d: Demand) -> float:
    """GPU-seconds per second a demand costs at the profile's speed: the unit errors are scored in."""
    if d.requests <= 0.0:
        return profile.prefill_s_per_token * d.prompt_tokens
    return d.requests * capacity.work_per_request(
        profile, d.prompt_tokens / d.requests, d.output_tokens / d.requests, 1.0
    )


def _load_function(profile: ReplicaProfile) -> Callable[[Demand], float]:
    """load_of for one profile, its arithmetic inlined (the same operations in the same order, so
    the same floats): a tick evaluates a dozen loads."""
    a0 = profile.prefill_s_per_token
    a1 = profile.prefill_s_per_attention_pair * 0.5  # a1 * 0.5 * x is (a1 * 0.5) * x
    b0 = profile.decode_s_per_request
    c0 = profile.decode_s_per_context_token

    def load(d: Demand) -> float:
        r, prompt, output = d
        if r <= 0.0:
            return a0 * prompt
        p = prompt / r
        o = output / r
        return r * ((a0 + a1 * (p + 1.0)) * p + (b0 + c0 * (p + 0.5 * o)) * o)

    return load


class _Fixed(NamedTuple):
    """What a tick derives from the capacity spec alone, worked out once per spec."""

    load: Callable[[Demand], float]
    slo: SloTarget  # the planning targets


_fixed: memo.Table = {}  # by capacity spec (memo.py)


def _make_fixed(cap: CapacitySpec) -> _Fixed:
    return _Fixed(_load_function(cap.profile), cap.planning_slo)


# horizon.recreate_s(cold, m, period_s) by (period_s, m), per cold-start spec: its lru_cache hashes
# the spec at every call (~3 µs a hash here, several calls a tick)
_recreated: memo.Table = {}


def _new_memo(cold: ColdStartSpec) -> dict[tuple[float, int], float]:
    return {}


_BINDING_REASONS: dict[str, str] = {"idle": "Idle"}


def _binding_reason(binding: str) -> str:
    """The capacity stage's reason: the binding constraint as a word (TTFTBinds, ...)."""
    reason = _BINDING_REASONS.get(binding)
    if reason is None:
        reason = _BINDING_REASONS[binding] = f"{binding.upper()}Binds"
    return reason


def _needed_now_message(
    template: str,
    profile: ReplicaProfile,
    slo: SloTarget,
    upper_now: Demand,
    speed: float,
    limit: int,
    floor: int,
    spread: float,
    shape: dict[str, float],
) -> str:
    """The scale-down stage's message when as many replicas are needed now as there are: keep()'s
    NeededNow template, whose one argument is the need now, which plan() did not size
    (need_at(0.0), at least the floor)."""
    need_now = max(burstsize.size(profile, slo, upper_now, speed, limit, spread, shape).replicas, floor)
    return template.format(need_now)


def plan(
    spec: AutoscalerSpec,
    cap: CapacitySpec,
    state: PlannerState | None,
    obs: Observation,
    reactive: int | None,
    lead_s: float | None,
    now: float,
) -> Outcome:
    """The predictive stages for one tick. `reactive` is upstream's proposal (None: unusable),
    `lead_s` a caller's or the spec's time to ready of one replica (None: the cold-start model)."""
    state = state or PlannerState()
    d = cap.demand
    metrics = obs.metrics
    finished_reading = metrics.get(d.request_rate_metric)
    finished = _total(finished_reading)
    prompt = _total(metrics.get(d.prompt_token_rate_metric))
    generated = _total(metrics.get(d.generation_token_rate_metric))
    have = obs.spec_replicas
    if finished is None or prompt is None or generated is None:
        why = "no demand reading (request and token rates); the reactive proposal decides"
        after = have if reactive is None else reactive
        return Outcome((Stage("demand", have, after, "NoDemandData", why),), None, None, state)
    inflight = _total(metrics.get(d.inflight_metric))
    if inflight is None:
        inflight = state.demand.inflight if state.demand is not None else 0.0
    profile = cap.profile
    prior = state.demand
    squares = _total(metrics.get(d.prompt_square_metric)) if d.prompt_square_metric is not None else None
    window = finished_reading.window_s if finished_reading is not None else None
    dstate, est = demand.observe(d, prior, now, finished, prompt, generated, inflight, squares, window)

    fixed = memo.by_identity(_fixed, cap, _make_fixed)
    load = fixed.load
    observed = dstate  # the band is read before this tick's errors are scored (track, below)
    typical_load = load(observed.typical)
    mean_now = demand.expected(d, observed, 0.0)  # the level: track leaves the series as they are
    forecasts: dict[float, tuple[Demand, Demand]] = {}

    def forecast_at(h: float) -> tuple[Demand, Demand]:
        """(mean, upper band) h seconds after this tick's sample, each h once a tick."""
        got = forecasts.get(h)
        if got is None:
            mean = mean_now if h == 0.0 else demand.expected(d, observed, h)
            got = mean, band.upper(d, observed, mean, load, typical_load)
            forecasts[h] = got
        return got

    def upper_at(h: float) -> Demand:
        return forecast_at(h)[1]

    # learned speed: only while every ready replica has a queue
    queue = _total(metrics.get(d.queue_metric)) if d.queue_metric is not None else None
    ready = obs.ready_pods or 0
    speed_state = state.speed
    saturated = queue is not None and ready > 0 and queue >= ready
    if cap.learn and (saturated or speed_state.saturated_ticks):  # else learn() returns it as it is
        speed_state = speedlearn.learn(
            profile,
            speed_state,
            queue=queue,
            prompt_rate=prompt,
            generated_rate=generated,
            finished_rate=finished,
            ready=ready,
        )
    speed = speedlearn.speed(speed_state, cap.learn_prior_weight)
    limit = spec.max_replicas
    slo = fixed.slo
    spread = demand.dispersion(dstate, slo.ttft_s)
    sized: dict[float, Sizing] = {}
    shape = lengths.spread(profile, dstate.mix.prompt, dstate.mix.lengths_cv2())

    def sizing_at(h: float) -> Sizing:
        got = sized.get(h)
        if got is None:
            got = burstsize.size(profile, slo, forecast_at(h)[1], speed, limit, spread, shape)
            sized[h] = got
        return got

    def need_at(h: float) -> int:
        return sizing_at(h).replicas

    cold = spec.cold_start
    cluster = (
        obs.free_gpus_per_node,
        obs.image_cached_nodes,
        obs.weights_cached_nodes,
        obs.loading_remaining_gb,
        obs.upcoming_loads_s,
    )
    horizon_s, needed, rounds = horizon.find(
        cold, have, limit - have, need_at, cluster, lead_s, cap.decision_period_s
    )
    at_horizon = sizing_at(horizon_s)
    mean, upper = forecast_at(horizon_s)
    mean_load = load(mean)
    upper_load = load(upper)
    widening = upper_load / mean_load if mean_load > 0.0 else math.inf
    load_now = load(est.now)
    # the band is scored on the smoothed level, not this tick's noisy estimate (band.track)
    level = load(mean_now)
    dstate = band.track(d, dstate, now, level, horizon_s, mean_load, typical_load)

    r, pt, gt = est.now
    stages = [
        _new(
            Stage,
            (
                "demand",
                have,
                have,
                "DemandForecast",
                _DEMAND_MESSAGE,
                (r, finished, est.growth_per_s, pt, gt, horizon_s, mean.requests, upper.requests, widening),
            ),
        ),
        _new(
            Stage,
            (
                "capacity",
                have,
                needed,
                _binding_reason(at_horizon.binding),
                _CAPACITY_MESSAGE,
                (
                    at_horizon.prefill_tokens_per_s,
                    at_horizon.decode_tokens_per_s,
                    at_horizon.requests_per_s,
                    speed,
                    upper.requests,
                    needed,
                    spread,
                    burstsize.replica_cv2(spread, at_horizon.replicas),
                ),
            ),
        ),
        _new(
            Stage,
            (
                "horizon",
                needed,
                needed,
                "MarginalReplica",
                _HORIZON_MESSAGE,
                (max(needed - have, 1), horizon_s, len(obs.loading_remaining_gb), rounds),
            ),
        ),
    ]

    # the reactive floor: upstream's proposal, capped while capacity is arriving within the horizon
    floor = 0
    if reactive is not None:
        floor = reactive
        if reactive > have and obs.starting_ready_at:
            arriving = sum(1 for t in obs.starting_ready_at if t <= now + horizon_s)
            if arriving:
                floor = have
    target = max(needed, floor)

    # panic: this tick's demand far above what the band allowed for it
    panic_state = state.panic
    in_panic = False
    burst_extra = 0
    if prior is not None and prior.primed:
        expected_now = band.upper(d, prior, demand.expected(d, prior, now - prior.at), load)
        triggered = load_now > cap.panic_threshold * load(expected_now)
        if triggered:  # sized only when the load is over the band (most ticks it is not)
            burst = burstsize.size(profile, slo, est.now, speed, limit, spread, shape)
            triggered = burst.replicas > have
        panic_state = panic.update(panic_state, now, triggered, cap.panic_window_s)
        if triggered:
            within = panic.relevance_s(panic_state, now, cap.panic_window_s)
            burst_extra = panic.in_time(cold, min(burst.replicas, limit) - have, cluster, within)
            stages.append(
                Stage(
                    "panic",
                    target,
                    max(target, have + burst_extra),
                    "BurstAboveBand",
                    _PANIC_MESSAGE,
                    (r, cap.panic_threshold, expected_now.requests, burst.replicas, burst_extra, within),
                )
            )
            target = max(target, have + burst_extra)
        in_panic = panic_state.since is not None

    period = cap.decision_period_s
    # a replica released is back a decision after its need returns at best: the need is read at the
    # first decision after the burst begins, and only then is its replacement started
    if cold is not None:
        recreated = memo.by_identity(_recreated, cold, _new_memo)

        def recreate(m: int) -> float:
            got = recreated.get((period, m))
            if got is None:
                got = recreated[period, m] = horizon.recreate_s(cold, m, period) + period
            return got

    else:

        def recreate(m: int) -> float:
            return horizon_s + period

    # the fleet's capacity at the SLO in load units, averaged: with the typical load, its utilization
    typical_capacity = state.typical_capacity
    if upper.requests > 0.0 and at_horizon.requests_per_s > 0.0:
        capacity_now = have * at_horizon.requests_per_s * upper_load / upper.requests
        typical_capacity = scaledown.averaged(
            typical_capacity, capacity_now, None if prior is None else prior.at, now
        )
    weight = scaledown.slo_weight(typical_load, dstate.typical_peak, typical_capacity)
    breakeven = scaledown.breakeven_s(recreate(1))
    found = scaledown.found_at_first_sight(state.found, not state.needs, have, now, breakeven)
    keep = have
    start = 0
    started_for = state.started_for
    needed_now: tuple[Any, ...] | None = None  # the scale-down message's inputs when it is made lazily
    if target > have:
        # the forecast's need starts replicas once two decisions in a row have seen it: a replica
        # started for one tick's peak of a noisy estimate is ready a horizon later, when that peak
        # is long gone, and waiting one decision delays a real step by one period of a horizon of
        # several. A burst over the band (panic) and the reactive floor (a standing queue) do not wait.
        confirmed = target
        # a first sight's reading (prior not primed) had no in-flight reading before it: no growth
        if not burst_extra and state.needs and prior is not None and prior.primed:
            before = state.needs[-1][1]  # the need of the decision before (remember() keeps it)
            if before < target:
                confirmed = max(floor, before)
        deficit = min(confirmed, limit) - have
        # Unconfirmed only when the wait is what holds replicas back (not maxReplicas: a
        # reactive floor above it leaves no deficit on the first decision, with no need before)
        if confirmed == target or deficit > 0:
            start, why = (
                scaleup.starts_now(cold, deficit, cluster, cap.decision_period_s) if cold else (deficit, "")
            )
            if burst_extra > start:  # a burst does not wait: what can be ready in time starts at once
                start = burst_extra
                why = f"panic: the {burst_extra} replica(s) ready in time start at once"
            reason = "StaggeredStart" if start < deficit else "StartAll"
            if confirmed < target:
                why = f"{why}; {target - confirmed} more when the next decision needs them too"
            stages.append(_new(Stage, ("scale-up", target, have + start, reason, why, ())))
        else:
            start = 0
            stages.append(
                _new(
                    Stage,
                    (
                        "scale-up",
                        target,
                        have,
                        "Unconfirmed",
                        "{} needed at the horizon, {} at the decision before: started when a second"
                        " decision needs them",
                        (target, state.needs[-1][1]),
                    ),
                )
            )
        desired = have + start
        if start:
            started_for = level
    else:
        if in_panic:
            kept = scaledown.Keep(
                have, "PanicHold", "no scale-down within {:.0f} s of a panic", (cap.panic_window_s,)
            )
        elif obs.starting_ready_at and level >= (1.0 - FALL_TOLERANCE) * started_for:
            kept = scaledown.Keep(
                have,
                "LoadingKept",
                "{} replica(s) still starting and demand has not fallen since they were asked for",
                (len(obs.starting_ready_at),),
            )
        elif max(floor, target) >= have:
            # as many are needed now as there are: keep() keeps them all whatever the sizing now
            # says, which only its message shows, so that sizing is made when the message is read
            kept = scaledown.keep(have, have, have, state.needs, now, recreate, state.gaps, weight)
            needed_now = (
                kept.template,
                profile,
                slo,
                upper_at(0.0),
                speed,
                limit,
                max(floor, target),
                spread,
                shape,
            )
        else:
            # sized as need_at: the horizon's fixed point may have sized these already
            now_count = max(need_at(0.0), floor, target)
            # keep() reads the need ahead only when fewer than `have` are needed now (a sizing saved)
            ahead = need_at(breakeven) if now_count < have else now_count
            kept = scaledown.keep(have, now_count, ahead, state.needs, now, recreate, state.gaps, weight)
            kept = scaledown.hold_found(kept, have, found, now, breakeven)
        keep = kept.replicas
        if needed_now is None:
            stages.append(_new(Stage, ("scale-down", target, keep, kept.reason, kept.template, kept.args)))
        else:
            message = _needed_now_message
            stages.append(_new(Stage, ("scale-down", target, keep, kept.reason, message, needed_now)))
        desired = keep
    # the history reaches the deepest level's weighted break-even over trust: longer than any window,
    # so a burst's levels and gaps outlive an idle spell (cut at the longest window used, Azure code
    # x 17 on fast-load-70b lost 7.4 points: docs/policy-history.md, "The price of a late request")
    longest = scaledown.breakeven_s(recreate(limit), weight) / scaledown.TRUST
    needs, gaps = scaledown.record(state.needs, state.gaps, now, target, longest)
    figures = (est.now, mean, upper, widening, horizon_s, at_horizon, speed, needed, keep, start, in_panic)
    result = _new(Plan, figures)
    next_state = _new(
        PlannerState, (dstate, speed_state, needs, panic_state, started_for, gaps, typical_capacity, found)
    )
    return _new(Outcome, (tuple(stages), desired, result, next_state))
