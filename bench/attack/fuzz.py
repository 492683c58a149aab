"""Fuzzed requests against the adapter with delegated auth, as the aggregator would send them
(front-proxy certificate, the HPA as X-Remote-User) so they reach the routes, and anonymously.

`python -m bench attack fuzz [--requests 10000] [--seed 0]`

Paths from the API's own words mixed with `..`, `%2F`, `%00`, percent-encoded bytes, long and
empty segments; label selectors from the selector grammar's characters; random methods, Accept
headers and header counts. Printed: requests, answers by status class, 5xx (must be 0), answers
that were no Status JSON although an error, and whether the adapter still answers afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import ssl
from collections import Counter
from typing import Any
from urllib.parse import quote

from bench.attack.harness import API, engines, load_average, vllm_exposition
from bench.attack.kube import AuthAdapter, auth_adapter

HPA = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
WORDS = [
    "apis", "external.metrics.k8s.io", "v1beta1", "namespaces", "default", "locked", "keda", "v1",
    "infscale_queue_size", "infscale_kv_cache_usage", "healthz", "metrics", "version", "status",
    "finalize", "..", ".", "%2F", "%2e%2e", "%00", "%ff", "%", "a" * 300, "", "UPPER", "ns-1",
]  # fmt: skip
SELECTOR = "abcxyz=!,() inotex-./_09"
ACCEPT = [
    "application/json", "*/*", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
    "text/html", "application/yaml", "", "application/json;q=0", "application/*;q=0.5, */*;q=0.1",
]  # fmt: skip


def fuzzed_request(rng: random.Random, proxied: bool) -> bytes:
    method = rng.choice(["GET"] * 8 + ["HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"])
    if rng.random() < 0.5:
        path = f"{API}/namespaces/{rng.choice(WORDS)}/{rng.choice(WORDS)}"
    else:
        path = "/" + "/".join(rng.choice(WORDS) for _ in range(rng.randint(0, 7)))
    if rng.random() < 0.2:
        path += "/" + "".join(f"%{rng.randrange(256):02X}" for _ in range(rng.randint(1, 8)))
    query = []
    if rng.random() < 0.6:
        selector = "".join(rng.choice(SELECTOR) for _ in range(rng.randint(0, 40)))
        query.append(f"labelSelector={quote(selector)}")
    if rng.random() < 0.1:
        query.append(rng.choice(["watch=true", "watch=1", "timeout=1s", "labelSelector", "=", "&&"]))
    target = path + ("?" + "&".join(query) if query else "")
    headers = [("Host", "localhost"), ("Accept", rng.choice(ACCEPT))]
    if proxied:
        headers += [("X-Remote-User", HPA), ("X-Remote-Group", "system:authenticated")]
    for _ in range(rng.choice([0, 0, 0, 1, 5, 40])):
        headers.append((f"X-Fuzz-{rng.randrange(10**6)}", "v" * rng.choice([1, 100, 4000])))
    if method in ("POST", "PUT", "PATCH") and rng.random() < 0.5:
        body = b"x" * rng.choice([0, 10, 70_000])
        headers.append(("Content-Length", str(len(body))))
    else:
        body = b""
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head.encode() + body


async def _worker(
    target: AuthAdapter, rng: random.Random, count: int, statuses: Counter[int], bad_bodies: list[str]
) -> None:
    proxied = rng.random() < 0.8
    context = target.context(target.pki.front_proxy if proxied else None)
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    for _ in range(count):
        data = fuzzed_request(rng, proxied)
        for _attempt in range(2):  # the server closes after a malformed request: reconnect once
            try:
                if connection is None:
                    connection = await asyncio.open_connection(
                        "127.0.0.1", target.running.port, ssl=context, server_hostname="localhost"
                    )
                reader, writer = connection
                writer.write(data)
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                status = int(head.split(b" ", 2)[1])
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                body = await reader.readexactly(length) if length and not data.startswith(b"HEAD") else b""
                statuses[status] += 1
                if status >= 400 and body and b"application/json" in head.lower():
                    doc = json.loads(body)
                    if doc.get("kind") != "Status" or doc.get("code") != status:
                        bad_bodies.append(body[:120].decode(errors="replace"))
                if b"connection: close" in head.lower():
                    writer.close()
                    connection = None
                break
            except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, TimeoutError, ValueError):
                if connection is not None:
                    connection[1].close()
                connection = None
        else:
            statuses[0] += 1  # no answer twice
    if connection is not None:
        connection[1].close()


async def _run(requests: int, seed: int) -> dict[str, Any]:
    with engines({"/pod-0/metrics": vllm_exposition()}) as urls:
        async with auth_adapter(urls) as target:
            statuses: Counter[int] = Counter()
            bad_bodies: list[str] = []
            workers = 8
            await asyncio.gather(
                *(
                    _worker(target, random.Random(seed * 100 + w), requests // workers, statuses, bad_bodies)
                    for w in range(workers)
                )
            )
            from bench.attack.auth import IDENTITIES, request

            alive = await request(
                target, IDENTITIES[11], "GET", f"{API}/namespaces/default/infscale_queue_size"
            )
            tracebacks = sum(1 for line in target.running.log if "Traceback" in line)
    return {"statuses": statuses, "bad_bodies": bad_bodies, "alive": alive, "tracebacks": tracebacks}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench attack fuzz")
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"load average {load_average()}")
    r = asyncio.run(_run(args.requests, args.seed))
    statuses = r["statuses"]
    assert isinstance(statuses, Counter)
    classes = Counter(f"{s // 100}xx" if s else "no answer" for s in statuses.elements())
    server_errors = sum(n for s, n in statuses.items() if s >= 500)
    print(
        f"fuzz: {sum(statuses.values()):,} requests (seed {args.seed}): {dict(sorted(classes.items()))}\n"
        f"  by status: {dict(sorted(statuses.items()))}\n"
        f"  5xx: {server_errors}; error answers that were no Status of their code: {len(r['bad_bodies'])}; "
        f"tracebacks in the log: {r['tracebacks']}; a read afterwards: {r['alive']}"
    )
    ok = server_errors == 0 and not r["bad_bodies"] and r["alive"] == 200 and r["tracebacks"] == 0
    print("goals (0 5xx, every error a Status, still serving):", "met" if ok else "NOT met")
    return 0 if ok else 1
