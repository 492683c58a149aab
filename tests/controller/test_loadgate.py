"""The load gate against the fake kube-apiserver (its Leases: resourceVersions, 409s) and the
engine emulator (its /health is 503 while the weights load): with N slots, replicas load N at a
time, one after another, instead of all together. Time is a manual clock the test moves once every
gate is asleep; nothing sleeps on the wall clock."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
from controller_harness import NS, T0, environment, until

from autoscaler.controller.kube import KubeClient
from autoscaler.loadgate import LoadGate, hold, lease_name
from autoscaler.loadgate_cli import GateError, LoadGateSettings, slots_of
from common.clock import ManualClock
from replay.emulate.server import EmulatorConfig, create_app
from tests.replay.emulator_fixtures import TINY, serve

LOAD_S = 20.0  # the emulator's startup_seconds: weights loading, /health 503 until then
RETRY_S = 1.0


@dataclass
class Replica:
    """One pod: its gate, and the engine the kubelet starts once the gate's probe passes."""

    name: str
    started_at: float | None = None  # the engine container's start (the gate took a slot)
    ready_at: float | None = None  # the engine's /health first answered 200
    released: str = ""
    url: str = ""
    stack: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)


@dataclass
class Fleet:
    clock: ManualClock
    http: aiohttp.ClientSession
    asleep: int = 0  # gates in their retry pause

    def sleep(self) -> Callable[[float], Awaitable[None]]:
        async def sleep(seconds: float) -> None:
            self.asleep += 1
            try:
                await self.clock.sleep(seconds)
            finally:
                self.asleep -= 1

        return sleep

    def engine_ready(self, replica: Replica) -> Callable[[], Awaitable[bool]]:
        async def ready() -> bool:
            if replica.started_at is None:  # first asked right after the slot was taken
                replica.started_at = self.clock()
                app = create_app(EmulatorConfig(profile=TINY, startup_s=LOAD_S), clock=self.clock)
                replica.url = await replica.stack.enter_async_context(serve(app))
            async with self.http.get(f"{replica.url}/health") as response:
                ok = response.status == 200
            if ok and replica.ready_at is None:
                replica.ready_at = self.clock()
            return ok

        return ready


@contextlib.asynccontextmanager
async def fleet_of(n: int, slots: int, **hold_kw: float) -> AsyncIterator[tuple[list[Replica], KubeClient]]:
    """n pods, each running hold() on one gate, driven until every one gave its slot back."""
    async with environment() as env, aiohttp.ClientSession() as http:
        clock = env.clock
        fleet = Fleet(clock, http)
        replicas = [Replica(f"llama-{i}") for i in range(n)]
        stop = asyncio.Event()
        tasks = []
        for r in replicas:
            gate = LoadGate(env.kube, namespace=NS, storage="nfs", slots=slots, identity=r.name)

            async def run(r: Replica = r, gate: LoadGate = gate) -> None:
                r.released = await hold(
                    gate,
                    fleet.engine_ready(r),
                    clock=clock,
                    sleep=fleet.sleep(),
                    stop=stop,
                    retry_s=RETRY_S,
                    **hold_kw,
                )

            tasks.append(asyncio.create_task(run()))
        try:
            for _ in range(2000):  # hang guard: 2,000 simulated seconds
                running = sum(not t.done() for t in tasks)
                if not running:
                    break
                # every running gate in its pause, on the clock (a woken one has left the clock's
                # sleepers but not yet counted itself awake: wait for it to run)
                await until(
                    lambda: fleet.asleep == sum(not t.done() for t in tasks) == clock.sleepers,
                    f"gates asleep at {clock() - T0:.0f} s",
                )
                clock.set(clock() + RETRY_S)
            else:
                raise AssertionError("the gates never finished")
            for t in tasks:
                t.result()  # a gate's exception fails the test
            yield replicas, env.kube
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            for r in replicas:
                await r.stack.aclose()


def overlapping(replicas: list[Replica]) -> int:
    """The most engines loading at one time (started, not ready yet)."""
    edges = sorted([(r.started_at, 1) for r in replicas] + [(r.ready_at, -1) for r in replicas])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


