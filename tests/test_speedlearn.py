"""The learned speed: what saturated replicas achieve relative to the profile, shrunk to the prior."""

from __future__ import annotations

import math

import pytest

from autoscaler.policy import capacityfacts, planner, speedlearn
from autoscaler.policy.capacityspec import CapacitySpec, DemandSpec, ReplicaProfile
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.speedlearn import SpeedState
from autoscaler.specsections import CapacityModel, DemandModel

# reference-70b as the replay had it: prefill 8,000 tok/s with priority, decode 30 ms + 0.2 ms a request
PROFILE = ReplicaProfile(
    step_base_s=0.030, prefill_s_per_token=1 / 8000, decode_s_per_request=0.0002, max_num_seqs=64
)


def tick(
    state: SpeedState, share: float, *, ready: int = 4, queue: float = 8.0, profile: ReplicaProfile = PROFILE
) -> SpeedState:
    """One tick of `ready` replicas that get through `share` of what the profile says per second,
    with `queue` requests waiting in all."""
    p, o = 1000.0, 200.0
    w = profile.prefill_s_per_token * p + profile.decode_s_per_request * o
    finished = ready * share / w
    return speedlearn.learn(
        profile,
        state,
        queue=queue,
        prompt_rate=finished * p,
        generated_rate=finished * o,
        finished_rate=finished,
        ready=ready,
    )


def saturated_samples(profile: ReplicaProfile, achieved_share: float, ticks: int) -> SpeedState:
    """Replicas that get through `achieved_share` of what the profile says per second."""
    state = speedlearn.NO_SPEED
    for _ in range(ticks):
        state = tick(state, achieved_share, profile=profile)
    return state


def test_speed_is_the_profile_until_saturation_was_seen_three_times() -> None:
    state = saturated_samples(PROFILE, 0.5, 2)
    assert state.samples == 0 and speedlearn.speed(state, 8.0) == 1.0
    state = saturated_samples(PROFILE, 0.5, 3)
    assert state.samples == 1
    assert speedlearn.speed(state, 8.0) == pytest.approx(math.exp(1 / 9 * math.log(0.5)))


def test_speed_converges_to_what_saturated_replicas_achieve() -> None:
    state = saturated_samples(PROFILE, 0.7, 200)
    assert speedlearn.speed(state, 8.0) == pytest.approx(0.7, rel=0.05)


def test_unsaturated_ticks_teach_nothing_and_reset_the_count() -> None:
    state = saturated_samples(PROFILE, 0.5, 10)
    assert state.backlog_ready == 4
    # no reading: the backlog's start is kept; fewer waiting than replicas: the backlog is over
    assert state.backlog_ticks == 10
    for queue, backlog, stood in ((None, 4, 11), (3.0, 0, 0)):
        after = tick(state, 0.5, queue=queue)
        assert after.values() == (state.log_ratio, state.samples, 0, 0, 0.0, backlog, stood)


def test_replicas_that_join_a_standing_backlog_stop_the_samples_until_it_drains() -> None:
    """Replicas that joined hold none of the backlog: the fleet's work per replica is that of the
    replicas it sits on, shared out over all of them, for as long as it takes to drain, however
    many ticks the total stays above one a replica (the 6 -> 12 drain read x0.50 on ServeGen
    m-small). Below one a replica the placement is even again, and the next run counts."""
    state = saturated_samples(PROFILE, 1.0, 10)
    joined = state
    for _ in range(40):  # ten minutes of the backlog draining on the four it came to
        joined = tick(joined, 0.25, ready=16, queue=900.0)
    assert (joined.log_ratio, joined.samples, joined.backlog_ready) == (state.log_ratio, state.samples, 4)
    assert joined.backlog_ticks == 50  # the ticks it has stood: the planner's backlog stage reads them
    drained = tick(joined, 0.25, ready=16, queue=15.0)
    assert (drained.samples, drained.backlog_ready, drained.backlog_ticks) == (state.samples, 0, 0)
    for _ in range(speedlearn.SATURATED_TICKS):  # a new backlog, begun at 16: its own run
        drained = tick(drained, 1.0, ready=16, queue=900.0)
    assert (drained.samples, drained.backlog_ready) == (state.samples + 1, 16)


def test_replicas_that_leave_keep_the_backlog_on_the_rest() -> None:
    """Fewer ready than the backlog began at: the rest all hold it, so samples count again after
    a new run of three ticks at that count."""
    state = saturated_samples(PROFILE, 1.0, 10)
    left = tick(state, 1.0, ready=3, queue=900.0)
    assert (left.samples, left.saturated_ticks, left.backlog_ready) == (state.samples, 1, 3)
    for _ in range(speedlearn.SATURATED_TICKS - 1):
        left = tick(left, 1.0, ready=3, queue=900.0)
    assert left.samples == state.samples + 1
    rejoined = tick(left, 1.0, ready=4, queue=900.0)  # back to four: one of them holds none of it
    assert (rejoined.samples, rejoined.saturated_ticks, rejoined.backlog_ready) == (left.samples, 0, 3)


