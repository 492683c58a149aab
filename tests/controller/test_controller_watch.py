"""The controller on its caches, through the fake kube-apiserver: what a steady state costs, which
changes queue an object at once, and the rough edges a cluster shows (no CRD, a failing metric, long
non-ASCII errors, the log line per rescale)."""

from __future__ import annotations

import logging

import pytest
from aiohttp.test_utils import TestClient, TestServer
from controller_harness import FAST, NAME, NS, QUEUE, T0, autoscaler, environment, only, until

from autoscaler.controller.kubetime import rfc3339
from autoscaler.controller.telemetry import make_app


def requests_beyond_watches(log: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(m, p) for m, p in log if m != "WATCH" and "external.metrics" not in p]


async def test_a_steady_state_makes_no_requests_but_metric_reads() -> None:
    async with environment() as env:
        for i in range(3):
            env.fake.add_deployment(NS, f"m{i}", 2, labels={"app": f"m{i}"})
            for k in range(2):
                env.fake.add_pod(
                    NS,
                    f"m{i}-{k}",
                    labels={"app": f"m{i}"},
                    created=rfc3339(T0 - 600),
                    ready_at=rfc3339(T0 - 500),
                )
            env.fake.add_autoscaler(autoscaler(name=f"m{i}", target=f"m{i}", behavior=FAST))
            env.fake.set_metric(NS, QUEUE, 8, labels={"deployment": f"m{i}"}, timestamp=rfc3339(T0))
        controller = env.controller()
        assert len(await controller.step()) == 3  # the first reconciles: lists, and one status each
        env.fake.log.clear()
        for t in range(5, 305, 5):  # five minutes of 5 s periods
            env.clock.set(T0 + t)
            for i in range(3):  # the adapter's samples keep coming, the same values
                env.fake.set_metric(NS, QUEUE, 8, labels={"deployment": f"m{i}"}, timestamp=rfc3339(T0 + t))
            assert len(await controller.step()) == 3
        assert requests_beyond_watches(env.fake.log) == []
        metric_reads = [p for m, p in env.fake.log if "external.metrics" in p]
        assert len(metric_reads) == 60  # one shared read per step for all three, not one each


async def test_changes_queue_the_object_at_once() -> None:
    async with environment(ready_after_s=None) as env:
        env.start(2, autoscaler(behavior=FAST))
        env.queue(8)
        controller = env.controller()
        only(await controller.step())
        assert await controller.step() == []  # nothing changed, nothing due

        env.kubelet.mark_ready(env.clock())  # a pod of the target changes: queued at once
        assert only(await controller.step()).key == f"{NS}/{NAME}"

        env.fake.set_replicas(NS, NAME, 3)  # the target changes (a user scaled it)
        out = only(await controller.step())
        assert out.decision is not None and out.decision.current_replicas == 3

        env.fake.add_hpa(NS, "llama-cpu", NAME)  # an HPA on the target
        assert only(await controller.step()).condition("AbleToScale").reason == "ForeignHPA"  # type: ignore[union-attr]

        env.fake.add_pod(NS, "stranger", labels={"app": "other"}, created=rfc3339(T0))  # not its pod
        env.fake.add_hpa(NS, "other-cpu", "another")  # not its target
        assert await controller.step() == []

        env.queue(24)  # its metric values move: queued at the next read, half a second on
        env.clock.advance(0.5)
        out = only(await controller.step())
        assert out.decision is not None and out.decision.desired_replicas == 6  # ratio 3 x 2 ready


async def test_its_own_status_writes_do_not_queue_it_again() -> None:
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST, mode="dryRun"))
        env.queue(24)
        controller = env.controller()
        assert only(await controller.step()).refused  # decided 6, wrote the status only
        written = env.fake.autoscalers[(NS, NAME)]["metadata"]["resourceVersion"]
        assert await controller.step() == []  # its status write came back through the watch: no news
        assert controller.caches.autoscalers.get(f"{NS}/{NAME}")["metadata"]["resourceVersion"] == written  # type: ignore[index]


