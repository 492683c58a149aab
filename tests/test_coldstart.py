"""The cold-start model (autoscaler/policy/coldstart.py, placement.py, storage.py); `infscale
coldstart` is tested in test_coldstart_cli.py.

Expected times are worked out by hand in each case's comment: rates are constant between
events, so every number is a few divisions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy.coldstart import (
    BYTE_GB,
    ColdStartInputError,
    Slot,
    advance_loads,
    check_spec,
    compiled_after,
    lead_time_s,
    loader_gbps,
    next_load_completion_s,
    place_replicas,
    predict_ready,
    shared_load_finish_times,
)
from autoscaler.policy.spec import ColdStartSpec, CompileCache
from autoscaler.policy.storage import loads_left_at

SEED = ColdStartSpec(weights_gb=140, storage_gbps=10)  # the seed: 140 GB, shared 10 GB/s


def assert_times(actual: tuple[float, ...], expected: tuple[float, ...]) -> None:
    """The one comparison for times: exact arithmetic up to float rounding."""
    assert len(actual) == len(expected), (actual, expected)
    assert actual == pytest.approx(expected, rel=1e-12, abs=1e-9), (actual, expected)


# --- the seed ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "ready_s"),
    [
        pytest.param(1, 14.0, id="alone: 140 GB / 10 GB/s = 14 s"),
        pytest.param(2, 28.0, id="two share: 140 / 5 = 28 s"),
        pytest.param(8, 112.0, id="eight share: 140 / 1.25 = 112 s each"),
    ],
)
def test_seed(k: int, ready_s: float) -> None:
    replicas = predict_ready(SEED, k)
    assert_times(tuple(r.ready_s for r in replicas), (ready_s,) * k)
    assert all(r.load_wait_s == pytest.approx(ready_s - 14.0) for r in replicas)


def test_seed_lead_time_is_the_single_replica_time() -> None:
    assert lead_time_s(SEED) == 14.0
    assert lead_time_s(SEED, loading_remaining_gb=(140.0,) * 7) == predict_ready(SEED, 8)[7].ready_s == 112.0


# --- shared storage ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sizes", "starts", "storage", "cap", "finish"),
    [
        pytest.param([140], None, 10, None, (14,), id="one loader alone"),
        pytest.param([140] * 8, None, 10, None, (112,) * 8, id="seed: eight together"),
        # alone 0-7 s reads 70; both at 5 GB/s: first's last 70 GB end at 21 s, when the second has
        # read 70 too; alone at 10 GB/s its last 70 GB take 7 s more
        pytest.param([140, 140], [0, 7], 10, None, (21, 28), id="second starts 7 s later"),
        # 3 at 2 GB/s: 10 GB done at 5 s; 2 at 3 GB/s: 10 more by 5 + 10/3; last 10 GB alone at 6
        pytest.param([10, 20, 30], None, 6, None, (5, 25 / 3, 10), id="sizes differ, survivors speed up"),
        # 0-1 s: 6 GB/s, L0 54 left; 1-2 s: 3 each, L0 51, L1 57; from 2 s: 2 each, L0 done at 27.5
        # with L1 6 and L2 9 left; at 3 each L1 done at 29.5 with L2 3 left, alone 0.5 s -> 30
        pytest.param([60, 60, 60], [0, 1, 2], 6, None, (27.5, 29.5, 30), id="three staggered by 1 s"),
        pytest.param([10, 10], [0, 5], 10, None, (1, 6), id="storage idle between loaders"),
        pytest.param([0, 10], [3, 0], 10, None, (3, 1), id="empty loader finishes as it starts"),
        pytest.param([140], None, 10, 4, (35,), id="cap binds alone: 140 / 4"),
        pytest.param([140, 140], None, 10, 4, (35, 35), id="cap binds for two: min(4, 5)"),
        pytest.param([140] * 8, None, 10, 4, (112,) * 8, id="cap slack for eight: min(4, 1.25)"),
        # alone at the 6 GB/s cap 0-10 s reads 60; then 5 each: first's 80 left end at 26 s,
        # when the second has read 80; its last 60 GB at the cap take 10 s
        pytest.param([140, 140], [0, 10], 10, 6, (26, 36), id="cap, then sharing, then cap"),
    ],
)
def test_shared_load_finish_times(
    sizes: list[float],
    starts: list[float] | None,
    storage: float,
    cap: float | None,
    finish: tuple[float, ...],
) -> None:
    assert_times(shared_load_finish_times(sizes, starts, storage_gbps=storage, per_loader_gbps=cap), finish)


@pytest.mark.parametrize(
    ("remaining", "dt", "cap", "left"),
    [
        # 3 at 10/3: the 10 GB one is done at 3 s, 10 GB served each; 2 at 5 GB/s for 2 s: 10 more
        pytest.param([140, 70, 10], 5, None, (120, 50, 0), id="one finishes inside the step"),
        pytest.param([140, 70], 0, None, (140, 70), id="zero step changes nothing"),
        pytest.param([140, 70], 1000, None, (0, 0), id="all finish inside the step"),
        pytest.param([10], 1, 4, (6,), id="cap binds"),
        pytest.param([], 3, None, (), id="nobody loading"),
    ],
)
def test_advance_loads(remaining: list[float], dt: float, cap: float | None, left: tuple[float, ...]) -> None:
    assert_times(advance_loads(remaining, dt, 10, cap), left)


@pytest.mark.parametrize(
    ("sizes", "starts", "at", "cap", "left"),
    [
        pytest.param([140, 140], [0, 7], 14, None, (35, 105), id="70 GB alone, then 35 GB each shared"),
        pytest.param([140, 140], [0, 7], 5, None, (90, 140), id="the second not begun"),
        pytest.param([140, 140], [0, 7], 28, None, (0, 0), id="both done"),
        pytest.param([140, 140], [0, 20], 24, None, (0, 100), id="the storage idle between them"),
        pytest.param([140, 140], [0, 0], 10, 2, (120, 120), id="the cap binds: 2 GB/s each"),
        pytest.param([], [], 3, None, (), id="nobody loading"),
    ],
)
def test_loads_left_at(
    sizes: list[float], starts: list[float], at: float, cap: float | None, left: tuple[float, ...]
) -> None:
    assert_times(loads_left_at(sizes, starts, at, storage_gbps=10, per_loader_gbps=cap), left)


@pytest.mark.parametrize(
    ("remaining", "cap", "seconds"),
    [
        pytest.param([], None, math.inf, id="nobody loading"),
        pytest.param([140, 70], None, 14, id="smallest first: 70 / 5"),
        pytest.param([140, 70], 2, 35, id="cap binds: 70 / 2"),
    ],
)
def test_next_load_completion(remaining: list[float], cap: float | None, seconds: float) -> None:
    assert next_load_completion_s(remaining, 10, cap) == seconds


def test_loader_gbps_is_fair_share_under_the_cap() -> None:
    assert (loader_gbps(8, 10), loader_gbps(2, 10, 4), loader_gbps(8, 10, 4)) == (1.25, 4, 1.25)


# --- placement -----------------------------------------------------------------------------------


def spec_of(**fields: Any) -> ColdStartSpec:
    return replace(SEED, **fields)


@dataclass(frozen=True)
class PlaceCase:
    spec: ColdStartSpec
    k: int
    free: tuple[int, ...]
    nodes: list[tuple[int, bool]]  # (node, new_node) per replica, in placement order
    image: tuple[int, ...] = ()
    weights: tuple[int, ...] = ()


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            PlaceCase(spec_of(gpus_per_replica=8), 1, free=(4, 4, 4, 4), nodes=[(4, True)]),
            id="16 idle GPUs as 4+4+4+4 hold no 8-GPU replica",
        ),
        pytest.param(
            PlaceCase(spec_of(gpus_per_replica=8), 1, free=(4, 8), nodes=[(1, False)]),
            id="a whole free node fits",
        ),
        pytest.param(
            PlaceCase(spec_of(gpus_per_replica=2), 1, free=(8, 2, 4), nodes=[(1, False)]),
            id="best fit: the fullest node that fits",
        ),
        pytest.param(
            PlaceCase(
                spec_of(gpus_per_replica=2),
                4,
                free=(8, 2, 4),
                nodes=[(1, False), (2, False), (2, False), (0, False)],
            ),
            id="best fit, filling node by node",
        ),
        pytest.param(
            PlaceCase(spec_of(image_pull_s=30), 1, free=(1, 1), image=(1,), nodes=[(1, False)]),
            id="node with the image first",
        ),
        pytest.param(
            PlaceCase(spec_of(local_cache_gbps=20), 1, free=(1, 1, 1), weights=(2,), nodes=[(2, False)]),
            id="node with the weights first",
        ),
        pytest.param(
            # image node: 0 + 140/10 = 14 s alone; weights node: 30 + 140/70 = 32 s
            PlaceCase(
                spec_of(image_pull_s=30, local_cache_gbps=70),
                1,
                free=(1, 1),
                weights=(0,),
                image=(1,),
                nodes=[(1, False)],
            ),
            id="cached image beats cached weights when the pull is slow",
        ),
        pytest.param(
            # image node: 14 s alone; weights node: 5 + 2 = 7 s
            PlaceCase(
                spec_of(image_pull_s=5, local_cache_gbps=70),
                1,
                free=(1, 1),
                weights=(0,),
                image=(1,),
                nodes=[(0, False)],
            ),
            id="cached weights beat cached image when the pull is quick",
        ),
        pytest.param(
            PlaceCase(
                spec_of(gpus_per_replica=4),
                6,
                free=(4, 8),
                nodes=[(0, False), (1, False), (1, False), (2, True), (2, True), (3, True)],
            ),
            id="overflow to new nodes, two 4-GPU replicas each",
        ),
        pytest.param(
            PlaceCase(spec_of(gpus_per_replica=3), 3, free=(), nodes=[(0, True), (0, True), (1, True)]),
            id="a new 8-GPU node holds 8 // 3 = 2",
        ),
        pytest.param(PlaceCase(SEED, 0, free=(8,), nodes=[]), id="nothing to place"),
    ],
)
def test_place_replicas(case: PlaceCase) -> None:
    slots = place_replicas(
        case.spec,
        case.k,
        free_gpus_per_node=case.free,
        image_cached_nodes=case.image,
        weights_cached=case.weights,
    )
    assert [(s.node, s.new_node) for s in slots] == case.nodes
    assert all(s == Slot(s.node, True, False, False) for s in slots if s.new_node)  # new nodes are cold


def test_replicas_no_up_node_fits_wait_for_a_node_on_its_way_before_new_ones() -> None:
    """Nodes on their way take the replicas no up node fits, the first up first (numbered after
    the up nodes in the order given), before new nodes (numbered after those): a full node, nodes
    up in 60 s and 30 s with room for one 4-GPU replica each and one up in 10 s with none."""
    spec = replace(SEED, node_provision_s=90.0, gpus_per_replica=4)
    coming = ((60.0, 4), (30.0, 4), (10.0, 0))
    got = predict_ready(spec, 4, free_gpus_per_node=(0,), coming_nodes=coming)
    assert [(r.node, r.new_node, r.provision_s) for r in got] == [
        (2, True, 30.0),
        (1, True, 60.0),
        (4, True, 90.0),
        (4, True, 90.0),
    ]
    # a load begins when its node is up: the first two load alone, 30-44 s and 60-74 s
    assert [r.ready_s for r in got[:2]] == [pytest.approx(44.0), pytest.approx(74.0)]
    with pytest.raises(ColdStartInputError, match="coming_nodes"):
        predict_ready(spec, 1, coming_nodes=((-1.0, 4),))


# --- the whole prediction ------------------------------------------------------------------------


def row(r: Any) -> tuple[object, ...]:
    return (r.node, r.new_node, r.provision_s, r.pull_s, r.from_cache, r.load_start_s, r.load_s, r.ready_s)


@pytest.mark.parametrize(
    ("spec", "k", "state", "rows"),
    [
        pytest.param(
            spec_of(image_pull_s=30, warmup_s=5),
            2,
            {"free_gpus_per_node": (1, 1), "image_cached_nodes": (0,)},
            # the cached node loads alone 0-14 s; the other pulls until 30 s, then loads alone
            [(0, False, 0, 0, False, 0, 14, 19), (1, False, 0, 30, False, 30, 14, 49)],
            id="image cached vs pulled",
        ),
        pytest.param(
            spec_of(local_cache_gbps=20),
            2,
            {"free_gpus_per_node": (1, 1), "weights_cached": (0,)},
            # 140 / 20 = 7 s locally; the shared loader is alone on the storage: 14 s
            [(0, False, 0, 0, True, 0, 7, 7), (1, False, 0, 0, False, 0, 14, 14)],
            id="local cache does not take shared bandwidth",
        ),
        pytest.param(
            spec_of(gpus_per_replica=8, node_provision_s=300, image_pull_s=60, warmup_s=45),
            1,
            {"free_gpus_per_node": (4, 4, 4, 4)},
            [(4, True, 300, 60, False, 360, 14, 419)],
            id="seed cluster: 4+4+4+4 free means a new node",
        ),
        pytest.param(
            SEED,
            1,
            {"loading_remaining_gb": (70,)},
            # both at 5 GB/s: the old one's 70 GB end at 14 s; the new one's last 70 GB alone, 7 s
            [(0, True, 0, 0, False, 0, 21, 21)],
            id="one loader already in progress",
        ),
        pytest.param(
            spec_of(image_pull_s=20, node_provision_s=100),
            8,
            {"free_gpus_per_node": (4,), "loading_remaining_gb": (300,)},
            # 0-20 s: the old loader alone reads 200 GB. From 20 s five at 2 GB/s: the old one is
            # done at 70 s, when the four have read 100 GB; their last 40 GB at 2.5 GB/s end at 86 s.
            # The new node's four start at 120 s on idle storage: 140 / 2.5 = 56 s, ready at 176 s.
            [(0, False, 0, 20, False, 20, 66, 86)] * 4 + [(1, True, 100, 20, False, 120, 56, 176)] * 4,
            id="staggered by pull and provisioning, with a loader in progress",
        ),
    ],
)
def test_predict_ready(
    spec: ColdStartSpec, k: int, state: dict[str, Any], rows: list[tuple[object, ...]]
) -> None:
    got = [row(r) for r in predict_ready(spec, k, **state)]
    assert got == [pytest.approx(expected) for expected in rows]
    assert lead_time_s(spec, **state) == pytest.approx(predict_ready(spec, 1, **state)[0].ready_s)


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param(spec_of(weights_gb=-1), "weights_gb", id="negative weights"),
        pytest.param(spec_of(weights_gb=math.nan), "weights_gb", id="NaN weights"),
        pytest.param(spec_of(storage_gbps=0), "storage_gbps", id="zero bandwidth"),
        pytest.param(spec_of(storage_gbps=math.inf), "storage_gbps", id="infinite bandwidth"),
        pytest.param(spec_of(per_loader_gbps=0), "per_loader_gbps", id="zero cap"),
        pytest.param(spec_of(local_cache_gbps=-5), "local_cache_gbps", id="negative cache speed"),
        pytest.param(spec_of(image_pull_s=-1), "image_pull_s", id="negative pull"),
        pytest.param(spec_of(warmup_s=math.nan), "warmup_s", id="NaN warm-up"),
        pytest.param(spec_of(node_provision_s=-1), "node_provision_s", id="negative provisioning"),
        pytest.param(spec_of(gpus_per_replica=0), "gpus_per_replica", id="no GPUs"),
        pytest.param(spec_of(gpus_per_replica=16), "gpus_per_replica", id="replica larger than a node"),
        pytest.param(spec_of(gpus_per_node=0), "gpus_per_node", id="empty node"),
        pytest.param(spec_of(engine_init_s=-1), "engine_init_s", id="negative init"),
        pytest.param(spec_of(compile_s=math.inf), "compile_s", id="endless compile"),
        pytest.param(spec_of(compile_cached_s=-1), "compile_cached_s", id="negative cached compile"),
        pytest.param(
            spec_of(compile_s=8, compile_cached_s=45), "compile_cached_s", id="hit slower than a miss"
        ),
        pytest.param(spec_of(compile_cache="disk"), "compile_cache", id="unknown compile cache"),
        pytest.param(spec_of(node_cache_gb=100), "node_cache_gb", id="capacity without a cache"),
        pytest.param(spec_of(local_cache_gbps=20, node_cache_gb=0), "node_cache_gb", id="zero capacity"),
        pytest.param(spec_of(peer_gbps=0), "peer_gbps", id="zero peer speed"),
        pytest.param(spec_of(max_concurrent_loads=0), "max_concurrent_loads", id="a gate with no slot"),
        pytest.param(spec_of(max_concurrent_loads=1.5), "max_concurrent_loads", id="half a slot"),
        pytest.param(spec_of(max_concurrent_loads=True), "max_concurrent_loads", id="a bool is not a count"),
        pytest.param(spec_of(load_gate_scope="pod"), "load_gate_scope", id="unknown gate scope"),
    ],
)
def test_bad_spec_names_the_field(spec: ColdStartSpec, field: str) -> None:
    with pytest.raises(ColdStartInputError) as caught:
        check_spec(spec)
    assert caught.value.field == field
    assert str(caught.value).startswith(field)
    with pytest.raises(ColdStartInputError):
        predict_ready(spec, 1)


@pytest.mark.parametrize(
    ("spec", "state", "field"),
    [
        pytest.param(SEED, {"k": -1}, "k", id="negative k"),
        pytest.param(SEED, {"free_gpus_per_node": (8, -1)}, "free_gpus_per_node[1]", id="negative free GPUs"),
        pytest.param(
            SEED,
            {"free_gpus_per_node": (8,), "image_cached_nodes": (1,)},
            "image_cached_nodes",
            id="image cache on an unknown node",
        ),
        pytest.param(
            SEED,
            {"free_gpus_per_node": (8,), "weights_cached": (0,)},
            "weights_cached",
            id="weights cached without a cache speed",
        ),
        pytest.param(
            SEED, {"loading_remaining_gb": (1, -3)}, "loading_remaining_gb[1]", id="negative remaining"
        ),
        pytest.param(
            SEED,
            {"free_gpus_per_node": (8,), "compile_cached_nodes": (0,)},
            "compile_cached_nodes",
            id="compile artifacts on a node without a node compile cache",
        ),
        pytest.param(SEED, {"peer_sources": -1}, "peer_sources", id="negative peers"),
    ],
)
def test_bad_state_names_the_argument(spec: ColdStartSpec, state: dict[str, Any], field: str) -> None:
    k = state.pop("k", 1)
    with pytest.raises(ColdStartInputError) as caught:
        predict_ready(spec, k, **state)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("call", "field"),
    [
        pytest.param(
            lambda: shared_load_finish_times([1, 2], [0], storage_gbps=1), "start_s", id="lengths differ"
        ),
        pytest.param(
            lambda: shared_load_finish_times([-1], storage_gbps=1), "sizes_gb[0]", id="negative size"
        ),
        pytest.param(
            lambda: shared_load_finish_times([1], [math.nan], storage_gbps=1), "start_s[0]", id="NaN start"
        ),
        pytest.param(
            lambda: shared_load_finish_times([1], storage_gbps=0), "storage_gbps", id="no bandwidth"
        ),
        pytest.param(lambda: advance_loads([1], -1, 10), "dt_s", id="negative step"),
    ],
)
def test_bad_loader_input_names_the_argument(call: Any, field: str) -> None:
    with pytest.raises(ColdStartInputError) as caught:
        call()
    assert caught.value.field == field


# --- properties ----------------------------------------------------------------------------------

sizes_st = st.lists(st.floats(0, 500, allow_nan=False), min_size=1, max_size=8)
rate_st = st.floats(0.5, 50)
cap_st = st.none() | st.floats(0.1, 50)


@st.composite
def loads_st(draw: st.DrawFn) -> tuple[list[float], list[float]]:
    sizes = draw(sizes_st)
    starts = draw(st.lists(st.floats(0, 100), min_size=len(sizes), max_size=len(sizes)))
    return sizes, starts


@settings(max_examples=150, deadline=None)
@given(loads=loads_st(), storage=rate_st, cap=cap_st)
def test_property_bandwidth_bounds(
    loads: tuple[list[float], list[float]], storage: float, cap: float | None
) -> None:
    sizes, starts = loads
    finish = shared_load_finish_times(sizes, starts, storage_gbps=storage, per_loader_gbps=cap)
    fastest = storage if cap is None else min(storage, cap)
    for size, start, done in zip(sizes, starts, finish, strict=True):
        # never faster than alone (and the cap), to the model's precision of one byte
        assert done - start >= (size - BYTE_GB) / fastest * (1 - 1e-9)
    # the storage cannot deliver all the bytes faster than its bandwidth
    assert max(finish) >= min(starts) + (sum(sizes) - len(sizes) * BYTE_GB) / storage * (1 - 1e-9)


def reference_finish_times(
    sizes: list[float], starts: list[float], storage: float, cap: float | None
) -> list[float]:
    """A deliberately naive oracle: keep every loader's bytes left, step from event to event."""
    left = list(sizes)
    finish = [math.nan] * len(sizes)
    t = min(starts)
    while any(math.isnan(f) for f in finish):
        active = [i for i in range(len(sizes)) if starts[i] <= t and math.isnan(finish[i])]
        for i in active:
            if left[i] <= BYTE_GB:
                finish[i] = t
        active = [i for i in active if math.isnan(finish[i])]
        later = [st for st in starts if st > t]
        if not active:
            if later:
                t = min(later)
            continue  # the loop ends once every loader has finished
        speed = min(storage / len(active), cap or math.inf)
        step = min(min(left[i] for i in active) / speed, min(later, default=math.inf) - t)
        for i in active:
            left[i] -= step * speed
        t += step
    return finish


