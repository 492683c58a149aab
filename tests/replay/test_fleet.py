"""Replica lifecycle: the shared-storage contention against the seed's 14 s / 112 s, node
provisioning, the image cache, GPU accounting and scale-down order."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy import coldstart
from autoscaler.policy.spec import ColdStartSpec, CompileCache, GateScope
from replay.fleet import Fleet
from replay.fleetrecords import Phase
from replay.profiles import REFERENCE_70B

# 140 GB at a shared 10 GB/s, nothing else in the way
BARE = ColdStartSpec(weights_gb=140.0, storage_gbps=10.0, gpus_per_replica=4, gpus_per_node=8)


def ready_times(fleet: Fleet) -> list[float]:
    return [r.ready_s for r in fleet.replicas if r.cold]


@pytest.mark.parametrize(
    ("k", "ready_s"),
    [
        pytest.param(1, 14.0, id="one loader alone: 140 / 10"),
        pytest.param(8, 112.0, id="eight share 10 GB/s: all at 8 x 140 / 10"),
    ],
)
def test_loaders_share_storage_as_the_seed_says(k: int, ready_s: float) -> None:
    fleet = Fleet(BARE, initial_ready=0, node_idle_remove_s=600)
    fleet.scale_to(k)
    fleet.advance(ready_s - 0.001)
    assert len(fleet.ready_ids) == 0
    fleet.advance(500.0)
    assert ready_times(fleet) == pytest.approx([ready_s] * k)
    assert len(fleet.ready_ids) == k


def test_loaders_that_come_and_go_follow_the_policy_core() -> None:
    # one starts at 0, a second at 7: the first reads 70 GB alone, then both run at 5 GB/s; the
    # first ends at 7 + 70/5 = 21 while the second has read 70 GB; its last 70 GB alone take 7 s
    fleet = Fleet(BARE, initial_ready=0, node_idle_remove_s=600)
    fleet.scale_to(1)
    fleet.advance(7.0)
    fleet.scale_to(2)
    fleet.advance(100.0)
    expected = coldstart.shared_load_finish_times([140.0, 140.0], [0.0, 7.0], storage_gbps=10.0)
    assert ready_times(fleet) == pytest.approx(list(expected))
    assert ready_times(fleet) == pytest.approx([21.0, 28.0])


def test_a_loader_deleted_midway_frees_its_bandwidth() -> None:
    # two from 0 at 5 GB/s each; at 7 s the newer one is deleted: the other has 105 GB left at 10 GB/s
    fleet = Fleet(BARE, initial_ready=0, node_idle_remove_s=600)
    fleet.scale_to(2)
    fleet.advance(7.0)
    assert fleet.scale_to(1) == (0, 1)
    fleet.advance(100.0)
    first, second = fleet.replicas
    assert first.ready_s == pytest.approx(7.0 + 105.0 / 10.0)
    assert second.phase == Phase.DELETED and second.deleted_s == 7.0
    assert np.isnan(second.ready_s)


def test_reference_70b_cold_cluster_matches_the_cold_start_model() -> None:
    # 8 replicas on a cold cluster: 4 new nodes (90 s), image pulls (30 s), a shared load, warm-up
    spec = REFERENCE_70B.cold_start
    fleet = Fleet(spec, initial_ready=0, node_idle_remove_s=600)
    fleet.scale_to(8)
    fleet.advance(1_000.0)
    predicted = [r.ready_s for r in coldstart.predict_ready(spec, 8)]
    assert ready_times(fleet) == pytest.approx(predicted)
    assert ready_times(fleet) == pytest.approx([90 + 30 + 112 + 30] * 8)
    assert len([n for n in fleet.nodes if not n.removed]) == 4


def test_image_is_pulled_once_per_node() -> None:
    # the first replica pulls on a new node; the second, later, lands on the same node: no pull
    spec = replace(BARE, image_pull_s=30.0)
    fleet = Fleet(spec, initial_ready=0, node_idle_remove_s=600)
    fleet.scale_to(1)
    fleet.advance(100.0)
    fleet.scale_to(2)
    fleet.advance(300.0)
    first, second = fleet.replicas
    assert first.ready_s == pytest.approx(30.0 + 14.0)
    assert second.ready_s == pytest.approx(100.0 + 14.0)
    assert first.node == second.node


def test_replica_on_a_full_cluster_waits_for_a_new_node() -> None:
    spec = replace(BARE, node_provision_s=90.0)
    fleet = Fleet(spec, initial_ready=2, node_idle_remove_s=600)  # one full node (2 x 4 GPUs)
    fleet.scale_to(3)
    new = fleet.replicas[2]
    assert new.phase == Phase.PROVISIONING and np.isnan(new.scheduled_s)
    fleet.advance(200.0)
    assert new.scheduled_s == 90.0
    assert new.ready_s == pytest.approx(90.0 + 14.0)


def test_gpus_are_held_from_scheduling_to_deletion_loading_included() -> None:
    spec = replace(BARE, node_provision_s=90.0)
    fleet = Fleet(spec, initial_ready=0, node_idle_remove_s=600)
    fleet.scale_to(1)
    fleet.advance(100.0)  # scheduled at 90 (node up), still loading
    fleet.scale_to(0)  # not ready: deleted at once
    fleet.advance(200.0)
    assert fleet.gpu_seconds(200.0) == pytest.approx(4 * (100.0 - 90.0))
    assert fleet.replica_seconds(200.0) == pytest.approx(100.0)


def test_scale_down_removes_unready_first_then_drains_the_newest_ready() -> None:
    fleet = Fleet(BARE, initial_ready=3, node_idle_remove_s=600)
    fleet.advance(10.0)
    fleet.scale_to(4)  # one loading
    assert fleet.scale_to(2) == (0, 2)
    phases = [r.phase for r in fleet.replicas]
    assert phases == [Phase.READY, Phase.READY, Phase.DRAINING, Phase.DELETED]
    # the draining replica still has 3 requests in flight: it stays until they finish
    fleet.finish_draining(np.array([0, 0, 3, 0]))
    draining = fleet.replicas[2]
    assert [r.phase for r in fleet.replicas][2] == Phase.DRAINING
    assert fleet.ready_ids.tolist() == [0, 1]
    fleet.advance(20.0)
    # its last request finished at 17 s: deleted then, not when the loop noticed
    fleet.finish_draining(np.array([0, 0, 0, 0]), lambda replica: 17.0)
    assert [r.phase for r in fleet.replicas][2] == Phase.DELETED
    assert draining.deleted_s == 17.0


def test_idle_node_is_removed_and_the_next_replica_provisions_again() -> None:
    spec = replace(BARE, node_provision_s=90.0, image_pull_s=30.0)
    fleet = Fleet(spec, initial_ready=1, node_idle_remove_s=600)
    fleet.scale_to(0)
    fleet.finish_draining(np.array([0]))
    fleet.advance(700.0)
    assert fleet.nodes[0].removed
    fleet.scale_to(1)
    fleet.advance(2_000.0)
    assert fleet.replicas[1].ready_s == pytest.approx(700.0 + 90.0 + 30.0 + 14.0)


def test_predicted_ready_at_uses_the_cold_start_arithmetic_without_future_starts() -> None:
    fleet = Fleet(BARE, initial_ready=0, node_idle_remove_s=600)
    fleet.scale_to(2)
    fleet.advance(7.0)
    # both loading since 0 at 5 GB/s: 105 GB left each, together at 10 GB/s -> 7 + 21 = 28
    assert fleet.predicted_ready_at() == pytest.approx((28.0, 28.0))


def test_lead_time_follows_the_cluster_state() -> None:
    # one full warm node: a new replica needs a node, the image, the weights alone and warm-up
    spec = REFERENCE_70B.cold_start
    fleet = Fleet(spec, initial_ready=2, node_idle_remove_s=600)
    assert fleet.lead_time_s() == pytest.approx(90 + 30 + 14 + 30)
    fleet.scale_to(3)
    for now, left_gb in ((120.0, 140.0), (127.0, 70.0)):  # node up at 90, image at 120, then loading
        fleet.advance(now)
        assert fleet.loading_remaining_gb == pytest.approx([left_gb])
        # the second node has room and the image: the next replica shares the storage with the loader
        expected = coldstart.lead_time_s(
            spec, free_gpus_per_node=[0, 4], image_cached_nodes={0, 1}, loading_remaining_gb=[left_gb]
        )
        assert fleet.lead_time_s() == pytest.approx(expected)
    assert expected == pytest.approx(2 * 70 / 10 + 70 / 10 + 30)  # both at 5 GB/s, then alone at 10


# --- the load gate, the tiers and the compile cache in the simulated cluster ---------------------


@pytest.mark.parametrize(
    ("slots", "expected"),
    [
        pytest.param(1, [14.0 * i for i in range(1, 9)], id="N=1: one after another, 14 s apart"),
        pytest.param(8, [112.0] * 8, id="N=8: all together at 112 s"),
    ],
)
def test_load_gate_staggers_eight_replicas(slots: int, expected: list[float]) -> None:
    fleet = Fleet(replace(BARE, max_concurrent_loads=slots), initial_ready=0, node_idle_remove_s=600)
    fleet.scale_to(8)
    assert fleet.predicted_ready_at() == pytest.approx(expected)
    fleet.advance(13.0)
    assert [r.phase for r in fleet.replicas].count(Phase.GATED) == 8 - slots
    fleet.advance(500.0)
    assert sorted(ready_times(fleet)) == pytest.approx(expected)


def test_a_node_cache_and_the_compile_cache_make_the_second_start_fast() -> None:
    # a warm replica's node holds the weights (20 GB/s) and the shared compile cache is filled:
    # a replica on its free half loads 140 / 20 = 7 s and compiles from the cache in 8 s
    spec = replace(
        BARE, local_cache_gbps=20, compile_s=45, compile_cached_s=8, compile_cache=CompileCache.CLUSTER
    )
    fleet = Fleet(spec, initial_ready=1, node_idle_remove_s=600)
    assert fleet.lead_time_s() == pytest.approx(7 + 8)
    fleet.scale_to(2)
    fleet.advance(100.0)
    assert fleet.replicas[1].ready_s == pytest.approx(15.0)
    # a third needs a new node: shared storage (14 s), still a compile-cache hit
    fleet.scale_to(3)
    fleet.advance(300.0)
    assert fleet.replicas[2].ready_s == pytest.approx(100 + 14 + 8)


def test_ready_replicas_serve_weights_peer_to_peer_until_they_drain() -> None:
    spec = replace(BARE, peer_gbps=35)
    fleet = Fleet(spec, initial_ready=1, node_idle_remove_s=600)
    fleet.scale_to(2)
    fleet.advance(50.0)
    assert fleet.replicas[1].ready_s == pytest.approx(140 / 35)
    fleet.scale_to(0)  # both drain: no source left, the next loads from shared storage
    fleet.scale_to(1)
    fleet.advance(100.0)
    assert fleet.replicas[2].ready_s == pytest.approx(50 + 14)


@st.composite
def fleet_case(draw: st.DrawFn) -> tuple[ColdStartSpec, int, list[tuple[float, int]]]:
    spec = ColdStartSpec(
        weights_gb=draw(st.sampled_from([0.0, 16.0, 140.0])),
        storage_gbps=draw(st.sampled_from([5.0, 10.0, 40.0])),
        per_loader_gbps=draw(st.sampled_from([None, 3.75])),
        local_cache_gbps=draw(st.sampled_from([None, 20.0])),
        image_pull_s=draw(st.sampled_from([0.0, 30.0])),
        warmup_s=draw(st.sampled_from([0.0, 5.0])),
        node_provision_s=draw(st.sampled_from([0.0, 90.0])),
        gpus_per_replica=draw(st.sampled_from([1, 4, 8])),
        engine_init_s=draw(st.sampled_from([0.0, 20.0])),
        compile_s=45.0,
        compile_cached_s=8.0,
        compile_cache=draw(st.sampled_from(list(CompileCache))),
        peer_gbps=draw(st.sampled_from([None, 45.0])),
        max_concurrent_loads=draw(st.sampled_from([None, 1, 3])),
        load_gate_scope=draw(st.sampled_from(list(GateScope))),
    )
    steps = draw(st.lists(st.tuples(st.floats(0, 60), st.integers(0, 12)), min_size=1, max_size=6))
    return spec, draw(st.integers(0, 3)), steps


@settings(max_examples=60, deadline=None)
@given(case=fleet_case())
def test_property_the_fleet_becomes_ready_when_the_model_projects(
    case: tuple[ColdStartSpec, int, list[tuple[float, int]]],
) -> None:
    # after any history of scaling, if nothing else changes, the replicas starting become ready
    # exactly when the policy core's projection said, and one more started now at the lead time
    spec, warm, steps = case

    def replay() -> Fleet:
        fleet = Fleet(spec, initial_ready=warm, node_idle_remove_s=120)
        t = 0.0
        for gap, desired in steps:
            t += gap
            fleet.advance(t)
            fleet.finish_draining(np.zeros(len(fleet.replicas), dtype=np.int64))
            fleet.scale_to(desired)
        return fleet

    fleet = replay()
    now = fleet.now
    projected = fleet.predicted_ready_at()
    starting = [r.id for r in fleet.starting()]
    fleet.advance(now + 10_000.0)
    assert sorted(fleet.replicas[i].ready_s for i in starting) == pytest.approx(list(projected))

    fleet = replay()
    lead = fleet.lead_time_s()
    fleet.scale_to(fleet.active_count + 1)
    fleet.advance(now + 10_000.0)
    assert fleet.replicas[-1].ready_s - now == pytest.approx(lead)


def test_upcoming_loads_are_the_load_starts_of_replicas_not_loading_yet() -> None:
    """Two replicas on a node without the image: both begin loading after the 30 s pull; once they
    do, they are loads in progress, no longer upcoming."""
    fleet = Fleet(replace(BARE, image_pull_s=30.0), initial_ready=0, node_idle_remove_s=600.0)
    fleet.scale_to(2)
    assert fleet.upcoming_loads_s() == (30.0, 30.0)
    fleet.advance(10.0)
    assert fleet.upcoming_loads_s() == (20.0, 20.0)
    fleet.advance(31.0)
    assert fleet.upcoming_loads_s() == ()
    assert len(fleet.loading_remaining_gb) == 2


def test_coming_nodes_are_the_nodes_on_their_way_with_their_room() -> None:
    """A replica of 4 GPUs on a new 8-GPU node (90 s): its node is on its way with 4 GPUs free; a
    second started 30 s later is bound there (the node then full); once up it is not coming."""
    fleet = Fleet(replace(BARE, node_provision_s=90.0), initial_ready=0, node_idle_remove_s=600.0)
    fleet.scale_to(1)
    assert fleet.coming_nodes() == ((90.0, 4),)
    fleet.advance(30.0)
    fleet.scale_to(2)
    assert fleet.coming_nodes() == ((60.0, 0),)
    assert {r.node for r in fleet.replicas} == {0}
    fleet.scale_to(3)
    assert fleet.coming_nodes() == ((60.0, 0), (90.0, 4))
    fleet.advance(90.0)
    assert fleet.coming_nodes() == ((30.0, 4),)