async def test_a_missing_crd_is_a_condition_an_event_and_a_not_ready_readyz() -> None:
    async with environment() as env:
        env.fake.crd_installed = False
        env.fake.add_pod(
            "infscale-system",
            "infscale-controller-0",
            labels={"app": "infscale"},
            created=rfc3339(T0),
            node="n1",
        )
        controller = env.controller(pod_name="infscale-controller-0", pod_namespace="infscale-system")
        async with TestClient(TestServer(make_app(controller.telemetry, env.clock))) as http:
            assert await controller.step() == []
            ready = await http.get("/readyz")
            assert ready.status == 503 and "install the CRD" in await ready.text()
            pod = env.fake.pods[("infscale-system", "infscale-controller-0")]
            condition = next(
                c for c in pod["status"]["conditions"] if c["type"] == "infscale.io/CRDInstalled"
            )
            assert (condition["status"], condition["reason"]) == ("False", "CRDNotInstalled")
            assert any(c["type"] == "PodScheduled" for c in pod["status"]["conditions"])  # the kubelet's stay
            event = env.fake.events[-1]
            assert (event["type"], event["reason"], event["regarding"]["kind"]) == (
                "Warning",
                "CRDNotInstalled",
                "Pod",
            )
            assert await controller.step() == []
            assert len(env.fake.events) == 1  # reported once, not every round

            env.fake.crd_installed = True  # kubectl apply -f deploy/controller/crd.yaml
            env.start(2, autoscaler(behavior=FAST))
            env.queue(24)
            await until(lambda: controller.caches.autoscalers.synced.is_set(), "the autoscaler cache")
            assert only(await controller.step()).scaled_to == 6
            assert (await http.get("/readyz")).status == 200
            pod = env.fake.pods[("infscale-system", "infscale-controller-0")]
            condition = next(
                c for c in pod["status"]["conditions"] if c["type"] == "infscale.io/CRDInstalled"
            )
            assert condition["status"] == "True"


async def test_a_failing_metric_is_a_warning_event() -> None:
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST))
        env.queue(8)
        controller = env.controller()
        only(await controller.step())
        env.fake.drop_metric(NS, QUEUE)
        env.clock.advance(5)
        only(await controller.step())
        warnings = [e for e in env.fake.events if e["reason"] == "FailedGetExternalMetric"]
        assert len(warnings) == 1 and warnings[0]["type"] == "Warning"
        assert f"unable to get external metric {QUEUE}" in warnings[0]["note"]
        env.clock.advance(5)
        only(await controller.step())
        assert (
            len([e for e in env.fake.events if e["reason"] == "FailedGetExternalMetric"]) == 1
        )  # not every time


async def test_a_long_non_ascii_error_still_makes_its_event(caplog: pytest.LogCaptureFixture) -> None:
    """1,024 characters of non-ASCII text are more than the 1,024 bytes a note may hold: cut in
    bytes, the Event is accepted (the fake refuses longer notes with 422, as the apiserver)."""
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST))
        env.queue(24)
        env.fake.fail("PUT", r"/scale$", 500, message="Überlastung: " + "é" * 1100)
        controller = env.controller()
        with caplog.at_level(logging.WARNING):
            assert only(await controller.step()).scaled_to is None
        event = env.fake.events[-1]
        assert event["reason"] == "FailedRescale" and len(event["note"].encode()) <= 1024
        assert not [r for r in caplog.records if "create event" in r.getMessage()]


async def test_every_rescale_is_one_info_line(caplog: pytest.LogCaptureFixture) -> None:
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST))
        env.queue(24)
        controller = env.controller()
        with caplog.at_level(logging.INFO, logger="autoscaler.controller.effects"):
            assert only(await controller.step()).scaled_to == 6
        lines = [r.getMessage() for r in caplog.records if "scaled" in r.getMessage()]
        assert lines == [f"{NS}/{NAME}: scaled Deployment {NAME} from 2 to 6: {QUEUE} above target"]
