"""lasting.py and the bursts' hold of the requests in flight (burstsize.py, "lifetime"): the
arrivals over the requests' time in the system, their spread, the rate the batch and KV ceilings
are held at, and the sizing that queues the prompts at the TTFT target's hold meanwhile."""

from __future__ import annotations

import math
import random

import pytest
from test_policy_planner import NOW, planner_spec

from autoscaler.policy import (
    burstsize,
    capacity,
    capacityfacts,
    demand,
    kvceiling,
    lasting,
    lookahead,
    replicarates,
)
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityspec import SloTarget
from autoscaler.policy.lasting import Lasting
from replay.policies.predictive import replica_profile
from replay.profiles import SCENARIOS

# reference-70b's engine as the predictive policy reads it: its KV cache holds ~157 requests of
# 2,048 + 1,500 tokens
PROFILE = replica_profile(SCENARIOS["reference-70b"].engine)
SLO = SloTarget(ttft_s=2.0, tpot_s=0.2)


def test_the_time_in_the_system_is_in_flight_over_finished() -> None:
    assert lasting.time_in_system_s(4.0, 240.0) == 60.0  # Little's law
    assert lasting.time_in_system_s(0.0, 5.0) == lasting.LONGEST_S  # nothing finishes: the longest
    assert lasting.time_in_system_s(0.001, 5.0) == lasting.LONGEST_S
    assert lasting.time_in_system_s(4.0, 0.0) == 0.0


def test_the_rate_over_the_time_in_the_system_is_what_memoryless_requests_keep_in_flight() -> None:
    """Requests of exponential lifetimes (mean 60 s) arriving in bursts: the requests in flight,
    integrated finely, are the rate over the time in the system times that time."""
    rng = random.Random(3)
    life, dt, state, held = 60.0, 15.0, Lasting(), 0.0
    for tick in range(200):
        arrivals = rng.choice([0.0, 0.0, 0.0, 2.0, 40.0])
        steps = 1_000  # in flight: dN/dt = arrivals - N / life, by small steps
        for _ in range(steps):
            held += (arrivals - held / life) * dt / steps
        if tick == 0:
            state = Lasting(life, 0.0, 0.0)  # from an empty system
        state = lasting.after_tick(state, arrivals, held / life, held, dt, 8.4, 0.0)
        assert state.time_s == pytest.approx(life)
        assert state.rate * state.time_s == pytest.approx(held, rel=1e-3)


def _spread_after(counts: list[float], dt: float, life: float) -> tuple[float, float]:
    """The lasting spread over ticks of these arrivals/s (its mean, past the first 100), and the
    variance its rate showed."""
    mean = sum(counts) / len(counts)
    state = Lasting(life, mean, 0.0)
    rates, spreads = [], []
    for i, c in enumerate(counts):
        state = lasting.after_tick(state, c, mean, mean * life, dt, mean, demand.typical_weight(dt))
        if i >= 100:
            rates.append(state.rate)
            spreads.append(state.excess)
    shown = sum((r - mean) ** 2 for r in rates) / len(rates)
    return sum(spreads) / len(spreads), shown


def test_the_spread_is_the_bursts_and_not_a_poisson_counts_noise() -> None:
    rng = random.Random(7)
    dt, life = 15.0, 60.0
    poisson = [_poisson(rng, 5.0 * dt) / dt for _ in range(3_000)]
    excess, shown = _spread_after(poisson, dt, life)
    assert shown > 0.0 and abs(excess) < 0.1 * shown  # Poisson counts: their noise taken out
    bursts = [(600.0 if rng.random() < 0.125 else 0.0) / dt for _ in range(3_000)]  # 5/s on average
    excess, shown = _spread_after(bursts, dt, life)
    assert excess == pytest.approx(shown, rel=0.1)
    # over a minute the bursts' rate spreads far less than over the TTFT target's 2 s (~1,500/s²)
    assert excess < 30.0


def _poisson(rng: random.Random, mean: float) -> float:
    count, t = 0, rng.expovariate(1.0)
    while t < mean:
        count += 1
        t += rng.expovariate(1.0)
    return float(count)


def _bursty(inflight: float) -> demand.DemandState:
    """600 requests in one 15 s tick in eight (5/s on average) of 2,048-token prompts and
    1,500-token answers, `inflight` in flight throughout (Little's law: inflight / 5 s)."""
    spec = planner_spec().capacity
    assert spec is not None
    state = None
    t = NOW
    for k in range(160):
        rate = 40.0 if k % 8 == 7 else 0.0
        finished = 5.0
        state, _ = demand.observe(
            spec.demand, state, t, finished, finished * 2_048.0, finished * 1_500.0, inflight, arrived=rate
        )
        t += 15.0
    assert state is not None
    return state


