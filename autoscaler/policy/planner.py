"""The predictive stages: demand x capacity sizing over the marginal replica's horizon.

Called by decide.py when the spec has a `capacity` section, after upstream's per-metric
proposals (the reactive floor) and before floors, stabilization and limits. Each stage is
recorded as a Stage (before and after replicas, reason, message):

  demand      arrivals and token rates from the engine counters plus the in-flight growth
              (demand.py); forecast with a damped trend; the band from the scored errors (band.py)
  capacity    the replicas the band's upper quantile needs under the SLO (capacity.py), with
              each replica's capacity at this mix and the learned speed
  horizon     the ready time of the marginal replica (horizon.py): the forecast is read there
              (lookahead.py: the forecast and the sizing at any horizon, each once a tick)
  panic       a burst far above the band: sized on this tick's demand, bounded by what is ready
              in time (panic.py) — only when it fires or holds
  scale-up    how many of the missing replicas start now under storage sharing (scaleup.py)
  scale-down  rent or buy (scaledown.py): what is kept, what is released (scaledownstage.py)

The reactive floor — upstream's proposal on queue and batch — joins at scale-up, less the replicas
arriving within the horizon (they are part of what a queue asks for, not all of it). Pure: (spec,
state, observation, now) in, stages, recommendation and new state out. The stages' rows are built
in planstages.py.
"""

from __future__ import annotations

import math

from autoscaler.policy import (
    band,
    demand,
    horizon,
    lengths,
    outputsteps,
    planstages,
    scaledown,
    scaledownstage,
    speedlearn,
    survival,
)
from autoscaler.policy.capacityfacts import CapacityFacts
from autoscaler.policy.lookahead import Lookahead
from autoscaler.policy.mix import outputs_cv2_of
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.planstate import Outcome, Plan, PlannerState
from autoscaler.policy.specfacts import SpecFacts
from autoscaler.policy.stage import Stage


def _total(reading: MetricReading | None) -> float | None:
    if reading is None:
        return None
    values = reading.values_milli
    if not values:
        return None
    # one value (most metrics): no call of the builtin sum, which a compiled module looks up by name
    return (values[0] if len(values) == 1 else sum(values)) / 1000.0


def _highest(reading: MetricReading | None) -> float | None:
    """The highest item of a gauge (a catalog with one item a pod: the fullest pod's)."""
    if reading is None:
        return None
    values = reading.values_milli
    if not values:
        return None
    return (values[0] if len(values) == 1 else max(values)) / 1000.0


