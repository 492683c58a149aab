"""`infscale controller` at scale against the fake kube-apiserver: 1,000 InferenceAutoscalers over
5,000 pods in steady state, then the reaction time to a metric change.

Run: `python -m bench controller` (or `python -m bench.bench_controller`); about three minutes.
Needs tests/controller/fake_apiserver.py (the repository checkout, not the wheel).

Set-up: one namespace, 1,000 Deployments of 5 ready pods each (1 GPU a pod, on 625 GPU nodes of 8),
an InferenceAutoscaler per Deployment (AverageValue 4 of infscale_queue_size, a Holt forecast, a
cold-start model, so capacity is read too), the queue at 20 everywhere: 5 replicas wanted, 5 there.
The fake runs in this process; the controller is the real console script in its own process
(leader election on, the defaults: each object at least every 15 s, metrics every 0.5 s), so its CPU
time and memory are its own (/proc/<pid>). The fake refreshes every sample's timestamp every 5 s,
as the adapter's scrape rounds do, with the values unchanged.

Printed: apiserver requests per second beyond the /scale writes, the Lease and the metric reads
(goal <= 1/s), metric reads per second (the External Metrics API; through the apiserver with
--metrics-source api), the controller's CPU as a share of one core (goal <= 5 %) and its RSS; then
the time from a metric change (one object's queue 20 <-> 40: 5 <-> 10 replicas) to the /scale write
the fake receives (goal p99 <= 1 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "controller"))

from fake_apiserver import FakeKube, serve  # type: ignore[import-not-found]

from autoscaler.controller.kubetime import rfc3339

NS = "bench"
OBJECTS = 1000
PODS_PER_OBJECT = 5
GPUS_PER_NODE = 8
QUEUE = "infscale_queue_size"
STEADY_S = 60.0
TRIALS = 40
WARM_UP_TIMEOUT_S = 600.0
SETTLE_ROUNDS = 8  # of 15 s each


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
    created = rfc3339(time.time() - 600)
    pods = OBJECTS * PODS_PER_OBJECT
    for n in range((pods + GPUS_PER_NODE - 1) // GPUS_PER_NODE):
        fake.add_node(f"gpu-{n}", gpus=GPUS_PER_NODE)
    for i in range(OBJECTS):
        name = f"model-{i}"
        fake.add_deployment(NS, name, PODS_PER_OBJECT, labels={"app": name})
        for k in range(PODS_PER_OBJECT):
            p = i * PODS_PER_OBJECT + k
            fake.add_pod(
                NS,
                f"{name}-{k}",
                labels={"app": name},
                created=created,
                ready_at=created,
                node=f"gpu-{p // 8}",
                gpus=1,
            )
        fake.add_autoscaler(autoscaler(i))
    set_queues(fake, 20.0)


def set_queues(fake: FakeKube, value: float, only: int | None = None) -> None:
    stamp = rfc3339(time.time())
    for i in range(OBJECTS) if only is None else (only,):
        fake.set_metric(NS, QUEUE, value, labels={"deployment": f"model-{i}"}, timestamp=stamp)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def counted(log: list[tuple[str, str]]) -> tuple[dict[str, int], dict[str, int]]:
    """Requests by kind, and the others by method and resource."""
    kinds = {"scale writes": 0, "lease": 0, "metric reads": 0, "other": 0}
    others: dict[str, int] = {}
    for method, path in log:
        if method == "PUT" and path.endswith("/scale"):
            kinds["scale writes"] += 1
        elif "/leases" in path:
            kinds["lease"] += 1
        elif "external.metrics" in path:
            kinds["metric reads"] += 1
        else:
            kinds["other"] += 1
            parts = [p for p in path.split("/") if p]
            resource = (
                parts[-1] if parts[-1] in ("status", "scale") else parts[-1] if len(parts) % 2 else parts[-2]
            )
            others[f"{method} {resource}"] = others.get(f"{method} {resource}", 0) + 1
    return kinds, others


async def bench() -> None:
    load = os.getloadavg()
    print(f"load average (uptime): {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} over 1/5/15 min")
    fake = FakeKube()
    began = time.perf_counter()
    populate(fake)
    print(
        f"set-up: {OBJECTS} objects, {OBJECTS * PODS_PER_OBJECT} pods in {time.perf_counter() - began:.0f} s"
    )
    writes: dict[str, float] = {}
    fake.on_scale_write = lambda name, replicas: writes.__setitem__(name, time.perf_counter())
    async with serve(fake, timeout_s=30) as kube:
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = Path(tmp) / "kubeconfig"
            kubeconfig.write_text(
                yaml.safe_dump(
                    {
                        "apiVersion": "v1",
                        "kind": "Config",
                        "clusters": [
                            {"name": "fake", "cluster": {"server": str(kube.api.configuration.host)}}
                        ],
                        "users": [{"name": "u", "user": {"token": "t"}}],
                        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
                        "current-context": "fake",
                    }
                )
            )
            env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
            env["INFSCALE_CONTROLLER_LEASE_NAMESPACE"] = "infscale-system"
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "infscale",
                "controller",
                f"--kubeconfig={kubeconfig}",
                "--listen=127.0.0.1:0",
                "--identity=bench",
                "--log-level=WARNING",
                env=env,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            try:
                await measure(fake, process.pid, writes)
            finally:
                process.terminate()
                await asyncio.wait_for(process.wait(), 60)


async def refresh_samples(fake: FakeKube, stop: asyncio.Event) -> None:
    """As the adapter's scrape rounds: new timestamps every 5 s, the same values."""
    while not stop.is_set():
        set_queues(fake, 20.0)
        for i, value in list(current.items()):
            set_queues(fake, value, only=i)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 5.0)


