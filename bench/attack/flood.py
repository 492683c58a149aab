"""Engine flood: pods whose exposition is huge, against the adapter's event loop and memory.

`python -m bench attack flood [--seconds 30]`

Two healthy vLLM pods share the adapter with two hostile ones:
- `flood`: ~260,000 distinct series of a metric the preset reads (15 MB, under the 16 MiB body
  cap), the same every scrape;
- `churn`: 9,999 series (under every bound) with new labels every scrape, the worst case for the
  series cache.
Meanwhile /healthz is probed on a fresh TLS connection every 50 ms, as the kubelet does, and the
healthy pods' metric is read. Printed: /healthz p50/p99/max, the metric's value (the healthy pods'
sum, 7), RSS before, peak and after, scrape errors by reason.

Goal (issue 13): /healthz p99 < 100 ms during the flood; the healthy pods keep their value.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from bench.attack.harness import (
    API,
    adapter,
    dev_adapter_args,
    engines,
    get,
    load_average,
    metric_samples,
    percentile,
    rss_mb,
    vllm_exposition,
)

FLOOD_SERIES = 260_000


def flood_exposition() -> bytes:
    lines = [f'vllm:num_requests_waiting{{i="{i}",model_name="m"}} 1\n' for i in range(FLOOD_SERIES)]
    return "".join(lines).encode()


async def _run(seconds: float, hostile: bool) -> dict[str, Any]:
    flood = flood_exposition() if hostile else b""
    bodies: dict[str, str | bytes] = {
        "/good-0/metrics": vllm_exposition(waiting=3, running=1),
        "/good-1/metrics": vllm_exposition(waiting=4, running=2),
        **({"/flood/metrics": flood} if hostile else {}),
    }
    rotating = {"/churn/metrics": 9_999} if hostile else {}
    with engines(bodies, rotating) as urls, adapter(*dev_adapter_args(urls)) as running:
        read = f"{API}/namespaces/default/infscale_queue_size"
        await asyncio.sleep(2)
        idle = rss_mb(running.pid)
        latencies: list[float] = []
        failures = 0
        values: list[float] = []
        peak = idle
        deadline = time.monotonic() + seconds
        next_read = 0.0
        while time.monotonic() < deadline:
            answer = await get(running.port, "/healthz", timeout_s=5)
            if answer.status == 200:
                latencies.append(answer.seconds)
            else:
                failures += 1
            if time.monotonic() >= next_read:
                next_read = time.monotonic() + 1.0
                metric = await get(running.port, read)
                if metric.status == 200:
                    items = json.loads(metric.body)["items"]
                    values += [float(i["value"]) for i in items if i["metricLabels"].get("model") != "churn"]
                peak = max(peak, rss_mb(running.pid))
            await asyncio.sleep(0.05)
        metrics = (await get(running.port, "/metrics")).body.decode()
        after = rss_mb(running.pid)
    errors = metric_samples(metrics, "infscale_adapter_scrape_errors_total")
    return {
        "flood_mb": len(flood) / 1e6,
        "probes": len(latencies) + failures,
        "failures": failures,
        "p50_ms": percentile(latencies, 0.5) * 1e3,
        "p99_ms": percentile(latencies, 0.99) * 1e3,
        "max_ms": max(latencies, default=float("nan")) * 1e3,
        "values": sorted(set(values)),
        "idle": idle,
        "peak": peak,
        "after": after,
        "errors": {k: v for k, v in errors.items() if v},
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench attack flood")
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args(argv)
    print(f"load average {load_average()}")
    calm = asyncio.run(_run(args.seconds / 2, hostile=False))
    print(
        f"calm, for reference (the 2 healthy pods only): /healthz p50 {calm['p50_ms']:.1f} ms, "
        f"p99 {calm['p99_ms']:.1f} ms, max {calm['max_ms']:.1f} ms; RSS {calm['peak']:.1f} MB"
    )
    r = asyncio.run(_run(args.seconds, hostile=True))
    print(
        f"flood: 2 healthy pods, one with {FLOOD_SERIES:,} series ({r['flood_mb']:.1f} MB), one with 9,999 "
        f"new series every scrape, {args.seconds:g} s\n"
        f"  /healthz on fresh TLS connections: {r['probes']} probes, {r['failures']} failed, "
        f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, max {r['max_ms']:.1f} ms\n"
        f"  infscale_queue_size served: {r['values']} (the healthy pods: 3 + 4 = 7)\n"
        f"  RSS {r['idle']:.1f} MB before, {r['peak']:.1f} MB peak, {r['after']:.1f} MB after\n"
        f"  scrape errors: {r['errors']}"
    )
    ok = r["p99_ms"] < 100 and r["failures"] == 0 and r["values"] == [7.0]
    print("goals (/healthz p99 < 100 ms, healthy pods served):", "met" if ok else "NOT met")
    return 0 if ok else 1
