"""The predictive stages through decide(): each stage's table, and closed-loop properties against
the replay's fleet (constant demand converges and stays; a step is served when the horizon says;
no runaway while replicas load)."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy import burstprice, burstsize, capacity, demand, horizon, latecurve, scaledown
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityspec import CapacitySpec, DemandSpec, ReplicaProfile, SloTarget
from autoscaler.policy.decide import Decision, decide, record_rescale
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.planstate import PlannerState
from autoscaler.policy.spec import (
    AutoscalerSpec,
    Behavior,
    ColdStartSpec,
    MetricSpec,
    RatePolicy,
    RatePolicyType,
    TargetType,
    default_scale_down,
    default_scale_up,
)
from autoscaler.policy.state import PolicyState
from replay.fleet import Fleet

NOW = 1_764_410_400.0
QUEUE = "infscale_queue_size"
# short prompts, decode-heavy: TPOT binds, ρ <= 1 - 0.02 / 0.1 = 0.8 with w = 0.1 s a request
PROFILE = ReplicaProfile(
    step_base_s=0.02, prefill_s_per_token=1e-4, decode_s_per_request=9e-4, max_num_seqs=10**5
)
SLO = SloTarget(ttft_s=10.0, tpot_s=0.1)
SEED = ColdStartSpec(weights_gb=140, storage_gbps=10, gpus_per_replica=4)
# a band fixed at its prior: with the typical demand equal to the mean, upper = 2 × 1.25 - 1 = 1.5 × mean
# the hand-computed figures (and the counterexample below) are at the demand level's alpha of 0.5,
# the default they were written with: pinned so they test the planner, not the level's smoothing
FIXED_BAND = DemandSpec(prior_error=math.log(1.25), prior_weight=1e6, quantile=0.9, alpha=0.5)
UNLIMITED = Behavior(
    scale_up=default_scale_up(policies=(RatePolicy(RatePolicyType.PERCENT, 10_000, 15),)),
    scale_down=default_scale_down(stabilization_window_s=0),
)


def planner_spec(
    cold: ColdStartSpec | None = SEED, queue_target_milli: int = 16_000, **capacity_kwargs: object
) -> AutoscalerSpec:
    capacity_kwargs.setdefault("demand", FIXED_BAND)
    # the hand-computed figures plan at the SLO itself (the planning shares' default is tested below)
    capacity_kwargs.setdefault("plan_tpot_share", 1.0)
    capacity_kwargs.setdefault("plan_ttft_share", 1.0)
    return AutoscalerSpec(
        max_replicas=100,
        metrics=(MetricSpec(QUEUE, TargetType.AVERAGE_VALUE, queue_target_milli),),
        behavior=UNLIMITED,
        cold_start=cold,
        capacity=CapacitySpec(profile=PROFILE, slo=SLO, **capacity_kwargs),  # type: ignore[arg-type]
    )


def readings(
    rate: float, *, queue: float = 0.0, inflight: float = 10.0, prompt: float = 100.0, output: float = 100.0
) -> dict[str, MetricReading]:
    return {
        QUEUE: MetricReading.of(queue),
        "infscale_request_rate": MetricReading.of(rate),
        "infscale_prompt_token_rate": MetricReading.of(rate * prompt),
        "infscale_generation_token_rate": MetricReading.of(rate * output),
        "infscale_inflight": MetricReading.of(inflight),
    }


def obs(replicas: int, metrics: dict[str, MetricReading], **kwargs: object) -> Observation:
    return Observation(replicas, replicas, replicas, metrics=metrics, **kwargs)  # type: ignore[arg-type]


def table(d: Decision) -> list[tuple[str, int, int, str]]:
    return [(s.name, s.before, s.after, s.reason) for s in d.stages]


def run_all(
    spec: AutoscalerSpec, replicas: int, rates: list[float], **kwargs: object
) -> tuple[list[Decision], PolicyState]:
    """Decide every 15 s on these arrival rates (served as they come), acting on each decision."""
    state = PolicyState()
    decisions = []
    for i, rate in enumerate(rates):
        now = NOW + 15 * i
        decision, state = decide(spec, state, obs(replicas, readings(rate), **kwargs), now)
        decisions.append(decision)
        if decision.scale:
            state = record_rescale(spec, state, now, replicas, decision.desired_replicas)
            replicas = decision.desired_replicas
    return decisions, state


def run(
    spec: AutoscalerSpec, replicas: int, rates: list[float], **kwargs: object
) -> tuple[Decision, PolicyState]:
    decisions, state = run_all(spec, replicas, rates, **kwargs)
    return decisions[-1], state


# --- stage tables --------------------------------------------------------------------------------


def test_steady_demand_the_stage_table() -> None:
    """40 req/s of 100 + 100 tokens: w = 0.1 s a request, ρ <= 1 - 0.02 / 0.1 = 0.8; the band asks
    for 60/s -> 60 × 0.1 / 0.8 = 7.5 -> 8 replicas."""
    d, _ = run(planner_spec(), 8, [40.0] * 3)
    assert table(d) == [
        ("metrics", 8, 0, "ValidMetricFound"),
        ("demand", 8, 8, "DemandForecast"),
        ("capacity", 8, 8, "TPOTBinds"),
        ("horizon", 8, 8, "MarginalReplica"),
        ("scale-down", 8, 8, "NeededNow"),
        ("stabilization", 8, 8, "ReadyForNewScale"),
        ("limits", 8, 8, "DesiredWithinRange"),
    ]
    assert d.plan is not None
    assert d.plan.upper.requests == pytest.approx(60.0, rel=1e-5)  # the prior weighs 1e6 scored errors
    assert d.plan.needed == 8
    assert d.plan.horizon_s == 14.0  # one more replica of 140 GB at 10 GB/s
    assert d.lead_time_s == 14.0


def test_the_demand_stage_says_when_the_level_averages_longer_than_alphas_window() -> None:
    """At 1 req/s alpha's window (0.5 a 15 s period: 3 periods) holds ~45 requests, under the 400 of
    levelRequests: the level runs at the w with w / (2 - w) = 15 / 400, and the demand stage's
    message says so; at 40 req/s alpha's window holds 1,800 and the message has no such clause."""
    slow, _ = run(planner_spec(), 8, [1.0] * 3)
    message = next(s.message for s in slow.stages if s.name == "demand")
    assert message.endswith("; the level at 0.072 a period, not alpha's 0.5: alpha's window holds under 400"
                            " requests' worth of counts")  # fmt: skip
    steady, _ = run(planner_spec(), 8, [40.0] * 3)
    assert next(s.message for s in steady.stages if s.name == "demand").endswith(")")


