"""The start-up phases, weight tiers, caches and the load gate (autoscaler/policy/startup.py), through
the cold-start model's breakdown (coldstart.predict_ready) and the machine itself.

Every expected time is worked out by hand in the case's comment: phases are fixed times or loads
at rates that are constant between events, so each number is a few additions and divisions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

import pytest

from autoscaler.policy.coldstart import lead_time_s, predict_ready, project_ready
from autoscaler.policy.nodecache import NodeCache
from autoscaler.policy.spec import ColdStartSpec, CompileCache, GateScope
from autoscaler.policy.startphase import StartPhase
from autoscaler.policy.startup import Startups

SEED = ColdStartSpec(weights_gb=140, storage_gbps=10, gpus_per_replica=4, gpus_per_node=8)


def ready(spec: ColdStartSpec, k: int, **cluster: object) -> list[float]:
    return [r.ready_s for r in predict_ready(spec, k, **cluster)]  # type: ignore[arg-type]


# --- phases --------------------------------------------------------------------------------------


def test_every_phase_adds_up_in_the_breakdown() -> None:
    spec = replace(SEED, node_provision_s=90, image_pull_s=30, engine_init_s=20, compile_s=45, warmup_s=5)
    (r,) = predict_ready(spec, 1)
    # 90 node + 30 pull + 20 init, then 140 GB alone at 10 GB/s, a 45 s compile (cold cache), 5 s
    assert (r.provision_s, r.pull_s, r.init_s, r.gate_wait_s) == (90, 30, 20, 0)
    assert (r.load_start_s, r.load_s, r.tier, r.compile_s, r.compile_hit, r.warmup_s) == (
        140,
        14,
        "shared",
        45,
        False,
        5,
    )
    assert r.ready_s == 90 + 30 + 20 + 14 + 45 + 5


def test_the_defaults_are_the_plain_shared_storage_model() -> None:
    # no init, no compile, no cache, no gate: the seed's 14 s alone and 112 s for eight
    assert ready(SEED, 1) == [14.0]
    assert ready(SEED, 8) == [112.0] * 8


# --- the compile cache ---------------------------------------------------------------------------

COMPILING = replace(SEED, compile_s=45, compile_cached_s=8)


@pytest.mark.parametrize(
    ("cache", "cluster", "expected"),
    [
        pytest.param(CompileCache.NONE, {"compile_cache_warm": True}, 14 + 45, id="no cache: always 45 s"),
        pytest.param(CompileCache.CLUSTER, {}, 14 + 45, id="shared cache, empty: a miss"),
        pytest.param(
            CompileCache.CLUSTER, {"compile_cache_warm": True}, 14 + 8, id="shared cache, filled: 8 s"
        ),
        pytest.param(
            CompileCache.NODE,
            {"free_gpus_per_node": (4,), "image_cached_nodes": (0,), "compile_cached_nodes": (0,)},
            14 + 8,
            id="node cache on the node it lands on: 8 s",
        ),
        pytest.param(
            CompileCache.NODE, {"compile_cache_warm": True}, 14 + 45, id="node cache, new node: a miss"
        ),
    ],
)
def test_compile_cache_hit_or_miss(cache: CompileCache, cluster: dict[str, object], expected: float) -> None:
    assert ready(replace(COMPILING, compile_cache=cache), 1, **cluster) == [expected]


def test_a_shared_compile_cache_fills_with_the_first_compile() -> None:
    # behind a one-slot gate the loads end at 14, 28, 42, ...; replica 0 compiles 14-59 (miss) and
    # fills the cache; replicas whose compile starts before 59 miss too (28, 42, 56: each + 45),
    # from 70 on they hit (+ 8)
    spec = replace(COMPILING, compile_cache=CompileCache.CLUSTER, max_concurrent_loads=1)
    rows = [(r.compile_hit, r.ready_s) for r in predict_ready(spec, 6)]
    assert rows == [(False, 59), (False, 73), (False, 87), (False, 101), (True, 78), (True, 92)]


def test_a_node_compile_cache_is_per_node() -> None:
    # two replicas on one new node compile together: both miss; later ones on that node would hit
    spec = replace(COMPILING, compile_cache=CompileCache.NODE)
    rows = [(r.node, r.compile_hit, r.ready_s) for r in predict_ready(spec, 2)]
    assert rows == [(0, False, 28 + 45), (0, False, 28 + 45)]  # 2 share 10 GB/s: 28 s each


# --- weight tiers --------------------------------------------------------------------------------

CACHED = replace(SEED, local_cache_gbps=20)


def test_a_node_cache_serves_its_weights_at_the_local_speed() -> None:
    (r,) = predict_ready(CACHED, 1, free_gpus_per_node=(4,), image_cached_nodes=(0,), weights_cached=(0,))
    assert (r.tier, r.from_cache, r.load_s, r.load_wait_s) == ("cache", True, 7.0, 0.0)  # 140 / 20


def test_a_shared_load_fills_the_node_cache_for_the_next_replica() -> None:
    # one slot: replica 0 reads shared storage 0-14 and writes the node's cache; replica 1, on the
    # same node, gets the slot at 14 and reads the cache: 140 / 20 = 7 s, ready at 21
    spec = replace(CACHED, max_concurrent_loads=1)
    rows = [(r.node, r.tier, r.ready_s) for r in predict_ready(spec, 2)]
    assert rows == [(0, "shared", 14.0), (0, "cache", 21.0)]


def test_weights_larger_than_the_node_cache_are_never_kept() -> None:
    spec = replace(CACHED, max_concurrent_loads=1, node_cache_gb=100)  # 140 GB do not fit in 100
    rows = [(r.tier, r.ready_s) for r in predict_ready(spec, 2)]
    assert rows == [("shared", 14.0), ("shared", 28.0)]


def test_a_ready_replica_serves_its_weights_peer_to_peer() -> None:
    spec = replace(SEED, peer_gbps=35)
    (r,) = predict_ready(spec, 1, peer_sources=1)
    assert (r.tier, r.load_s) == ("peer", 4.0)  # 140 / 35, not sharing the storage
    # none ready: shared storage; behind one slot the second loads from the first once it is ready
    rows = [(r.tier, r.ready_s) for r in predict_ready(replace(spec, max_concurrent_loads=1), 2)]
    assert rows == [("shared", 14.0), ("peer", 18.0)]


# --- the load gate -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("slots", "expected"),
    [
        pytest.param(1, [14.0 * i for i in range(1, 9)], id="one slot: one after another, 14 s apart"),
        pytest.param(2, [28.0, 28.0, 56.0, 56.0, 84.0, 84.0, 112.0, 112.0], id="two: pairs at 5 GB/s"),
        pytest.param(8, [112.0] * 8, id="eight: all together at 112 s, as without a gate"),
    ],
)
def test_gate_staggers_eight_loads(slots: int, expected: list[float]) -> None:
    rows = predict_ready(replace(SEED, max_concurrent_loads=slots), 8)
    assert [r.ready_s for r in rows] == pytest.approx(expected)
    # each load shares the storage with slots - 1 others: 14 x slots seconds, the rest is waiting
    assert [r.gate_wait_s for r in rows] == pytest.approx([e - 14.0 * slots for e in expected])


def test_gate_scope_startup_holds_the_slot_until_ready() -> None:
    spec = replace(SEED, engine_init_s=10, warmup_s=5, max_concurrent_loads=1)
    # load scope: both init 0-10; replica 0 loads 10-24 (ready 29), replica 1 waits 10-24, loads
    # 24-38, ready 43
    assert ready(spec, 2) == [29.0, 43.0]
    # startup scope: replica 1 waits for the slot until replica 0 is ready (29), then init, load
    # and warm-up: 29 + 10 + 14 + 5 = 58
    rows = predict_ready(replace(spec, load_gate_scope=GateScope.STARTUP), 2)
    assert [(r.gate_wait_s, r.init_s, r.load_start_s, r.ready_s) for r in rows] == [
        (0, 10, 10, 29),
        (29, 10, 39, 58),
    ]


def test_loaders_in_progress_hold_gate_slots() -> None:
    # one slot held by a loader with 70 GB to go (7 s alone): the new replica loads 7-21
    (r,) = predict_ready(replace(SEED, max_concurrent_loads=1), 1, loading_remaining_gb=(70.0,))
    assert (r.gate_wait_s, r.load_s, r.ready_s) == (7.0, 14.0, 21.0)


def test_a_load_about_to_begin_shares_the_storage_from_when_it_begins() -> None:
    # 140 GB at 10 GB/s; another replica's load begins at 7 s: ours reads alone 0-7 (70 GB), then
    # both at 5 GB/s: ours has 70 GB left, 14 s more (ready 21); the other 70 GB by 21, then 7 s
    # alone at 10 GB/s. Counted as begun now, both would have shared from 0 and been ready at 28
    (r,) = predict_ready(SEED, 1, upcoming_loads_s=(7.0,))
    assert (r.load_start_s, r.load_s, r.load_wait_s, r.ready_s) == (0.0, 21.0, 7.0, 21.0)
    assert ready(SEED, 1, loading_remaining_gb=(140.0,)) == [28.0]


def test_a_load_about_to_begin_takes_the_gate_ahead_of_replicas_started_after_it() -> None:
    # one slot, held by a loader with 70 GB left (free at 7 s); a replica already starting begins
    # its load at 7 s (its wait at the gate is in the caller's projection). Ours reached the gate
    # at 0, but was started after it: it loads 21-35. Had ours gone first, 7-21
    gated = replace(SEED, max_concurrent_loads=1)
    (r,) = predict_ready(gated, 1, loading_remaining_gb=(70.0,), upcoming_loads_s=(7.0,))
    assert (r.gate_wait_s, r.load_start_s, r.ready_s) == (21.0, 21.0, 35.0)
    # a slot free when ours arrives is ours: it loads 0-14 alone, the other waits for it; with two
    # slots the other joins at 7 and both share the storage 7-21
    (alone,) = predict_ready(gated, 1, upcoming_loads_s=(7.0,))
    assert (alone.gate_wait_s, alone.ready_s) == (0.0, 14.0)
    (shared,) = predict_ready(replace(SEED, max_concurrent_loads=2), 1, upcoming_loads_s=(7.0,))
    assert (shared.gate_wait_s, shared.ready_s) == (0.0, 21.0)


def test_a_load_about_to_begin_reads_shared_storage_whatever_ours_reads() -> None:
    # a ready peer serves ours at 20 GB/s (0-7 s); the load the caller told of, at 2 s, is a shared
    # one (the caller lists only those): 14 s at 10 GB/s, not the peer's 7
    m = Startups(replace(SEED, peer_gbps=20.0), peer_sources=1)
    m.add_upcoming(-1, 2.0)
    m.add_node(0, up_at=0.0, image=True)
    ours = m.start(0, 0)
    told = m.get(-1)
    assert told is not None
    m.run()
    assert (told.tier, told.entered[StartPhase.LOAD], told.entered[StartPhase.READY]) == ("shared", 2.0, 16.0)
    assert (ours.tier, ours.entered[StartPhase.LOAD], ours.entered[StartPhase.READY]) == ("peer", 0.0, 7.0)


def test_a_load_about_to_begin_behind_a_startup_gate_holds_its_slot_from_its_engine_init() -> None:
    # startup scope, one slot, a 10 s engine init: the replica told to load at 15 s reaches the
    # gate at 5 (its init 5-15) and holds the slot to ready (load 15-29). Ours reaches it at 0,
    # first: init 0-10, load 10-24
    spec = replace(SEED, engine_init_s=10, max_concurrent_loads=1, load_gate_scope=GateScope.STARTUP)
    (r,) = predict_ready(spec, 1, upcoming_loads_s=(15.0,))
    assert (r.gate_wait_s, r.ready_s) == (0.0, 24.0)
    # behind an 8 s pull ours reaches it at 8, second: the slot at 29, init 29-39, load 39-53
    late = replace(spec, image_pull_s=8.0)
    (r,) = predict_ready(late, 1, upcoming_loads_s=(15.0,))
    assert (r.gate_wait_s, r.load_start_s, r.ready_s) == (21.0, 39.0, 53.0)


def test_loads_about_to_begin_are_checked() -> None:
    with pytest.raises(ValueError, match=r"upcoming_loads_s\[1\]"):
        predict_ready(SEED, 1, upcoming_loads_s=(3.0, float("nan")))


def test_gate_is_first_come_first_served_with_ties_in_start_order() -> None:
    spec = replace(SEED, max_concurrent_loads=1, image_pull_s=5, engine_init_s=10)
    m = Startups(spec)
    m.add_node(0, up_at=5.0)  # no image: up at 5, pulls 5-10, reaches the gate at 10 (init 10 s more: 20)
    m.add_node(1, up_at=0.0, image=True)  # reaches the gate at 10 (init 0-10)
    m.add_node(2, up_at=0.0, image=True)
    late = m.start(0, 0)
    tie = m.start(1, 1)
    # started last but first at the gate: replica 2's init ends at 10, replica 1's too, replica 0's at 20
    m.advance(0.0)
    first = m.start(2, 2)
    m.run()
    # at 10 replicas 1 and 2 arrive together: the earlier started (1) loads first, 10-24; 2 24-38;
    # replica 0 arrived at 20 and waits for both: 38-52
    assert tie.entered[StartPhase.LOAD] == 10.0
    assert first.entered[StartPhase.LOAD] == 24.0
    assert late.entered[StartPhase.LOAD] == 38.0
    assert late.entered[StartPhase.READY] == 52.0


def test_gate_tie_holds_whatever_order_the_events_come_in() -> None:
    # both reach the gate at 10. Replica 0 (started first) gets there through two timers (its node
    # is up at 5, then a 5 s pull), replica 1 through one set at 0 (its node is up at 10), so
    # replica 1's event is processed first; the slot still goes to replica 0
    spec = replace(SEED, max_concurrent_loads=1, image_pull_s=5)
    m = Startups(spec)
    m.add_node(0, up_at=5.0)
    m.add_node(1, up_at=10.0, image=True)
    r0 = m.start(0, 0)
    r1 = m.start(1, 1)
    m.run()
    assert r0.entered[StartPhase.GATE] == r1.entered[StartPhase.GATE] == 10.0
    assert (r0.entered[StartPhase.LOAD], r1.entered[StartPhase.LOAD]) == (10.0, 24.0)


def test_a_cancelled_replica_frees_its_slot_at_once() -> None:
    m = Startups(replace(SEED, max_concurrent_loads=1))
    m.add_node(0, up_at=0.0, image=True)
    m.start(0, 0)
    waiting = m.start(1, 0)
    m.advance(7.0)
    m.cancel(0)  # 70 GB read, then deleted: replica 1 takes the slot and the whole bandwidth at 7
    m.run()
    assert (waiting.entered[StartPhase.LOAD], waiting.entered[StartPhase.READY]) == (7.0, 21.0)


def test_projection_leaves_the_machine_as_it_was() -> None:
    m = Startups(replace(SEED, max_concurrent_loads=1))
    m.add_node(0, up_at=0.0, image=True)
    for i in range(3):
        m.start(i, 0)
    m.advance(5.0)
    before = (m.version, m.shared_left_gb, m.now)
    assert project_ready(m) == {0: 14.0, 1: 28.0, 2: 42.0}
    assert (m.version, m.shared_left_gb, m.now) == before
    m.run()
    assert [s for s in m.starting()] == []


# --- the node cache ------------------------------------------------------------------------------


def test_node_cache_evicts_the_least_recently_used() -> None:
    cache = NodeCache(capacity_gb=300).filled("70b", 140).filled("8b", 16).filled("70b-fp8", 70)
    assert cache.used_gb == 226
    cache = cache.read("70b")  # 70b becomes the most recent: 8b is now the oldest
    cache = cache.filled("mixtral", 90)  # 316 > 300: evict 8b (16) -> 300
    assert [name for name, _ in cache.entries] == ["70b-fp8", "70b", "mixtral"]
    cache = cache.filled("405b", 810)  # larger than the whole cache: not kept, nothing evicted
    assert [name for name, _ in cache.entries] == ["70b-fp8", "70b", "mixtral"]
    cache = cache.filled("70b", 140)  # refreshed, not duplicated
    assert [name for name, _ in cache.entries] == ["70b-fp8", "mixtral", "70b"]
    assert not cache.holds("8b") and cache.holds("mixtral")


def test_unlimited_node_cache_keeps_everything() -> None:
    cache = NodeCache().filled("a", 1e6).filled("b", 1e6)
    assert cache.holds("a") and cache.holds("b") and cache.read("missing") is cache


def test_advancing_to_the_past_changes_nothing() -> None:
    m = Startups(SEED)
    m.add_node(0, up_at=0.0, image=True)
    m.start(0, 0)
    m.advance(7.0)
    m.advance(3.0)  # a caller's clock never goes back; if it did, the loads must not run backwards
    assert (m.now, m.shared_left_gb) == (7.0, [70.0])
    m.run()
    assert project_ready(m) == {}


def _finishes(run: Callable[[], object]) -> object:
    """`run()`'s result, or a failure if it has not returned within a minute (it used to loop)."""
    out: list[object] = []
    worker = threading.Thread(target=lambda: out.append(run()), daemon=True)
    worker.start()
    worker.join(60.0)
    assert out, "the start-up machine never returned"
    return out[0]


