"""The fused sizing (autoscaler/policy/flatsize.py), uncompiled and as the replay and the bench
compile it (replay/policies/sizekernel.py), gives burstsize.size's Sizing to the bit: every
league number depends on it. A shape it does not cover (a least-loaded router, gamma prompt
lengths) or an input the Python path raises on is sized by burstsize itself."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy import burstsize, flatkernel, flatsize, flattables, lengths, tailsearch
from autoscaler.policy.capacity import Demand, Sizing
from autoscaler.policy.capacityspec import ReplicaProfile, SloTarget
from replay.policies import sizekernel
from tests.test_sizer import profiles, slos

demands = st.builds(
    lambda r, p, o: Demand(r, r * p, r * o),
    st.one_of(st.floats(0.0, 300.0), st.sampled_from([0.0, 1e-7, 5e-324])),
    st.one_of(st.sampled_from([0.0, 1e-7, 1.0, 200.0, 1_000.0, 8_000.0]), st.floats(1.0, 20_000.0)),
    st.one_of(st.sampled_from([0.0, 1.0, 28.0, 200.0, 2_000.0]), st.floats(0.5, 4_000.0)),
)
covered = st.sampled_from(
    [{}, {"service_cv2": 1.7, "lengths_cv2": 1.0}, {"service_cv2": 0.2, "lengths_cv2": 1.0}]
)
KERNELS = {"python": flatkernel.PYTHON, "compiled": sizekernel.compiled()}


def _python(*args: object) -> Sizing:
    kernel = burstsize._flat
    burstsize.use(None)
    try:
        return burstsize.size(*args)  # type: ignore[arg-type]
    finally:
        burstsize.use(kernel)


def _same(got: Sizing, want: Sizing) -> None:
    assert type(got) is Sizing
    assert got.values()[:2] == want.values()[:2]
    for g, w in zip(got.values()[2:], want.values()[2:], strict=True):
        assert type(g) is float
        assert math.copysign(1.0, g) == math.copysign(1.0, w) and (g == w or (g != g and w != w)), (got, want)


@pytest.mark.parametrize("name", KERNELS)
@settings(max_examples=400, deadline=None)
@given(
    profile=profiles,
    slo=slos,
    need=demands,
    speed=st.sampled_from([0.5, 1.0, 1.3]),
    limit=st.sampled_from([1, 5, 64, 1_000_000]),
    spread=st.one_of(st.just(1.0), st.floats(0.5, 400.0)),
    shape=covered,
    hold=st.one_of(st.just(0.0), st.floats(0.0, 600.0)),
    lifetime_share=st.one_of(st.just(1.0), st.floats(0.0, 1.0), st.just(None)),
)
def test_the_fused_sizing_is_burstsize_size_to_the_bit(
    name: str,
    profile: ReplicaProfile,
    slo: SloTarget,
    need: Demand,
    speed: float,
    limit: int,
    spread: float,
    shape: lengths.Shape,
    hold: float,
    lifetime_share: float | None,
) -> None:
    kernel = KERNELS[name]
    # the requests in flight held at a share of the prompts' hold (None: at it)
    lifetime_hold = None if lifetime_share is None else hold * lifetime_share
    lasting = hold if lifetime_hold is None else lifetime_hold
    got = flatkernel.sizing(
        kernel, profile, slo, need, speed, limit, spread, shape.get("service_cv2", 1.0), hold, lasting
    )
    # a subnormal rate's hold, whose scale to the held rate is inf, is sized as no hold (it raised)
    want = _python(profile, slo, need, speed, limit, spread, shape, hold, lifetime_hold)
    assert got is not None
    _same(got, want)


@pytest.mark.parametrize(
    "shape", [{"least_loaded": True, "arrivals_index": 3.0}, {"lengths_cv2": 2.5}, {"outputs_cv2": 3.0}]
)
def test_an_uncovered_shape_is_sized_by_burstsize_itself(shape: lengths.Shape) -> None:
    profile, slo, need = (
        ReplicaProfile(step_base_s=0.02, prefill_s_per_token=1e-4),
        SloTarget(),
        Demand(20.0, 2e4, 4e3),
    )
    assert not burstsize._flat_covers(shape)
    assert burstsize._flat_covers({"service_cv2": 1.7, "lengths_cv2": 1.0, "outputs_cv2": 1.0})
    sizekernel.install()
    try:
        got = burstsize.size(profile, slo, need, 1.0, 100, 30.0, shape, 40.0, 25.0)
    finally:
        burstsize.use(None)
    _same(got, burstsize.size(profile, slo, need, 1.0, 100, 30.0, shape, 40.0, 25.0))


def test_an_input_the_python_path_raises_on_raises_it() -> None:
    profile, slo = ReplicaProfile(step_base_s=0.02, prefill_s_per_token=1e-4), SloTarget()
    need = Demand(math.inf, math.inf, 1.0)
    with pytest.raises((OverflowError, ValueError)):
        _python(profile, slo, need, 1.0, 100, 1.0, {}, 0.0)
    assert flatkernel.sizing(KERNELS["compiled"], profile, slo, need, 1.0, 100, 1.0, 1.0, 0.0, 0.0) is None
    sizekernel.install()
    try:
        with pytest.raises((OverflowError, ValueError)):
            burstsize.size(profile, slo, need, 1.0, 100, 1.0, {}, 0.0)
    finally:
        burstsize.use(None)


def test_the_tpot_rates_table_keeps_the_rate_of_the_key_in_its_slot() -> None:
    profile, slo = ReplicaProfile(step_base_s=0.02, prefill_s_per_token=1e-4), SloTarget()
    c = flattables.consts(profile, slo) + [0.0] * flattables.TABLE_FLOATS
    keys = [0] * flattables.KEYS
    want = tailsearch.tpot_rate(profile, 0.2, 0.01, 200.0, 100.0, 1.0)
    assert flattables.tpot_rate(c, keys, 0.01, 200.0, 100.0, 1.0) == want
    slot = next(i for i in range(flattables.TPOT_SLOTS) if keys[5 * i] == 1)
    c[flattables.FIELDS + slot] = -1.0  # a hit reads the table
    assert flattables.tpot_rate(c, keys, 0.01, 200.0, 100.0, 1.0) == -1.0
    keys[5 * slot + 1] += 1  # another key in the slot: worked out again
    assert flattables.tpot_rate(c, keys, 0.01, 200.0, 100.0, 1.0) == want


def test_the_ttft_searches_table_keeps_the_count_of_the_key_in_its_slot() -> None:
    profile, slo = ReplicaProfile(step_base_s=0.02, prefill_s_per_token=1e-4), SloTarget()
    c = flattables.consts(profile, slo) + [0.0] * flattables.TABLE_FLOATS
    keys = [0] * flattables.KEYS
    want = tailsearch.ttft_servers(12.0, 40.0, 0.01)
    assert flattables.ttft_servers(c, keys, 12.0, 40.0, 0.01) == want
    first, shares = 5 * flattables.TPOT_SLOTS, 5 * (flattables.TPOT_SLOTS + flattables.TTFT_SLOTS)
    at = next(i for i in range(first, shares, 5) if keys[i] == 1)
    keys[at + 4] = -1  # a hit reads the table
    assert flattables.ttft_servers(c, keys, 12.0, 40.0, 0.01) == -1
    keys[at + 1] += 1  # another key in the slot: searched again
    assert flattables.ttft_servers(c, keys, 12.0, 40.0, 0.01) == want
    assert flattables.ttft_servers(c, keys, 0.0, -1.0, 0.01) == tailsearch.ttft_servers(0.0, -1.0, 0.01)


def test_the_utilizations_table_serves_another_load_at_the_same_slack_and_tail() -> None:
    profile, slo = ReplicaProfile(step_base_s=0.02, prefill_s_per_token=1e-4), SloTarget()
    c = flattables.consts(profile, slo) + [0.0] * flattables.TABLE_FLOATS
    keys = [0] * flattables.KEYS
    assert flattables.ttft_servers(c, keys, 12.0, 40.0, 0.01) == tailsearch.split_servers(
        *(math.exp(round(math.log(x) * 256.0) / 256.0) for x in (12.0, 40.0, 0.01))
    )
    first = 5 * (flattables.TPOT_SLOTS + flattables.TTFT_SLOTS)
    (at,) = [i for i in range(first, flattables.KEYS, 3) if keys[i] == 1]
    slot = (at - first) // 3
    u = c[flattables.FIELDS + flattables.TPOT_SLOTS + slot]
    assert 0.0 < u < 1.0
    c[flattables.FIELDS + flattables.TPOT_SLOTS + slot] = 0.5  # a hit divides by the kept utilization
    assert flattables.ttft_servers(c, keys, 30.0, 40.0, 0.01) == 61  # its load's step: exp(871 / 256) = 30.03
    keys[at + 2] += 1  # another tail in the slot: searched again
    assert flattables.ttft_servers(c, keys, 31.0, 40.0, 0.01) == tailsearch.ttft_servers(31.0, 40.0, 0.01)
    assert c[flattables.FIELDS + flattables.TPOT_SLOTS + slot] == u
    # a tail of 1 or more fits any utilization below 1: floor(load) + 1, as split_servers counts
    assert flattables.ttft_servers(c, keys, 7.5, 40.0, 1.0) == tailsearch.split_servers(7.5, 40.0, 1.0) == 8


def test_a_count_past_an_int64_is_sized_by_burstsize_itself() -> None:
    profile, slo = ReplicaProfile(step_base_s=0.02, prefill_s_per_token=1e-4), SloTarget()
    need = Demand(1e21, 1e24, 1e23)
    want = _python(profile, slo, need, 1.0, 10**30, 1.0, {}, 0.0)
    assert want.replicas > 2**63
    assert flatkernel.sizing(KERNELS["compiled"], profile, slo, need, 1.0, 10**30, 1.0, 1.0, 0.0, 0.0) is None


def test_arguments_of_other_types_compile_no_other_copy_on_a_decision() -> None:
    profile, slo = ReplicaProfile(step_base_s=0.02, prefill_s_per_token=1e-4), SloTarget()
    need = Demand(20, 20_000, 4_000)  # ints: converted to the compiled floats, not compiled for
    got = flatkernel.sizing(KERNELS["compiled"], profile, slo, need, 1, 100, 30.0, 1.0, 0.0, 0.0)
    assert got is not None
    _same(got, _python(profile, slo, need, 1, 100, 30.0, {}, 0.0))
    assert flatkernel.sizing(KERNELS["compiled"], profile, slo, need, 1j, 100, 30.0, 1.0, 0.0, 0.0) is None
    # the kernel calls the one signature's entry point, which converts or raises, never compiles
    (signature,) = sizekernel._dispatcher.signatures
    assert KERNELS["compiled"].size is sizekernel._dispatcher.overloads[signature].entry_point


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("rate", [5e-324, 2.2e-311])
def test_a_subnormal_rate_with_a_hold_is_sized_as_no_hold(name: str, rate: float) -> None:
    """A restored state can carry a subnormal rate (hypothesis found 2.2e-311 beside a typical load
    at the idle bound): the hold's scale to the held rate, lasting / rate, is inf, and the held
    demand's mix NaN, which ended the decision in "cannot convert float NaN to integer". Its mix is
    no number to hold bursts at: both paths size the need alone, as an idle one."""
    profile, slo = ReplicaProfile(step_base_s=0.02, prefill_s_per_token=1e-4), SloTarget(ttft_s=2.0)
    need = Demand(rate, rate * 1_000.0, rate * 100.0)
    want = _python(profile, slo, need, 1.0, 64, 1.0, {}, 40.0, 25.0)
    assert (want.replicas, want.binding) == (0, "idle")
    got = flatkernel.sizing(KERNELS[name], profile, slo, need, 1.0, 64, 1.0, 1.0, 40.0, 25.0)
    assert got is not None
    _same(got, want)
    for shape in ({"least_loaded": True, "arrivals_index": 3.0}, {"lengths_cv2": 2.5}):  # the Python path's
        assert _python(profile, slo, need, 1.0, 64, 1.0, shape, 40.0, 25.0).binding == "idle"


@pytest.mark.parametrize("name", KERNELS)
def test_a_need_sized_at_two_holds_is_each_holds_sizing(name: str) -> None:
    """burstsize.size sizes a need at its steady hold, then at its lasting one: the second call
    reads the thinned sizing the first kept (flatsize._thinned_kept), and each is burstsize's."""
    kernel = KERNELS[name]
    profile, slo = ReplicaProfile(step_base_s=0.02, prefill_s_per_token=1e-4), SloTarget()
    needs = [Demand(20.0, 2e4, 4e3), Demand(20.0, 2e4, 4e3), Demand(35.0, 1e4, 9e3), Demand(0.0, 0.0, 0.0)]
    for need in needs:
        for spread, limit in ((30.0, 100), (30.0, 7), (4.0, 100)):
            for hold, lasting in ((60.0, 40.0), (40.0, 40.0), (0.0, 0.0), (60.0, 40.0)):
                got = flatkernel.sizing(kernel, profile, slo, need, 1.0, limit, spread, 1.0, hold, lasting)
                assert got is not None
                _same(got, _python(profile, slo, need, 1.0, limit, spread, {}, hold, lasting))
    sizekernel.install()
    try:  # a late curve's hold of 2 replicas under the steady count: sized again at the lasting hold
        got = burstsize.size(profile, slo, needs[0], 1.0, 100, 30.0, {}, 60.0, 40.0, 30.0)
    finally:
        burstsize.use(None)
    _same(got, _python(profile, slo, needs[0], 1.0, 100, 30.0, {}, 60.0, 40.0, 30.0))


