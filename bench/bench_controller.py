"""The controller against the fake kube-apiserver on loopback: reaction time and CPU per 100 objects.

Run: `python -m bench.bench_controller` (or `python -m bench controller`); about a minute.
Needs tests/controller/fake_apiserver.py (the repository checkout, not the wheel).

Set-up: 100 InferenceAutoscalers, each on its own Deployment with 2 ready pods, a Holt forecast and a
cold-start model (so every tick also reads nodes and every pod bound to a node); 10 GPU nodes. The
fake runs on the main thread's event loop, the controller (`run()`, the real-time driver, leader
election on) on its own thread and loop, so `time.thread_time()` there is the controller's CPU
alone. Both share one interpreter: the fake's work competes for the GIL, which makes the reaction
times pessimistic.

- CPU: controller thread CPU seconds per tick over 100 objects, at a 1 s tick, steady load.
- Reaction: one object's queue flips between 8 and 24 (AverageValue 4: 2 <-> 6 replicas) at a random
  moment; the time from the metric change to the /scale write the fake receives. Goal p99 <= 1.5 s
  with a 1 s tick (a change waits for the next tick: uniform 0-1 s, plus the tick's own work).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "controller"))

from fake_apiserver import FakeKube, serve  # type: ignore[import-not-found]
from kubernetes_asyncio import client

from autoscaler.controller.kube import KubeClient
from autoscaler.controller.kubetime import rfc3339
from autoscaler.controller.leader import LeaderElector
from autoscaler.controller.loop import Controller, run
from autoscaler.controller.metrics import ApiMetricsReader
from autoscaler.controller.settings import ControllerSettings
from autoscaler.controller.telemetry import Telemetry

NS = "bench"
OBJECTS = 100
TICK_S = 1.0
STEADY_S = 20.0
TRIALS = 40
QUEUE = "infscale_queue_size"


def autoscaler(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "infscale.io/v1alpha1",
        "kind": "InferenceAutoscaler",
        "metadata": {"name": f"model-{i}", "namespace": NS},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"model-{i}"},
            "minReplicas": 1,
            "maxReplicas": 20,
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": QUEUE, "selector": {"matchLabels": {"deployment": f"model-{i}"}}},
                        "target": {"type": "AverageValue", "averageValue": "4"},
                    },
                }
            ],
            "behavior": {
                "scaleUp": {"policies": [{"type": "Pods", "value": 20, "periodSeconds": 1}]},
                "scaleDown": {"stabilizationWindowSeconds": 0},
            },
            "coldStart": {"weightsGB": 16, "storageGBps": 10, "warmupSeconds": 10, "gpusPerReplica": 1},
            "prediction": {"forecaster": "holt", "leadTimeSeconds": 0},
        },
    }


def populate(fake: FakeKube) -> None:
    now = rfc3339(time.time() - 600)
    for n in range(10):
        fake.add_node(f"gpu-{n}", gpus=8)
    for i in range(OBJECTS):
        name = f"model-{i}"
        fake.add_deployment(NS, name, 2, labels={"app": name})
        for k in range(2):
            fake.add_pod(
                NS,
                f"{name}-{k}",
                labels={"app": name},
                created=now,
                ready_at=now,
                node=f"gpu-{(2 * i + k) % 10}",
                gpus=1,
            )
        fake.add_autoscaler(autoscaler(i))
    set_queues(fake, 8.0)


def set_queues(fake: FakeKube, value: float, only: int | None = None) -> None:
    stamp = rfc3339(time.time())
    for i in range(OBJECTS) if only is None else (only,):
        fake.set_metric(NS, QUEUE, value, labels={"deployment": f"model-{i}"}, timestamp=stamp)


class ControllerThread(threading.Thread):
    def __init__(self, host: str) -> None:
        super().__init__(daemon=True)
        self.host = host
        self.started_loop = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop_event: asyncio.Event | None = None
        self.controller: Controller | None = None
        self.cpu_marks: list[tuple[float, float]] = []  # (thread CPU s, ticks) at each mark

    def mark(self) -> None:
        """Record (CPU, ticks) from inside the controller's thread."""
        assert self.loop is not None
        done = threading.Event()

        def take() -> None:
            assert self.controller is not None
            ticks = (
                self.controller.telemetry.registry.get_sample_value("infscale_tick_duration_seconds_count")
                or 0
            )
            self.cpu_marks.append((time.thread_time(), ticks))
            done.set()

        self.loop.call_soon_threadsafe(take)
        done.wait(10)

    def stop(self) -> None:
        assert self.loop is not None and self.stop_event is not None
        self.loop.call_soon_threadsafe(self.stop_event.set)
        self.join(30)

    def run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        settings = ControllerSettings(tick_s=TICK_S, identity="bench", concurrency=32, status_interval_s=15)
        api = client.ApiClient(configuration=client.Configuration(host=self.host))
        kube = KubeClient(api, timeout_s=5)
        elector = LeaderElector(
            kube,
            namespace="infscale-system",
            name="bench",
            identity="bench",
            lease_duration_s=15,
            renew_deadline_s=10,
        )
        self.controller = Controller(
            settings, kube, ApiMetricsReader(kube), telemetry=Telemetry(), elector=elector
        )
        self.loop = asyncio.get_running_loop()
        self.stop_event = asyncio.Event()
        self.started_loop.set()
        try:
            await run(self.controller, self.stop_event, retry_period_s=settings.retry_period_s)
        finally:
            await api.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def bench() -> None:
    fake = FakeKube()
    populate(fake)
    writes: dict[str, float] = {}
    fake.on_scale_write = lambda name, replicas: writes.__setitem__(name, time.perf_counter())
    async with serve(fake) as kube:
        thread = ControllerThread(str(kube.api.configuration.host))
        thread.start()
        thread.started_loop.wait(10)
        await asyncio.sleep(3 * TICK_S)  # leader election, first ticks, status writes settle
        await asyncio.to_thread(thread.mark)
        started = time.perf_counter()
        await asyncio.sleep(STEADY_S)
        await asyncio.to_thread(thread.mark)
        wall = time.perf_counter() - started
        (cpu0, ticks0), (cpu1, ticks1) = thread.cpu_marks[-2:]
        ticks = ticks1 - ticks0
        per_tick = (cpu1 - cpu0) / max(ticks, 1)
        print(f"objects: {OBJECTS}, tick: {TICK_S:g} s, steady for {wall:.1f} s: {ticks:.0f} ticks")
        print(f"controller CPU per tick (100 objects): {per_tick * 1000:.0f} ms")
        print(
            f"  = {per_tick / TICK_S * 100:.0f}% of one core at a 1 s tick,"
            f" {per_tick / 5 * 100:.1f}% at the default 5 s tick"
        )
        assert thread.controller is not None
        registry = thread.controller.telemetry.registry
        total = registry.get_sample_value("infscale_tick_duration_seconds_sum") or 0.0
        count = registry.get_sample_value("infscale_tick_duration_seconds_count") or 1.0
        print(f"tick wall time, mean over the run: {total / count * 1000:.0f} ms")
        errors = sum(
            sample.value
            for metric in registry.collect()
            if metric.name == "infscale_errors"
            for sample in metric.samples
            if sample.name == "infscale_errors_total"
        )
        print(f"failed reads/writes during the run: {errors:.0f}")

        rng = random.Random(7)
        reactions: list[float] = []
        value = 8.0
        for _ in range(TRIALS):
            await asyncio.sleep(rng.uniform(0.2, 1.2))
            value = 24.0 if value == 8.0 else 8.0
            writes.pop("model-0", None)
            changed = time.perf_counter()
            set_queues(fake, value, only=0)
            for _ in range(1000):  # hang guard: 10 s
                if "model-0" in writes:
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("no /scale write within 10 s")
            reactions.append(writes["model-0"] - changed)
        await asyncio.to_thread(thread.stop)  # the fake must keep answering while the controller stops
    print(f"reaction time, metric change -> /scale write, {TRIALS} trials, 1 s tick, 100 objects:")
    print(
        f"  p50 {statistics.median(reactions):.2f} s, p90 {percentile(reactions, 0.9):.2f} s,"
        f" p99 {percentile(reactions, 0.99):.2f} s, max {max(reactions):.2f} s (goal p99 <= 1.5 s)"
    )


def main() -> None:
    asyncio.run(bench())


if __name__ == "__main__":
    main()
