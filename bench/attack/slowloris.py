"""Slowloris: TLS connections that never finish their request head.

`python -m bench attack slowloris [--connections 600] [--trickle-s 10]`

Phase 1, under the cap: N connections each send `GET /healthz HTTP/1.1`, one header, then one more
header byte every `--trickle-s` seconds, forever. Printed: the adapter's RSS idle, with them open
(and per connection) and 5 s after the server closed them; how long the server took to close each
(the header-read timeout, 32 s by default); /healthz latency from fresh connections meanwhile.
Phase 2, over the cap: an adapter with `--max-connections 200` gets N such connections at once;
printed: how many it refused and its RSS.

Goals (issue 13): every slow connection closed within 60 s; RSS within 20 % of idle after they
close; /healthz answering throughout.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import statistics
import time

from bench.attack.harness import (
    adapter,
    dev_adapter_args,
    engines,
    get,
    insecure_client_context,
    load_average,
    metric_samples,
    percentile,
    rss_mb,
    vllm_exposition,
)

HEAD = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: "


async def _slow_client(port: int, trickle_s: float, opened: list[float], closed_after: list[float]) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=insecure_client_context())
    except (OSError, ssl.SSLError):
        closed_after.append(0.0)  # refused at accept (the handshake never happened)
        return
    started = time.monotonic()
    opened.append(started)
    writer.write(HEAD)

    async def trickle() -> None:
        while True:
            await asyncio.sleep(trickle_s)
            writer.write(b"a")

    trickler = asyncio.create_task(trickle())
    try:
        while await reader.read(1024):
            pass
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        trickler.cancel()
        closed_after.append(time.monotonic() - started)
        writer.close()


async def _health_probe(port: int, stop: asyncio.Event, latencies: list[float], failures: list[int]) -> None:
    while not stop.is_set():
        answer = await get(port, "/healthz", timeout_s=5.0)
        if answer.status == 200:
            latencies.append(answer.seconds)
        else:
            failures.append(answer.status)
        await asyncio.sleep(0.5)


async def _under_cap(connections: int, trickle_s: float) -> dict[str, float]:
    with engines({"/pod-0/metrics": vllm_exposition()}) as urls, adapter(*dev_adapter_args(urls)) as running:
        for _ in range(20):  # warm: connections, a read, the scrape loop
            await get(running.port, "/healthz")
            await get(
                running.port, "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/infscale_queue_size"
            )
        await asyncio.sleep(3)
        idle = rss_mb(running.pid)
        opened: list[float] = []
        closed_after: list[float] = []
        clients = [
            asyncio.create_task(_slow_client(running.port, trickle_s, opened, closed_after))
            for _ in range(connections)
        ]
        while len(opened) + len(closed_after) < connections:
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        peak = rss_mb(running.pid)
        stop = asyncio.Event()
        latencies: list[float] = []
        failures: list[int] = []
        probe = asyncio.create_task(_health_probe(running.port, stop, latencies, failures))
        try:
            async with asyncio.timeout(120):
                await asyncio.gather(*clients)
        except TimeoutError:
            pass
        still_open = sum(1 for c in clients if not c.done())
        for c in clients:
            c.cancel()
        stop.set()
        await probe
        peak = max(peak, rss_mb(running.pid))
        await asyncio.sleep(5)
        after = rss_mb(running.pid)
        metrics = (await get(running.port, "/metrics")).body.decode()
        timed_out = metric_samples(metrics, "infscale_adapter_connections_timed_out_total")
    return {
        "connections": connections,
        "idle": idle,
        "peak": peak,
        "after": after,
        "per_connection_kb": (peak - idle) * 1024 / connections,
        "close_max": max(closed_after) if closed_after else float("nan"),
        "close_median": statistics.median(closed_after) if closed_after else float("nan"),
        "still_open": still_open,
        "health_ok": len(latencies),
        "health_failed": len(failures),
        "health_p99_ms": percentile(latencies, 0.99) * 1e3,
        "timed_out_header": timed_out.get('{phase="header"}', 0.0),
    }


async def _over_cap(connections: int, cap: int) -> dict[str, float]:
    with (
        engines({"/pod-0/metrics": vllm_exposition()}) as urls,
        adapter(*dev_adapter_args(urls, "--max-connections", str(cap))) as running,
    ):
        await asyncio.sleep(2)
        idle = rss_mb(running.pid)
        opened: list[float] = []
        closed_after: list[float] = []
        clients = [
            asyncio.create_task(_slow_client(running.port, 10.0, opened, closed_after))
            for _ in range(connections)
        ]
        await asyncio.sleep(5)
        peak = rss_mb(running.pid)
        for c in clients:
            c.cancel()
        await asyncio.gather(*clients, return_exceptions=True)
        await asyncio.sleep(3)
        metrics = (await get(running.port, "/metrics")).body.decode()
    refused = metric_samples(metrics, "infscale_adapter_connections_refused_total").get("", 0.0)
    return {"connections": connections, "cap": cap, "refused": refused, "idle": idle, "peak": peak}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench attack slowloris")
    parser.add_argument("--connections", type=int, default=600)
    parser.add_argument("--trickle-s", type=float, default=10.0, help="one more header byte this often")
    args = parser.parse_args(argv)
    print(f"load average {load_average()}")
    r = asyncio.run(_under_cap(args.connections, args.trickle_s))
    back = (r["after"] - r["idle"]) / r["idle"] * 100
    print(
        f"slowloris: {r['connections']} TLS connections trickling a header every {args.trickle_s:g} s\n"
        f"  RSS idle {r['idle']:.1f} MB, with them open {r['peak']:.1f} MB "
        f"({r['per_connection_kb']:.0f} KB each), 5 s after they closed {r['after']:.1f} MB "
        f"({back:+.0f} % of idle)\n"
        f"  closed by the server after {r['close_median']:.1f} s median, {r['close_max']:.1f} s max; "
        f"{r['still_open']:.0f} still open after 120 s; "
        f"header timeouts counted: {r['timed_out_header']:.0f}\n"
        f"  /healthz meanwhile: {r['health_ok']:.0f} ok, {r['health_failed']:.0f} failed, "
        f"p99 {r['health_p99_ms']:.1f} ms"
    )
    ok = r["close_max"] <= 60 and r["still_open"] == 0 and back <= 20 and r["health_failed"] == 0
    c = asyncio.run(_over_cap(args.connections, 200))
    print(
        f"over the cap: {c['connections']:.0f} slow connections against --max-connections {c['cap']:.0f}: "
        f"{c['refused']:.0f} refused at accept; RSS {c['idle']:.1f} -> {c['peak']:.1f} MB"
    )
    ok = ok and c["refused"] >= c["connections"] - c["cap"]
    print(
        "goals (closed ≤ 60 s, RSS back within 20 %, /healthz answering, cap holds):",
        "met" if ok else "NOT met",
    )
    return 0 if ok else 1
