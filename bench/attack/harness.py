"""What every attack needs: the real `infscale adapter` in its own process, fake engines in
another, RSS and CPU readings, raw HTTP over TLS.

The adapter runs as users run it (`python -m infscale adapter …`, real TLS, the real scrape loop),
so its RSS and its event loop are measured alone; the engines run in a child process so their CPU
is not the adapter's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import multiprocessing
import multiprocessing.connection
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
API = "/apis/external.metrics.k8s.io/v1beta1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


@functools.cache
def insecure_client_context() -> ssl.SSLContext:
    """The adapter under attack serves a throwaway certificate (`--self-signed-dev`). One context
    for every connection: building one reads the system's CA store (~50 ms)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


# --- the adapter ----------------------------------------------------------------------------------


@dataclass
class AdapterProcess:
    """`infscale adapter` with `args`; its log lines are collected in `log`."""

    args: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    port: int = 0
    process: subprocess.Popen[str] | None = None
    log: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> None:
        self.port = self.port or free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "infscale", "adapter", "--listen", f"127.0.0.1:{self.port}", *self.args],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), **self.env},
        )
        ready = threading.Event()

        def drain() -> None:
            assert self.process is not None and self.process.stderr is not None
            for line in self.process.stderr:
                self.log.append(line.rstrip("\n"))
                if "serving external.metrics" in line:
                    ready.set()

        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(timeout_s):
            self.stop()
            raise RuntimeError("the adapter did not start:\n" + "\n".join(self.log[-20:]))

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@contextlib.contextmanager
def adapter(*args: str, env: Mapping[str, str] | None = None) -> Iterator[AdapterProcess]:
    running = AdapterProcess(args, env or {})
    running.start()
    try:
        yield running
    finally:
        running.stop()


def dev_adapter_args(endpoints: Sequence[str], *extra: str) -> list[str]:
    """TLS with a throwaway certificate, no auth (what the unauthenticated attacks need), the
    given engines as static endpoints."""
    return ["--self-signed-dev", "--insecure-dev", "--endpoints", ",".join(endpoints), *extra]


# --- fake engines ---------------------------------------------------------------------------------


def _serve_engines(
    port: int,
    bodies: Mapping[str, bytes],
    rotating: Mapping[str, int],
    ready: multiprocessing.connection.Connection,
) -> None:
    from aiohttp import web

    scrapes = [0]

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path in rotating:  # fresh series every scrape: the worst case for any cache
            scrapes[0] += 1
            n, k = rotating[request.path], scrapes[0]
            text = "".join(
                f'vllm:num_requests_waiting{{s="{k}",i="{i}",model_name="churn"}} 1\n' for i in range(n)
            )
            return web.Response(text=text, content_type="text/plain")
        body = bodies.get(request.path)
        if body is None:
            return web.Response(status=404)
        return web.Response(body=body, content_type="text/plain")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        ready.send("ready")
        await asyncio.Event().wait()

    asyncio.run(main())


@contextlib.contextmanager
def engines(
    bodies: Mapping[str, str | bytes], rotating: Mapping[str, int] | None = None
) -> Iterator[list[str]]:
    """Serve each `path -> exposition` from one local HTTP server in a child process, and each
    `rotating` path N series with new labels every scrape; yields the URLs (bodies, then rotating)."""
    port = free_port()
    encoded = {p: b if isinstance(b, bytes) else b.encode() for p, b in bodies.items()}
    rotating = dict(rotating or {})
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.get_context("fork").Process(
        target=_serve_engines, args=(port, encoded, rotating, child), daemon=True
    )
    process.start()
    if not parent.poll(30) or parent.recv() != "ready":
        process.kill()
        raise RuntimeError("the fake engines did not start")
    try:
        yield [f"http://127.0.0.1:{port}{path}" for path in [*bodies, *rotating]]
    finally:
        process.kill()
        process.join()


def vllm_exposition(waiting: float = 2, running: float = 3, kv: float = 0.5) -> str:
    model = 'model_name="meta-llama/Llama-3.1-8B-Instruct"'
    return (
        "# TYPE vllm:num_requests_waiting gauge\n"
        f"vllm:num_requests_waiting{{{model}}} {waiting}\n"
        "# TYPE vllm:num_requests_running gauge\n"
        f"vllm:num_requests_running{{{model}}} {running}\n"
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        f"vllm:kv_cache_usage_perc{{{model}}} {kv}\n"
    )


# --- raw HTTP -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    seconds: float


async def get(
    port: int, path: str, headers: Mapping[str, str] | None = None, *, timeout_s: float = 10.0
) -> Answer:
    """One GET over a fresh TLS connection, `Connection: close`; status 0 when the server closed
    or reset the connection without an answer."""
    started = time.perf_counter()
    head = f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items()) + "\r\n"
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=insecure_client_context())
            writer.write(head.encode("latin-1"))
            data = await reader.read()
            writer.close()
    except (ConnectionError, ssl.SSLError, TimeoutError):
        return Answer(0, b"", time.perf_counter() - started)
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    body = data.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in data else b""
    return Answer(status, body, time.perf_counter() - started)


def metric_samples(metrics_text: str, name: str) -> dict[str, float]:
    """`{labels text: value}` of every sample of `name`."""
    found = {}
    for line in metrics_text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            key, _, value = line.rpartition(" ")
            found[key[len(name) :]] = float(value)
    return found
