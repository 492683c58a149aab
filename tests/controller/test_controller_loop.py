"""The controller's loop end to end: the real kubernetes-asyncio client against the fake kube-apiserver,
a manual clock, ticks driven one `step()` at a time. Scenarios from the issue, each on a time line
starting at T0; nothing sleeps.
"""

from __future__ import annotations

from typing import Any

import pytest
from controller_harness import FAST, NAME, NS, QUEUE, T0, autoscaler, environment, only, until

from autoscaler.controller import crd
from autoscaler.controller.kubetime import nano_time, rfc3339
from autoscaler.policy.decide import decide

SEED = {  # 140 GB at 10 GB/s shared: 14 s alone; 8 GPUs a replica; 300 s to get a new node
    "weightsGB": 140,
    "storageGBps": 10,
    "warmupSeconds": 6,
    "nodeProvisionSeconds": 300,
    "gpusPerReplica": 8,
    "gpusPerNode": 8,
}


async def test_scale_up_on_queue_growth() -> None:
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST))
        controller = env.controller()
        env.queue(8)  # ratio 1: hold
        out = only(await controller.step())
        assert out.scaled_to is None and env.fake.scale_writes == []
        assert env.status["desiredReplicas"] == 2

        env.clock.advance(5)
        env.queue(24)  # ratio 3 over 2 ready pods -> 6
        out = only(await controller.step())
        assert out.scaled_to == 6
        assert env.fake.replicas(NS, NAME) == 6
        assert env.fake.scale_writes == [(NAME, 6)]
        event = env.fake.events[-1]
        assert (event["reason"], event["type"], event["regarding"]["name"]) == (
            "SuccessfulRescale",
            "Normal",
            NAME,
        )
        assert event["note"].startswith("New size: 6; reason: infscale_queue_size above target; metrics 2->6")
        status = env.status
        assert (status["currentReplicas"], status["desiredReplicas"]) == (6, 6)
        assert status["lastScaleTime"] == rfc3339(T0 + 5)
        assert env.condition("AbleToScale")["reason"] == "SucceededRescale"  # type: ignore[index]
        assert [s["name"] for s in status["lastDecision"]["stages"]] == ["metrics", "stabilization", "limits"]

        env.clock.advance(5)  # the queue tripled: ceil(9 x 6 ready) = 54, but the 15 s period
        env.queue(72)  # started at 2 replicas (6 - the 4 just added), so at most 2 + 10
        out = only(await controller.step())
        assert out.scaled_to == 12
        assert env.condition("ScalingLimited")["reason"] == "ScaleUpLimit"  # type: ignore[index]


async def test_writes_scale_only_on_change_and_a_steady_status_never() -> None:
    """A steady object costs no writes at all; a policy state that moves (here the forecaster, on
    values within the tolerance) is written at most every status_interval_s."""
    async with environment() as env:
        env.start(3, autoscaler(behavior=FAST, prediction={"forecaster": "holt", "leadTimeSeconds": 0}))
        controller = env.controller(status_interval_s=30)

        def patches() -> int:
            return len([p for m, p in env.fake.log if m == "PATCH"])

        for _ in range(8):  # 40 s: the first status, then the forecaster primed on its second value
            env.queue(8)
            only(await controller.step())
            env.clock.advance(5)
        settled = patches()
        assert settled == 2
        for _ in range(12):  # a minute more of the same value: nothing to write
            env.queue(8)
            only(await controller.step())
            env.clock.advance(5)
        assert [p for m, p in env.fake.log if m == "PUT" and p.endswith("/scale")] == []
        assert patches() == settled
        env.queue(8.4)  # within the 10 % tolerance: the same count, another forecaster state
        only(await controller.step())
        assert patches() == settled + 1
        env.clock.advance(5)
        env.queue(8.6)
        only(await controller.step())
        assert patches() == settled + 1  # changed again, but only 5 s later
        env.clock.advance(30)
        only(await controller.step())
        assert patches() == settled + 2