@pytest.mark.parametrize("storage_gbps", [3e6, 1e12])
def test_loads_of_microseconds_finish(storage_gbps: float) -> None:
    # 140 GB at 3e6 GB/s is 47 us: below a day's float resolution per step x the rate, the
    # service stepped by (at - now) x rate fell short of the target and no step advanced
    spec = replace(SEED, storage_gbps=storage_gbps)
    m = Startups(spec, now=86_400.0)
    m.add_node(0, up_at=0.0, image=True)
    m.add_node(1, up_at=0.0, image=True)
    for r in range(4):
        m.start(r, r // 2)
    ready_at = _finishes(lambda: project_ready(m))
    # four loaders together: each at storage / 4, all done at 4 x 140 / storage
    assert ready_at == pytest.approx({r: 86_400.0 + 4 * 140 / storage_gbps for r in range(4)}, abs=1e-9)
    # loaders already reading 1 GB and 50 GB, and one more from now: three share until the 1 GB is
    # in (3 x 1 GB), two until the 50 (2 x 49), the probe alone for its last 90: 191 GB of time
    lead = _finishes(lambda: lead_time_s(spec, loading_remaining_gb=[1.0, 50.0]))
    assert lead == pytest.approx(191 / storage_gbps, rel=1e-6)
    # reference-70b's phases before the load (90 s node, 30 s pull) and after it (30 s warm-up)
    slow = replace(spec, node_provision_s=90, image_pull_s=30, warmup_s=30)
    assert _finishes(lambda: lead_time_s(slow)) == pytest.approx(150 + 140 / storage_gbps, abs=1e-9)
