"""Test harness for the controller: a manual clock, InferenceAutoscaler documents, a controller wired
to the fake kube-apiserver, and a 'kubelet' that turns /scale writes into pods.

Time is a number the test moves; `step()` is one tick. Nothing here sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fake_apiserver import FakeKube, serve

from autoscaler.controller.kube import KubeClient
from autoscaler.controller.kubetime import rfc3339
from autoscaler.controller.leader import LeaderElector
from autoscaler.controller.loop import Controller, Outcome
from autoscaler.controller.metrics import ApiMetricsReader
from autoscaler.controller.settings import ControllerSettings
from autoscaler.controller.telemetry import Telemetry
from common.clock import ManualClock
from common.listwatch import Informer

T0 = 1795946400.0  # 2026-11-29T10:00:00Z
NS = "serving"
NAME = "llama"
QUEUE = "infscale_queue_size"
LABELS = {"app": NAME}


def autoscaler(
    *,
    name: str = NAME,
    target: str = NAME,
    min_replicas: int = 1,
    max_replicas: int = 20,
    target_type: str = "Value",
    target_value: str = "8",
    mode: str | None = None,
    behavior: Mapping[str, Any] | None = None,
    cold_start: Mapping[str, Any] | None = None,
    prediction: Mapping[str, Any] | None = None,
    extra_metrics: tuple[Mapping[str, Any], ...] = (),
) -> dict[str, Any]:
    key = "value" if target_type == "Value" else "averageValue"
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
        "minReplicas": min_replicas,
        "maxReplicas": max_replicas,
        "metrics": [
            {
                "type": "External",
                "external": {
                    "metric": {"name": QUEUE, "selector": {"matchLabels": {"deployment": target}}},
                    "target": {"type": target_type, key: target_value},
                },
            },
            *extra_metrics,
        ],
    }
    if mode is not None:
        spec["mode"] = mode
    if behavior is not None:
        spec["behavior"] = copy.deepcopy(dict(behavior))
    if cold_start is not None:
        spec["coldStart"] = dict(cold_start)
    if prediction is not None:
        spec["prediction"] = copy.deepcopy(dict(prediction))
    return {
        "apiVersion": "infscale.io/v1alpha1",
        "kind": "InferenceAutoscaler",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


FAST = {  # scale up by up to 10 pods per 15 s, down with a 60 s window
    "scaleUp": {"policies": [{"type": "Pods", "value": 10, "periodSeconds": 15}]},
    "scaleDown": {"stabilizationWindowSeconds": 60},
}


def settings(**overrides: Any) -> ControllerSettings:
    # tick_s 5: the time lines below step every 5 s and expect each object to come round
    values: dict[str, Any] = {
        "identity": "test-controller",
        "leader_elect": False,
        "status_interval_s": 0.0,
        "tick_s": 5.0,
    }
    values.update(overrides)
    return ControllerSettings(**values)


@dataclass
class Kubelet:
    """Makes the Deployment's pods follow /scale writes: new pods are created now and ready after
    `ready_after_s` (None: they stay starting until the test marks them ready)."""

    fake: FakeKube
    clock: ManualClock
    ready_after_s: float | None = 0.0
    node: str | None = None
    gpus: int = 0
    serial: int = 0
    names: list[str] = field(default_factory=list)

    def sync(self, name: str, replicas: int) -> None:
        while len(self.names) < replicas:
            self.serial += 1
            pod = f"{name}-{self.serial}"
            created = rfc3339(self.clock())
            ready = None if self.ready_after_s is None else rfc3339(self.clock() + self.ready_after_s)
            self.fake.add_pod(
                NS,
                pod,
                labels=LABELS,
                created=created,
                scheduled_at=created,
                ready_at=ready,
                node=self.node or "node-a",
                gpus=self.gpus,
            )
            self.names.append(pod)
        while len(self.names) > replicas:
            self.fake.delete_pod(NS, self.names.pop())

    def mark_ready(self, at: float) -> None:
        for pod in self.names:
            if self.fake.pods[(NS, pod)]["status"]["phase"] != "Running":
                self.fake.mark_pod_ready(NS, pod, rfc3339(at))


class Stepped:
    """A Controller whose step() first lets its caches see every change the test made: a bookmark
    at the fake's current revision must have reached each informer (nothing sleeps on time)."""

    def __init__(self, controller: Controller, fake: FakeKube) -> None:
        self.controller = controller
        self.fake = fake

    def __getattr__(self, name: str) -> Any:
        return getattr(self.controller, name)

    async def caught_up(self) -> None:
        await self.controller.start()
        for informer in self.controller.caches.informers():
            await caught_up(self.fake, informer)

    async def step(self) -> list[Outcome]:
        await self.caught_up()
        outcomes = await self.controller.step()
        for informer in self.controller.caches.informers():  # lazily started ones (targets, nodes)
            await caught_up(self.fake, informer)
        return outcomes