def test_without_demand_readings_the_reactive_proposal_decides() -> None:
    spec = planner_spec()
    d, _ = decide(spec, PolicyState(), obs(4, {QUEUE: MetricReading.of(96)}), NOW)
    assert table(d)[:2] == [("metrics", 4, 6, "ValidMetricFound"), ("demand", 4, 6, "NoDemandData")]
    assert d.desired_replicas == 6 and d.plan is None


def test_a_deficit_on_shared_storage_starts_one_replica_per_decision() -> None:
    d, _ = run(planner_spec(), 2, [40.0])
    assert ("scale-up", 8, 3, "StaggeredStart") in table(d)
    assert d.desired_replicas == 3
    assert d.plan is not None and d.plan.start_now == 1
    # the sixth of the missing replicas: loads one after another, each at the first decision after
    # the one before it is done (14 s loads, 15 s decisions: 1 s idle between them)
    assert d.plan.horizon_s == 6 * 14.0 + 5 * 1.0


def test_the_band_is_scored_at_one_replicas_lead_not_at_the_marginal_ones() -> None:
    """The forecast kept for the band is due one replica's lead time ahead (14 s on this empty
    cluster), not at the sixth replica's 89 s: the marginal replica waits for the loads the policy
    itself asks for, and scored at that wait the band would widen with what it asks (band.track)."""
    d, state = run(planner_spec(), 2, [40.0])
    assert d.plan is not None and d.plan.horizon_s == 6 * 14.0 + 5 * 1.0
    assert state.planner is not None and state.planner.demand is not None
    made, due, _, _ = state.planner.demand.pending[-1]
    assert made == NOW and due == NOW + 14.0


def test_with_a_load_gate_every_missing_replica_starts() -> None:
    gated = ColdStartSpec(weights_gb=140, storage_gbps=10, gpus_per_replica=4, max_concurrent_loads=1)
    d, _ = run(planner_spec(gated), 2, [40.0])
    assert ("scale-up", 8, 8, "StartAll") in table(d)


def test_the_reactive_floor_counts_the_replicas_already_arriving() -> None:
    """A long queue asks for 10 by upstream's formula. The replicas arriving within the horizon are
    part of that answer, not all of it: the floor is 10 less them (9 with one, 7 with three), at
    least the current count. It had waited for them whatever the queue, and a queue growing faster
    than one arriving replica absorbs then stood a lead time (ServeGen m-small x 0.14, docs/policy.md)."""
    spec = planner_spec()
    for queue, arriving, floor in ((160.0, 1, 9), (160.0, 3, 7), (160.0, 0, 10), (80.0, 3, 4)):
        ready_at = tuple(NOW + 5.0 + i for i in range(arriving))
        seen = obs(4, readings(8.0, queue=queue), starting_ready_at=ready_at)
        d, _ = decide(spec, PolicyState(), seen, NOW)
        assert table(d)[0] == ("metrics", 4, 10 if queue == 160.0 else 5, "ValidMetricFound")
        scale_up = [row for row in table(d) if row[0] == "scale-up"]
        if floor > 4:
            assert scale_up[0][1] == floor, (queue, arriving)  # the target the scale-up starts toward
            assert d.desired_replicas > 4
        else:  # 5 asked, 3 of them arriving: nothing more
            assert not scale_up and d.desired_replicas == 4
    # a replica arriving past the horizon is not capacity the queue can count on
    late = obs(4, readings(8.0, queue=160.0), starting_ready_at=(NOW + 3_600.0,))
    d, _ = decide(spec, PolicyState(), late, NOW)
    assert next(row for row in table(d) if row[0] == "scale-up")[1] == 10


def test_a_failed_queue_reading_never_lets_demand_scale_down() -> None:
    spec = planner_spec()
    metrics = {**readings(1.0), QUEUE: MetricReading.failed("adapter down")}
    d, _ = decide(spec, PolicyState(planner=None), obs(20, metrics), NOW)
    assert d.desired_replicas == 20


def test_idle_replicas_are_released_one_load_time_apart() -> None:
    """40/s then 4/s: 8 replicas of the seed come back one 14 s load after another (15 s a decision),
    a decision after their need returns, so the top one goes after λ x 2 x (14 + 15) s idle and each
    below it one decision later: 8 -> 2 in six decisions, not at once."""
    decisions, _ = run_all(planner_spec(), 8, [40.0] * 4 + [4.0] * 8)
    reasons = [next(r for r in table(d) if r[0] == "scale-down")[3] for d in decisions]
    assert reasons[:6] == ["NeededNow", "NeededNow", "NeededNow", "NeededNow", "KeepWarm", "ReleaseIdle"]
    assert [d.desired_replicas for d in decisions[4:7]] == [8, 7, 7]
    # down to what the bursts' hold asks: the fall is counted as a burst (the dispersion and the
    # typical rate, still ~30/s, remember it over their 10-minute half-life; 2 before the hold, 5
    # under the wall's price: this profile's TPOT tail is a cliff just past C, latecurve.py)
    last = decisions[-1]
    assert last.plan is not None and last.desired_replicas == last.plan.needed == 6


