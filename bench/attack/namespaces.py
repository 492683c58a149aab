"""Reads of many distinct namespaces, against the adapter's per-namespace answer cache.

`python -m bench attack namespaces [--namespaces 20660]`

One metric read per namespace over keep-alive connections (20,660 namespaces once grew the cache
by 10.6 MB for good). Printed: the adapter's RSS idle, after the first quarter and after all of
them; the growth over the last three quarters is the unbounded part (goal: about none, the cache
being an LRU of 4,096 answers).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
from typing import Any

from bench.attack.harness import (
    API,
    adapter,
    dev_adapter_args,
    engines,
    insecure_client_context,
    load_average,
    rss_mb,
    vllm_exposition,
)


async def _reader(port: int, namespaces: list[str], statuses: dict[int, int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=insecure_client_context())
    for namespace in namespaces:
        path = f"{API}/namespaces/{namespace}/infscale_queue_size"
        writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = next(
            int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        statuses[status] = statuses.get(status, 0) + 1
    writer.close()


async def _read_all(port: int, namespaces: list[str], statuses: dict[int, int], connections: int = 8) -> None:
    await asyncio.gather(*(_reader(port, namespaces[i::connections], statuses) for i in range(connections)))


async def _run(count: int) -> dict[str, Any]:
    names = [f"ns-{i:05d}" for i in range(count)]
    quarter = count // 4
    with engines({"/pod-0/metrics": vllm_exposition()}) as urls, adapter(*dev_adapter_args(urls)) as running:
        await asyncio.sleep(2)
        statuses: dict[int, int] = {}
        await _read_all(running.port, ["default"] * 200, statuses)  # warm the request path
        idle = rss_mb(running.pid)
        await _read_all(running.port, names[:quarter], statuses)
        await asyncio.sleep(1)
        first = rss_mb(running.pid)
        await _read_all(running.port, names[quarter:], statuses)
        await asyncio.sleep(1)
        last = rss_mb(running.pid)
    gc.collect()
    return {"idle": idle, "first": first, "last": last, "quarter": quarter, "statuses": statuses}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench attack namespaces")
    parser.add_argument("--namespaces", type=int, default=20_660)
    args = parser.parse_args(argv)
    print(f"load average {load_average()}")
    r = asyncio.run(_run(args.namespaces))
    growth = float(r["last"]) - float(r["first"])
    per_1000 = growth / ((args.namespaces - int(r["quarter"])) / 1000)
    print(
        f"namespaces: {args.namespaces:,} distinct namespaces read once each; answers {r['statuses']}\n"
        f"  RSS idle {r['idle']:.1f} MB, after {r['quarter']:,} namespaces {r['first']:.1f} MB, after all "
        f"{r['last']:.1f} MB: {growth:+.1f} MB over the last {args.namespaces - int(r['quarter']):,} "
        f"({per_1000:+.2f} MB per 1,000)"
    )
    ok = growth <= 2.0
    print(
        "goals (no growth once the cache is full: <= 2 MB over the last three quarters):",
        "met" if ok else "NOT met",
    )
    return 0 if ok else 1
