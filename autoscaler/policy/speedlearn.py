"""Learning a replica's speed online: what saturated replicas achieve, relative to the profile.

Sits beside capacity.py (planner.py folds one tick in per decision and scales the profile by the
result): while every replica has a queue, the work the fleet got through per second is what the
replicas can do, so achieved / profile is the speed the profile should have.

The metrics are fleet totals, so "every replica has a queue" is inferred: the waiting total is at
least one a replica, over SATURATED_TICKS ticks with the same ready count, and not shrinking; and
where the engine admits prompts by a token budget, the prompts waiting are more than one step
admits on every replica (waiting × mean prompt >= ready × max_batched_tokens): below that the next
step admits them all, so the replicas are between steps, not saturated, and their work per second
is their utilization (ServeGen mm-image: 1-3 waiting a replica at 420-1,580-token prompts read a
fleet at 65 % as a slow engine, x0.70-0.76; docs/policy-history.md, session 45). An
engine's waiting queue is its own (vLLM's scheduler; a request is placed when it arrives), so a
backlog stays on the replicas that were ready when it came: replicas that joined since, or that
drained their own, idle while the total still exceeds one a replica, and the fleet's work per
replica then understates the speed by up to the share saturated. A total that is not shrinking
means the replicas taking the arrivals queue too (the least loaded, under a balancing router; all
alike under a random one). docs/policy-history.md ("The learned speed on bursty traffic") has the figures.

So a standing backlog remembers the ready count it began at (backlog_ready), and while more
replicas are ready than that, no tick is a sample, however long the total stays above one a
replica: the ones that joined hold none of it. The backlog ends when the waiting total falls
below one a replica (placement is even again from there). A fleet that grew 6 -> 12 through a
backlog read x0.50 from the drain on the six (ServeGen m-small, docs/policy-history.md, "The
learned speed after a backlog"), where the engine is the profile.

It also keeps the ticks the backlog has stood (backlog_ticks, tracked with learning off too): past
one replica's lead, the planner counts the arrivals beside the replicas that hold it
(planstages.backlog_stage).
"""

from __future__ import annotations

import math
from typing import Final, final

from autoscaler.policy import replicarates
from autoscaler.policy.capacityspec import ReplicaProfile
from autoscaler.policy.record import Record
from autoscaler.policy.tpottail import CONTEXT_OUTPUT_SHARE

SATURATED_TICKS: Final = 3  # consecutive saturated ticks at one ready count before a sample counts
MAX_SPEED_STEP: Final = math.log(2.0)  # one sample moves the estimate by at most a factor 2
MAX_SPEED_SAMPLES: Final = 100.0  # then it is an exponential average over the last ~100 samples
# KV cache usage (0-1) from which a tick is no sample: the engine preempts when a step's blocks do
# not fit and recomputes the preempted prompts, work its token counters do not count, so a fleet at
# its KV ceiling reads as a slow engine (docs/policy.md, "Defaults and why": learned-speed sample)
KV_FULL: Final = 0.95


@final
class SpeedState(Record):
    """What saturated replicas achieved, relative to the profile (log scale), and the saturated
    run in progress. A Record (record.py), not a NamedTuple: learn() builds one a tick."""

    FIELDS = ("log_ratio", "samples", "saturated_ticks", "ready", "queue", "backlog_ready", "backlog_ticks")

    log_ratio: float  # mean of the clipped log(achieved / profile) over the samples
    samples: float
    saturated_ticks: int  # consecutive ticks with a queue of one a replica, at `ready` replicas
    ready: int  # the ready count of that run
    queue: float  # the waiting total at its last tick
    backlog_ready: int  # the ready count when the standing backlog began (0: none stands)
    backlog_ticks: int  # the ticks it has stood (0: none stands)

    def __init__(
        self,
        log_ratio: float,
        samples: float,
        saturated_ticks: int,
        ready: int = 0,
        queue: float = 0.0,
        backlog_ready: int = 0,
        backlog_ticks: int = 0,
    ) -> None:
        self.log_ratio = log_ratio
        self.samples = samples
        self.saturated_ticks = saturated_ticks
        self.ready = ready
        self.queue = queue
        self.backlog_ready = backlog_ready
        self.backlog_ticks = backlog_ticks


NO_SPEED = SpeedState(0.0, 0.0, 0)


