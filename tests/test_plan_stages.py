"""The small planning modules: horizon, contention-aware scale-up, rent-or-buy, panic."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.policy import clusterview, horizon, panic, scaledown, scaleup
from autoscaler.policy.spec import ColdStartSpec, CompileCache

SEED = ColdStartSpec(weights_gb=140, storage_gbps=10)  # 14 s alone, 112 s each for 8 together
COLD = ((), (), (), (), (), ())  # a cluster without nodes: every replica on a new node
WARM = ((8, 8, 8, 8), (0, 1, 2, 3), (), (), (), ())  # four idle nodes with the image


# --- horizon -------------------------------------------------------------------------------------


def test_the_marginal_replica_waits_for_the_ones_before_it() -> None:
    assert clusterview.marginal_ready_s(SEED, 1, COLD) == pytest.approx(14.0)
    assert clusterview.marginal_ready_s(SEED, 8, COLD) == pytest.approx(112.0)
    busy = ((), (), (), (140.0,) * 7, (), ())  # seven loaders already at it
    assert clusterview.marginal_ready_s(SEED, 1, busy) == pytest.approx(112.0)


def test_the_horizon_is_the_ready_time_of_the_last_replica_needed_then() -> None:
    """4 more: 4 x 14 s of loads, and a 1 s gap between them (each starts at the first decision
    after the previous is done: 14 s loads, decisions every 15 s)."""
    h, n, rounds, _ = horizon.find(SEED, 2, 100, lambda t: 6, COLD, None)
    assert (h, n) == (pytest.approx(4 * 14.0 + 3 * 1.0), 6)
    assert rounds == 2
    assert horizon.find(SEED, 2, 100, lambda t: 6, COLD, None, period_s=7.0)[0] == pytest.approx(56.0)


def test_the_horizon_follows_the_staggers_own_schedule() -> None:
    """140 GB at 10 GB/s behind a 30 s pull and a 30 s warm-up, one replica a node. Started together
    the two loads share the storage from 30 to 58 s (both ready at 88 s); the stagger starts the
    second a decision later, a lower sum of ready times (loads 30-44 s and 45-59 s), and its pull
    and warm-up move with it: the marginal replica is ready at 89 s, and the horizon says so."""
    pulled = ColdStartSpec(weights_gb=140, storage_gbps=10, image_pull_s=30, warmup_s=30, gpus_per_replica=8)
    assert clusterview.marginal_ready_s(pulled, 2, COLD) == pytest.approx(88.0)
    assert scaleup.staggered_ready_s(pulled, 2, COLD, 15.0) == (pytest.approx(89.0), 2)
    assert horizon.find(pulled, 0, 10, lambda t: 2, COLD, None)[0] == pytest.approx(89.0)


def test_the_horizons_first_replica_is_on_the_staggers_exact_schedule() -> None:
    """140 GB at 2.5 GB/s (56 s a load), 90 s nodes, two replicas a node; one replica waits for a
    node up in 15 s. One more started now goes there and loads beside it: ready at 127 s, as the
    caller's own projection says, so the caller corrects nothing and 2 more are ready when the
    stagger has them, 183 s. The model said 112 s for the first when it counted the load about to
    begin as begun now, and the 15 s it took as the caller's correction was added to the
    stagger's; told when that load begins, it says 127 s too."""
    slow = ColdStartSpec(weights_gb=140, storage_gbps=2.5, node_provision_s=90, gpus_per_replica=4)
    waiting = ((0,), (0,), (), (), (15.0,), ((15.0, 4),))
    assert scaleup.staggered_ready_s(slow, 1, waiting, 15.0, at_once=True) == (pytest.approx(127.0), 1)
    assert clusterview.marginal_ready_s(slow, 1, waiting) == pytest.approx(127.0)
    assert scaleup.staggered_ready_s(slow, 2, waiting, 15.0)[0] == pytest.approx(183.0)
    assert horizon.find(slow, 0, 10, lambda t: 2, waiting, 127.0)[:2] == (pytest.approx(183.0), 2)
    assert horizon.find(slow, 0, 10, lambda t: 1, waiting, None)[0] == pytest.approx(127.0)