async def test_hold_while_replicas_load_no_double_scale_up() -> None:
    """2 -> 6 at T0 (rate-limited); the four new replicas need 146 s to load (the cold-start model:
    1400 GB at 10 GB/s, 6 s warm-up). At T0 + 20 the burst is draining but the queue, 36, still looks
    high against the 2 ready pods: the HPA's formula asks ceil(36 / 8 x 2) = 9 on top of the 4
    already coming. The loading replicas hold it at 6; the draining forecast adds nothing."""
    async with environment(ready_after_s=None) as env:
        cold = {**SEED, "weightsGB": 1400, "gpusPerReplica": 1}
        behavior = {"scaleUp": {"policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]}}
        env.fake.add_node("node-a", gpus=8)
        env.kubelet.ready_after_s = 0.0
        env.start(2, autoscaler(behavior=behavior, cold_start=cold, prediction={"forecaster": "holt"}))
        env.kubelet.ready_after_s = None  # from now on new pods stay loading
        controller = env.controller()
        env.queue(40)
        assert only(await controller.step()).scaled_to == 6

        env.clock.set(T0 + 20)
        env.queue(36)
        out = only(await controller.step())
        assert out.scaled_to is None and env.fake.replicas(NS, NAME) == 6
        assert out.decision is not None
        stages = {s.name: s for s in out.decision.stages}
        assert (stages["metrics"].before, stages["metrics"].after) == (6, 9)  # the reactive double scale-up
        assert (stages["capacity"].before, stages["capacity"].after, stages["capacity"].reason) == (
            9,
            6,
            "CapacityArriving",
        )
        assert "4 starting replica(s) ready within the 146 s lead time" in stages["capacity"].message
        assert stages["forecast"].reason == "ForecastNotAbove"
        assert env.status["readyReplicas"] == 2


async def test_scale_down_only_after_the_stabilization_window() -> None:
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST))
        controller = env.controller()
        env.queue(24)
        assert only(await controller.step()).scaled_to == 6  # at T0
        for t in (5, 30, 59):
            env.clock.set(T0 + t)
            env.queue(4)  # ratio 1/2 of 6 ready -> 3
            out = only(await controller.step())
            assert out.scaled_to is None, t
            assert env.condition("AbleToScale")["reason"] == "ScaleDownStabilized"  # type: ignore[index]
        env.clock.set(T0 + 64)  # the 60 s window held the 6 recommended at T0; the first reconcile
        env.queue(4)  # after it expired (each object comes round at least every tick_s, 5 s) scales
        assert only(await controller.step()).scaled_to == 3
        assert env.fake.events[-1]["note"].startswith("New size: 3; reason: All metrics below target")


@pytest.mark.parametrize(
    "break_metric",
    [
        pytest.param(lambda env: env.fake.drop_metric(NS, QUEUE), id="metric gone: 404 from the metrics API"),
        pytest.param(lambda env: env.queue(), id="empty list: never read as 0"),
        pytest.param(lambda env: env.queue(8, age_s=600), id="stale sample older than max_metric_age_s"),
        pytest.param(
            lambda env: env.fake.fail("GET", "external.metrics", 500, times=99), id="metrics API 500"
        ),
    ],
)
async def test_no_scale_down_on_missing_metrics(break_metric: Any) -> None:
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST))
        controller = env.controller()
        env.queue(24)
        assert only(await controller.step()).scaled_to == 6
        break_metric(env)
        for t in (5, 120, 600):  # far past the 60 s window
            env.clock.set(T0 + t)
            out = only(await controller.step())
            assert out.scaled_to is None
        assert env.fake.replicas(NS, NAME) == 6
        active = env.condition("ScalingActive")
        assert active is not None and (active["status"], active["reason"]) == (
            "False",
            "FailedGetExternalMetric",
        )