def speed(state: SpeedState, prior_weight: float) -> float:
    """The learned speed, shrunk towards the profile (1.0) with the profile weighing prior_weight
    samples: robust to a few odd readings, and the profile decides until saturation was seen."""
    n = state.samples
    if n <= 0.0:
        return 1.0
    return math.exp(n / (n + prior_weight) * state.log_ratio)


def backlog_after(state: SpeedState, queue: float | None, ready: int) -> tuple[int, int]:
    """(backlog_ready, backlog_ticks) after a tick with `queue` waiting in all (None: unknown) on
    `ready` replicas: a backlog stands from the tick at least one waits a replica, on the fewest
    ready since, until fewer than one a replica wait (placement is even again)."""
    backlog = state.backlog_ready
    if queue is not None and ready > 0:
        if queue < ready:  # drained: placement is even again
            backlog = 0
        elif backlog == 0 or ready < backlog:  # min(backlog, ready) once one stands
            backlog = ready
    return backlog, (state.backlog_ticks + 1 if backlog else 0)


def learn(
    profile: ReplicaProfile,
    state: SpeedState,
    *,
    queue: float | None,
    prompt_rate: float,
    generated_rate: float,
    finished_rate: float,
    ready: int,
    share: float = CONTEXT_OUTPUT_SHARE,
    kv_full: bool = False,
) -> SpeedState:
    """Fold one tick in (`queue`: the waiting total, None unknown). While every replica has a
    queue, a replica's work per second (profile seconds of prefill and decode it got through) is
    its speed times the share of a step that is not the fixed part, so achieved / that share is the
    speed the profile should have (`share`: of the mean output in the context a decode reads, as
    the sizing has it, lengths.context_share at the outputs' cv²: the speed learned is the profile's
    at the sizing's own work per request). `kv_full`: a pod's KV cache at KV_FULL, no sample."""
    backlog, stood = backlog_after(state, queue, ready)
    if kv_full or queue is None or ready <= 0 or queue < ready or finished_rate <= 0.0 or ready > backlog:
        # (ready > backlog: replicas joined the standing backlog, which sits on the others)
        return SpeedState(state.log_ratio, state.samples, 0, 0, 0.0, backlog, stood)
    p = prompt_rate / finished_rate
    budget = profile.max_batched_tokens
    if budget is not None and queue * p < ready * budget:
        # the prompts waiting fit one step's token budget a replica: the next step admits them all,
        # so the replicas are between steps, not saturated (a fleet at 65 % read as a slow engine)
        return SpeedState(state.log_ratio, state.samples, 0, 0, 0.0, backlog, stood)
    if ready != state.ready:  # a new run, or replicas left: three ticks at this count first
        return SpeedState(state.log_ratio, state.samples, 1, ready, queue, backlog, stood)
    ticks = state.saturated_ticks + 1
    if ticks < SATURATED_TICKS or queue < state.queue:  # shrinking: perhaps one replica's backlog
        return SpeedState(state.log_ratio, state.samples, ticks, ready, queue, backlog, stood)
    o = generated_rate / finished_rate
    if o < 1.0:  # max(o, 1.0), without the builtin's call (as below)
        o = 1.0
    a = replicarates.prefill_token_s(profile, p)
    achieved = (a * prompt_rate + replicarates.decode_token_s(profile, p, o, share) * generated_rate) / ready
    busy = 1.0
    if budget is not None:  # a saturated step carries a full token budget beside its fixed part
        full = profile.step_base_s + a * budget
        busy = 1.0 - profile.step_base_s / full
    if achieved <= 0.0:
        return SpeedState(state.log_ratio, state.samples, ticks, ready, queue, backlog, stood)
    sample = math.log(achieved / busy)
    mean = state.log_ratio
    if state.samples:
        low, high = mean - MAX_SPEED_STEP, mean + MAX_SPEED_STEP
    else:
        low, high = -MAX_SPEED_STEP, MAX_SPEED_STEP
    if low > sample:  # min(max(sample, low), high)
        sample = low
    if high < sample:
        sample = high
    n = state.samples + 1.0
    if n > MAX_SPEED_SAMPLES:
        n = MAX_SPEED_SAMPLES
    return SpeedState(mean + (sample - mean) / n, n, ticks, ready, queue, backlog, stood)