def plan(
    spec: SpecFacts,
    cap: CapacityFacts,
    state: PlannerState | None,
    obs: Observation,
    reactive: int | None,
    lead_s: float | None,
    now: float,
) -> Outcome:
    """The predictive stages for one tick. `reactive` is upstream's proposal (None: unusable),
    `lead_s` a caller's or the spec's time to ready of one replica (None: the cold-start model).
    The specs are read from their facts (specfacts.py), kept once per spec."""
    state = state or PlannerState()
    d = cap.demand
    observed = obs.metrics
    # a dict's get is compiled, a Mapping's a method call by name
    metrics = observed if isinstance(observed, dict) else dict(observed)
    finished_reading = metrics.get(cap.request_rate_metric)
    finished = _total(finished_reading)
    prompt = _total(metrics.get(cap.prompt_token_rate_metric))
    generated = _total(metrics.get(cap.generation_token_rate_metric))
    have = obs.spec_replicas
    if finished is None or prompt is None or generated is None:
        why = "no demand reading (request and token rates); the reactive proposal decides"
        after = have if reactive is None else reactive
        return Outcome((Stage("demand", have, after, "NoDemandData", why),), None, None, state)
    prior = state.demand

    # demand: this tick's sample folded in; the band is read before its errors are scored (track)
    inflight = _total(metrics.get(cap.inflight_metric))
    if inflight is None:
        inflight = prior.inflight if prior is not None else 0.0
    square_metric = cap.prompt_square_metric
    squares = _total(metrics.get(square_metric)) if square_metric is not None else None
    output_metric, output_sum_metric = cap.output_square_metric, cap.output_sum_metric
    out_squares = _total(metrics.get(output_metric)) if output_metric is not None else None
    out_sum = _total(metrics.get(output_sum_metric)) if output_sum_metric is not None else None
    window = finished_reading.window_s if finished_reading is not None else None
    arrived, arrived_window = None, None
    arrival_metric = cap.arrival_rate_metric
    if arrival_metric is not None:
        arrived_reading = metrics.get(arrival_metric)
        arrived = _total(arrived_reading)
        arrived_window = arrived_reading.window_s if arrived_reading is not None else None
    # the level's weight this tick, worked out once: observe applies it, the band takes off the
    # noise of that level
    level_alpha = d.alpha
    if prior is not None and now > prior.at:
        level_alpha = demand.level_alpha_at(d, prior, now - prior.at, window)
    dstate, est = demand.observe(
        d,
        prior,
        now,
        finished,
        prompt,
        generated,
        inflight,
        squares,
        window,
        arrived,
        arrived_window,
        out_squares,
        out_sum,
        level_alpha,
    )

    # capacity at the learned speed, and the horizon: the marginal replica's ready time
    # the outputs' spread the sizing reads (lengths.py), so the speed is learned at its work per request
    outputs_cv2 = lengths.outputs_cv2(outputs_cv2_of(dstate.mix))
    # the waiting total, read once: the speed's saturation and the backlog stage both read it
    queue = _total(metrics.get(cap.queue_metric)) if cap.queue_metric is not None else None
    speed_state = _learn_speed(
        cap, state.speed, obs, metrics, queue, prompt, generated, finished, outputs_cv2
    )
    speed = speedlearn.speed(speed_state, cap.learn_prior_weight)
    limit = spec.max_replicas
    if state.needs and state.needs[0][1] > limit:  # recorded under a higher bound (its front is its peak)
        state = state._replace(needs=scaledown.bounded(state.needs, limit), gaps=state.gaps[:limit])
    # the seconds the dispersion's count was read over: the gateway's rate window where it counts
    # the arrivals, the finishes' otherwise (None: the tick's), which the bursts' hold reads the
    # rate's excess as persisting over (latecurve.persistence)
    count_s = arrived_window if arrived is not None else window
    # the prefill times' far tail (prefilltail.py): the holds one long prompt puts on a replica; and
    # the output lengths' survival (outputsteps.py): the decode steps of the TPOT tail's requests
    period = cap.decision_period_s
    prefill_tail, tail_problem = state.prefill_tail, ""
    tail_metric = cap.prefill_time_metric
    if tail_metric is not None:
        prefill_tail, tail_problem = survival.track(prefill_tail, metrics.get(tail_metric), now, period)
    output_tail, outputs_problem = state.output_tail, ""
    outputs_metric = cap.output_length_metric
    if outputs_metric is not None:
        output_tail, outputs_problem = survival.track(
            output_tail, metrics.get(outputs_metric), now, period, outputsteps.UNITS
        )
    output_steps = outputsteps.of(output_tail)
    ahead = Lookahead(cap, dstate, speed, limit, count_s, prefill_tail, output_steps)
    cold = spec.cold_start
    # the nodes on their way with room for a replica (a generator made only when any is listed)
    coming = obs.coming_nodes
    coming = tuple(n for n in coming if cold is not None and n[1] >= cold.gpus_per_replica) if coming else ()
    cluster = (
        obs.free_gpus_per_node,
        obs.image_cached_nodes,
        obs.weights_cached_nodes,
        obs.loading_remaining_gb,
        obs.upcoming_loads_s,
        coming,
    )
    horizon_s, needed, rounds, scored_s = horizon.find(
        cold, have, limit - have, ahead.need_at, cluster, lead_s, period
    )
    at_horizon = ahead.sizing_at(horizon_s)
    mean, upper = ahead.forecast_at(horizon_s)
    load = ahead.load
    mean_load = ahead.mean_load_at(horizon_s)
    upper_load = load(upper)
    widening = upper_load / mean_load if mean_load > 0.0 else math.inf
    on_heights = band.on_heights(dstate, mean_load, ahead.typical_load)
    # the band is scored on the smoothed level, not this tick's noisy estimate (band.track), one
    # replica's lead ahead: the marginal replica's wait is the policy's own asks (horizon.find)
    level = ahead.level
    # (the lead is the horizon on most ticks: mean_load, without the float-keyed memo's lookup)
    scored_load = mean_load if scored_s == horizon_s else ahead.mean_load_at(scored_s)
    dstate = band.track(
        d, dstate, now, level, scored_s, scored_load, ahead.typical_load, ahead.mean_now.requests,
        level_alpha,
    )  # fmt: skip
    slower = (level_alpha, d.alpha, d.level_requests) if level_alpha < d.alpha else None
    stages = planstages.forecast_stages(
        have, needed, finished, est, horizon_s, mean, upper, widening, at_horizon, ahead, rounds, obs,
        on_heights, slower, tail_problem, outputs_problem,
    )  # fmt: skip

    # the reactive floor: upstream's proposal less the replicas arriving within the horizon, at least
    # the count (capped at the count while any arrived, a queue growing faster than they absorb
    # stood for a lead: docs/policy.md, the backlog stage's row)
    floor = 0
    if reactive is not None:
        floor = reactive
        if reactive > have and obs.starting_ready_at:
            arriving = sum(1 for t in obs.starting_ready_at if t <= now + horizon_s)
            if arriving:
                floor = reactive - arriving if reactive - arriving > have else have
    target = floor if floor > needed else needed  # max(), without the builtin's call
    backlog = planstages.backlog_stage(
        cap,
        speed_state,
        queue,
        obs.ready_pods,
        dstate.mix.prompt,
        at_horizon,
        needed,
        target,
        limit,
        scored_s,
    )
    if backlog is not None:
        stages.append(backlog)
        target = backlog.after

    # the SLO's own evidence (latefeedback.py): first tokens slow past what the sizing allows, or
    # the hour usually sees, ask at its alarm for a replica above the count, started as the floor's
    late_evidence, ttft_tail = state.late_evidence, state.ttft_tail
    ttft_metric = cap.ttft_metric
    if ttft_metric is not None:
        late_reading = metrics.get(ttft_metric)
        # the first tokens since the last decision: a rate's window longer than that counted them before
        counted_s = period
        rate_s = late_reading.window_s if late_reading is not None else None
        if rate_s is not None and rate_s < counted_s:
            counted_s = rate_s
        if prior is not None and 0.0 < now - prior.at < counted_s:
            counted_s = now - prior.at
        late, late_evidence = planstages.late_stage(
            cap, late_reading, ttft_tail, late_evidence, counted_s, ahead.idle_misses(), have, target, limit
        )
        # the hour's usual share of slow first tokens, this tick's window in it after it is weighed
        ttft_tail, _ = survival.track(ttft_tail, late_reading, now, period)
        if late is not None:
            stages.append(late)
            target = late.after
            floor = target

    panic_state, burst_extra, in_panic, burst_stage = planstages.panic_stage(
        cap, cold, cluster, ahead, prior, state.panic, est, have, target, now
    )
    if burst_stage is not None:
        stages.append(burst_stage)
        target = burst_stage.after

    # rent or buy's terms, kept for the next tick whether or not this one scales down: a replica
    # released finishes its requests first, the in-flight ones spread over the ready replicas
    recreate = scaledownstage.recreation(cold, period, horizon_s)
    ready = obs.ready_pods if obs.ready_pods else have
    drain = scaledown.drain_s(dstate.lasting.time_s, inflight / ready if ready > 0 else 0.0)
    typical_capacity, weight, breakeven, found = scaledownstage.terms(
        state,
        have,
        upper,
        upper_load,
        at_horizon,
        ahead.typical_load,
        dstate.typical_peak,
        None if prior is None else prior.at,
        now,
        recreate,
        drain,
    )
    started_for = state.started_for
    if target > have:
        last = planstages.scale_up_stage(
            cold, cluster, period, state, prior, have, target, floor, burst_extra, limit
        )
        start, keep = last.after - have, have
        if start:
            started_for = level
    else:
        last = scaledownstage.stage(
            ahead,
            state,
            have,
            target,
            floor,
            in_panic,
            cap.panic_window_s,
            obs.starting_ready_at,
            level,
            now,
            recreate,
            weight,
            breakeven,
            found,
            drain,
        )
        start, keep = 0, last.after
    stages.append(last)
    desired = last.after
    # the history reaches the deepest level's weighted break-even over trust: longer than any window,
    # so a burst's levels and gaps outlive an idle spell (cut at the longest window used, Azure code
    # x 17 on fast-load-70b lost 7.4 points: docs/policy-history.md, "The price of a late request")
    longest = scaledown.breakeven_s(recreate(limit), weight, drain) / scaledown.TRUST
    # a need above the bound is recorded as the bound: no burst brings back more (scaledown.bounded)
    recorded = limit if limit < target else target  # min(), without the builtin's call
    needs, gaps = scaledown.record(state.needs, state.gaps, now, recorded, longest)
    result = Plan(est.now, mean, upper, widening, horizon_s, at_horizon, speed, needed, keep, start, in_panic)
    next_state = PlannerState(
        dstate,
        speed_state,
        needs,
        panic_state,
        started_for,
        gaps,
        typical_capacity,
        found,
        prefill_tail,
        output_tail,
        late_evidence,
        ttft_tail,
    )
    return Outcome(tuple(stages), desired, result, next_state)


