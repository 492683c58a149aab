"""External-metric reads per second and latency percentiles, concurrent clients on loopback.

Run: `python -m bench.bench_adapter_reads` (or `python -m bench adapter_reads`).
Goal: ≥ 5,000 reads/s with the server on one core, p99 ≤ 5 ms.

The server runs in its own process pinned to one CPU (an event loop is one thread anyway); the
load generator runs in this process on the other CPU and speaks HTTP/1.1 keep-alive over raw
asyncio streams, because an HTTP client library would cost more CPU than the server and measure
itself. Two server setups:
- `tls+auth`: what the aggregator sees: HTTPS, a front-proxy client certificate, X-Remote-*
  headers, SubjectAccessReview answered from the cache (the steady state: one review per 10 s);
- `plain`: `--insecure-dev` (HTTP, no auth), the floor of the HTTP stack.
Each read is `…/namespaces/default/infscale_queue_size?labelSelector=deployment%3Dllama` against a
static backend, so the numbers are the server's cost, not a source's.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

CONNECTIONS = 16
WARMUP_S = 1.0
DURATION_S = 5.0
PATH = (
    "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/infscale_queue_size"
    "?labelSelector=deployment%3Dllama"
)


# --- server side (child process) ----------------------------------------------------------------


def _serve(mode: str, pki_dir: str) -> None:
    from collections.abc import Sequence as Seq

    from aiohttp import web

    from adapter.auth import Decision, DelegatedAccess, InsecureDevAccess, TokenReviewResult
    from adapter.backend import MetricSample
    from adapter.frontproxy import RequestHeaderConfig
    from adapter.server import create_app
    from adapter.telemetry import Telemetry
    from adapter.tls import ServingTLS
    from common.selector import Selector

    class Static:
        samples = (
            MetricSample(
                {"namespace": "default", "deployment": "llama", "model": "llama-3"}, 12.0, time.time()
            ),
            MetricSample(
                {"namespace": "default", "deployment": "mistral", "model": "mistral"}, 1.5, time.time()
            ),
        )

        def metric_names(self) -> Seq[str]:
            return ["infscale_queue_size"]

        async def read(self, namespace: str, metric: str, selector: Selector) -> Seq[MetricSample]:
            return [s for s in self.samples if selector.matches(s.labels)]

    class AllowAll:
        async def review_token(self, token: str) -> TokenReviewResult:
            return TokenReviewResult(False)

        async def review_access(self, user: object, attributes: object) -> Decision:
            return Decision(True)

    os.sched_setaffinity(0, {0})
    pki = Path(pki_dir)
    if mode == "plain":
        access: object = InsecureDevAccess()
        ssl_context = None
    else:
        config = RequestHeaderConfig(
            ca_pem=(pki / "ca.crt").read_bytes(), allowed_names=("front-proxy-client",)
        )
        access = DelegatedAccess(AllowAll(), config)
        ssl_context = ServingTLS(pki / "server.crt", pki / "server.key", config.ca_pem).context
    app = create_app(Static(), access, Telemetry())  # type: ignore[arg-type]

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"READY {port}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


# --- certificates -------------------------------------------------------------------------------


def _make_pki(directory: Path) -> None:
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(name: str, cn: str, usage: x509.ObjectIdentifier, san: bool) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if san:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False
            )
        cert = builder.sign(ca_key, hashes.SHA256())
        (directory / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (directory / f"{name}.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )

    (directory / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    leaf("server", "adapter", ExtendedKeyUsageOID.SERVER_AUTH, True)
    leaf("client", "front-proxy-client", ExtendedKeyUsageOID.CLIENT_AUTH, False)


# --- load generator -----------------------------------------------------------------------------


async def _worker(
    port: int,
    ctx: ssl.SSLContext | None,
    request: bytes,
    deadline: float,
    start: float,
    latencies: list[float],
) -> None:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=ctx, server_hostname="localhost" if ctx else None
    )
    while True:
        t0 = time.perf_counter()
        if t0 >= deadline:
            break
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"unexpected answer: {head[:200]!r}")
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        await reader.readexactly(length)
        if t0 >= start:
            latencies.append(time.perf_counter() - t0)
    writer.close()


async def _load(port: int, ctx: ssl.SSLContext | None, headers: str) -> list[float]:
    request = (
        f"GET {PATH} HTTP/1.1\r\nHost: localhost\r\nAccept: application/json, */*\r\n{headers}\r\n".encode()
    )
    latencies: list[float] = []
    now = time.perf_counter()
    start, deadline = now + WARMUP_S, now + WARMUP_S + DURATION_S
    await asyncio.gather(
        *(_worker(port, ctx, request, deadline, start, latencies) for _ in range(CONNECTIONS))
    )
    return latencies


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _run(mode: str, pki: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.bench_adapter_reads", "--serve", mode, str(pki)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line.startswith("READY"):
            raise RuntimeError(f"server did not start: {line!r}")
        port = int(line.split()[1])
        ctx = None
        headers = ""
        if mode != "plain":
            ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
            ctx.load_cert_chain(pki / "client.crt", pki / "client.key")
            user = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
            headers = f"X-Remote-User: {user}\r\nX-Remote-Group: system:authenticated\r\n"
        cpu_before = _cpu_seconds(server.pid)
        latencies = asyncio.run(_load(port, ctx, headers))
        server_cpu = (_cpu_seconds(server.pid) - cpu_before) / (WARMUP_S + DURATION_S)
    finally:
        server.terminate()
        server.wait(10)
    rate = len(latencies) / DURATION_S
    p50, p99 = _percentile(latencies, 0.50) * 1e3, _percentile(latencies, 0.99) * 1e3
    # reads per second of server CPU: what one fully busy core would serve when the load generator,
    # not the server, is the limit (the server's share of its core is printed beside it)
    per_core = rate / server_cpu if server_cpu > 0 else float("nan")
    print(
        f"{mode:>9}: {rate:6.0f} reads/s  p50 {p50:5.2f} ms  p99 {p99:6.2f} ms  "
        f"server CPU {server_cpu * 100:3.0f}%  -> {per_core:6.0f} reads per server CPU-second  "
        f"({CONNECTIONS} connections, {DURATION_S:.0f} s)"
    )


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def main() -> None:
    os.sched_setaffinity(0, {1} if os.cpu_count() and os.cpu_count() > 1 else {0})  # type: ignore[operator]
    with tempfile.TemporaryDirectory() as tmp:
        pki = Path(tmp)
        _make_pki(pki)
        print(f"goal: ≥ 5000 reads/s on one core, p99 ≤ 5 ms; GET {PATH}")
        for mode in ("tls+auth", "plain"):
            _run(mode, pki)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        _serve(sys.argv[2], sys.argv[3])
    else:
        main()