def test_recurring_bursts_keep_their_capacity_warm_when_it_is_slow_to_come_back() -> None:
    """40/s for 45 s every 2 minutes, 4/s (2 replicas) between. With a 60 s warm-up after the load
    every level came back within its break-even (2 x 74 s for the top one): the fleet stays at 7 or
    more between bursts. With the seed's 14 s re-creation (and the decision that reads the need
    first, 15 s) the top two or three go (break-even 2 x 29, 2 x 44, 2 x 59 s, gaps of 75-90 s); the
    ones below would come back behind their loads and came back sooner than that after the last
    burst: kept."""
    rates = ([40.0] * 3 + [4.0] * 5) * 6

    def between(cold: ColdStartSpec) -> list[int]:
        decisions, _ = run_all(planner_spec(cold), 8, rates)
        return [d.desired_replicas for i, d in enumerate(decisions) if i > 8 and i % 8 == 7]

    assert min(between(replace(SEED, warmup_s=60.0))) >= 7
    # the bursts' hold keeps them all (6 before the hold, 6 then 7 under the wall's price: this
    # profile's TPOT tail is a cliff just past C, latecurve.py), more once it has seen more
    assert between(SEED) == [7, 8, 8, 9, 9]


def test_bursts_back_after_an_idle_spell_keep_part_of_their_capacity_between_them() -> None:
    """40/s for 45 s every 4 minutes, 1/s (1 replica) between: the gaps (195 s) are longer than the
    plain break-even of any level the bursts reach (2 x 74 s at most for the seed), so at the plain
    price every burst meets 1 replica. The fleet idles between bursts (the typical load is a fifth
    of the peak), so a late request is priced at several replica-seconds (scaledown.slo_weight):
    once the bursts have come back the lower levels of their capacity stay. A long idle spell
    after them still releases it (the weight is bounded by the peak's ratio to the typical load)."""
    rates = ([40.0] * 3 + [1.0] * 13) * 8
    decisions, _ = run_all(planner_spec(), 8, rates + [1.0] * 120)
    between = [d.desired_replicas for i, d in enumerate(decisions[: len(rates)]) if i > 16 and i % 16 == 15]
    # the bursts' hold keeps 5 from the first gap on (1 before it, until the price had seen the
    # bursts recur, then 3 or more), more as the dispersion counts more bursts
    assert min(between) >= 5 and between == sorted(between)
    # 30 minutes at 1/s after them: the typical rate and the dispersion forget, the hold falls (20
    # under the wall's price, which held less: this profile's TPOT tail is a cliff past C)
    assert decisions[-1].desired_replicas < min(between)


def test_the_demand_stage_says_when_bin_0_plans_on_heights() -> None:
    """On/off traffic (bursts to 40/s for a minute every 4 minutes, the gaps at 0.5-2/s) moves bin
    0's band to its heights over the typical load once their quantile loss is the lower at the
    band's confidence (band.band_width); the demand stage's message says so at the decisions
    planned there, and steady traffic never reads so. The lean here is +0.009 (30-s bursts every 2
    minutes leaned +0.006 while the band was scored at the marginal replica's horizon, -0.015 at
    one replica's lead: held up by a bin's first error setting its scale, docs/policy-history.md,
    session 27, "A bin's first error held the band")."""
    spec = planner_spec(demand=DemandSpec(prior_weight=8.0))
    gaps = [0.5, 1.0, 2.0, 1.5]
    rates = [r for k in range(60) for r in [40.0] * 4 + [gaps[k % 4]] * 12]
    decisions, state = run_all(spec, 8, rates)
    said = [d for d in decisions if d.stages[1].message.endswith("read as a height over it)")]
    assert state.planner is not None and state.planner.demand is not None
    assert state.planner.demand.heights.lean > 0.0
    assert said and all(d.stages[1].name == "demand" for d in said)
    steady, _ = run_all(spec, 8, [20.0] * len(rates))
    assert not any("height" in d.stages[1].message for d in steady)


def test_panic_sizes_on_this_ticks_demand_bounded_by_what_is_ready_in_time() -> None:
    """Steady at 10/s, then 100/s: ten times the band. 4 replicas of the seed load in 56 s, 5 in 70,
    so 4 start at once; the rest of what the forecast asks for is staggered as usual."""
    spec = planner_spec(panic_window_s=60.0)
    d, _ = run(spec, 2, [10.0] * 30 + [100.0])
    rows = table(d)
    panic = next(s for s in d.stages if s.name == "panic")
    assert panic.reason == "BurstAboveBand"
    assert "13 needed, 4 can be ready within 60 s" in panic.message
    assert d.plan is not None and d.plan.panic and d.plan.start_now == 4
    scale_up = next(r for r in rows if r[0] == "scale-up")
    assert (scale_up[2], scale_up[3]) == (6, "StaggeredStart")


def test_panic_holds_scale_down_for_its_window() -> None:
    spec = planner_spec(panic_window_s=120.0)
    d, _ = run(spec, 2, [10.0] * 30 + [100.0] + [1.0] * 4)
    assert "scale-down" in [r[0] for r in table(d)]
    assert next(r for r in table(d) if r[0] == "scale-down")[3] == "PanicHold"


def test_planner_state_round_trips() -> None:
    _, state = run(planner_spec(), 3, [10.0, 12.0, 30.0, 5.0])
    assert state.planner is not None
    assert PlannerState.from_dict(state.planner.to_dict()) == state.planner


def test_planner_state_keeps_the_typical_capacity_and_reads_an_older_state_without_it() -> None:
    _, state = run(planner_spec(), 3, [10.0, 12.0, 30.0, 5.0])
    assert state.planner is not None and state.planner.typical_capacity > 0.0
    assert state.planner.demand is not None and state.planner.demand.typical_peak > 0.0
    doc = state.planner.to_dict()
    assert PlannerState.from_dict(doc) == state.planner
    del doc["typicalCapacity"]
    del doc["demand"]["typicalPeak"]
    older = PlannerState.from_dict(doc)
    assert older.typical_capacity == 0.0
    assert older.demand is not None and older.demand.typical_peak == 0.0
    for bad in (-1.0, math.inf):
        with pytest.raises(ValueError, match="typicalCapacity"):
            PlannerState.from_dict({**doc, "typicalCapacity": bad})
        with pytest.raises(ValueError, match="typicalPeak"):
            PlannerState.from_dict({**doc, "demand": {**doc["demand"], "typicalPeak": bad}})