async def test_restart_keeps_the_history() -> None:
    """The scale-up events and recommendations live in .status.policyState: a new controller (a
    restart, or the standby after a failover) still honours the rate limit and the window."""
    behavior = {
        "scaleUp": {"policies": [{"type": "Pods", "value": 4, "periodSeconds": 60}]},
        "scaleDown": {"stabilizationWindowSeconds": 60},
    }
    async with environment() as env:
        env.start(2, autoscaler(behavior=behavior, prediction={"forecaster": "holt", "leadTimeSeconds": 30}))
        first = env.controller()
        env.queue(48)  # ratio 6 -> 12, limited to 2 + 4
        assert only(await first.step()).scaled_to == 6
        stored = env.status["policyState"]
        assert stored["scaleUpEvents"] == [{"at": nano_time(T0), "change": 4}]
        assert set(stored["forecasters"]) == {QUEUE}
        assert crd.state_from_status(stored) == first.memory["uid-ia-llama"].state  # a lossless round trip

        env.clock.set(T0 + 10)
        second = env.controller()  # fresh process: no memory, only the status
        env.queue(48)
        out = only(await second.step())
        assert out.scaled_to is None  # 4 pods per 60 s already used at T0
        assert env.condition("ScalingLimited")["reason"] == "ScaleUpLimit"  # type: ignore[index]
        assert second.memory["uid-ia-llama"].state.scale_up_events == (
            first.memory["uid-ia-llama"].state.scale_up_events
        )

        env.clock.set(T0 + 61)
        env.queue(48)
        assert only(await env.controller().step()).scaled_to == 10  # the period passed: +4


async def test_two_controllers_exactly_one_acts() -> None:
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST))
        env.queue(24)
        a_elector, b_elector = env.elector("a"), env.elector("b")
        a, b = env.controller(elector=a_elector), env.controller(elector=b_elector)
        assert await a_elector.tick(env.clock()) is True
        assert await b_elector.tick(env.clock()) is False
        results = [await a.step(), await b.step()]
        assert [len(r) for r in results] == [1, 0]  # the standby decides nothing
        assert env.fake.scale_writes == [(NAME, 6)]
        lease = env.fake.leases[("infscale-system", "infscale-controller")]
        assert lease["spec"]["holderIdentity"] == "a"
        assert lease["spec"]["renewTime"].endswith(".000000Z")  # MicroTime with its six digits

        # a stops renewing; b takes over only once the lease expired on b's own clock
        env.clock.advance(10)
        assert await b_elector.tick(env.clock()) is False
        env.clock.advance(6)  # 16 s after b first saw a's renewal > 15 s lease
        assert await b_elector.tick(env.clock()) is True
        assert not a_elector.leading(env.clock())  # its renew deadline passed
        assert env.fake.leases[("infscale-system", "infscale-controller")]["spec"]["leaseTransitions"] == 1
        assert await a_elector.tick(env.clock()) is False  # back, but b holds a live lease
        env.queue(8)
        results = [await a.step(), await b.step()]
        assert [len(r) for r in results] == [0, 1]

        # b shuts down and releases: a acquires at its next retry, without waiting for expiry
        await b_elector.release(env.clock())
        assert env.fake.leases[("infscale-system", "infscale-controller")]["spec"]["holderIdentity"] == ""
        env.clock.advance(2)
        assert await a_elector.tick(env.clock()) is True


async def test_release_survives_a_failed_lease_read() -> None:
    """SIGTERM releases the lease from run()'s `finally`: a failing kube-apiserver then is a warning,
    not an exception that turns a clean shutdown into a crash."""
    async with environment() as env:
        elector = env.elector("a")
        assert await elector.tick(env.clock()) is True
        env.fake.fail("GET", "/leases/", 500)
        await elector.release(env.clock())
        assert not elector.leading(env.clock())


async def test_leader_election_race_has_one_winner() -> None:
    async with environment() as env:
        electors = [env.elector(f"c{i}") for i in range(3)]
        import asyncio

        won = await asyncio.gather(*(e.tick(env.clock()) for e in electors))
        assert sum(won) == 1