@settings(max_examples=150, deadline=None)
@given(loads=loads_st(), storage=rate_st, cap=cap_st)
def test_property_matches_a_naive_simulation(
    loads: tuple[list[float], list[float]], storage: float, cap: float | None
) -> None:
    sizes, starts = loads
    fast = shared_load_finish_times(sizes, starts, storage_gbps=storage, per_loader_gbps=cap)
    slow = reference_finish_times(sizes, starts, storage, cap)
    # the two may disagree on which sub-byte remainder counts as done: one byte's time of slack
    byte_s = BYTE_GB / loader_gbps(len(sizes), storage, cap)
    for a, b in zip(fast, slow, strict=True):
        assert abs(a - b) <= byte_s + 1e-9 * max(1.0, b)


@settings(max_examples=150, deadline=None)
@given(sizes=sizes_st, storage=rate_st)
def test_property_no_cap_together_is_work_conserving(sizes: list[float], storage: float) -> None:
    finish = shared_load_finish_times(sizes, storage_gbps=storage)
    assert max(finish) == pytest.approx(sum(sizes) / storage, rel=1e-9, abs=len(sizes) * BYTE_GB / storage)


@settings(max_examples=150, deadline=None)
@given(loads=loads_st(), extra=st.tuples(st.floats(0, 500), st.floats(0, 100)), storage=rate_st, cap=cap_st)
def test_property_another_loader_never_speeds_anyone_up(
    loads: tuple[list[float], list[float]], extra: tuple[float, float], storage: float, cap: float | None
) -> None:
    sizes, starts = loads
    before = shared_load_finish_times(sizes, starts, storage_gbps=storage, per_loader_gbps=cap)
    after = shared_load_finish_times(
        [*sizes, extra[0]], [*starts, extra[1]], storage_gbps=storage, per_loader_gbps=cap
    )
    # a loader within a byte of done is done: up to one byte's time at the slowest rate early
    byte_s = BYTE_GB / loader_gbps(len(sizes) + 1, storage, cap)
    for old, new in zip(before, after, strict=False):
        assert new >= old - byte_s - 1e-9 * max(1.0, old)