def test_a_node_with_the_image_ran_a_replica_that_compiled() -> None:
    """fast-load-70b's cold start without its node cache (140 GB at 3.75 GB/s a loader, 30 s pull and
    init, 55 s compile, 18 s cached, 5 s warm-up): six nodes with the image are full, one without
    has room, and a replica's load begins at 45 s. Ours: pull and init 0-60, load 60-97.3, a compile
    hit (the fleet's replicas filled the cluster cache), ready at 120.3 s; taken as cold, a miss:
    157.3 s. With a node-scope cache, the hit is on the node that ran a replica (the fastest, chosen
    first)."""
    fast = ColdStartSpec(
        weights_gb=140.0,
        storage_gbps=100.0,
        per_loader_gbps=3.75,
        image_pull_s=30.0,
        warmup_s=5.0,
        node_provision_s=90.0,
        gpus_per_replica=4,
        engine_init_s=30.0,
        compile_s=55.0,
        compile_cached_s=18.0,
        compile_cache=CompileCache.CLUSTER,
    )
    busy = ((0, 0, 0, 0, 0, 0, 4), tuple(range(6)), (), (), (45.0,), ())
    (r,) = clusterview.readiness(fast, 1, busy)
    assert (r.compile_hit, r.ready_s) == (True, pytest.approx(120.0 + 1 / 3))
    (r,) = clusterview.readiness(fast, 1, (busy[0], (), *busy[2:]))
    assert (r.compile_hit, r.ready_s) == (False, pytest.approx(157.0 + 1 / 3))
    node_scope = ColdStartSpec(
        weights_gb=140.0,
        storage_gbps=10.0,
        compile_s=55.0,
        compile_cached_s=18.0,
        compile_cache=CompileCache.NODE,
        gpus_per_replica=4,
    )
    (there,) = clusterview.readiness(node_scope, 1, ((4, 4), (1,), (), (), (), ()))
    assert (there.node, there.compile_hit, there.ready_s) == (1, True, pytest.approx(14.0 + 18.0))


def test_a_later_start_goes_to_the_node_an_earlier_one_is_waiting_for() -> None:
    """Two replicas a node, 90 s to provision, a 30 s pull: the stagger starts the first now. A
    decision later the second goes to the node the first is waiting for (the observation lists it
    on its way), where both loads begin when the pull ends at 120 s: held back another decision,
    its load would begin no later, so it starts; both are ready at 148 s. Told of no node on its
    way, the decision put it on a node of its own (its load from 135 s, alone) and started it."""
    provisioned = ColdStartSpec(
        weights_gb=140, storage_gbps=10, image_pull_s=30, node_provision_s=90, gpus_per_replica=4
    )
    assert scaleup.starts_now(provisioned, 2, COLD, 15.0)[0] == 1
    assert scaleup.staggered_ready_s(provisioned, 2, COLD, 15.0) == (pytest.approx(148.0), 2)
    waiting = ((), (), (), (), (105.0,), ((75.0, 4),))  # at 15 s
    assert scaleup.starts_now(provisioned, 1, waiting, 15.0)[0] == 1
    assert clusterview.readiness(provisioned, 1, waiting)[0].load_start_s == pytest.approx(105.0)
    assert clusterview.readiness(provisioned, 1, (*waiting[:5], ()))[0].load_start_s == pytest.approx(120.0)


def test_the_stagger_waits_for_the_loads_in_progress() -> None:
    """Seven loads of 140 GB at it, 98 s of storage: the next starts at the first decision after
    they are done (105 s, the eighth) and is ready at 119 s, not the 112 s of starting it now."""
    busy = ((), (), (), (140.0,) * 7, (), ())
    assert clusterview.marginal_ready_s(SEED, 1, busy) == pytest.approx(112.0)
    assert scaleup.staggered_ready_s(SEED, 1, busy, 15.0) == (pytest.approx(119.0), 8)


def test_a_load_written_through_to_a_node_cache_serves_the_next_from_it() -> None:
    """Two nodes hold the weights in their caches (5 s a read): 16 replicas of one GPU read them at
    once. Four more go to a new node: the first loads from the storage (14 s), the other three at
    the next decision, when that node's cache has the weights (15 + 5 s)."""
    cached = ColdStartSpec(weights_gb=140, storage_gbps=10, local_cache_gbps=28)
    nodes = ((8, 8), (0, 1), (0, 1), (), (), ())
    assert scaleup.staggered_ready_s(cached, 16, nodes, 15.0) == (pytest.approx(5.0), 1)
    assert scaleup.staggered_ready_s(cached, 20, nodes, 15.0) == (pytest.approx(20.0), 2)