@pytest.mark.parametrize(
    ("mode", "writes", "condition"),
    [
        pytest.param(
            "direct", [], ("False", "ForeignHPA"), id="direct: refuses while a foreign HPA targets it"
        ),
        pytest.param(
            "hpa", [], ("True", "ReadyForNewScale"), id="hpa: the HPA is the actuator, infscale publishes"
        ),
        pytest.param("dryRun", [], ("True", "ReadyForNewScale"), id="dryRun: decides, never writes"),
    ],
)
async def test_foreign_hpa_and_modes(mode: str, writes: list[Any], condition: tuple[str, str]) -> None:
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST, mode=mode))
        env.fake.add_hpa(NS, "llama-cpu", NAME)
        env.fake.add_hpa(NS, "other", "another-deployment")
        env.queue(24)
        controller = env.controller()
        out = only(await controller.step())
        assert env.fake.scale_writes == writes
        assert out.decision is not None and out.decision.desired_replicas == 6
        able = env.condition("AbleToScale")
        assert able is not None and (able["status"], able["reason"]) == condition
        if mode == "direct":
            assert "llama-cpu" in able["message"] and "other" not in able["message"]
        text = controller.telemetry.desired.labels(NS, NAME)._value.get()
        assert text == 6  # published for the HPA (mode hpa) and for dashboards


async def test_direct_mode_does_not_act_blind_when_the_hpas_cannot_be_read() -> None:
    """The foreign-HPA check needs the HPAs: while they were never listed, direct mode refuses."""
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST))
        env.fake.add_hpa(NS, "llama-cpu", NAME)
        env.fake.fail("GET", "/horizontalpodautoscalers$", 500, times=10**6)
        env.queue(24)
        controller = env.controller()
        out = only(await controller.step())
        assert env.fake.scale_writes == [] and out.scaled_to is None
        able = env.condition("AbleToScale")
        assert able is not None and (able["status"], able["reason"]) == ("False", "FailedListHPAs")
        assert "500" in able["message"]
        env.fake.failures.clear()  # the list works again: the foreign HPA is seen
        await until(lambda: controller.caches.hpas.synced.is_set(), "the HPA cache")
        env.clock.advance(5)
        only(await controller.step())
        assert env.condition("AbleToScale")["reason"] == "ForeignHPA"  # type: ignore[index]
        env.fake.delete_hpa(NS, "llama-cpu")  # deleted: the change alone queues the object, which acts
        assert only(await controller.step()).scaled_to == 6


async def test_hpa_mode_records_the_hpas_scale_changes() -> None:
    """The HPA writes /scale in mode hpa; infscale sees the change and books it as a scale event, so
    its own rate limits stay true to what happened."""
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST, mode="hpa"))
        controller = env.controller()
        env.queue(24)
        only(await controller.step())
        env.clock.advance(15)
        env.fake.set_replicas(NS, NAME, 6)  # the HPA acted on infscale_desired_replicas
        only(await controller.step())
        assert env.status["policyState"]["scaleUpEvents"] == [{"at": nano_time(T0 + 15), "change": 4}]


async def test_hpa_mode_books_a_change_made_across_a_restart() -> None:
    """The count last seen lives in status.currentReplicas: a new leader books an HPA's write made
    while no controller was looking, as the old leader would have at its next tick."""
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST, mode="hpa"))
        env.queue(24)
        only(await env.controller().step())
        env.clock.advance(15)
        env.fake.set_replicas(NS, NAME, 6)  # the HPA acts while the controller restarts
        only(await env.controller().step())
        assert env.status["policyState"]["scaleUpEvents"] == [{"at": nano_time(T0 + 15), "change": 4}]