async def test_eight_replicas_with_one_slot_become_ready_one_after_another() -> None:
    async with fleet_of(8, slots=1) as (replicas, kube):
        assert all(r.released == "ready" for r in replicas)
        assert overlapping(replicas) == 1
        ready = sorted(r.ready_at - T0 for r in replicas)  # type: ignore[operator]
        # each loads alone in LOAD_S; the next starts within a retry period of the release
        assert ready[0] == LOAD_S
        for before, after in itertools.pairwise(ready):
            assert LOAD_S <= after - before <= LOAD_S + RETRY_S
        assert ready[-1] <= 8 * (LOAD_S + RETRY_S)  # not 8 x 1/8 of the bandwidth, all at the end
        lease = await kube.get_lease(NS, lease_name("nfs", 0))
        assert lease is not None and lease["spec"]["holderIdentity"] == ""  # given back


async def test_two_slots_load_two_at_a_time() -> None:
    async with fleet_of(8, slots=2) as (replicas, _):
        assert overlapping(replicas) == 2
        ready = sorted(r.ready_at - T0 for r in replicas)  # type: ignore[operator]
        assert ready[:2] == [LOAD_S, LOAD_S]
        assert ready[-1] <= 4 * (LOAD_S + RETRY_S)


async def test_an_engine_that_never_gets_ready_gives_the_slot_back_after_the_timeout() -> None:
    async with fleet_of(2, slots=1, timeout_s=5.0) as (replicas, _):
        assert [r.released for r in replicas] == ["timeout", "timeout"]  # LOAD_S > 5 s
        first, second = sorted(r.started_at - T0 for r in replicas)  # type: ignore[operator]
        assert first == 0 and 5 <= second <= 5 + 2 * RETRY_S


async def test_a_vanished_holder_frees_its_slot_when_its_lease_expires() -> None:
    async with environment() as env:
        gone = LoadGate(env.kube, namespace=NS, storage="nfs", slots=1, identity="gone", lease_duration_s=30)
        waiting = LoadGate(
            env.kube, namespace=NS, storage="nfs", slots=1, identity="next", lease_duration_s=30
        )
        assert await gone.step(env.clock())  # then its pod is killed: no renewal, no release
        taken_at = None
        for _ in range(60):
            env.clock.advance(1)
            if await waiting.step(env.clock()):
                taken_at = env.clock() - T0
                break
        assert taken_at == 31  # first seen at 1 s, expired 30 s later on the waiter's own clock


async def test_the_slot_count_comes_from_the_autoscalers_cold_start() -> None:
    from controller_harness import autoscaler

    async with environment() as env:
        obj = autoscaler(cold_start={"weightsGB": 140, "storageGBps": 10, "maxConcurrentLoads": 2})
        env.fake.add_autoscaler(obj)
        assert await slots_of(env.kube, NS, "llama") == 2
        env.fake.add_autoscaler(autoscaler(name="plain", cold_start={"weightsGB": 140, "storageGBps": 10}))
        with pytest.raises(GateError, match=r"sets no spec\.coldStart\.maxConcurrentLoads"):
            await slots_of(env.kube, NS, "plain")
        with pytest.raises(GateError, match="not found"):
            await slots_of(env.kube, NS, "missing")


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"slots": 1, "autoscaler": "llama"}, "exactly one of --slots"),
        ({"autoscaler": ""}, "set the pod label infscale.io/autoscaler"),
        ({}, "exactly one of --slots"),
        ({"slots": 0}, "greater than or equal to 1"),
        ({"slots": 1, "storage": "NFS_1"}, "must be a DNS label"),
        ({"slots": 1, "identity": ""}, "POD_NAMESPACE and POD_NAME"),
        ({"slots": 1, "listen": "8090"}, "must be host:port"),
    ],
)
def test_settings_name_the_problem(values: dict[str, object], problem: str) -> None:
    base: dict[str, object] = {"namespace": NS, "identity": "llama-0"}
    with pytest.raises(ValueError, match=problem):
        LoadGateSettings(**{**base, **values})


def test_the_command_names_its_problem_in_one_line(tmp_path: object) -> None:
    import subprocess
    import sys

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": "", "HOME": str(tmp_path)}
        return subprocess.run(
            [sys.executable, "-m", "infscale", "loadgate", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )

    missing = run("--namespace=serving", "--identity=llama-0")
    assert missing.returncode == 2
    (line,) = missing.stderr.strip().splitlines()
    assert line.startswith("infscale loadgate: ") and "give exactly one of --slots N or --autoscaler" in line
    no_cluster = run("--namespace=serving", "--identity=llama-0", "--slots=1", "--kubeconfig=/nonexistent")
    assert no_cluster.returncode == 1
    (line,) = no_cluster.stderr.strip().splitlines()  # one line, not a traceback
    assert line.startswith("infscale loadgate: ") and "/nonexistent" in line