@settings(max_examples=150, deadline=None)
@given(remaining=sizes_st, dt=st.floats(0, 200), storage=rate_st, cap=cap_st)
def test_property_advance_then_finish_matches_one_schedule(
    remaining: list[float], dt: float, storage: float, cap: float | None
) -> None:
    """The replay's stepwise use (advance to an event, carry on) equals the one-shot schedule."""
    whole = shared_load_finish_times(remaining, storage_gbps=storage, per_loader_gbps=cap)
    left = advance_loads(remaining, dt, storage, cap)
    active = [i for i, gb in enumerate(left) if gb > 0]
    rest = shared_load_finish_times([left[i] for i in active], storage_gbps=storage, per_loader_gbps=cap)
    for i, done in zip(active, rest, strict=True):
        assert dt + done == pytest.approx(whole[i], rel=1e-9, abs=1e-6)
    for i, gb in enumerate(left):
        if gb == 0:
            assert whole[i] <= dt * (1 + 1e-9) + 1e-6


@st.composite
def cluster_st(draw: st.DrawFn) -> tuple[ColdStartSpec, dict[str, Any]]:
    node_gpus = draw(st.sampled_from([1, 2, 4, 8]))
    spec = ColdStartSpec(
        weights_gb=draw(st.floats(0, 500)),
        storage_gbps=draw(rate_st),
        per_loader_gbps=draw(cap_st),
        local_cache_gbps=draw(st.none() | rate_st),
        image_pull_s=draw(st.floats(0, 120)),
        warmup_s=draw(st.floats(0, 120)),
        node_provision_s=draw(st.floats(0, 600)),
        gpus_per_replica=draw(st.integers(1, node_gpus)),
        gpus_per_node=node_gpus,
    )
    free = draw(st.lists(st.integers(0, node_gpus), max_size=5))
    nodes = st.lists(st.integers(0, len(free) - 1), max_size=len(free)) if free else st.just([])
    state = {
        "free_gpus_per_node": tuple(free),
        "image_cached_nodes": tuple(draw(nodes)),
        "weights_cached": tuple(draw(nodes)) if spec.local_cache_gbps is not None else (),
        "loading_remaining_gb": tuple(draw(st.lists(st.floats(0, 500), max_size=3))),
    }
    return spec, state