async def test_capacity_shortage_adds_node_provisioning_to_the_predicted_ready_time() -> None:
    async with environment() as env:
        # 16 idle GPUs as 4 + 4 + 8: one 8-GPU replica fits, the second needs a new node
        env.fake.add_node("gpu-a", gpus=8)
        env.fake.add_node("gpu-b", gpus=8)
        env.fake.add_node("gpu-c", gpus=8)
        for node in ("gpu-a", "gpu-b"):
            env.fake.add_pod(
                "other",
                f"busy-{node}",
                labels={"x": "y"},
                created=rfc3339(T0 - 100),
                ready_at=rfc3339(T0 - 50),
                node=node,
                gpus=4,
            )
        env.kubelet.node, env.kubelet.gpus = "gpu-d", 8
        env.fake.add_node("gpu-d", gpus=8)  # the target's existing replica fills gpu-d
        env.start(1, autoscaler(behavior=FAST, cold_start=SEED, prediction={"forecaster": "last"}))
        controller = env.controller()
        env.queue(24)  # ratio 3 -> 3 replicas: +2
        out = only(await controller.step())
        assert out.scaled_to == 3
        ready = env.status["lastDecision"]["predictedReadySeconds"]
        assert ready == [pytest.approx(20.0), pytest.approx(300 + 20.0)]  # 14 s load + 6 s warm-up
        cond = out.condition("CapacityAvailable")
        assert cond is not None and (cond.status, cond.reason) == ("False", "InsufficientGPUs")
        assert "1 of 2 new replica(s) need 8 GPU(s) on one node" in cond.message
        assert "300 s of node provisioning" in cond.message

        # a 16-GPU node joins: two more replicas fit, no provisioning in their ready times
        env.fake.add_node("gpu-e", gpus=16)
        env.clock.advance(5)
        env.queue(12)  # ratio 1.5 x 3 ready -> 5: +2
        out = only(await controller.step())
        assert out.scaled_to == 5
        cond = out.condition("CapacityAvailable")
        assert cond is not None and (cond.status, cond.reason) == ("True", "GPUsAvailable")
        assert all(t < 300 for t in env.status["lastDecision"]["predictedReadySeconds"])


async def test_unschedulable_replicas_count_as_starting_not_ready() -> None:
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST, cold_start=SEED, prediction={"forecaster": "last"}))
        env.fake.add_pod(
            NS, "llama-pending", labels={"app": NAME}, created=rfc3339(T0 - 30), unschedulable=True, gpus=8
        )
        env.fake.set_replicas(NS, NAME, 3)
        controller = env.controller()
        env.queue(8)
        out = only(await controller.step())
        assert env.status["readyReplicas"] == 2
        assert out.observation is not None and out.observation.ready_pods == 2
        # no GPU node at all: it waits for a node (300 s), then loads (14 s) and warms up (6 s)
        assert out.observation.starting_ready_at == (T0 + 320,)
        cond = out.condition("CapacityAvailable")
        assert cond is not None and cond.reason == "InsufficientGPUs"


async def test_conflict_on_scale_rereads_and_decides_again() -> None:
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST))
        controller = env.controller()
        env.queue(24)
        bumped: list[str] = []

        def user_scales_first(name: str) -> None:
            if not bumped:
                bumped.append(name)
                env.fake.set_replicas(NS, NAME, 3)  # a user's write lands between our GET and PUT

        env.fake.before_put_scale = user_scales_first
        out = only(await controller.step())
        gets = [p for m, p in env.fake.log if m == "GET" and p.endswith("/scale")]
        assert len(gets) == 1  # read from the cache first, from the API after the 409 (the cache may lag)
        assert out.decision is not None and out.decision.current_replicas == 3  # decided on the new count
        assert env.fake.replicas(NS, NAME) == out.scaled_to == 6


async def test_conflict_then_no_change_reports_the_count_read_again() -> None:
    """A user scales to what infscale wanted between its GET and PUT: after the 409 the new decision
    holds, and the status and gauges carry the count read again, not the stale one."""
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST))
        controller = env.controller()
        env.queue(24)  # ratio 3 x 2 ready -> 6
        env.fake.before_put_scale = lambda name: env.fake.set_replicas(NS, NAME, 6)
        out = only(await controller.step())
        assert out.scaled_to is None and out.decision is not None and not out.decision.scale
        assert env.fake.replicas(NS, NAME) == 6
        assert env.status["currentReplicas"] == 6
        assert controller.telemetry.current.labels(NS, NAME)._value.get() == 6