def test_planner_state_without_the_fields_added_later_reads_with_their_defaults() -> None:
    """A field a state was written without (an older controller) takes its default; the rest is
    read as it was."""
    _, state = run(planner_spec(), 3, [10.0, 12.0, 30.0, 5.0])
    assert state.planner is not None
    doc = state.planner.to_dict()
    # before the run's ready and queue, and the backlog's start and length
    doc["speed"] = {"logRatio": -0.1, "samples": 5.0, "saturatedTicks": 2}
    del doc["gaps"]
    read = PlannerState.from_dict(doc)
    assert read.speed.values() == (-0.1, 5.0, 2, 0, 0.0, 0, 0)
    assert read.gaps == () and read.needs == state.planner.needs and read.demand == state.planner.demand
    doc["speed"]["ready"] = 2.5
    with pytest.raises(ValueError, match=r"planner.speed.ready: expected an integer in \[0, \d+\], got 2.5"):
        PlannerState.from_dict(doc)
    doc["speed"]["ready"] = 2
    doc["speed"]["backlogReady"] = -1
    with pytest.raises(ValueError, match=r"planner.speed.backlogReady: expected an integer in \[0, \d+\]"):
        PlannerState.from_dict(doc)


# --- closed loop against the replay's fleet --------------------------------------------------------


def closed_loop(
    spec: AutoscalerSpec, rates: list[float], initial: int, cold: ColdStartSpec
) -> list[tuple[float, int, int, Decision]]:
    """Every 15 s: the fleet's facts -> decide() -> the fleet scales. Demand is served as it comes
    (finished = arrivals), so only the policy moves. Returns (t, desired, ready, decision)."""
    fleet = Fleet(cold, initial_ready=initial, node_idle_remove_s=600.0)
    state = PolicyState()
    desired = initial
    out = []
    for i, rate in enumerate(rates):
        t = 15.0 * i
        fleet.advance(t)
        nodes = fleet.node_state(fleet.live_nodes())
        o = Observation(
            desired,
            fleet.active_count,
            len(fleet.ready_ids),
            metrics=readings(rate),
            starting_ready_at=tuple(NOW + x for x in fleet.predicted_ready_at()),
            free_gpus_per_node=tuple(nodes["free_gpus_per_node"]),
            image_cached_nodes=tuple(sorted(nodes["image_cached_nodes"])),
            weights_cached_nodes=tuple(sorted(nodes["weights_cached"])),
            loading_remaining_gb=tuple(fleet.loading_remaining_gb),
            upcoming_loads_s=fleet.upcoming_loads_s(),
            coming_nodes=fleet.coming_nodes(),
        )
        decision, state = decide(spec, state, o, NOW + t)
        if decision.scale:
            state = record_rescale(spec, state, NOW + t, desired, decision.desired_replicas)
            desired = decision.desired_replicas
        fleet.scale_to(desired)
        out.append((t, desired, len(fleet.ready_ids), decision))
    return out


colds = st.builds(
    ColdStartSpec,
    weights_gb=st.sampled_from([16.0, 140.0]),
    storage_gbps=st.sampled_from([2.5, 10.0, 40.0]),
    image_pull_s=st.sampled_from([0.0, 30.0]),
    warmup_s=st.sampled_from([0.0, 30.0]),
    node_provision_s=st.sampled_from([0.0, 90.0]),
    gpus_per_replica=st.sampled_from([1, 4]),
)


@settings(max_examples=15, deadline=None)
@given(rate=st.floats(1.0, 100.0), initial=st.integers(1, 30), cold=colds)
def test_constant_demand_converges_and_stays(rate: float, initial: int, cold: ColdStartSpec) -> None:
    spec = replace(planner_spec(cold), max_replicas=200)
    loop = closed_loop(spec, [rate] * 200, initial, cold)
    settled = [desired for _, desired, _, _ in loop[-40:]]
    assert len(set(settled)) == 1, settled
    final = settled[0]
    last = loop[-1][3]
    plan = last.plan
    assert plan is not None
    # it settles on the need at the upper band (the band narrows as forecasts come true), or one
    # above it when the narrowing took the need a step down within the release margin
    kept = next(s for s in last.stages if s.name == "scale-down").reason if final > plan.needed else None
    assert final == max(plan.needed, 1) or (final == plan.needed + 1 and kept == "WithinReleaseMargin")
    assert loop[-1][2] == final  # and all of them are ready


def test_a_need_on_a_step_of_the_narrowing_band_is_not_given_up_hours_after_it_settled() -> None:
    """The counterexample random search found: at 97.66 req/s the need at the upper band sits
    0.006 % above the step from 19 to 20 replicas; the band narrowing with the prior's fading weight
    took it below at t = 2,505 s, and the fleet, settled at 20 for 40 minutes, gave one up. It
    now keeps them (the release margin) and reads the need of 19 at the band's own demand."""
    cold = ColdStartSpec(weights_gb=16.0, storage_gbps=2.5, gpus_per_replica=1)
    loop = closed_loop(replace(planner_spec(cold), max_replicas=200), [97.658203125] * 200, 1, cold)
    assert [desired for _, desired, _, _ in loop[10:]] == [20] * 190
    last = loop[-1][3]
    assert last.plan is not None and last.plan.needed == 19
    kept = [(s.reason, s.after) for s in last.stages if s.name == "scale-down"]
    assert kept == [("WithinReleaseMargin", 20)]


# derandomized: the same 12 examples on every run, so CI cannot turn flaky on a rare draw; the wider
# search (thousands of draws, run locally) found the counterexample below, kept as a regression test
@settings(max_examples=12, deadline=None, derandomize=True)
@given(low=st.floats(1.0, 20.0), factor=st.floats(2.0, 6.0), cold=colds)
def test_a_demand_step_is_served_by_the_time_the_horizon_said(
    low: float, factor: float, cold: ColdStartSpec
) -> None:
    """After the step, the first decision that asks for the capacity the new demand needs says, in
    its horizon, when the last of those replicas is ready; by then (give or take the decision
    periods the starts are quantized to) they all are.

    The fleet places a replica no up node fits on a node still coming up with room; the
    observation lists those nodes (coming_nodes), and the model places the policy's starts there
    as the fleet does, the stagger's own later ones too (scaleup.staggered_ready_s; the regression
    tests below), so a later decision's start does not load beside a replica the horizon timed.
    """
    _step_served_by_the_horizon(low, factor, cold)