@settings(max_examples=100, deadline=None)
@given(cluster=cluster_st(), k=st.integers(1, 8))
def test_property_ready_times_non_decreasing_in_k(
    cluster: tuple[ColdStartSpec, dict[str, Any]], k: int
) -> None:
    spec, state = cluster
    fewer = predict_ready(spec, k, **state)
    more = predict_ready(spec, k + 1, **state)
    loaders = k + 1 + len(state["loading_remaining_gb"])
    byte_s = BYTE_GB / loader_gbps(loaders, spec.storage_gbps, spec.per_loader_gbps)  # see BYTE_GB

    def slack(t: float) -> float:
        return byte_s + 1e-9 * max(1.0, t)

    for a, b in zip(fewer, more, strict=False):
        assert b.ready_s >= a.ready_s - slack(a.ready_s)  # the same replica, one more competitor
    last = max(r.ready_s for r in fewer)
    assert max(r.ready_s for r in more) >= last - slack(last)
    for r in more:  # the breakdown adds up
        assert r.load_start_s == r.provision_s + r.pull_s
        assert r.ready_s == pytest.approx(r.provision_s + r.pull_s + r.load_s + r.warmup_s)
        assert r.load_wait_s >= 0


@settings(max_examples=150, deadline=None)
@given(loads=loads_st(), at=st.floats(0, 300), storage=rate_st, cap=cap_st)
def test_property_loads_left_at_agrees_with_the_finish_times(
    loads: tuple[list[float], list[float]], at: float, storage: float, cap: float | None
) -> None:
    """What is left at any time is what the one-shot schedule has still to serve then: nothing
    once a loader finished, something while it has not, all of it before it began."""
    sizes, starts = loads
    finish = shared_load_finish_times(sizes, starts, storage_gbps=storage, per_loader_gbps=cap)
    left = loads_left_at(sizes, starts, at, storage_gbps=storage, per_loader_gbps=cap)
    byte_s = BYTE_GB / loader_gbps(len(sizes), storage, cap)
    for size, start, done, gb in zip(sizes, starts, finish, left, strict=True):
        if at < start:
            assert gb == size
        elif at >= done + byte_s + 1e-9 * max(1.0, done):
            assert gb <= BYTE_GB
        elif at < done - byte_s - 1e-9 * max(1.0, done):
            assert gb > 0.0
        assert 0.0 <= gb <= size


def test_a_bool_gate_fails_even_after_the_equal_int_gate_passed() -> None:
    """True == 1 and hashes as 1: the remembered check must not take the one for the other."""
    check_spec(spec_of(max_concurrent_loads=1))
    with pytest.raises(ColdStartInputError) as caught:
        check_spec(spec_of(max_concurrent_loads=True))
    assert caught.value.field == "max_concurrent_loads"


@pytest.mark.parametrize(
    ("cache", "ran_on", "expected"),
    [
        (CompileCache.NONE, (0, 2), ((), False)),
        (CompileCache.NODE, (0, 2), ((0, 2), False)),
        (CompileCache.CLUSTER, (0, 2), ((), True)),
        (CompileCache.CLUSTER, (), ((), False)),  # nothing ran yet: the shared cache is empty
    ],
)
def test_the_compile_caches_replicas_leave_where_they_ran(
    cache: CompileCache, ran_on: tuple[int, ...], expected: tuple[tuple[int, ...], bool]
) -> None:
    """A replica compiled on its node: a node cache has it there, a cluster cache everywhere."""
    spec = replace(SEED, compile_s=40.0, compile_cached_s=5.0, compile_cache=cache)
    assert compiled_after(spec, ran_on) == expected