# the client's timeout: short only where the fake hangs (the client must give up within the test),
# and even there above what one request through the in-process fake can take on a busy machine
# (at 0.3 s for every case, the target-deleted case's last, healthy reconcile once left the scale
# unwritten in CI with a league running beside it: most likely its /scale write timing out)
HANG_TIMEOUT_S = 1.0


@pytest.mark.parametrize(
    ("fault", "check", "timeout_s"),
    [
        pytest.param(
            lambda env: env.fake.delete_deployment(NS, NAME),
            "FailedGetScale",
            5.0,
            id="target deleted: condition",
        ),
        pytest.param(
            lambda env: env.fake.fail("PUT", r"/scale$", 500),
            "FailedUpdateScale",
            5.0,
            id="scale write 500: condition and Warning event",
        ),
        pytest.param(
            lambda env: env.fake.fail("PUT", r"/scale$", "timeout"),
            "FailedUpdateScale",
            HANG_TIMEOUT_S,
            id="scale write hangs: client timeout, condition and Warning event",
        ),
    ],
)
async def test_api_failures_become_conditions(fault: Any, check: str, timeout_s: float) -> None:
    async with environment(timeout_s=timeout_s) as env:
        env.start(2, autoscaler(behavior=FAST))
        controller = env.controller()
        env.queue(8)
        only(await controller.step())  # a healthy reconcile first: the status has samples and a decision
        env.clock.advance(5)
        fault(env)
        env.queue(24)
        out = only(await controller.step())
        assert out.scaled_to is None
        able = env.condition("AbleToScale")
        assert able is not None and (able["status"], able["reason"]) == ("False", check)
        assert len(env.status["coldStarts"]["samples"]) == 2  # the rest of the status is kept
        assert env.condition("ScalingActive") is not None
        if check == "FailedUpdateScale":
            assert (
                env.fake.events[-1]["reason"] == "FailedRescale" and env.fake.events[-1]["type"] == "Warning"
            )
        if check == "FailedGetScale":
            assert 'deployments.apps "llama" not found' in able["message"]
            env.fake.add_deployment(NS, NAME, 2, labels={"app": NAME})  # back: its ADDED queues the object
        env.clock.advance(5)  # the failure was one-off: the next reconcile acts
        env.queue(24)
        assert only(await controller.step()).scaled_to == 6


async def test_status_write_failure_is_retried_next_tick() -> None:
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST))
        env.fake.fail("PATCH", "/status$", 500)
        env.queue(24)
        controller = env.controller(status_interval_s=3600)
        assert only(await controller.step()).scaled_to == 6
        assert "policyState" not in env.status
        env.clock.advance(5)
        env.queue(8)  # ratio 1 over the 6 ready: hold
        assert only(await controller.step()).scaled_to is None
        assert env.status["policyState"]["scaleUpEvents"] == [{"at": nano_time(T0), "change": 4}]


@pytest.mark.parametrize(
    ("spec_patch", "message"),
    [
        pytest.param(
            {"coldStart": {"weightsGB": 1, "storageGBps": 1, "gpusPerReplica": 16, "gpusPerNode": 8}},
            "gpusPerReplica (16) exceeds gpusPerNode (8)",
            id="cold start: replica larger than a node",
        ),
        pytest.param(
            {"prediction": {"seasonSeconds": 1000, "seasonBucketSeconds": 300}},
            "season_s",
            id="prediction: season not a multiple of its bucket",
        ),
        pytest.param(
            {"floors": {"schedules": [{"minReplicas": 2, "timezone": "Mars/Olympus"}]}},
            "unknown time zone 'Mars/Olympus'",
            id="floors: unknown time zone",
        ),
    ],
)
async def test_invalid_spec_is_reported_in_status(spec_patch: dict[str, Any], message: str) -> None:
    """What the CRD schema cannot express is checked by the controller and named in a condition."""
    async with environment() as env:
        obj = autoscaler()
        obj["spec"].update(spec_patch)
        env.start(2, obj)
        env.queue(24)
        out = only(await env.controller().step())
        assert out.scaled_to is None
        active = env.condition("ScalingActive")
        assert active is not None and active["reason"] == "InvalidSpec"
        assert message in active["message"]