@settings(max_examples=6, deadline=None, derandomize=True)
@given(low=st.floats(1.0, 20.0), factor=st.floats(2.0, 6.0), cold=colds, slots=st.sampled_from([1, 2, 4]))
def test_a_demand_step_behind_a_load_gate_is_served_by_the_time_the_horizon_said(
    low: float, factor: float, cold: ColdStartSpec, slots: int
) -> None:
    """The same behind a load gate, where every missing replica starts at once and the gate
    paces their loads (a wider local search: main's horizon short in 4 of 60 draws, this one's in
    2 of 200: a replica the next decisions start joins the batch the horizon timed)."""
    _step_served_by_the_horizon(low, factor, replace(cold, max_concurrent_loads=slots))


def test_a_step_behind_a_load_gate_counts_the_loads_about_to_begin_from_when_they_begin() -> None:
    """The draw the gated property failed on (4 in 60): 18.1 -> 73.1 req/s, 140 GB at 10 GB/s,
    two loads at once, 90 s nodes and a 30 s pull. At 960 s six replicas wait for their nodes,
    their loads to begin from 1,020 s; counted as loading from now they held the gate's slots and
    the storage at once and were done by 84 s, so one more was due in 98 s and was ready 67 s
    after it. Each reaching the gate when its load begins, ahead of ours: 158 s."""
    cold = ColdStartSpec(
        weights_gb=140.0,
        storage_gbps=10.0,
        image_pull_s=30.0,
        node_provision_s=90.0,
        gpus_per_replica=1,
        max_concurrent_loads=2,
    )
    _step_served_by_the_horizon(18.096551506764385, 4.0404639237147055, cold)


def test_a_step_whose_last_replica_needs_a_new_node_starts_it_before_the_storage_frees() -> None:
    """The draw the property failed on with provisioning in the space (about 1 in 1,500): 6.5 ->
    32.5 req/s, 140 GB at 2.5 GB/s (56 s a load), 90 s nodes and a 30 s pull, 2 replicas a node.
    With three loads holding the storage the stagger started nothing, one replica at a time: the
    next would load at once beside them. The one after it needs a new node, 120 s before its load,
    so started with it the storage is free by then; waiting, the 7th was ready 35 s after its
    horizon's due time (scaleup: the k replicas started together when that beats a period later)."""
    for warmup in (0.0, 30.0):
        cold = ColdStartSpec(
            weights_gb=140.0,
            storage_gbps=2.5,
            image_pull_s=30.0,
            warmup_s=warmup,
            node_provision_s=90.0,
            gpus_per_replica=4,
        )
        _step_served_by_the_horizon(6.5, 5.0, cold)


def test_a_later_start_does_not_load_beside_the_replica_the_horizon_timed() -> None:
    """The draw the property failed on in a wider search with provisioning (1 in 1,500): 7.4 ->
    14.8 req/s, 140 GB at 2.5 GB/s (56 s a load), 90 s nodes, 2 replicas a node. The 3rd replica,
    asked for at 915 s with its horizon at 176 s, waits for a new node; at 990 s the need grew to
    4 and the 4th was started as if on a node of its own (its load after the 3rd's), but the
    scheduler bound it to the 3rd's node, still coming up with room: both loaded together from
    1,005 s and the 3rd was ready 41 s after its horizon's due time. Told the nodes on their way,
    the model puts one more on that node, beside the 3rd: the horizon is 172 s at 975 s, where
    the need is 3 (176 s and 4 before). The scale-up would not hold a 4th there (held a decision,
    its load still begins when the node is up): what keeps the 3rd on time is the horizon."""
    for pull, warmup in ((0.0, 30.0), (30.0, 0.0)):
        cold = ColdStartSpec(
            weights_gb=140.0,
            storage_gbps=2.5,
            image_pull_s=pull,
            warmup_s=warmup,
            node_provision_s=90.0,
            gpus_per_replica=4,
        )
        _step_served_by_the_horizon(7.4, 2.0, cold)


def test_a_step_of_short_loads_behind_long_pulls_is_served_by_the_staggers_horizon() -> None:
    """The counterexample random search found (about 1 in 400 draws): 20 -> 105 req/s, 140 GB at
    40 GB/s (3.5 s a load) behind a 30 s image pull and a 30 s warm-up. The scale-up's stagger,
    minimising the sum of ready times, spreads the 7 missing replicas' starts over the next 4
    decisions, each delay pushing its pull and warm-up back too. A horizon of all of them started at
    once said 74 s and the last was ready 46 s after it; the stagger's own schedule says 108 s."""
    cold = ColdStartSpec(
        weights_gb=140.0, storage_gbps=40.0, image_pull_s=30.0, warmup_s=30.0, gpus_per_replica=1
    )
    _step_served_by_the_horizon(20.0, 5.25, cold)


def test_a_step_whose_later_starts_land_on_nodes_still_coming_up_is_served_by_the_horizon() -> None:
    """A short horizon of main's that a wider local search found (500 seeded draws over 16-140 GB,
    2.5-100 GB/s, per-loader caps, node caches, engine init, 1-8 GPUs a replica and provisioning
    kept: main's short in 10, all with provisioning, this one's in none): 8.4 -> 48 req/s, 70 GB
    at 2.5 GB/s (28 s a load) behind 90 s for a node, a 30 s pull and a 30 s warm-up. The
    stagger's later starts go to the nodes the earlier ones are waiting for, which no observation
    lists yet."""
    cold = ColdStartSpec(
        weights_gb=70.0,
        storage_gbps=2.5,
        image_pull_s=30.0,
        warmup_s=30.0,
        node_provision_s=90.0,
        gpus_per_replica=1,
    )
    _step_served_by_the_horizon(8.44, 5.71, cold)


