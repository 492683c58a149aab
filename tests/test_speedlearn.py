"""The learned speed: what saturated replicas achieve relative to the profile, shrunk to the prior."""

from __future__ import annotations

import math

import pytest

from autoscaler.policy import speedlearn
from autoscaler.policy.spec import ReplicaProfile
from autoscaler.policy.speedlearn import SpeedState

# reference-70b as the replay had it: prefill 8,000 tok/s with priority, decode 30 ms + 0.2 ms a request
PROFILE = ReplicaProfile(
    step_base_s=0.030, prefill_s_per_token=1 / 8000, decode_s_per_request=0.0002, max_num_seqs=64
)


def saturated_samples(profile: ReplicaProfile, achieved_share: float, ticks: int) -> SpeedState:
    """Replicas that get through `achieved_share` of what the profile says per second."""
    state = speedlearn.NO_SPEED
    ready = 4
    p, o = 1000.0, 200.0
    w = profile.prefill_s_per_token * p + profile.decode_s_per_request * o
    finished = ready * achieved_share / w
    for _ in range(ticks):
        state = speedlearn.learn(
            profile,
            state,
            saturated=True,
            prompt_rate=finished * p,
            generated_rate=finished * o,
            finished_rate=finished,
            ready=ready,
        )
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
    after = speedlearn.learn(
        PROFILE, state, saturated=False, prompt_rate=1.0, generated_rate=1.0, finished_rate=1.0, ready=4
    )
    assert (after.log_ratio, after.samples, after.saturated_ticks) == (state.log_ratio, state.samples, 0)


def test_one_wild_sample_moves_the_speed_at_most_a_factor_two() -> None:
    state = saturated_samples(PROFILE, 1.0, 20)
    wild = speedlearn.learn(
        PROFILE, state, saturated=True, prompt_rate=1e9, generated_rate=1e9, finished_rate=1e6, ready=4
    )
    assert wild.log_ratio - state.log_ratio <= math.log(2.0) / wild.samples + 1e-12