async def test_invalid_spec_reported_once_and_forgotten_with_the_object() -> None:
    async with environment() as env:
        obj = autoscaler()
        obj["spec"]["floors"] = {"schedules": [{"minReplicas": 2, "timezone": "Mars/Olympus"}]}
        env.start(2, obj)
        env.queue(8)
        controller = env.controller()
        only(await controller.step())
        env.clock.advance(5)
        only(await controller.step())
        assert len([p for m, p in env.fake.log if m == "PATCH"]) == 1  # the same error: written once
        env.fake.delete_autoscaler(NS, NAME)
        assert await controller.step() == []
        assert controller._invalid == {}  # nothing kept for a deleted object


async def test_parity_with_decide() -> None:
    """The controller makes the decisions decide() makes on the same observations (the replay calls
    decide() the same way; tests/replay adds that side)."""
    from autoscaler.controller.crd import parse_autoscaler
    from autoscaler.policy.decide import record_rescale
    from autoscaler.policy.observation import MetricReading, Observation
    from autoscaler.policy.state import PolicyState

    queue = [8, 24, 40, 40, 30, 12, 8, 8, 4, 4, 0, 0, 16, 64, 64]
    obj = autoscaler(behavior=FAST, prediction={"forecaster": "holt", "leadTimeSeconds": 20})
    async with environment() as env:
        env.start(2, obj)
        controller = env.controller(max_metric_age_s=None)
        spec = parse_autoscaler(
            env.fake.autoscalers[(NS, NAME)],
            tolerance=0.1,
            downscale_stabilization_s=300,
            max_metric_age_s=None,
        ).spec
        state, replicas = PolicyState(), 2
        for i, q in enumerate(queue):
            env.clock.set(T0 + 5 * i)
            env.queue(q)
            out = only(await controller.step())
            obs = Observation(replicas, replicas, replicas, {QUEUE: MetricReading.of(q)})
            expected, state = decide(spec, state, obs, env.clock())
            if expected.scale:
                state = record_rescale(spec, state, env.clock(), replicas, expected.desired_replicas)
                replicas = expected.desired_replicas
            assert out.decision == expected, f"tick {i}"
            assert env.fake.replicas(NS, NAME) == replicas


async def test_learned_cold_starts_feed_the_horizon_and_survive_a_restart() -> None:
    """Auto horizon: the cold-start model (14 s load + 6 s warm-up = 20 s) until three start-ups were
    seen, then the p90 of their scheduled -> Ready times (plus provisioning if a replica would not
    fit). The model's prediction and the observations sit side by side in the status."""
    async with environment(ready_after_s=None) as env:
        env.fake.add_node("gpu-a", gpus=8)
        cold = {**SEED, "gpusPerReplica": 1}
        env.start(
            0, autoscaler(min_replicas=0, behavior=FAST, cold_start=cold, prediction={"forecaster": "holt"})
        )
        for i, (created, scheduled, ready) in enumerate([(0, 10, 100), (0, 10, 130), (0, 20, 220)]):
            env.fake.add_pod(
                NS,
                f"old-{i}",
                labels={"app": NAME},
                created=rfc3339(T0 - 1000 + created),
                scheduled_at=rfc3339(T0 - 1000 + scheduled),
                ready_at=rfc3339(T0 - 1000 + ready),
                node="gpu-a",
                gpus=1,
            )
        env.fake.set_replicas(NS, NAME, 3)
        env.queue(24)  # ratio 3 x 3 ready = 9 wanted: the horizon is what this test looks at
        first = env.controller()
        out = only(await first.step())
        assert out.decision is not None
        # load times 90, 120, 200 s: p90 = 184 s; one more replica fits on gpu-a (3 of 8 GPUs used)
        assert out.decision.lead_time_s == pytest.approx(184.0)
        cold_status = env.status["coldStarts"]
        assert cold_status["observedMedianSeconds"] == 130.0  # creation -> Ready: 100, 130, 220
        assert cold_status["modelSeconds"] == pytest.approx(20.0)
        assert [s["pod"] for s in cold_status["samples"]] == ["old-0", "old-1", "old-2"]
        text = first.telemetry.cold_start.labels(NS, NAME, "observed_p90")._value.get()
        assert text == pytest.approx(202.0)

        # a restart reads the samples back and does not count the same pods twice
        env.clock.advance(5)
        env.queue(24)
        second = env.controller()
        only(await second.step())
        assert [s["pod"] for s in env.status["coldStarts"]["samples"]] == ["old-0", "old-1", "old-2"]


