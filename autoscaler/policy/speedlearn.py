"""Learning a replica's speed online: what saturated replicas achieve, relative to the profile.

Sits beside capacity.py (planner.py folds one tick in per decision and scales the profile by the
result): while every replica has a queue, the work the fleet got through per second is what the
replicas can do, so achieved / profile is the speed the profile should have. docs/policy.md
("The learned speed") says when a sample counts and why it is shrunk towards the profile.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from autoscaler.policy import capacity
from autoscaler.policy.spec import ReplicaProfile

SATURATED_TICKS = 3  # consecutive ticks with a queue on every replica before a sample counts
MAX_SPEED_STEP = math.log(2.0)  # one sample moves the estimate by at most a factor 2
MAX_SPEED_SAMPLES = 100.0  # then it is an exponential average over the last ~100 samples


class SpeedState(NamedTuple):
    """What saturated replicas achieved, relative to the profile (log scale)."""

    log_ratio: float  # mean of the clipped log(achieved / profile) over the samples
    samples: float
    saturated_ticks: int


NO_SPEED = SpeedState(0.0, 0.0, 0)


def speed(state: SpeedState, prior_weight: float) -> float:
    """The learned speed, shrunk towards the profile (1.0) with the profile weighing prior_weight
    samples: robust to a few odd readings, and the profile decides until saturation was seen."""
    n = state.samples
    if n <= 0.0:
        return 1.0
    return math.exp(n / (n + prior_weight) * state.log_ratio)


def learn(
    profile: ReplicaProfile,
    state: SpeedState,
    *,
    saturated: bool,
    prompt_rate: float,
    generated_rate: float,
    finished_rate: float,
    ready: int,
) -> SpeedState:
    """Fold one tick in. While every replica has a queue, a replica's work per second (profile
    seconds of prefill and decode it got through) is its speed times the share of a step that is
    not the fixed part, so achieved / that share is the speed the profile should have."""
    if not saturated or ready <= 0 or finished_rate <= 0.0:
        return SpeedState(state.log_ratio, state.samples, 0)
    ticks = state.saturated_ticks + 1
    if ticks < SATURATED_TICKS:
        return SpeedState(state.log_ratio, state.samples, ticks)
    p = prompt_rate / finished_rate
    o = max(generated_rate / finished_rate, 1.0)
    a = capacity.prefill_token_s(profile, p)
    achieved = (a * prompt_rate + capacity.decode_token_s(profile, p, o) * generated_rate) / ready
    budget = profile.max_batched_tokens
    busy = 1.0
    if budget is not None:  # a saturated step carries a full token budget beside its fixed part
        full = profile.step_base_s + a * budget
        busy = 1.0 - profile.step_base_s / full
    if achieved <= 0.0:
        return SpeedState(state.log_ratio, state.samples, ticks)
    sample = math.log(achieved / busy)
    mean = state.log_ratio
    if state.samples:
        sample = min(max(sample, mean - MAX_SPEED_STEP), mean + MAX_SPEED_STEP)
    else:
        sample = min(max(sample, -MAX_SPEED_STEP), MAX_SPEED_STEP)
    n = min(state.samples + 1.0, MAX_SPEED_SAMPLES)
    return SpeedState(mean + (sample - mean) / n, n, ticks)