current: dict[int, float] = {}


async def measure(fake: FakeKube, pid: int, writes: dict[str, float]) -> None:
    stop = asyncio.Event()
    refresher = asyncio.create_task(refresh_samples(fake, stop))
    try:
        began = time.perf_counter()
        # warm-up: the lists, one reconcile and one status write per object
        while time.perf_counter() - began < WARM_UP_TIMEOUT_S:
            written = sum(
                1 for o in fake.autoscalers.values() if (o.get("status") or {}).get("desiredReplicas")
            )
            if written == OBJECTS:
                break
            await asyncio.sleep(1.0)
        else:
            raise AssertionError(
                f"only {written} of {OBJECTS} statuses written after {WARM_UP_TIMEOUT_S:.0f} s"
            )
        took = time.perf_counter() - began
        print(f"warm-up: every object reconciled and its status written after {took:.0f} s")
        # settle: one more round of reconciles (tick_s 15 s) after the last first write, in which each
        # forecaster, primed on its second value, is written once more (status_interval_s 15 s); on a
        # loaded machine that round runs late: wait until a whole resync passes without such writes
        await asyncio.sleep(20.0)
        for _ in range(SETTLE_ROUNDS):
            fake.log.clear()
            await asyncio.sleep(15.0)
            if counted(fake.log)[0]["other"] == 0:
                break
        else:
            print(f"  (still writing after {SETTLE_ROUNDS} settle rounds: the figures include those writes)")

        fake.log.clear()
        cpu0, t0 = cpu_seconds(pid), time.perf_counter()
        await asyncio.sleep(STEADY_S)
        cpu1, t1 = cpu_seconds(pid), time.perf_counter()
        wall = t1 - t0
        kinds, others = counted(fake.log)
        print(f"steady state, {wall:.0f} s, {OBJECTS} objects, {OBJECTS * PODS_PER_OBJECT} pods:")
        print(
            "  apiserver requests beyond /scale writes, the Lease and metric reads:"
            f" {kinds['other'] / wall:.2f}/s ({kinds['other']} in {wall:.0f} s; goal <= 1/s)"
        )
        print(
            f"  metric reads: {kinds['metric reads'] / wall:.2f}/s; lease: {kinds['lease'] / wall:.2f}/s;"
            f" /scale writes: {kinds['scale writes']}"
        )
        if others:
            print("  the others: " + ", ".join(f"{k} {v}" for k, v in sorted(others.items())))
        share = (cpu1 - cpu0) / wall * 100
        print(f"  controller CPU: {share:.1f} % of one core (goal <= 5 %); RSS {rss_mb(pid):.0f} MB")

        rng = random.Random(7)
        reactions: list[float] = []
        value = 20.0
        for _ in range(TRIALS):
            await asyncio.sleep(rng.uniform(0.3, 1.3))
            value = 40.0 if value == 20.0 else 20.0
            current[0] = value
            writes.pop("model-0", None)
            changed = time.perf_counter()
            set_queues(fake, value, only=0)
            for _ in range(1000):  # hang guard: 10 s
                if "model-0" in writes:
                    break
                await asyncio.sleep(0.005)
            else:
                raise AssertionError("no /scale write within 10 s")
            reactions.append(writes["model-0"] - changed)
        print(f"reaction, metric change -> /scale write, {TRIALS} trials (5 <-> 10 replicas):")
        print(
            f"  p50 {statistics.median(reactions):.2f} s, p90 {percentile(reactions, 0.9):.2f} s,"
            f" p99 {percentile(reactions, 0.99):.2f} s, max {max(reactions):.2f} s (goal p99 <= 1 s)"
        )
    finally:
        stop.set()
        await refresher


def main() -> None:
    asyncio.run(bench())


if __name__ == "__main__":
    main()