@pytest.mark.parametrize(
    ("horizon", "samples", "node_gpus", "lead"),
    [
        pytest.param({"source": "Auto"}, 2, 8, 20.0, id="Auto, too few samples: the model"),
        pytest.param({"source": "ObservedStartups"}, 2, 8, 0.0, id="ObservedStartups, too few: no horizon"),
        pytest.param(
            {"source": "ColdStartModel"}, 3, 8, 20.0, id="ColdStartModel: the model even with samples"
        ),
        pytest.param({"source": "Auto", "quantile": 0.5}, 3, 8, 120.0, id="Auto, median of the observations"),
        pytest.param({"source": "Auto"}, 3, 3, 184.0 + 300, id="Auto, no GPU free: p90 + node provisioning"),
        pytest.param(
            {"source": "ColdStartModel"}, 3, 3, 320.0, id="model, no GPU free: provisioning included"
        ),
    ],
)
async def test_horizon_sources(horizon: dict[str, Any], samples: int, node_gpus: int, lead: float) -> None:
    async with environment() as env:
        env.fake.add_node("gpu-a", gpus=node_gpus)
        obj = autoscaler(
            behavior=FAST,
            cold_start={**SEED, "gpusPerReplica": 1},
            prediction={"forecaster": "holt", "horizon": horizon},
        )
        env.fake.add_deployment(NS, NAME, samples, labels={"app": NAME})
        env.fake.add_autoscaler(obj)
        for i, load in enumerate([90, 120, 200][:samples]):
            env.fake.add_pod(
                NS,
                f"p{i}",
                labels={"app": NAME},
                created=rfc3339(T0 - 1000),
                scheduled_at=rfc3339(T0 - 1000),
                ready_at=rfc3339(T0 - 1000 + load),
                node="gpu-a",
                gpus=1,
            )
        env.queue(8)
        out = only(await env.controller().step())
        assert out.decision is not None and out.decision.lead_time_s == pytest.approx(lead)


async def test_two_autoscalers_on_one_target_neither_acts() -> None:
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST))
        env.fake.add_autoscaler(autoscaler(name="llama-2", behavior=FAST))
        env.fake.add_autoscaler(autoscaler(name="llama-dry", behavior=FAST, mode="dryRun"))  # reports only
        env.queue(24)
        outcomes = await env.controller().step()
        assert env.fake.scale_writes == []
        refused = {o.key: o.condition("AbleToScale") for o in outcomes}
        assert refused[f"{NS}/{NAME}"] is not None and refused[f"{NS}/{NAME}"].reason == "AmbiguousTarget"  # type: ignore[union-attr]
        assert "llama-2" in refused[f"{NS}/{NAME}"].message  # type: ignore[union-attr]
        assert refused[f"{NS}/llama-dry"].reason != "AmbiguousTarget"  # type: ignore[union-attr]
