"""Client connections (adapter/connections.py): the header-read timeout closes slow clients, the
idle timeout closes quiet kept-alive connections, the cap refuses connections past it, each counted
on the adapter's /metrics; and the memory of closed connections is handed back (adapter/memory.py).

Timeouts here are a fraction of a second so the tests stay quick; the defaults (32 s, 90 s) are
the apiserver's, and `python -m bench attack slowloris` measures them at full size.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import pytest
from conftest import Pki, ScriptedBackend, client_context, default_script, serve

from adapter.auth import InsecureDevAccess
from adapter.connections import (
    TLS_READ_BUFFER_BYTES,
    ConnectionGuard,
    ConnectionLimits,
    connection_metrics,
)
from adapter.memory import Trimmer, tune_allocator
from adapter.server import ServerConfig, create_app
from adapter.telemetry import Telemetry
from adapter.tls import ServingTLS

FAST = ConnectionLimits(max_connections=4, header_read_timeout_s=0.25, idle_timeout_s=0.5)


@asynccontextmanager
async def adapter(pki: Pki, limits: ConnectionLimits = FAST, *, tls: bool = True) -> AsyncIterator[Any]:
    telemetry = Telemetry()
    app = create_app(
        ScriptedBackend(default_script()),
        InsecureDevAccess(),
        telemetry,
        config=ServerConfig(connections=limits),
    )
    context = ServingTLS(pki.server.cert, pki.server.key).context if tls else None
    async with serve(app, context) as url:
        parts = urlsplit(url)
        yield parts.hostname, parts.port, telemetry


def sample(telemetry: Telemetry, name: str, **labels: str) -> float:
    value = telemetry.registry.get_sample_value(name, labels or None)
    return 0.0 if value is None else value


async def tls_connect(pki: Pki, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(host, port, ssl=client_context(pki), server_hostname="localhost")


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> float:
    """Seconds until the server closed the connection (EOF or reset); fails after `seconds`."""
    started = time.monotonic()
    try:
        async with asyncio.timeout(seconds):
            while await reader.read(4096):
                pass
    except (ConnectionResetError, ssl.SSLError):
        pass
    return time.monotonic() - started


async def test_a_request_head_that_never_ends_is_closed_at_the_header_read_timeout(pki: Pki) -> None:
    async with adapter(pki) as (host, port, telemetry):
        reader, writer = await tls_connect(pki, host, port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # no blank line: the head never ends
        await writer.drain()
        assert await closed_within(reader, 5.0) < 2.0
        assert sample(telemetry, "infscale_adapter_connections_timed_out_total", phase="header") == 1
        writer.close()


async def test_a_trickled_head_gains_no_time_by_sending_bytes(pki: Pki) -> None:
    async with adapter(pki) as (host, port, telemetry):
        reader, writer = await tls_connect(pki, host, port)
        started = time.monotonic()
        head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
        try:
            for byte in head:  # one byte every 20 ms: 4 s for the whole head, far past the timeout
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.02)
                if reader.at_eof():
                    break
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            pass
        await closed_within(reader, 5.0)
        assert time.monotonic() - started < 2.0
        assert sample(telemetry, "infscale_adapter_connections_timed_out_total", phase="header") == 1
        writer.close()


async def test_a_tcp_connection_that_never_starts_tls_is_closed_at_the_header_read_timeout(pki: Pki) -> None:
    async with adapter(pki) as (host, port, telemetry):
        reader, writer = await asyncio.open_connection(host, port)  # no ClientHello, ever
        assert await closed_within(reader, 5.0) < 2.0
        assert sample(telemetry, "infscale_adapter_connections_timed_out_total", phase="handshake") == 1
        writer.close()


async def test_a_kept_alive_connection_is_served_then_closed_when_idle(pki: Pki) -> None:
    async with adapter(pki) as (host, port, telemetry):
        reader, writer = await tls_connect(pki, host, port)
        for _ in range(3):  # keep-alive works: three requests on one connection
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200")
            await reader.readexactly(2)  # "ok"
        assert 0.3 < await closed_within(reader, 5.0) < 2.5
        assert sample(telemetry, "infscale_adapter_connections_timed_out_total", phase="idle") == 1
        assert sample(telemetry, "infscale_adapter_connections_timed_out_total", phase="header") == 0
        writer.close()


async def test_a_slow_second_request_on_a_kept_alive_connection_gets_the_header_timeout_not_idle(
    pki: Pki,
) -> None:
    limits = ConnectionLimits(max_connections=4, header_read_timeout_s=0.25, idle_timeout_s=30.0)
    async with adapter(pki, limits) as (host, port, telemetry):
        reader, writer = await tls_connect(pki, host, port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\n")  # pipelined
        await writer.drain()
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        assert await closed_within(reader, 5.0) < 2.0  # not the 30 s idle timeout
        assert sample(telemetry, "infscale_adapter_connections_timed_out_total", phase="header") == 1
        writer.close()


async def test_connections_past_the_cap_are_refused_and_counted(pki: Pki) -> None:
    limits = ConnectionLimits(max_connections=3, header_read_timeout_s=30.0, idle_timeout_s=30.0)
    async with adapter(pki, limits, tls=False) as (host, port, telemetry):
        held = [await asyncio.open_connection(host, port) for _ in range(3)]
        await asyncio.sleep(0.05)  # let the server accept them
        reader, writer = await asyncio.open_connection(host, port)
        assert await closed_within(reader, 2.0) < 1.0  # closed at accept
        assert sample(telemetry, "infscale_adapter_connections_refused_total") == 1
        assert sample(telemetry, "infscale_adapter_open_connections") == 3
        writer.close()
        held[0][1].close()
        await asyncio.sleep(0.05)
        reader, writer = await asyncio.open_connection(host, port)  # a place is free again
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert (await reader.read()).startswith(b"HTTP/1.1 200")
        assert sample(telemetry, "infscale_adapter_connections_accepted_total") == 4  # the refused one is not
        for _, w in held[1:]:
            w.close()
        writer.close()


async def test_the_connection_figures_are_on_the_adapters_own_metrics(pki: Pki) -> None:
    async with adapter(pki) as (host, port, _):
        reader, writer = await tls_connect(pki, host, port)
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        body = (await reader.read()).decode()
        writer.close()
    assert "infscale_adapter_open_connections 1.0" in body
    assert 'infscale_adapter_connections_timed_out_total{phase="header"} 0.0' in body
    assert "infscale_adapter_connections_refused_total 0.0" in body


async def test_the_tls_read_buffer_is_one_record_not_256_kib(pki: Pki) -> None:
    from asyncio import sslproto

    from adapter.connections import _TLSConnection

    assert sslproto.SSLProtocol.max_size == 256 * 1024  # asyncio's: ~256 KiB per connection
    assert _TLSConnection.max_size == TLS_READ_BUFFER_BYTES < 17 * 1024


def test_limits_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="max_connections must be >= 1"):
        ConnectionLimits(max_connections=0)
    with pytest.raises(ValueError, match="header_read_timeout_s must be > 0"):
        ConnectionLimits(header_read_timeout_s=0)


def test_settings_carry_the_limits_with_the_apiservers_defaults() -> None:
    from adapter.settings import AdapterSettings

    s = AdapterSettings(insecure_dev=True, endpoints=("http://127.0.0.1:1/metrics",))
    assert (s.max_connections, s.header_read_timeout_s, s.idle_timeout_s) == (1000, 32.0, 90.0)
    assert ConnectionLimits() == ConnectionLimits(1000, 32.0, 90.0)


# --- memory ----------------------------------------------------------------------------------


async def test_a_burst_of_closed_connections_asks_for_one_trim() -> None:
    trims: list[float] = []
    trimmer = Trimmer(lambda: trims.append(time.monotonic()) or True, delay_s=0.01)
    guard = ConnectionGuard(ConnectionLimits(), connection_metrics(Telemetry()), trimmer)
    for _ in range(100):
        assert guard.take()
    for _ in range(100):
        guard.release()
    await asyncio.sleep(0.05)
    assert len(trims) == 1  # 100 closes, one trim
    for _ in range(10):  # a few connections coming and going are not worth one
        guard.take()
        guard.release()
    await asyncio.sleep(0.05)
    assert len(trims) == 1


def test_the_allocator_is_tuned_on_glibc() -> None:
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only")
    assert tune_allocator() is True
