"""Capacity in tokens: the step model's closed forms, the per-replica M/G/1 TTFT tail."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy import capacity
from autoscaler.policy.capacity import Demand
from autoscaler.policy.spec import ReplicaProfile, SloTarget

# reference-70b as the replay had it: prefill 8,000 tok/s with priority, decode 30 ms + 0.2 ms a request
PROFILE = ReplicaProfile(
    step_base_s=0.030, prefill_s_per_token=1 / 8000, decode_s_per_request=0.0002, max_num_seqs=64
)
SLO = SloTarget(ttft_s=2.0, tpot_s=0.2, attainment=0.99)


def demand(rate: float, prompt: float, output: float) -> Demand:
    return Demand(rate, rate * prompt, rate * output)


def test_idle_needs_no_replica_and_still_reports_capacity() -> None:
    s = capacity.size(PROFILE, SLO, Demand(0.0, 0.0, 0.0))
    assert (s.replicas, s.binding) == (0, "idle")
    assert s.prefill_tokens_per_s == pytest.approx(8000.0)
    # pure decode at the TPOT target: 30 ms + 0.2 ms × B = 200 ms holds 850, capped at 64 slots
    assert s.decode_tokens_per_s == pytest.approx(64 / (0.030 + 0.0002 * 64))


def test_tpot_binds_at_its_closed_form() -> None:
    """No slot or KV limit and short prompts: ρ = x·w must stay <= 1 - base / tpot."""
    profile = ReplicaProfile(
        step_base_s=0.02, prefill_s_per_token=1e-4, decode_s_per_request=1e-3, max_num_seqs=10**6
    )
    d = demand(100.0, prompt=100, output=100)
    w = 1e-4 * 100 + 1e-3 * 100  # 0.11 GPU-s per request
    s = capacity.size(profile, SloTarget(ttft_s=10.0, tpot_s=0.1), d)
    assert s.binding == "tpot"
    assert s.replicas == math.ceil(100 * w / (1 - 0.02 / 0.1))  # 13.75 -> 14
    assert s.utilization <= 1 - 0.02 / 0.1


def test_slots_bind_through_littles_law() -> None:
    """B = x·o·s with s = base / (1 - x·w): 64 slots at 211 output tokens hold x = 64 / (o·base + 64·w)."""
    d = demand(20.0, prompt=1155, output=211)
    s = capacity.size(PROFILE, SloTarget(ttft_s=60.0, tpot_s=None), d)
    w = 1155 / 8000 + 0.0002 * 211
    per_replica = 64 / (211 * 0.030 + 64 * w)
    assert s.binding == "batch"
    assert s.replicas == math.ceil(20.0 / per_replica)


def test_kv_binds_when_contexts_are_long() -> None:
    profile = ReplicaProfile(
        step_base_s=0.03,
        prefill_s_per_token=1 / 8000,
        decode_s_per_request=2e-4,
        max_num_seqs=1024,
        kv_cache_tokens=400_000,
    )
    d = demand(2.0, prompt=12_000, output=600)
    s = capacity.size(profile, SloTarget(ttft_s=600.0, tpot_s=None), d)
    assert s.binding == "kv"
    seqs = 400_000 / (12_000 + 300)
    w = 12_000 / 8000 + 2e-4 * 600
    assert s.replicas == math.ceil(2.0 * (600 * 0.03 + seqs * w) / seqs)


def test_the_split_tail_matches_m_m_1() -> None:
    """2 Erlangs over n M/M/1 queues: each waits with probability u = 2/n, so with no slack the
    least n with u <= 0.5 is 4 and with u <= 0.49 it is 5."""
    assert capacity._split_servers(2.0, 0.0, 0.5) == 4
    assert capacity._split_servers(2.0, 0.0, 0.49) == 5
    # with slack t (in mean services) the tail is u·exp(-(1 - u)·t): 0.5·e^-0.5 = 0.3033 at n = 4
    assert capacity._split_servers(2.0, 1.0, 0.31) == 4
    assert capacity._split_servers(2.0, 1.0, 0.30) == 5
    assert capacity._split_servers(0.0, 1.0, 0.01) == 1


def test_ttft_binds_for_long_prompts_and_needs_more_than_the_work() -> None:
    """12,000-token prompts take 1.5 s to prefill: at a 2 s TTFT little wait is allowed."""
    d = demand(10.0, prompt=12_000, output=100)
    s = capacity.size(
        ReplicaProfile(step_base_s=0.03, prefill_s_per_token=1 / 8000, max_num_seqs=1024),
        SloTarget(2.0, None),
        d,
    )
    assert s.binding == "ttft"
    assert s.replicas > 10 * 1.5  # more than the busy servers A = 15
    # exponential prompt lengths of mean 12,000 at 8,000 tok/s: those over ~15,800 tokens miss 2 s
    # on an idle replica (27 %), so the waits may miss as often; a length-aware target that every
    # prompt can meet plans the full 1 % wait tail instead, and needs more
    lost = math.exp(-(2.0 - 0.03) * 8000 / 12_000)
    assert capacity._wait_budget(0.01, 12_000, 8000.0, 0.0, 2.0 - 0.03, None) == pytest.approx(lost)
    aware = capacity.size(
        ReplicaProfile(step_base_s=0.03, prefill_s_per_token=1 / 8000, max_num_seqs=1024),
        SloTarget(2.0, None, ttft_tokens_per_s=8000),
        d,
    )
    assert capacity._wait_budget(0.01, 12_000, 8000.0, 0.0, 2.0 - 0.03, 8000.0) == 0.01
    assert aware.replicas > s.replicas


def test_the_wait_budget_is_the_tail_less_the_unavoidable_misses() -> None:
    """Up to half the tail lost on idle replicas, the waits get the rest; beyond, as many."""
    room = 2.0
    for lost in (0.0, 0.002, 0.005, 0.02, 0.3):
        p = 8000.0 * room / -math.log(lost) if lost else 1e-9  # exp(-room·rate / p) = lost
        budget = capacity._wait_budget(0.01, p, 8000.0, 0.0, room, None)
        assert budget == pytest.approx(max(0.01 - lost, lost), rel=1e-9, abs=1e-12)


def test_a_token_budget_slows_prefill_by_the_decodes_it_carries() -> None:
    chunked = ReplicaProfile(
        step_base_s=0.02,
        prefill_s_per_token=7e-5,
        decode_s_per_request=1e-4,
        max_batched_tokens=8192,
        max_num_seqs=1024,
    )
    idle = capacity.size(chunked, SLO, Demand(0.0, 0.0, 0.0))
    busy = capacity.size(chunked, SLO, demand(30.0, 1000, 300))
    assert idle.prefill_tokens_per_s < 1 / 7e-5  # every step pays its fixed part
    assert busy.prefill_tokens_per_s < idle.prefill_tokens_per_s


def test_speed_divides_the_work() -> None:
    d = demand(40.0, 1000, 200)
    slow = capacity.size(PROFILE, SLO, d, speed=1.0)
    fast = capacity.size(PROFILE, SLO, d, speed=2.0)
    assert fast.replicas < slow.replicas
    assert fast.prefill_tokens_per_s == pytest.approx(2 * slow.prefill_tokens_per_s)


def test_limit_caps_the_count() -> None:
    assert capacity.size(PROFILE, SLO, demand(1e4, 1000, 200), limit=64).replicas == 64


@settings(max_examples=200, deadline=None)
@given(
    rate=st.floats(0.01, 200),
    more=st.floats(1.0, 3.0),
    prompt=st.floats(1, 30_000),
    output=st.floats(1, 2_000),
)
def test_more_demand_never_needs_fewer_replicas(
    rate: float, more: float, prompt: float, output: float
) -> None:
    base = capacity.size(PROFILE, SLO, demand(rate, prompt, output))
    bigger = capacity.size(PROFILE, SLO, demand(rate * more, prompt, output))
    assert bigger.replicas >= base.replicas >= 1