def _step_served_by_the_horizon(low: float, factor: float, cold: ColdStartSpec) -> None:
    spec = replace(planner_spec(cold), max_replicas=400)
    before, after = 60, 120
    loop = closed_loop(spec, [low] * before + [low * factor] * after, 1, cold)
    # the need once the forecast has caught up with the step (the band still moves it by one)
    caught_up = loop[before + 8][3].plan
    assert caught_up is not None
    asks = [(i, p) for i in range(before, len(loop)) if (p := loop[i][3].plan) is not None]
    first = next(i for i, p in asks if p.needed >= caught_up.needed)
    plan = loop[first][3].plan
    assert plan is not None
    # two decision periods: one for the fleet to act, one for starts the storage made wait a decision
    due = loop[first][0] + plan.horizon_s + 2 * 15.0
    at, ready = next((t, r) for t, _, r, _ in loop if t >= due)
    # unless the policy itself decided meanwhile, up to the decision this is read at, that fewer
    # suffice (the band narrows as it learns): it may release one at that very decision
    fewest = min(p.needed for i, p in asks if loop[first][0] <= loop[i][0] <= at)
    assert ready >= min(caught_up.needed, fewest)


@settings(max_examples=12, deadline=None)
@given(rate=st.floats(5.0, 100.0), cold=colds)
def test_no_runaway_while_replicas_load(rate: float, cold: ColdStartSpec) -> None:
    """Scaling from 1 under constant demand: while replicas load, desired never goes past what the
    demand needs at the widest band it was planned with (no extrapolated shortfall)."""
    spec = replace(planner_spec(cold), max_replicas=400)
    loop = closed_loop(spec, [rate] * 120, 1, cold)
    # the widest band: (mean + typical) × 1.25 - typical with the typical demand at the mean
    widest = capacity.size(PROFILE, SLO, Demand(rate, rate * 100, rate * 100).scaled(1.5)).replicas
    assert max(desired for _, desired, _, _ in loop) <= widest


def test_the_planning_shares_tighten_the_targets_the_sizing_plans_on() -> None:
    """Defaults: both tails at the targets themselves (docs/policy.md, "Defaults"); a share below 1
    tightens its target: the TPOT at 20 % of 0.1 s, 40 req/s at w = 0.1 s: ρ <= 1 - 0.02 / 0.02 = 0
    -> the floor MIN_UTILIZATION, so far more replicas than at the SLO itself."""
    slo = SloTarget(ttft_s=10.0, tpot_s=0.1, ttft_tokens_per_s=1000.0)
    cap = CapacitySpec(profile=PROFILE, slo=slo)
    assert cap.planning_slo == slo
    planned = CapacitySpec(profile=PROFILE, slo=slo, plan_tpot_share=0.2).planning_slo
    assert (planned.ttft_s, planned.tpot_s, planned.ttft_tokens_per_s) == (10.0, pytest.approx(0.02), 1000.0)
    halved = CapacitySpec(profile=PROFILE, slo=cap.slo, plan_ttft_share=0.5).planning_slo
    assert (halved.ttft_s, halved.ttft_tokens_per_s) == (5.0, 2000.0)
    assert planned.attainment == cap.slo.attainment
    at_slo = capacity.size(PROFILE, cap.slo, Demand(40.0, 4000.0, 4000.0)).replicas
    assert capacity.size(PROFILE, planned, Demand(40.0, 4000.0, 4000.0)).replicas > at_slo
    with pytest.raises(ValueError, match="plan_tpot_share"):
        CapacitySpec(profile=PROFILE, plan_tpot_share=0.0)


def test_a_queue_beyond_max_replicas_at_max_replicas_is_no_unconfirmed_start() -> None:
    """At maxReplicas, a standing queue whose proposal is above it leaves nothing to start: the
    first decision (no need recorded before) holds the count, as every later one does, and the
    scale-up stage says nothing is missing rather than waiting for a confirmation."""
    spec = replace(planner_spec(), max_replicas=4)
    state = PolicyState()
    for i in range(3):
        decision, state = decide(spec, state, obs(4, readings(500.0, queue=10_000_000.0)), NOW + 15.0 * i)
        assert decision.desired_replicas == 4
        (up,) = [s for s in decision.stages if s.name == "scale-up"]
        assert (up.after, up.reason, up.message) == (4, "StartAll", "nothing missing")


def test_the_fleet_found_at_first_sight_is_kept_one_re_creation() -> None:
    """10 replicas found at 1/s, demand rising to 4/s over the first decisions (1 or 2 needed), a
    replica ready 74 s after it is asked for (the seed's 14 s load, a 60 s warm-up), back a
    decision (15 s) after its need returns: the found fleet counts as needed at first sight, each
    replica as if re-created alone and with its one request of ~5 s to finish when released (the
    drain, scaledown.drain_s), so it is kept λ·(B(1) + drain) = 91.5 s, then rent-or-buy releases
    what is not needed. The level rising above its band
    scores a forecast early: the hold until a forecast was scored released 9 of the 10 at the
    second decision and started one again two decisions later. Steady demand is held as long."""
    cold = replace(SEED, warmup_s=60.0)
    drain = scaledown.drain_s(5.0, 1.0)  # the fixture's requests: 5 s in the system, one a replica
    hold = scaledown.TRUST * scaledown.breakeven_s(horizon.recreate_s(cold, 1, 15.0) + 15.0, 1.0, drain)
    assert hold == pytest.approx(91.5, abs=0.1)
    for rates in ([1.0, 2.0] + [4.0] * 10, [4.0] * 12):
        decisions, _ = run_all(planner_spec(cold), 10, rates)
        reasons = [next((r[3] for r in table(d) if r[0] == "scale-down"), "-") for d in decisions]
        held = [i for i in range(len(rates)) if 15.0 * i <= hold]
        assert reasons[: len(held)] == ["FirstSight"] + ["FoundFleet"] * (len(held) - 1)
        assert [d.desired_replicas for d in decisions[: len(held)]] == [10] * len(held)
        assert reasons[len(held)] == "ReleaseIdle" and decisions[len(held)].desired_replicas <= 2