def test_requests_that_last_minutes_hold_in_flight_their_rate_over_their_time_in_the_system() -> None:
    spec = planner_spec()
    cap = spec.capacity
    assert cap is not None
    long_lived = lookahead.Lookahead(
        capacityfacts.facts(cap), _bursty(400.0), 1.0, spec.max_replicas
    )  # 80 s in the system
    assert long_lived._observed.lasting.time_s == pytest.approx(80.0)
    # the prompts' queue holds the bursts over the TTFT target (40/s a tick, 300/s within it)
    assert long_lived.hold > 40.0
    # in flight, the arrivals over 80 s: 600 requests at most in any 80 s, 7.5/s
    assert 5.0 < long_lived.lifetime_hold < 15.0
    # requests within a tick in the system: the counts cannot tell, the TTFT target's hold
    short_lived = lookahead.Lookahead(capacityfacts.facts(cap), _bursty(25.0), 1.0, spec.max_replicas)  # 5 s
    assert short_lived.lifetime_hold == short_lived.hold == pytest.approx(long_lived.hold)


def _need(rate: float, prompt: float, output: float) -> Demand:
    return Demand(rate, rate * prompt, rate * output)


def test_the_ceilings_hold_the_lifetime_rate_and_the_prompts_queue_at_the_burst() -> None:
    """Minute-long requests on reference-70b, 5/s: the burst held over the TTFT target (75/s)
    queues its prompts, the requests in flight are those of the rate over their time in the
    system: the KV ceiling's count at that rate (Little's law: the rate × the time a request
    spends on a full replica / the requests it holds, at the KV's priced tail: 46, where the mean
    holds 45 and the SLO's tail quantile 48), not at 75/s."""
    need = _need(5.0, 2_048.0, 1_500.0)
    p, o = 2_048.0, 1_500.0
    context = p + capacity.CONTEXT_OUTPUT_SHARE * o
    spread = p * p + (capacity.CONTEXT_OUTPUT_SHARE * o) ** 2  # the prompts' cv² 1, an exponential age
    # a preempted context's recompute (its prefill) in steps at the TPOT target (capacity.kv_z)
    redo = PROFILE.prefill_s_per_token + PROFILE.prefill_s_per_attention_pair * 0.5 * (context + 1.0)
    steps = redo * context * (1.0 - (1.0 - PROFILE.step_base_s / 0.2)) / PROFILE.step_base_s
    z = kvceiling.kv_z(1.0 - SLO.attainment, spread, context, 440_000, steps)
    seqs = kvceiling.kv_requests(440_000, context, spread, z)
    on_a_full_replica_s = o * PROFILE.step_base_s + seqs * replicarates.work_per_request(PROFILE, p, o, 1.0)

    def held(in_flight: float | None) -> capacity.Sizing:
        return burstsize.size(PROFILE, SLO, need, 1.0, 1_000, 1.0, {}, hold=75.0, lifetime_hold=in_flight)

    at_burst = held(None)
    assert (
        at_burst.binding == "kv" and at_burst.replicas == math.ceil(75.0 * on_a_full_replica_s / seqs) == 46
    )
    assert held(40.0).binding == "kv" and held(40.0).replicas == math.ceil(40.0 * on_a_full_replica_s / seqs)
    # at 20/s in flight the prompts' queue at 75/s asks for more than the KV ceiling (13)
    assert math.ceil(20.0 * on_a_full_replica_s / seqs) == 13
    assert held(20.0).binding == "ttft" and held(20.0).replicas == 16
    # a lifetime hold above the TTFT target's, or none: the TTFT target's
    assert held(90.0) == at_burst
    # under the demand itself: the demand's own in flight
    assert burstsize.size(PROFILE, SLO, need, 1.0, 1_000, 1.0, {}, 75.0, 1.0) == capacity.size(
        PROFILE, SLO, need, 1.0, 1_000, prefill_burst=15.0
    )


def test_the_prompts_queue_at_the_burst_rate_while_the_decodes_are_the_lifetime_rates() -> None:
    """Long prompts and one-token answers (TTFT-bound, little decode): prompts queued at three
    times the rate need as many replicas as three times the demand; answers of 1,500 tokens
    in flight at the demand's rate alone leave more prefill room than three times as many."""
    prefill = _need(20.0, 4_000.0, 1.0)
    queued = capacity.size(PROFILE, SLO, prefill, prefill_burst=3.0)
    assert queued.binding == "ttft"
    assert abs(queued.replicas - capacity.size(PROFILE, SLO, prefill.scaled(3.0)).replicas) <= 1
    assert queued.replicas > capacity.size(PROFILE, SLO, prefill).replicas
    mixed = _need(10.0, 4_000.0, 300.0)
    assert (
        capacity.size(PROFILE, SLO, mixed, prefill_burst=3.0).replicas
        <= capacity.size(PROFILE, SLO, mixed.scaled(3.0)).replicas
    )