def test_behind_a_load_gate_everything_starts_now_and_the_gate_paces_the_loads() -> None:
    gated = ColdStartSpec(weights_gb=140, storage_gbps=10, max_concurrent_loads=1)
    assert scaleup.staggered_ready_s(gated, 4, COLD, 15.0) == (pytest.approx(56.0), 1)


def test_pacing_is_the_storage_idle_between_loads_staggered_by_decisions() -> None:
    assert horizon.pacing_s(SEED, 15.0) == pytest.approx(1.0)
    assert horizon.pacing_s(ColdStartSpec(weights_gb=140, storage_gbps=2.5), 15.0) == pytest.approx(4.0)
    assert horizon.pacing_s(ColdStartSpec(weights_gb=16, storage_gbps=10), 15.0) == 0.0  # several a period
    gated = ColdStartSpec(weights_gb=140, storage_gbps=10, max_concurrent_loads=1)
    assert horizon.pacing_s(gated, 15.0) == 0.0  # the gate hands the slot on at once


def test_a_need_that_grows_with_the_horizon_is_followed_but_stops() -> None:
    """Need = 1 per 10 s of horizon: 14 s -> 2, 29 s -> 3, 44 s -> 5, 74 s -> 8, then the rounds stop
    (in the policy the damped forecast bounds the need whatever the horizon)."""
    h, n, rounds, _ = horizon.find(SEED, 0, 1000, lambda t: int(t // 10) + 1, COLD, None)
    assert (h, n, rounds) == (pytest.approx(74.0), 8, horizon.MAX_ROUNDS)


def test_the_lead_is_the_horizon_of_one_replica_whatever_is_asked() -> None:
    """find's lead, what the band is scored at, is its first horizon (its horizon where no more are
    needed): one replica started now, its ready time on this cluster (the caller's lead where it
    gives one), however many the need asks for."""
    for cluster, lead in (
        (COLD, None),
        (WARM, None),
        (((), (), (), (140.0,) * 7, (), ()), None),
        (COLD, 100.0),
    ):
        one = horizon.find(SEED, 0, 1000, lambda t: 0, cluster, lead)
        assert one[3] == one[0]
        many = horizon.find(SEED, 0, 1000, lambda t: 40, cluster, lead)
        assert many[3] == pytest.approx(one[0])
        assert many[0] > one[0]  # forty loads share the storage: the marginal one is later, the lead is not
    assert horizon.find(None, 1, 10, lambda t: 40, COLD, 30.0)[3] == 30.0
    assert horizon.find(None, 1, 10, lambda t: 40, COLD, None)[3] == 0.0


def test_room_caps_the_marginal_replica() -> None:
    h, n, _, _ = horizon.find(SEED, 2, 3, lambda t: 50, COLD, None)
    assert h == pytest.approx(3 * 14.0 + 2 * 1.0) and n == 50


def test_a_callers_lead_time_replaces_the_first_replicas_and_keeps_the_sharing() -> None:
    h, _, _, _ = horizon.find(SEED, 0, 10, lambda t: 3, COLD, 100.0)
    assert h == pytest.approx(100.0 + 3 * 14.0 - 14.0 + 2 * 1.0)


def test_without_a_cold_start_model_the_horizon_is_the_fixed_lead_time() -> None:
    assert horizon.find(None, 1, 10, lambda t: 4, COLD, 30.0) == (30.0, 4, 1, 30.0)


def test_recreating_a_released_replica_skips_provisioning_and_pull() -> None:
    full = ColdStartSpec(weights_gb=140, storage_gbps=10, image_pull_s=30, warmup_s=30, node_provision_s=90)
    assert horizon.recreate_s(full) == pytest.approx(14.0 + 30.0)
    cached = ColdStartSpec(weights_gb=140, storage_gbps=10, local_cache_gbps=28, warmup_s=30)
    assert horizon.recreate_s(cached) == pytest.approx(5.0 + 30.0)


def test_recreating_several_queues_them_on_the_storage() -> None:
    """Four released together come back one load after another (14 s each, decisions every 15 s):
    the last is ready after 3 x 15 s more than the first; from node caches they do not queue."""
    full = ColdStartSpec(weights_gb=140, storage_gbps=10, image_pull_s=30, warmup_s=30, node_provision_s=90)
    assert horizon.recreate_s(full, 4, 15.0) == pytest.approx(4 * 14.0 + 3 * 1.0 + 30.0)
    assert horizon.recreate_s(full, 40, 15.0) > horizon.recreate_s(full, 4, 15.0) + 500.0
    cached = ColdStartSpec(weights_gb=140, storage_gbps=10, local_cache_gbps=28, warmup_s=30)
    assert horizon.recreate_s(cached, 4, 15.0) == pytest.approx(5.0 + 30.0)


# --- contention-aware scale-up -------------------------------------------------------------------


def test_the_seed_starts_one_load_per_decision() -> None:
    """14 s alone, decisions every 15 s: starting the second now makes both wait 28 s."""
    k, why = scaleup.starts_now(SEED, 8, COLD, 15.0)
    assert k == 1 and "later decisions" in why


def test_a_load_gate_starts_everything_now() -> None:
    gated = ColdStartSpec(weights_gb=140, storage_gbps=10, max_concurrent_loads=2)
    assert scaleup.starts_now(gated, 8, COLD, 15.0) == (8, "the load gate staggers the loads")


def test_fast_storage_starts_everything_now() -> None:
    fast = ColdStartSpec(weights_gb=16, storage_gbps=100)  # 0.16 s alone
    assert scaleup.starts_now(fast, 8, COLD, 15.0)[0] == 8


def test_a_per_loader_cap_lets_that_many_load_at_full_speed() -> None:
    streamer = ColdStartSpec(weights_gb=140, storage_gbps=10, per_loader_gbps=2.5)  # 4 at full speed
    k, _ = scaleup.starts_now(streamer, 8, COLD, 15.0)
    assert 4 <= k <= 8


def test_replicas_on_nodes_with_the_weights_cached_start_at_once() -> None:
    cached = ColdStartSpec(weights_gb=140, storage_gbps=10, local_cache_gbps=28)
    nodes = ((8, 8), (0, 1), (0, 1), (), (), ())  # room for 2 replicas of 4 GPUs each... of 1 GPU: 16
    assert scaleup.starts_now(cached, 8, nodes, 15.0)[0] == 8


def test_loaders_in_progress_make_new_ones_wait() -> None:
    """Seven loads at it: a new one now would slow all seven; it starts once they are nearly done."""
    busy = ((), (), (), (140.0,) * 7, (), ())
    k, why = scaleup.starts_now(SEED, 4, busy, 15.0)
    assert k == 0 and "in progress" in why
    assert scaleup.starts_now(SEED, 4, ((), (), (), (20.0,), (), ()), 15.0)[0] == 1


def test_a_start_bound_for_a_node_on_its_way_is_held_only_where_holding_moves_its_load() -> None:
    """The demand-step property's draw (7.4 -> 14.8 req/s): 140 GB at 2.5 GB/s (56 s a load), 90 s
    nodes, two replicas a node; one replica waits for a node on its way, its load from when it is
    up. One more started now goes to that node and loads beside it. Up in 5 s: held a decision,
    its load begins 10 s later and the first has the storage alone meanwhile (sum of ready times
    224 s against 234 s), so it waits for the storage. Up in 15 s: held a decision, its load begins
    when the node is up all the same, so holding buys nothing and it starts. Told of no node on
    its way, the model put it on a node of its own (its load from 90 s, after the first's) and
    started it in both."""
    slow = ColdStartSpec(weights_gb=140, storage_gbps=2.5, node_provision_s=90, gpus_per_replica=4)
    for up, starts in ((5.0, 0), (15.0, 1)):
        waiting = ((0,), (0,), (), (), (up,), ((up, 4),))
        assert scaleup.starts_now(slow, 1, waiting, 15.0)[0] == starts
        assert scaleup.starts_now(slow, 1, (*waiting[:5], ()), 15.0)[0] == 1
    assert clusterview.marginal_ready_s(slow, 1, ((0,), (0,), (), (), (15.0,), ((15.0, 4),))) == 127.0
    assert clusterview.marginal_ready_s(slow, 1, ((0,), (0,), (), (), (15.0,), ())) == 146.0


def test_slow_setup_before_the_load_lets_more_start() -> None:
    """A 90 s node provisioning and 30 s pull overlap; only the 14 s loads are shared."""
    slow = ColdStartSpec(weights_gb=140, storage_gbps=10, image_pull_s=30, node_provision_s=90)
    k, _ = scaleup.starts_now(slow, 8, COLD, 15.0)
    assert k >= 1


# --- rent or buy ---------------------------------------------------------------------------------


def test_the_need_history_keeps_the_window_maximum_in_front() -> None:
    h: scaledown.NeedHistory = ()
    for t, n in [(0, 5), (10, 8), (20, 3), (30, 6), (40, 2)]:
        h = scaledown.remember(h, float(t), n, 100.0)
    assert h == ((10.0, 8), (30.0, 6), (40.0, 2))
    assert scaledown.recent_max(h, 40.0, 100.0) == 8
    assert scaledown.recent_max(h, 40.0, 15.0) == 6
    assert scaledown.recent_max(h, 40.0, 0.0) == 2
    h = scaledown.remember(h, 200.0, 1, 100.0)
    assert h == ((200.0, 1),)


def _recreate(m: int) -> float:
    """A replica back in 40 s, each further one 15 s after the one before (one load a decision)."""
    return 40.0 + 15.0 * (m - 1)


def test_the_break_even_prices_the_lost_requests_as_the_gpus() -> None:
    assert scaledown.breakeven_s(40.0) == pytest.approx((1.0 + scaledown.SLO_WEIGHT) * 40.0)


def test_a_released_replica_holds_its_gpus_until_its_last_request_ends() -> None:
    """The drain is the mean of the largest of B memoryless residuals, B the fewest requests a
    replica holds under a balancing router (the floor of the mean): T times the harmonic H_B."""
    harmonic = [sum(1.0 / k for k in range(1, b + 1)) for b in range(1, 201)]
    for b, h in enumerate(harmonic, start=1):
        assert scaledown.drain_s(60.0, float(b)) == pytest.approx(60.0 * h, rel=0.01 if b == 1 else 4e-4)
        assert scaledown.drain_s(60.0, b + 0.9) == scaledown.drain_s(60.0, float(b))
    assert scaledown.drain_s(60.0, 0.9) == 0.0  # the least loaded holds none
    assert scaledown.drain_s(0.0, 10.0) == scaledown.drain_s(60.0, 0.0) == 0.0
    assert scaledown.drain_s(60.0, float("nan")) == scaledown.drain_s(float("nan"), 5.0) == 0.0
    assert scaledown.drain_s(60.0, float("inf")) > 0.0  # a bounded count, not a crash
    assert scaledown.breakeven_s(40.0, 1.0, 300.0) == 80.0 + 300.0


def test_a_replica_that_drains_long_is_kept_through_its_drain() -> None:
    """B(1) = 80 s for the top replica, nothing forecast: without a drain it goes λ·B = 40 s after its
    last need; with 175 minute-long requests to finish (a ~6-minute drain) released now it would
    hold its GPUs anyway, so it stays λ·(B + drain)."""
    history = scaledown.remember((), 0.0, 10, 10_000.0)
    drain = scaledown.drain_s(60.0, 175.0)
    assert 300.0 < drain < 400.0

    def keep(at: float, drain: float) -> scaledown.Keep:
        return scaledown.keep(10, 6, 6, history, at, _recreate, (), scaledown.SLO_WEIGHT, drain)

    assert keep(41.0, 0.0).replicas < 10
    assert keep(41.0, drain).replicas == 10
    assert keep(scaledown.TRUST * (80.0 + drain) + 1.0, drain).replicas < 10
    released = keep(10_000.0, drain)
    assert f"a {drain:.0f} s drain" in released.template.format(*released.args)


def test_a_replica_the_forecast_needs_is_kept_up_to_the_break_even_over_trust() -> None:
    """B(1) = 80 s for the top replica: kept 150 s idle when forecast, released at 170 s."""
    history = scaledown.remember((), 0.0, 10, 10_000.0)
    kept = scaledown.keep(10, need_now=6, need_ahead=10, history=history, now=150.0, recreate_s=_recreate)
    assert (kept.replicas, kept.reason) == (10, "KeepWarm")
    assert scaledown.keep(10, 6, 10, history, now=170.0, recreate_s=_recreate).replicas < 10


def test_first_sight_holds_the_current_count() -> None:
    first = scaledown.keep(have=10, need_now=6, need_ahead=6, history=(), now=0.0, recreate_s=_recreate)
    assert (first.replicas, first.reason) == (10, "FirstSight")


def test_the_found_fleet_is_held_its_window_and_no_more_than_was_found() -> None:
    """Found 5 at t = 0, scaled to 8 since, 2 needed: the hold keeps the 5 found for λ·B(1) = 40 s
    (B(1) = 80 s), not the 3 started since (rent-or-buy's, from the need history); then nothing."""
    released = scaledown.Keep(2, "ReleaseIdle", "", ())
    held = scaledown.hold_found(released, have=8, found=(0.0, 5), now=40.0, breakeven_one=80.0)
    assert (held.replicas, held.reason) == (5, "FoundFleet")
    assert scaledown.hold_found(released, 8, (0.0, 5), now=41.0, breakeven_one=80.0) is released
    assert scaledown.hold_found(released, 3, (0.0, 5), now=10.0, breakeven_one=80.0).replicas == 3
    assert scaledown.found_at_first_sight(None, True, 5, 0.0, 80.0) == (0.0, 5)
    assert scaledown.found_at_first_sight((0.0, 5), False, 8, 41.0, 80.0) is None


def test_the_fleet_shrinks_no_faster_than_the_storage_could_bring_it_back() -> None:
    """Peak 10, now 2, nothing forecast: replica 10 goes λ·B(1) = 40 s after its last need, replica
    9 at λ·B(2) = 55 s, ... replica 3 (the 8th to come back) at λ·B(8) = 145 s."""
    history = scaledown.remember((), 0.0, 10, 10_000.0)
    history = scaledown.remember(history, 15.0, 2, 10_000.0)

    def kept(at: float) -> int:
        return scaledown.keep(10, 2, 2, history, at, _recreate).replicas

    assert kept(39.0) == 10
    assert kept(41.0) == 9
    assert kept(56.0) == 8
    assert kept(144.0) == 3
    assert kept(146.0) == 2
    release = scaledown.keep(10, 2, 2, history, 100.0, _recreate)
    assert release.reason == "ReleaseIdle" and release.replicas == kept(100.0) == 6


def test_each_level_is_idle_since_its_own_last_need() -> None:
    """A staircase down from 9: 5 last needed 165 s ago, 4 needed 15 s ago, 3 needed now. Replica 5
    goes (λ·B(1) = 40 s after its last need); replica 4 stays, its own need 15 s old. Read from
    the newest entry of at least 5 (165 s), it went too: two released on one tick's dip (Azure
    conv x 10 on one-gpu-8b, 5 -> 3 replicas and a TTFT p99 of 10 s, 2026-12-04)."""
    history: scaledown.NeedHistory = ()
    for t, need in [(0, 9), (60, 8), (135, 7), (315, 6), (450, 5), (600, 4)]:
        history = scaledown.remember(history, float(t), need, 10_000.0)
    kept = scaledown.keep(5, 3, 3, history, 615.0, _recreate)
    assert (kept.replicas, kept.reason) == (4, "ReleaseIdle")
    assert scaledown.keep(4, 3, 3, history, 615.0, _recreate).reason == "KeepWarm"
    assert scaledown.keep(5, 3, 3, history, 641.0, _recreate).replicas == 3  # 41 s idle: past λ·B(1)


def test_a_recurring_burst_keeps_its_capacity_warm() -> None:
    """Bursts to 10 every 120 s with 1 needed between them: the lowest replicas, whose re-creation
    would queue behind the others', are never idle long enough to go; the top ones are."""
    history: scaledown.NeedHistory = ()
    low = 10
    for t in range(0, 1200, 15):
        need = 10 if t % 120 == 0 else 1
        history = scaledown.remember(history, float(t), need, 10_000.0)
        if t % 120 == 105:  # just before the next burst
            low = min(low, scaledown.keep(10, 1, 1, history, float(t), _recreate).replicas)
    assert 4 <= low < 10


def test_each_level_remembers_its_last_gap_between_needs() -> None:
    """10 at 0 s, 2 from 15 to 45 s, 10 again at 60 s: levels 3-10 came back after 60 s; levels 1-2
    were needed all along, and a level's first need is no gap (the longest window, 1,000 s)."""
    history: scaledown.NeedHistory = ()
    gaps: scaledown.Gaps = ()
    for t, need in [(0, 10), (15, 2), (30, 2), (45, 2), (60, 10), (75, 12)]:
        gaps = scaledown.recur(history, gaps, float(t), need, 1000.0)
        history = scaledown.remember(history, float(t), need, 1000.0)
    assert gaps == (1000.0, 1000.0, *[60.0] * 8, 1000.0, 1000.0)
    # a level last needed beyond the history's reach gets the longest window
    assert scaledown.recur(((0.0, 4),), (), 5000.0, 6, 1000.0)[4:] == (1000.0, 1000.0)


def test_record_drops_the_gaps_of_levels_the_history_no_longer_reaches() -> None:
    """6 needed at 0 s, 2 at 2,000 s with a 1,000 s history: the history forgets the 6, and the
    gaps of levels 3-6 go with it (recur alone keeps all six)."""
    history, gaps = scaledown.record((), (), 0.0, 6, 1000.0)
    assert gaps == (1000.0,) * 6
    assert scaledown.recur(history, gaps, 2000.0, 2, 1000.0) == (1000.0,) * 6
    assert scaledown.record(history, gaps, 2000.0, 2, 1000.0) == (((2000.0, 2),), (1000.0, 1000.0))


def test_a_level_that_came_back_within_its_break_even_is_kept_for_it() -> None:
    """Replica 10 (B(1) = 80 s) came back 60 s after its last need: the forecast says idle, yet it
    is kept B = 80 s after its last need, not λ·B = 40 s; one whose gap was 100 s goes at 40 s."""
    history = scaledown.remember((), 60.0, 10, 10_000.0)
    history = scaledown.remember(history, 75.0, 2, 10_000.0)
    recurring = (10_000.0, 10_000.0, *[60.0] * 8)

    def keep(at: float, gaps: scaledown.Gaps) -> scaledown.Keep:
        return scaledown.keep(10, 2, 2, history, at, _recreate, gaps)

    assert (keep(139.0, recurring).replicas, keep(139.0, recurring).reason) == (10, "KeepRecurring")
    assert keep(141.0, recurring).replicas == 9  # replica 9: B(2) = 110 s
    assert keep(101.0, ()).replicas < 10
    assert keep(101.0, (10_000.0, 10_000.0, *[100.0] * 8)).replicas < 10


def test_a_level_back_after_an_idle_spell_is_kept_its_weighted_break_even() -> None:
    """Replica 10 (R(1) = 40 s, B = 80 s) came back 100 s after its last need. Priced at a weight
    of 4 (a fleet at a fifth of its capacity: slo_weight) its break-even is 5 x 40 = 200 s, which
    the gap is within: kept 200 s after its last need, not λ·B = 40 s (the plain price, weight 1).
    A gap within B is the need's flicker and is kept B as before; one beyond 200 s gets λ·B."""
    history = scaledown.remember((), 60.0, 10, 10_000.0)
    history = scaledown.remember(history, 75.0, 2, 10_000.0)

    def keep(at: float, gap: float, weight: float) -> scaledown.Keep:
        gaps = (10_000.0, 10_000.0, *[gap] * 8)
        return scaledown.keep(10, 2, 2, history, at, _recreate, gaps, weight)

    held = keep(259.0, 100.0, 4.0)
    assert (held.replicas, held.reason) == (10, "KeepRecurring")
    assert "within its 200 s break-even" in held.template.format(*held.args)
    assert keep(261.0, 100.0, 4.0).replicas < 10
    assert keep(101.0, 100.0, 1.0).replicas < 10  # the plain price: λ·B after its last need
    assert keep(141.0, 60.0, 4.0).replicas < 10  # a flicker within B: B, weighted or not
    assert keep(101.0, 250.0, 4.0).replicas < 10  # beyond the weighted break-even: λ·B


def test_the_price_of_a_late_request_is_the_fleets_inverse_utilization_bounded_by_the_peak() -> None:
    assert scaledown.slo_weight(0.0, 5.0, 5.0) == scaledown.SLO_WEIGHT  # no load yet
    assert scaledown.slo_weight(1.0, 8.0, 0.0) == 8.0  # no capacity averaged yet: the peak's ratio
    assert scaledown.slo_weight(1.0, 8.0, 3.0) == 3.0  # a fleet at a third of its capacity
    assert scaledown.slo_weight(1.0, 8.0, 20.0) == 8.0  # its own idle holding does not count
    assert scaledown.slo_weight(1.0, 0.5, 0.5) == scaledown.SLO_WEIGHT  # never below the GPUs' price
    assert scaledown.breakeven_s(40.0, 4.0) == pytest.approx(200.0)


@given(
    st.floats(1e-9, 1e6),
    st.floats(0.0, 1e6),
    st.floats(0.0, 1e6),
    st.floats(1e-9, 1.0),
)
def test_the_price_is_bounded_when_the_load_fades_with_its_peak(
    load: float, peak: float, capacity: float, fade: float
) -> None:
    """In an idle spell the typical load and the typical peak fade alike while the fleet's capacity
    stays: the price stays within [1, max(1, peak / load)], so holding cannot justify itself."""
    w = scaledown.slo_weight(load * fade, peak * fade, capacity)
    assert scaledown.SLO_WEIGHT <= w <= max(scaledown.SLO_WEIGHT, peak / load) * (1 + 1e-9)


def test_levels_never_needed_are_released_and_what_is_needed_now_is_kept() -> None:
    history = scaledown.remember((), 0.0, 6, 10_000.0)
    assert scaledown.keep(10, 2, 2, history, 10.0, _recreate).replicas == 6  # 7-10 were never needed
    old = scaledown.remember((), -1000.0, 20, 10_000.0)
    assert scaledown.keep(10, 12, 0, old, 0.0, _recreate).replicas == 10
    assert scaledown.keep(10, 7, 0, old, 0.0, _recreate).replicas == 7


@pytest.mark.parametrize("need_now", [10, 11, 30])
def test_what_is_needed_now_keeps_all_whatever_the_forecast(need_now: int) -> None:
    # planner.py relies on it: it sizes the need ahead only when fewer than `have` are needed now, and
    # when `have` are, it keeps them with keep(have, have, ...)'s count, reason and template and
    # sizes the need now (the template's one argument) only when the message is read
    history = scaledown.remember((), 0.0, 4, 400.0)
    kept = {
        scaledown.keep(10, need_now, ahead, history, 100.0, lambda m: 82.0 * m) for ahead in (0, 5, 10, 64)
    }
    assert kept == {scaledown.Keep(10, "NeededNow", "{} needed now", (need_now,))}


# --- panic ---------------------------------------------------------------------------------------


def test_panic_starts_holds_a_window_and_ends() -> None:
    s = panic.PanicState(None, 0.0)
    s = panic.update(s, 100.0, True, 60.0)
    assert s == panic.PanicState(100.0, 100.0)
    s = panic.update(s, 130.0, True, 60.0)
    assert s == panic.PanicState(100.0, 130.0)
    assert panic.relevance_s(s, 130.0, 60.0) == 60.0
    assert panic.relevance_s(s, 230.0, 60.0) == 130.0
    s = panic.update(s, 180.0, False, 60.0)
    assert s.since == 100.0  # 50 s after the last trigger: still in panic
    s = panic.update(s, 190.0, False, 60.0)
    assert s.since is None


def test_panic_starts_only_what_is_ready_while_the_burst_matters() -> None:
    # 4 together take 56 s, 5 take 70 s: within 60 s at most 4
    assert panic.in_time(SEED, 8, COLD, 60.0) == 4
    assert panic.in_time(SEED, 8, COLD, 10.0) == 0
    assert panic.in_time(None, 8, COLD, 10.0) == 8