def test_the_first_sights_reading_confirms_nothing() -> None:
    """The first decision with demand data reads the finished requests alone (no in-flight reading
    before it, so no growth): it is not a reading of the same demand, and a need seen after it
    starts replicas at once. Waiting for a second decision delayed Mooncake × 0.52's first starts
    by one period (docs/policy.md, "Defaults and why")."""
    decisions, _ = run_all(planner_spec(), 2, [10.0, 40.0, 40.0])
    up = next(r for r in table(decisions[1]) if r[0] == "scale-up")
    assert up[2:] == (3, "StaggeredStart") and decisions[1].desired_replicas == 3
    later, _ = run_all(planner_spec(), 2, [10.0, 10.0, 25.0, 25.0])  # a reading with growth confirms
    assert [next(r for r in table(d) if r[0] == "scale-up")[3] for d in later[2:]] == [
        "Unconfirmed",
        "StaggeredStart",
    ]


def test_a_need_seen_at_one_decision_only_starts_nothing() -> None:
    """10/s (2 replicas: 15/s at the band x 0.1 s / 0.8), one tick of 12.5/s and one of 7.5/s, as
    the noise of a scrape goes: the level (11.25/s) asks for 3 at that decision only, the next one
    for 2 again; nothing starts, since a replica started for it would be ready a horizon later. A
    step to 25/s (under panic's 2 x the band) that stays is started at the next decision."""
    spike, _ = run_all(planner_spec(), 2, [10.0] * 10 + [12.5, 7.5] + [10.0] * 3)
    at_spike = next(r for r in table(spike[10]) if r[0] == "scale-up")
    assert at_spike[1] > 2 and at_spike[2:] == (2, "Unconfirmed")
    assert [d.desired_replicas for d in spike] == [2] * 15
    step, _ = run_all(planner_spec(), 2, [10.0] * 10 + [25.0] * 3)
    assert step[10].desired_replicas == 2
    assert step[11].desired_replicas > 2
    assert "Unconfirmed" not in [r[3] for r in table(step[11])]


def test_bursty_arrivals_size_the_ttft_tail_on_their_dispersion_thinned_per_replica() -> None:
    """10 req/s of 2,000-token prompts (0.2 s each to prefill, a 10 s TTFT): counted as Poisson the
    TPOT binds; the same level counted in bursts (an index of dispersion of 401 over the TTFT
    target, demand.spread) needs more replicas, the TTFT tail binding at the least n whose own
    thinned ca², 1 + 400 / n, it sizes at most n."""
    spec = planner_spec()
    reading = obs(8, readings(10.0, prompt=2_000.0))
    state = PolicyState()
    for i in range(40):
        _, state = decide(spec, state, reading, NOW + 15 * i)
    assert state.planner is not None and state.planner.demand is not None
    steady = state.planner.demand
    assert demand.dispersion(steady, SLO.ttft_s) == 1.0  # steady counts: Poisson's at most
    at = NOW + 15 * 40
    calm, _ = decide(spec, state, reading, at)
    bursty_state = steady._replace(spread=(40.0 * steady.spread[1], steady.spread[1]))
    assert demand.dispersion(bursty_state, SLO.ttft_s) == pytest.approx(401.0)
    planner = state.planner._replace(demand=bursty_state)
    bursty, _ = decide(spec, replace(state, planner=planner), reading, at)
    assert calm.plan is not None and bursty.plan is not None
    assert bursty.plan.needed > calm.plan.needed
    assert next(s for s in calm.stages if s.name == "capacity").reason == "TPOTBinds"
    stage = next(s for s in bursty.stages if s.name == "capacity")
    spread = stage.args[6]  # this tick's count moved it a little
    assert spread == pytest.approx(401.0, rel=0.05)
    upper = bursty.plan.upper
    thin = burstsize.thinned(PROFILE, SLO, upper, 1.0, 100, spread, {})
    n = thin.replicas
    assert thin.binding == "ttft" and n > calm.plan.needed
    # self-consistent: n at its own ca² suffices, n - 1 at theirs does not
    assert capacity.size(PROFILE, SLO, upper, arrival_cv2=1.0 + (spread - 1.0) / n).replicas <= n
    assert capacity.size(PROFILE, SLO, upper, arrival_cv2=1.0 + (spread - 1.0) / (n - 1)).replicas > n - 1
    # and the bursts held (burstprice.hold_rate about the typical rate, 10/s here) at least as many
    hold = stage.args[8]
    mix = bursty_state.mix
    key, curve = latecurve.curve(PROFILE, SLO, mix.prompt, mix.output, 1.0, 1.0, capacity.SERVICE_CV2)
    assert curve is not None
    priced = burstprice.hold_rate(10.0, spread, SLO.ttft_s, burstprice.BUDGET * 0.01, key, curve)
    assert hold == pytest.approx(priced, rel=0.02)
    held = capacity.size(PROFILE, SLO, upper.scaled(hold / upper.requests))
    assert bursty.plan.needed == max(n, held.replicas)
    assert f"bursts held at {hold:.3g}/s" in stage.message
    # the TTFT binds at the band's upper: the count prices the load past it at the prefill queue's
    # tail (lateband.queued_width), and the stage says so with u_C; where the TPOT binds it does not
    queued = "the load past the count late at the prefill queue's tail, u_C "
    utilization = stage.args[11]  # before the holds past the TTFT target (prefilltail)
    assert queued in stage.message and 0.0 < utilization < 1.0
    assert f"u_C {utilization:.2f} a replica" in stage.message
    assert queued not in next(s for s in calm.stages if s.name == "capacity").message


