"""capacity.sizer and burstsize.size reuse what does not depend on the arrivals' ca² across the
sizings of one demand: each result equals, to the bit, the code before the reuse (kept here as
the reference: one full capacity.size per ca²)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy import (
    burstsize,
    capacity,
    idlemiss,
    kvceiling,
    leastloaded,
    lengths,
    replicarates,
    tailsearch,
    tpottail,
)
from autoscaler.policy.capacity import Demand, Sizing
from autoscaler.policy.capacityspec import ReplicaProfile, SloTarget


def _wait_budget_before(
    tail: float,
    p: float,
    rate: float,
    beta: float,
    room_s: float,
    ttft_tokens: float | None,
    cv2: float,
    idle_rate: float,
    idle_room_s: float,
) -> float:
    lost = idlemiss.misses_at(p, rate, beta, room_s, ttft_tokens, cv2)
    if lost <= tail - lost:
        return tail - lost
    return max(tail - lost, idlemiss.misses_at(p, idle_rate, beta, idle_room_s, ttft_tokens, cv2))


def _decode_rate_before(profile: ReplicaProfile, slo: SloTarget, base: float, d: float, seqs: float) -> float:
    room = (slo.tpot_s if slo.tpot_s is not None else base / (1.0 - replicarates.MAX_UTILIZATION)) - base
    batch = seqs if d <= 0.0 else min(seqs, room / d)
    if batch < 1.0:
        batch = 1.0
    return batch / (base + d * batch)


def _size_before(
    profile: ReplicaProfile,
    slo: SloTarget,
    demand: Demand,
    speed: float,
    limit: int,
    arrival_cv2: float,
    service_cv2: float,
    lengths_cv2: float,
    least_loaded: bool = False,
    arrivals_index: float = 1.0,
    outputs_cv2: float = 1.0,
) -> Sizing:
    """capacity.size as it was before the reuse (9e65c0e), over the same helpers but those it
    changed (the wait budget, the decode rate: their min and max as the builtins); the outputs'
    spread in the context as session 27 put it there."""
    c = capacity
    lam = demand.requests
    if lam < c.MIN_RATE:
        return c._idle(profile, slo, speed)
    p = demand.prompt_tokens / lam
    o = max(demand.output_tokens / lam, 1.0)
    base = profile.step_base_s / speed
    a_token = profile.prefill_s_per_token + profile.prefill_s_per_attention_pair * 0.5 * (p + 1.0)
    context = p + lengths.context_share(outputs_cv2) * o
    d_token = profile.decode_s_per_request + profile.decode_s_per_context_token * context
    w = (a_token * p + d_token * o) / speed
    a = a_token / speed
    d = d_token / speed
    rho_tpot = c.MAX_UTILIZATION if slo.tpot_s is None else min(1.0 - base / slo.tpot_s, c.MAX_UTILIZATION)
    binding = "tpot"
    if rho_tpot < c.MIN_UTILIZATION:
        rho_tpot = c.MIN_UTILIZATION
    n = lam * w / rho_tpot
    seqs = float(profile.max_num_seqs)
    if profile.kv_cache_tokens is not None:  # the KV at its priced tail (tests/test_capacity.py checks it)
        kv = profile.kv_cache_tokens
        spread = lengths_cv2 * p * p + lengths.age_variance(outputs_cv2) * o * o
        redo = profile.prefill_s_per_token + profile.prefill_s_per_attention_pair * 0.5 * (context + 1.0)
        redo_steps = redo * context / speed * (1.0 - rho_tpot) / base
        z = kvceiling.kv_z(1.0 - slo.attainment, spread, context, kv, redo_steps)
        seqs = min(seqs, kvceiling.kv_requests(kv, context, spread, z))
    batch_n = lam * (o * base + seqs * w) / seqs
    if batch_n > n:
        n = batch_n
        binding = "batch" if seqs == profile.max_num_seqs else "kv"
    rate, rate_at = 0.0, 0
    if p < c.MIN_PROMPT_TOKENS:
        replicas = max(1, math.ceil(n - 1e-9))
    else:
        tail = 1.0 - slo.attainment
        beta = profile.prefill_s_per_attention_pair * 0.5 / speed
        ttft_s = slo.ttft_s
        ttft_tokens = slo.ttft_tokens_per_s
        if slo.tpot_s is not None:
            idle_rate = replicarates.prefill_rate_of(profile, 0.0, o, base, w, a, d)
            tpot_tail = max(
                tail, idlemiss.misses_at(p, idle_rate, beta, ttft_s - base, ttft_tokens, lengths_cv2)
            )
            tpot_n = lam / tailsearch.tpot_rate(
                profile, slo.tpot_s, tpot_tail, p, o, speed, lengths_cv2, outputs_cv2
            )
            if tpot_n > n:
                n, binding = tpot_n, "tpot"
        first = max(1, math.ceil(n - 1e-9))
        idle_rate = replicarates.prefill_rate_of(profile, 0.0, o, base, w, a, d)

        def ask(count: int) -> tuple[int, float]:
            """The count the TTFT tail asks for at `count`'s terms, and that count's prefill rate."""
            rate = replicarates.prefill_rate_of(profile, lam / count, o, base, w, a, d)
            service = p / rate
            step = base / max(1.0 - lam * w / count, 1e-3)
            slack = ttft_s - service - step
            if ttft_tokens is not None:
                slack += p / ttft_tokens
            slack = max(slack, c.MIN_SLACK_SHARE * service)
            offered = lam * service
            slack_services = slack / service * 2.0 / (arrival_cv2 + service_cv2)
            budget = _wait_budget_before(
                tail, p, rate, beta, ttft_s - step, ttft_tokens, lengths_cv2, idle_rate, ttft_s - base
            )
            if least_loaded and budget > tail:
                budget = tail
            # the random router's count, at least the light-traffic tail's (session 35):
            # u·P(R > slack) within the budget, a wait behind one long prompt's residual
            most = tailsearch.ttft_servers(offered, slack_services, budget)
            residual = 0.0
            if lengths_cv2 > 1.0:
                residual = lengths.residual_share(slack, p, 1.0 / rate - beta * p, beta, lengths_cv2)
                if budget > 0.0:
                    most = max(
                        most, math.ceil(min(offered * residual / budget, capacity.MOST_REPLICAS) - 1e-9)
                    )
            if not least_loaded:
                return most, rate
            chunks = 1.0
            if profile.max_batched_tokens is not None:
                chunks = max(1.0, p / profile.max_batched_tokens)
            got = leastloaded.servers(
                offered,
                slack_services,
                budget,
                lam * o * base,
                lam * w,
                arrivals_index,
                most,
                service_cv2,
                lam * base * chunks,
                residual,
            )
            return got, rate

        # the least count that asks for no more than itself, between the decode bound and its ask
        replicas = first
        asked, rate = ask(first)
        rate_at = first
        if asked > first:
            binding = "ttft"
            again, rate = ask(asked)
            rate_at = asked
            if again > asked:
                replicas = again
            else:
                lo, hi = first, asked
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    got, mid_rate = ask(mid)
                    if got <= mid:
                        hi, rate, rate_at = mid, mid_rate, mid
                    else:
                        lo = mid
                replicas = hi
    replicas = min(replicas, limit)
    if rate_at != replicas:
        rate = replicarates.prefill_rate_of(profile, lam / replicas, o, base, w, a, d)
    decode = _decode_rate_before(profile, slo, base, d, seqs)
    return Sizing(replicas, binding, rate, decode, lam / replicas, lam * w / replicas)


def _burst_before(
    profile: ReplicaProfile,
    slo: SloTarget,
    need: Demand,
    speed: float,
    limit: int,
    spread: float,
    shape: lengths.Shape,
) -> tuple[Sizing, int]:
    """burstsize.size as it was before the reuse (a full sizing per ca²), and how many it made."""
    cs2 = shape.get("service_cv2", capacity.SERVICE_CV2)
    cv2 = shape.get("lengths_cv2", 1.0)
    router = shape.get("least_loaded", False), shape.get("arrivals_index", 1.0)
    outputs = shape.get("outputs_cv2", 1.0)
    calls = 0

    def at(ca2: float) -> Sizing:
        nonlocal calls
        calls += 1
        return _size_before(profile, slo, need, speed, limit, ca2, cs2, cv2, *router, outputs_cv2=outputs)

    got = at(1.0)
    lo = got.replicas
    if spread <= 1.0 or lo <= 0:
        return got, calls
    top = at(burstsize.replica_cv2(spread, lo))
    hi = top.replicas
    if hi <= lo:
        return top, calls
    best = None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        sized = at(burstsize.replica_cv2(spread, mid))
        if sized.replicas <= mid:
            hi, best = mid, sized
        else:
            lo = mid
    if best is None:
        best = at(burstsize.replica_cv2(spread, hi))
    if best.replicas >= hi:
        return best, calls
    share = best.replicas / hi
    _, binding, prefill, decode, requests, utilization = best.values()
    return Sizing(hi, binding, prefill, decode, requests * share, utilization * share), calls


profiles = st.builds(
    ReplicaProfile,
    step_base_s=st.floats(0.005, 0.1),
    prefill_s_per_token=st.floats(1e-5, 1e-3),
    prefill_s_per_attention_pair=st.sampled_from([0.0, 3e-9, 8.85e-9]),
    decode_s_per_request=st.floats(0.0, 1e-3),
    decode_s_per_context_token=st.sampled_from([0.0, 3.3e-8, 2e-7]),
    max_batched_tokens=st.sampled_from([None, 2048, 8192]),
    max_num_seqs=st.sampled_from([64, 256, 1024]),
    kv_cache_tokens=st.sampled_from([None, 50_000, 440_000]),
    prefill_first=st.booleans(),
)
slos = st.builds(
    SloTarget,
    ttft_s=st.floats(0.2, 10.0),
    tpot_s=st.sampled_from([None, 0.05, 0.2]),
    ttft_tokens_per_s=st.sampled_from([None, 5_000.0]),
    attainment=st.sampled_from([0.9, 0.99]),
)
demands = st.builds(
    lambda r, p, o: Demand(r, r * p, r * o),
    st.floats(0.0, 300.0),
    st.sampled_from([0.0, 1e-7, 1.0, 200.0, 1_000.0, 8_000.0]),
    st.sampled_from([0.0, 1.0, 28.0, 200.0, 2_000.0]),
)
shapes = st.sampled_from(
    [
        {},
        {"service_cv2": 1.7, "lengths_cv2": 2.5},
        {"service_cv2": 0.2, "lengths_cv2": 0.1},
        {"least_loaded": True, "arrivals_index": 1.0},
        {"service_cv2": 1.7, "lengths_cv2": 2.5, "least_loaded": True, "arrivals_index": 30.0},
        {"outputs_cv2": 3.5},
        {
            "service_cv2": 0.2,
            "lengths_cv2": 0.1,
            "outputs_cv2": 0.3,
            "least_loaded": True,
            "arrivals_index": 3.0,
        },
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    profiles,
    slos,
    demands,
    st.sampled_from([0.5, 1.0, 1.3]),
    st.sampled_from([1, 3, 1_000_000]),
    shapes,
    st.lists(st.floats(0.05, 60.0), min_size=1, max_size=4),
)
def test_one_sizer_at_several_ca2_sizes_each_as_size_did(
    profile: ReplicaProfile,
    slo: SloTarget,
    d: Demand,
    speed: float,
    limit: int,
    shape: lengths.Shape,
    cas: list[float],
) -> None:
    at = capacity.sizer(profile, slo, d, speed, limit, **shape)
    cs2 = shape.get("service_cv2", capacity.SERVICE_CV2)
    cv2 = shape.get("lengths_cv2", 1.0)
    router = shape.get("least_loaded", False), shape.get("arrivals_index", 1.0)
    outputs = shape.get("outputs_cv2", 1.0)
    for ca2 in cas:  # one sizer, in turn: what it keeps between calls must not depend on the ca²
        assert at(ca2) == _size_before(
            profile, slo, d, speed, limit, ca2, cs2, cv2, *router, outputs_cv2=outputs
        )
        assert capacity.size(profile, slo, d, speed, limit, arrival_cv2=ca2, **shape) == at(ca2)


@settings(max_examples=300, deadline=None)
@given(profiles, slos, demands, st.sampled_from([1, 5, 64]), shapes, st.floats(0.5, 400.0))
def test_the_bursty_count_is_the_one_sized_a_full_sizing_per_ca2(
    profile: ReplicaProfile, slo: SloTarget, d: Demand, limit: int, shape: lengths.Shape, spread: float
) -> None:
    expected, _ = _burst_before(profile, slo, d, 1.0, limit, spread, shape)
    assert burstsize.size(profile, slo, d, 1.0, limit, spread, shape) == expected


@pytest.mark.parametrize("spread", [30.0, 200.0, 2_000.0])
def test_the_bisection_between_the_counts_reuses_the_sizer(spread: float) -> None:
    """Long prompts at a tight TTFT, counted in bursts: the count at Poisson's ca² and the count at
    its own differ by more than one, so the bisection runs (more than two sizings)."""
    profile = ReplicaProfile(step_base_s=0.0185, prefill_s_per_token=5.55e-5, max_batched_tokens=8192)
    slo = SloTarget(ttft_s=1.0, tpot_s=None)
    need = Demand(40.0, 40.0 * 4_000, 40.0 * 200)
    expected, calls = _burst_before(profile, slo, need, 1.0, 1_000, spread, {})
    assert calls > 2
    assert burstsize.size(profile, slo, need, 1.0, 1_000, spread, {}) == expected


def _prefill_rate_before(
    x: float, o: float, base: float, w: float, a: float, d: float, budget: float
) -> float:
    """tpottail.prefill_rate with a token budget and decodes beside the chunks, as it was: builtins."""
    carried = min(x * o * base / (1.0 - min(x * w, 0.95)), budget * 0.5)
    chunk = budget - carried
    return chunk / (base + a * chunk + d * carried)


# a prefill rate's arguments: x req/s, o output tokens, the step's base, w, a and d
_RATE_ARGS = (
    st.floats(0.0, 50.0),
    st.floats(1.0, 4_000.0),
    st.floats(0.001, 0.1),
    st.floats(0.0, 2.0),
    st.floats(1e-6, 1e-3),
    st.floats(0.0, 1e-3),
)


@settings(max_examples=500, deadline=None)
@given(*_RATE_ARGS, st.sampled_from([256.0, 2048.0, 8192.0]))
def test_the_prefill_rate_is_the_one_of_the_builtins(
    x: float, o: float, base: float, w: float, a: float, d: float, budget: float
) -> None:
    got = tpottail.prefill_rate(x, o, base, w, a, d, True, budget, False)
    assert got == _prefill_rate_before(x, o, base, w, a, d, budget)


@settings(max_examples=500, deadline=None)
@given(*_RATE_ARGS, st.sampled_from([None, 256, 2048, 8192]), st.booleans())
def test_capacitys_prefill_rate_is_tpottails(
    x: float, o: float, base: float, w: float, a: float, d: float, budget: int | None, first: bool
) -> None:
    # the compiled core's copy (replicarates.prefill_rate_of) of numba's source (tpottail.prefill_rate)
    profile = ReplicaProfile(base, a, max_batched_tokens=budget, max_num_seqs=256, prefill_first=first)
    got = replicarates.prefill_rate_of(profile, x, o, base, w, a, d)
    tokens = 0.0 if budget is None else float(budget)
    assert got == tpottail.prefill_rate(x, o, base, w, a, d, budget is not None, tokens, first)


def test_a_subnormal_wait_budget_sizes_within_the_limit_not_an_overflow() -> None:
    """Hypothesis's find (CI, session 44): one-token prompts against a 0.2 s target leave a wait
    budget of idle misses of ~4e-315, and the light-traffic count's ratio offered·residual/budget
    overflowed math.ceil. It is held under capacity.MOST_REPLICAS, and the count is within the limit."""
    profile = ReplicaProfile(
        step_base_s=0.056640625,
        prefill_s_per_token=1e-05,
        prefill_s_per_attention_pair=8.85e-09,
        decode_s_per_request=0.0003062183418536673,
        decode_s_per_context_token=0.0,
        max_batched_tokens=8192,
        max_num_seqs=256,
    )
    slo = SloTarget(ttft_s=0.203125, tpot_s=None, attainment=0.9)
    demand = Demand(2.0, 2.0, 4000.0)
    got = capacity.size(profile, slo, demand, 0.5, 1, service_cv2=1.7, lengths_cv2=2.5)
    assert got.replicas == 1
    assert 1 < capacity.size(profile, slo, demand, 0.5, 7, service_cv2=1.7, lengths_cv2=2.5).replicas <= 7