def test_the_kept_thinned_sizing_is_read_for_the_same_inputs_alone() -> None:
    profile, slo = ReplicaProfile(step_base_s=0.02, prefill_s_per_token=1e-4), SloTarget()
    c = flattables.consts(profile, slo) + [0.0] * flattables.TABLE_FLOATS
    keys = [0] * flattables.KEYS
    args = (20.0, 2e4, 4e3, 1.0, 100, 30.0, 1.0)
    want = flatsize._thinned(c, keys, *args)
    assert flatsize._thinned_kept(c, keys, *args) == want
    at = flattables.KEPT_FLOATS
    assert c[at : at + 6] == [20.0, 2e4, 4e3, 1.0, 30.0, 1.0]
    assert keys[flattables.KEPT_KEYS : flattables.KEPT_KEYS + 2] == [1, 100]
    c[at + 6] = 999.0  # a hit reads what was kept
    assert flatsize._thinned_kept(c, keys, *args)[0] == 999
    assert flatsize._thinned_kept(c, keys, 20.0, 2e4, 4e3, 1.0, 99, 30.0, 1.0)[0] != 999  # another limit
    assert c[at + 6] == want[0] and keys[flattables.KEPT_KEYS + 1] == 99
    c[at + 6] = 999.0
    assert flatsize._thinned_kept(c, keys, 20.0, 2e4, 4e3, 1.0, 99, 30.0, 1.0 + 2**-52)[0] != 999
    # an input not positive is never kept (-0.0 equals 0.0, and its sizing may differ)
    zero = (0.0, 0.0, 0.0, 1.0, 100, 30.0, 1.0)
    assert flatsize._thinned_kept(c, keys, *zero) == flatsize._thinned(c, keys, *zero)
    assert c[at] == 20.0