def test_the_finished_rates_window_is_the_noise_the_arrivals_dispersion_leaves_out() -> None:
    """The same counts read through a 5 s rate at 15 s ticks: a Poisson count's variance reads 3
    times its mean there, so the planner's state keeps 2 mean counts less excess a tick than with
    no window said (the tick's own, as before). The level at alpha's window either way (at 10 req/s
    the 5 s read would lengthen it: demand.level_alpha_at, tested in test_levelnoise.py)."""
    spec = planner_spec(demand=replace(FIXED_BAND, level_requests=0.0))
    rng = np.random.default_rng(0)
    counts = rng.poisson(150.0, 60)
    states = []
    for window in (None, 5.0):
        state = PolicyState()
        for i, n in enumerate(counts):
            got = readings(float(n) / 15.0)
            got["infscale_request_rate"] = got["infscale_request_rate"]._replace(window_s=window)
            _, state = decide(spec, state, obs(8, got), NOW + 15 * i)
        assert state.planner is not None and state.planner.demand is not None
        states.append(state.planner.demand.spread)
    (plain, plain_n), (windowed, windowed_n) = states
    assert windowed_n == plain_n
    assert plain - windowed == pytest.approx(2.0 * plain_n / 15.0, rel=0.01)


def test_a_need_history_above_max_replicas_prices_re_creations_at_the_bound() -> None:
    """A need recorded under a higher maxReplicas (the user lowered it since) cannot come back
    beyond the bound: the scale-down prices the re-creation of at most maxReplicas together, and
    so decides as if the history's peak were the bound (before, it priced the re-creation of
    3,941 replicas through the storage and kept 60 where the bound's history releases 3)."""
    spec = replace(planner_spec(), max_replicas=100)
    _, state = run(spec, 60, [40.0] * 3)
    assert state.planner is not None

    def scale_down(peak: int) -> tuple[int, list[tuple[str, int, int, str]]]:
        needs = ((NOW - 600.0, peak), (NOW - 400.0, 60), (NOW, 8))
        restored = replace(state, planner=state.planner._replace(needs=needs))  # type: ignore[union-attr]
        d, _ = decide(spec, restored, obs(60, readings(10.0)), NOW + 60.0)
        return d.desired_replicas, [row for row in table(d) if row[0] == "scale-down"]

    assert scale_down(4_000) == scale_down(100)


def _backlog_run(waiting: float, ticks: int, *, learn: bool = True) -> list[Decision]:
    """4 of 5 replicas ready (the fifth starting) under a standing queue of `waiting` prompts of 100
    tokens, 8 requests/s arriving: `ticks` decisions. The queue's target is 2,000 a replica, so
    upstream's proposal on it stays under the count and the backlog stage is what adds."""
    spec = planner_spec(learn=learn, queue_target_milli=2_000_000)
    state, decisions = PolicyState(), []
    for i in range(ticks):
        now = NOW + 15 * i
        metrics = readings(8.0, queue=waiting, inflight=waiting + 40.0)
        decision, state = decide(
            spec, state, Observation(5, 5, 4, metrics=metrics, starting_ready_at=(now + 10.0,)), now
        )
        decisions.append(decision)
    return decisions


def test_arrivals_are_counted_beside_the_replicas_a_standing_backlog_holds() -> None:
    """8,000 waiting prompts of 100 tokens are 31 s of prefill for each of the 4 ready replicas
    (at the speed learned from their saturation, x0.64 of 10,000 tokens/s), past the 10 s TTFT
    target, and the queue is theirs: the 8/s arriving need their own count beside them. Not at
    once (a backlog a lead time drains is a burst's, which the band and the hold answer), but once
    it has stood longer than one replica's lead."""
    decisions = _backlog_run(8000.0, 6)
    first, last = decisions[0], decisions[-1]
    assert "backlog" not in [s.name for s in first.stages]
    backlog = next(s for s in last.stages if s.name == "backlog")
    capacity = next(s for s in last.stages if s.name == "capacity")
    assert backlog.reason == "BacklogHeld"
    assert backlog.after == 4 + capacity.after > backlog.before
    assert last.desired_replicas > 5
    # the wait is at the capacity stage's prefill rate at the horizon (6,431 tok/s at the learned speed)
    prefill = float(re.search(r"prefill ([\d,]+) tok/s", capacity.message)[1].replace(",", ""))  # type: ignore[index]
    wait = re.search(r"its 8000 waiting requests are ([\d.]+) s of prefill a ready replica", backlog.message)
    assert wait is not None and float(wait[1]) == pytest.approx(8000 * 100 / (4 * prefill), rel=1e-3)
    assert float(wait[1]) > 10.0
    assert backlog.message.startswith("4 replica(s) hold a backlog standing 75 s")


def test_the_backlog_is_tracked_where_no_speed_is_learned() -> None:
    """With `learn` off the speed stays the profile's (10,000 prefill tokens/s), and the backlog
    stage fires all the same: 8,000 prompts of 100 tokens are 20 s of prefill a ready replica."""
    d = _backlog_run(8000.0, 6, learn=False)[-1]
    assert d.plan is not None and d.plan.speed == 1.0
    backlog = next(s for s in d.stages if s.name == "backlog")
    capacity = next(s for s in d.stages if s.name == "capacity")
    assert backlog.after == 4 + capacity.after
    assert "its 8000 waiting requests are 20.0 s of prefill a ready replica" in backlog.message


def test_a_backlog_that_keeps_new_prompts_within_the_ttft_target_adds_nothing() -> None:
    """2,000 waiting prompts are 8 s of prefill a replica (at x0.64): within the 10 s target,
    however long it stands."""
    decisions = _backlog_run(2000.0, 8)
    assert all("backlog" not in [s.name for s in d.stages] for d in decisions)


def test_the_backlog_is_remembered_in_the_planner_state() -> None:
    spec = planner_spec()
    state = PolicyState()
    for i in range(4):
        metrics = readings(8.0, queue=8000.0, inflight=8040.0)
        _, state = decide(spec, state, Observation(5, 5, 4, metrics=metrics), NOW + 15 * i)
    assert state.planner is not None
    speed = state.planner.speed
    assert (speed.backlog_ready, speed.backlog_ticks) == (4, 4)
    doc = state.planner.to_dict()
    assert doc["speed"]["backlogTicks"] == 4
    assert PlannerState.from_dict(doc).speed == speed