def test_a_shrinking_queue_teaches_nothing_but_keeps_the_run() -> None:
    """A draining backlog may sit on a few replicas while the rest idle: no sample, though the
    fleet is still saturated by the totals."""
    state = saturated_samples(PROFILE, 1.0, 10)
    drained = tick(state, 0.2, queue=7.0)
    assert (drained.log_ratio, drained.samples) == (state.log_ratio, state.samples)
    assert (drained.saturated_ticks, drained.queue) == (state.saturated_ticks + 1, 7.0)
    level = tick(drained, 0.9, queue=7.0)  # level again: a sample
    assert level.samples == state.samples + 1


def test_prompts_that_fit_one_step_a_replica_are_no_saturation() -> None:
    """With a token budget a step admits up to max_batched_tokens of prompts, so replicas whose
    waiting prompts fit one step are between steps, not saturated: 8 waiting 1,000-token prompts on
    4 replicas of 8,192 tokens a step teach nothing however long they stand (a fleet at 65 % read as
    a slow engine: ServeGen mm-image, session 42); 40 of them (10,000 tokens a replica) are a sample."""
    budgeted = ReplicaProfile(
        step_base_s=0.030,
        prefill_s_per_token=1 / 8000,
        decode_s_per_request=0.0002,
        max_num_seqs=64,
        max_batched_tokens=8192,
    )
    between, saturated = speedlearn.NO_SPEED, speedlearn.NO_SPEED
    for _ in range(20):
        between = tick(between, 0.6, queue=8.0, profile=budgeted)
        saturated = tick(saturated, 0.6, queue=40.0, profile=budgeted)
    assert (between.samples, between.saturated_ticks, between.log_ratio) == (0.0, 0, 0.0)
    assert between.backlog_ready == 4  # the backlog is still tracked for the planner
    assert saturated.samples == 20 - speedlearn.SATURATED_TICKS + 1 and saturated.log_ratio < 0.0


def test_one_wild_sample_moves_the_speed_at_most_a_factor_two() -> None:
    state = saturated_samples(PROFILE, 1.0, 20)
    wild = speedlearn.learn(
        PROFILE, state, queue=8.0, prompt_rate=1e9, generated_rate=1e9, finished_rate=1e6, ready=4
    )
    assert wild.log_ratio - state.log_ratio <= math.log(2.0) / wild.samples + 1e-12


def test_a_full_kv_cache_is_no_sample() -> None:
    """A fleet at its KV ceiling preempts and recomputes what its token counters do not count, so
    its work per replica reads as a slow engine (capacity.demand.kvUsageMetric): with the fullest
    pod's usage at KV_FULL or above the tick is no sample, below it (or without a reading) it is."""
    cap = capacityfacts.facts(
        CapacitySpec(profile=PROFILE, demand=DemandSpec(queue_metric="q", kv_usage_metric="kv"))
    )
    assert "kv" in CapacitySpec(profile=PROFILE, demand=DemandSpec(kv_usage_metric="kv")).metric_names
    assert "kv" not in CapacitySpec(profile=PROFILE, demand=DemandSpec(queue_metric="kv0")).metric_names
    p, o = 1000.0, 200.0
    finished = 4 * 0.5 / (PROFILE.prefill_s_per_token * p + PROFILE.decode_s_per_request * o)
    obs = Observation(spec_replicas=4, status_replicas=4, ready_pods=4)

    def run(kv: MetricReading | None) -> SpeedState:
        metrics = {"q": MetricReading((8000,))} | ({} if kv is None else {"kv": kv})
        state = speedlearn.NO_SPEED
        for _ in range(speedlearn.SATURATED_TICKS + 2):
            queue = planner._total(metrics["q"])  # the waiting total, as plan() reads it
            state = planner._learn_speed(
                cap, state, obs, metrics, queue, finished * p, finished * o, finished
            )
        return state

    full = round(1000 * speedlearn.KV_FULL)
    assert run(MetricReading((full,))).samples == 0  # a mean over the pods at the ceiling
    assert run(MetricReading((500, full))).samples == 0  # one pod a item: the fullest one's
    for kv in (None, MetricReading((full - 1,)), MetricReading(None, error="no reading")):
        learned = run(kv)
        assert learned.samples == 3 and speedlearn.speed(learned, 8.0) < 1.0
    with pytest.raises(ValueError, match="kv_usage_metric"):
        DemandSpec(kv_usage_metric="")
    model = DemandModel.model_validate({"kvUsageMetric": "infscale_kv_cache_usage"})
    assert model.to_spec().kv_usage_metric == "infscale_kv_cache_usage"
    with pytest.raises(ValueError, match="kvUsageMetric"):
        DemandModel.model_validate({"kvUsageMetric": ""})
    spec = CapacitySpec(profile=PROFILE, demand=DemandSpec(kv_usage_metric="infscale_kv_cache_usage"))
    assert CapacityModel.model_validate(CapacityModel.document_of(spec)).to_spec().demand == spec.demand
