"""Authentication and authorization bypass attempts, a random-token flood and forged log lines,
against the adapter with delegated auth (TLS, front-proxy CA, x509 client CA, TokenReview and
SubjectAccessReview at the test suite's mock kube-apiserver).

`python -m bench attack auth [--tokens 2000]`

RBAC of the mock: the HPA, `alice` (x509) and `token-reader` may read external metrics except in
namespace `locked`; everyone authenticated may read discovery. Every attempt below must be refused
(401/403/404/405/429, or the TLS handshake refused); a 2xx is a bypass. Printed: attempts,
bypasses, 5xx; TokenReviews the flood of random tokens cost; forged log lines.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.attack.harness import API, engines, load_average, vllm_exposition
from bench.attack.kube import AuthAdapter, auth_adapter

HPA = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
READ = "infscale_queue_size"


@dataclass(frozen=True)
class Identity:
    name: str
    cert: str | None  # which PKI certificate: front_proxy, intruder, no_client_auth, foreign, alice
    headers: tuple[tuple[str, str], ...] = ()


# who may read namespace `default` (nobody may read `locked`), and who is authenticated at all
ALLOWED_DEFAULT = {"aggregator as the HPA", "alice (x509)", "token-reader"}
AUTHENTICATED = ALLOWED_DEFAULT | {"aggregator as nobody", "authenticated nobody"}
MASTERS = ("X-Remote-Group", "system:masters")
IDENTITIES = [
    Identity("anonymous", None),
    Identity("anonymous claiming the HPA", None, (("X-Remote-User", HPA), MASTERS)),
    Identity("intruder CN", "intruder", (("X-Remote-User", HPA),)),
    Identity("front-proxy CA cert without clientAuth", "no_client_auth", (("X-Remote-User", HPA),)),
    Identity("foreign CA", "foreign", (("X-Remote-User", HPA),)),
    Identity("aggregator without a user", "front_proxy"),
    Identity("aggregator as nobody", "front_proxy", (("X-Remote-User", "nobody"),)),
    Identity("random token", None, (("Authorization", "Bearer not-a-token"),)),
    Identity("authenticated nobody", None, (("Authorization", "Bearer nobody-token"),)),
    Identity("empty bearer", None, (("Authorization", "Bearer "),)),
    Identity("basic auth", None, (("Authorization", "Basic YWxpY2U6eA=="),)),
    Identity("aggregator as the HPA", "front_proxy", (("X-Remote-User", HPA),)),
    Identity("alice (x509)", "alice", (("X-Remote-User", "system:admin"), MASTERS)),
    Identity("token-reader", None, (("Authorization", "Bearer reader-token"), MASTERS)),
]  # fmt: skip

DEFAULT_PATHS = [
    f"{API}/namespaces/default/{READ}",
    f"/keda/v1/namespaces/default/{READ}",
    f"{API}/namespaces/default/{READ}?labelSelector=model%3Dm",
]
DISCOVERY_PATHS = ["/apis", f"{API}", "/version", "/metrics"]
LOCKED_PATHS = [
    f"{API}/namespaces/locked/{READ}",
    f"/keda/v1/namespaces/locked/{READ}",
    f"{API}/namespaces/default/../locked/{READ}",
    f"{API}/namespaces/default/%2e%2e/locked/{READ}",
    f"{API}/namespaces/locked%2F{READ}",
    f"//apis/external.metrics.k8s.io/v1beta1/namespaces/locked/{READ}",
    f"{API}/namespaces/locked/{READ}?namespace=default",
    f"{API}/namespaces/LOCKED/{READ}",
    f"/healthz/../apis/external.metrics.k8s.io/v1beta1/namespaces/locked/{READ}",
]


async def request(
    target: AuthAdapter,
    identity: Identity,
    method: str,
    path: str,
    extra: Sequence[tuple[str, str]] = (),
    source: str = "127.0.0.1",
) -> int:
    """The status code, or 0 when the connection or handshake was refused."""
    certificate = getattr(target.pki, identity.cert) if identity.cert else None
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in (*identity.headers, *extra)) + "\r\n"
    try:
        async with asyncio.timeout(10):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1",
                target.running.port,
                ssl=target.context(certificate),
                server_hostname="localhost",
                local_addr=(source, 0),  # the client address the failure budget is kept by
            )
            writer.write(head.encode())
            data = await reader.read()
            writer.close()
    except (ConnectionError, ssl.SSLError, TimeoutError):
        return 0
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0


async def _attempts(target: AuthAdapter) -> tuple[int, list[str], int]:
    attempts, bypasses, server_errors = 0, [], 0

    async def attempt(identity: Identity, method: str, path: str) -> None:
        nonlocal attempts, server_errors
        status = await request(target, identity, method, path)
        attempts += 1
        server_errors += status >= 500
        if 200 <= status < 300:
            bypasses.append(f"{identity.name}: {method} {path} -> {status}")

    for identity in IDENTITIES:
        for path in LOCKED_PATHS:
            await attempt(identity, "GET", path)
        if identity.name not in ALLOWED_DEFAULT:
            for path in DEFAULT_PATHS:
                await attempt(identity, "GET", path)
            await attempt(identity, "HEAD", DEFAULT_PATHS[0])
        if identity.name not in AUTHENTICATED:  # discovery is open to every authenticated user
            for path in DISCOVERY_PATHS:
                await attempt(identity, "GET", path)
        for method in ("POST", "PUT", "DELETE"):
            await attempt(identity, method, DEFAULT_PATHS[0])
    return attempts, bypasses, server_errors


async def _token_flood(target: AuthAdapter, tokens: int) -> tuple[int, float, dict[int, int]]:
    before = len(target.kube.token_reviews)
    identity = Identity("flood", None)
    started = time.monotonic()
    codes: dict[int, int] = {}
    for _ in range(tokens):
        status = await request(
            target, identity, "GET", DEFAULT_PATHS[0], (("Authorization", f"Bearer {os.urandom(16).hex()}"),)
        )
        codes[status] = codes.get(status, 0) + 1
    return len(target.kube.token_reviews) - before, time.monotonic() - started, codes


async def _forged_log_lines(target: AuthAdapter) -> int:
    marker = "FORGED-LINE"
    path = f"{API}/namespaces/default/x%0A2026-01-01%2000:00:00,000%20INFO%20adapter.auth:%20{marker}"
    await request(target, IDENTITIES[0], "GET", path)
    await request(target, IDENTITIES[11], "GET", path)  # as the HPA, through the router too
    await asyncio.sleep(0.5)
    return sum(1 for line in target.running.log if line.startswith("2026-01-01") and marker in line)


async def _run(tokens: int) -> dict[str, Any]:
    with engines({"/pod-0/metrics": vllm_exposition()}) as urls:
        async with auth_adapter(urls) as target:
            await asyncio.sleep(1)
            ok = await request(target, IDENTITIES[11], "GET", DEFAULT_PATHS[0])  # the legit caller
            attempts, bypasses, server_errors = await _attempts(target)
            reviews, seconds, codes = await _token_flood(target, tokens)
            forged = await _forged_log_lines(target)
            # a valid token right after the flood: from another client, and from the flooding one
            same = await request(target, IDENTITIES[13], "GET", DEFAULT_PATHS[0])
            other = await request(target, IDENTITIES[13], "GET", DEFAULT_PATHS[0], source="127.0.0.2")
    return {"legit": ok, "attempts": attempts, "bypasses": bypasses, "5xx": server_errors,
            "reviews": reviews, "seconds": seconds, "codes": codes, "forged": forged,
            "other": other, "same": same}  # fmt: skip


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench attack auth")
    parser.add_argument("--tokens", type=int, default=2000, help="random bearer tokens from one client")
    args = parser.parse_args(argv)
    print(f"load average {load_average()}")
    r = asyncio.run(_run(args.tokens))
    bypasses = r["bypasses"]
    assert isinstance(bypasses, list)
    print(
        f"auth: {r['attempts']} bypass attempts over {len(IDENTITIES)} identities "
        f"(the aggregator's own read: {r['legit']})\n"
        f"  bypasses: {len(bypasses)} {bypasses[:3]}; 5xx: {r['5xx']}\n"
        f"  {args.tokens:,} random bearer tokens from one client in {r['seconds']:.1f} s: "
        f"{r['reviews']} TokenReviews; answers {r['codes']}\n"
        f"  a valid token right after: {r['same']} from the flooding client (429 when its budget is spent "
        f"and the token not cached: the budget is per client address), {r['other']} from another client\n"
        f"  forged log lines from a %0A path: {r['forged']}"
    )
    ok = (
        r["legit"] == 200 and not bypasses and r["5xx"] == 0 and r["forged"] == 0
        and r["other"] == 200 and int(r["reviews"]) <= 10 + r["seconds"] + 1
    )  # fmt: skip
    print("goals (0 bypasses, 0 5xx, TokenReviews bounded, 0 forged lines):", "met" if ok else "NOT met")
    return 0 if ok else 1