async def caught_up(fake: FakeKube, informer: Informer) -> None:
    """The informer has seen revision fake.rv: a bookmark reached it, asked again until one does (a
    watch opened after a bookmark round waits for the next). A list failing on purpose (an injected
    500) cannot catch up: it is left as it is."""
    for _ in range(100):  # hang guard: 10 s
        if informer.resource_version == str(fake.rv):
            return
        if informer.last_error and not informer.synced.is_set():
            return
        fake.bookmark()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(informer.wait_for(lambda: informer.resource_version == str(fake.rv)), 0.1)
    raise AssertionError(f"informer {informer.name} never caught up with revision {fake.rv}")


@dataclass
class Env:
    fake: FakeKube
    kube: KubeClient
    clock: ManualClock
    kubelet: Kubelet
    controllers: list[Controller] = field(default_factory=list)

    def controller(self, *, elector: LeaderElector | None = None, **overrides: Any) -> Stepped:
        controller = Controller(
            settings(**overrides),
            self.kube,
            ApiMetricsReader(self.kube),
            telemetry=Telemetry(),
            elector=elector,
            clock=self.clock,
            informer_options={"backoff_initial_s": 0.01, "backoff_max_s": 0.05},
        )
        self.controllers.append(controller)
        return Stepped(controller, self.fake)

    def elector(self, identity: str) -> LeaderElector:
        return LeaderElector(
            self.kube,
            namespace="infscale-system",
            name="infscale-controller",
            identity=identity,
            lease_duration_s=15,
            renew_deadline_s=10,
        )

    def queue(self, *values: float, age_s: float = 0.0) -> None:
        self.fake.set_metric(
            NS, QUEUE, *values, labels={"deployment": NAME}, timestamp=rfc3339(self.clock() - age_s)
        )

    def start(self, replicas: int, obj: Mapping[str, Any]) -> None:
        self.fake.add_deployment(NS, NAME, replicas, labels=LABELS)
        self.kubelet.sync(NAME, replicas)
        self.fake.on_scale_write = self.kubelet.sync
        self.fake.add_autoscaler(obj)

    @property
    def status(self) -> dict[str, Any]:
        return self.fake.status_of(NS, NAME)

    def condition(self, type_: str) -> dict[str, Any] | None:
        return next((c for c in self.status.get("conditions", []) if c["type"] == type_), None)


@asynccontextmanager
async def environment(*, timeout_s: float = 5.0, ready_after_s: float | None = 0.0) -> AsyncIterator[Env]:
    fake = FakeKube()
    clock = ManualClock(T0)
    async with serve(fake, timeout_s=timeout_s) as kube:
        env = Env(fake, kube, clock, Kubelet(fake, clock, ready_after_s))
        try:
            yield env
        finally:
            for controller in env.controllers:
                await controller.close()


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait for something the event loop makes true (a hang guard of 10 s, not a timing assumption)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def only(outcomes: list[Outcome]) -> Outcome:
    assert len(outcomes) == 1, outcomes
    return outcomes[0]