def _learn_speed(
    cap: CapacityFacts,
    speed_state: speedlearn.SpeedState,
    obs: Observation,
    metrics: dict[str, MetricReading],
    queue: float | None,
    prompt: float,
    generated: float,
    finished: float,
    outputs_cv2: float = 1.0,
) -> speedlearn.SpeedState:
    """The learned speed after this tick, learned only while every ready replica has a queue, and
    the standing backlog it tracks, with `learn` off too (`metrics`: obs.metrics as a dict;
    `queue`: the waiting total, None unread)."""
    ready = obs.ready_pods or 0
    saturated = queue is not None and ready > 0 and queue >= ready
    kv_metric = cap.kv_usage_metric
    kv_full = False
    # read on saturated ticks alone: an unsaturated one ends the run in learn() either way
    if saturated and kv_metric is not None:
        kv = _highest(metrics.get(kv_metric))
        kv_full = kv is not None and kv >= speedlearn.KV_FULL  # preempting: the counters miss the recomputes
    # else learn() would return it as it is; a standing backlog is read every tick (its end is news)
    if cap.learn and (saturated or speed_state.saturated_ticks or speed_state.backlog_ready):
        speed_state = speedlearn.learn(
            cap.profile,
            speed_state,
            queue=queue,
            prompt_rate=prompt,
            generated_rate=generated,
            finished_rate=finished,
            ready=ready,
            share=lengths.context_share(outputs_cv2),
            kv_full=kv_full,
        )
    elif not cap.learn and (saturated or speed_state.backlog_ready):
        # no speed learned, but the backlog is tracked all the same: the backlog stage reads it
        held, stood = speedlearn.backlog_after(speed_state, queue, ready)
        speed_state = speedlearn.SpeedState(
            speed_state.log_ratio, speed_state.samples, 0, 0, 0.0, held, stood
        )
    return speed_state
