"""Client connections to the adapter's server: a cap, a header-read and an idle timeout, and a
small TLS read buffer per connection.

Pipeline position: `cli.serve` (and the tests) start the aiohttp app with `start_site` instead of
`web.TCPSite`. The site's protocol factory wraps aiohttp's own per-connection `RequestHandler`:

    socket -> _TLSConnection (asyncio's SSLProtocol, 16 KiB read buffer) -> _Guarded -> RequestHandler

- **cap**: a connection past `max_connections` (TLS handshakes in progress included) is closed at
  accept, before any TLS work, and counted;
- **header-read timeout** (default 32 s, as k8s.io/apiserver's `ReadHeaderTimeout`): the TLS
  handshake, and then the request line and headers, must arrive within it, counted from the
  connection (or from the first byte of a later request on a kept-alive connection). A client that
  trickles a header one byte at a time is closed when it runs out, not at aiohttp's 3,630 s
  keep-alive;
- **idle timeout** (default 90 s, as the apiserver's `IdleTimeout`, which matches Go's
  `http.DefaultTransport`): a kept-alive connection with no request for that long is closed.

Memory: asyncio's SSLProtocol allocates a 256 KiB read buffer per connection (`max_size`), which
is most of the ~280 KB an idle TLS connection costs; a TLS record is at most 16 KiB, so
`_TLSConnection` reads 16 KiB at a time. Freed memory also has to reach the kernel again: see
adapter/memory.py.

The middleware `request_started` tells the guard a request head is complete (the header timer
stops) and when the handler returned (the idle timer starts); it is the outermost middleware.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import weakref
from asyncio import sslproto
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web
from prometheus_client import Counter, Gauge

from adapter.memory import Trimmer
from adapter.telemetry import Telemetry

log = logging.getLogger(__name__)

TLS_READ_BUFFER_BYTES: Final = 16 * 1024 + 512  # one full TLS record and its header


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Defaults: k8s.io/apiserver's `ReadHeaderTimeout` (32 s) and `IdleTimeout` (90 s); 1,000
    connections (the aggregator, the kubelet's probes and Prometheus need tens; at ~45 KB each,
    1,000 cost ~45 MB, within the manifests' 256 Mi)."""

    max_connections: int = 1000
    header_read_timeout_s: float = 32.0
    idle_timeout_s: float = 90.0

    def __post_init__(self) -> None:
        if self.max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {self.max_connections}")
        for name in ("header_read_timeout_s", "idle_timeout_s"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")


class ConnectionMetrics:
    """The connection counters, in the adapter's own registry (served on its /metrics)."""

    def __init__(self, telemetry: Telemetry) -> None:
        registry = telemetry.registry
        self.open = Gauge(
            "infscale_adapter_open_connections",
            "Client connections open now (TLS handshakes in progress included).",
            registry=registry,
        )
        self.accepted = Counter(
            "infscale_adapter_connections_accepted",
            "Client connections accepted.",
            registry=registry,
        )
        self.refused = Counter(
            "infscale_adapter_connections_refused",
            "Client connections closed at accept because max_connections were open.",
            registry=registry,
        )
        self.timed_out = Counter(
            "infscale_adapter_connections_timed_out",
            "Client connections closed by a timeout, by phase: handshake or header (the header-read "
            "timeout), idle (the idle timeout).",
            ["phase"],
            registry=registry,
        )
        for phase in ("handshake", "header", "idle"):
            self.timed_out.labels(phase)


_METRICS: weakref.WeakKeyDictionary[Telemetry, ConnectionMetrics] = weakref.WeakKeyDictionary()


def connection_metrics(telemetry: Telemetry) -> ConnectionMetrics:
    """The connection metrics of `telemetry`, created once per registry."""
    found = _METRICS.get(telemetry)
    if found is None:
        found = _METRICS[telemetry] = ConnectionMetrics(telemetry)
    return found


class ConnectionGuard:
    """The open connections of one site, against the cap; and the transport -> guard map the
    middleware uses."""

    # this many connections closed since the peak: their memory is worth a malloc_trim
    TRIM_AFTER_CLOSED: Final = 32

    def __init__(
        self, limits: ConnectionLimits, metrics: ConnectionMetrics, trimmer: Trimmer | None = None
    ) -> None:
        self.limits = limits
        self.metrics = metrics
        self.open = 0
        self._peak = 0  # most open since the last trim request
        self._trimmer = trimmer
        self._by_transport: dict[Any, _Guarded] = {}

    def take(self) -> bool:
        if self.open >= self.limits.max_connections:
            self.metrics.refused.inc()
            return False
        self.open += 1
        self._peak = max(self._peak, self.open)
        self.metrics.open.set(self.open)
        self.metrics.accepted.inc()
        return True

    def release(self) -> None:
        self.open -= 1
        self.metrics.open.set(self.open)
        if self._trimmer is not None and self._peak - self.open >= self.TRIM_AFTER_CLOSED:
            self._peak = self.open
            self._trimmer.request()

    def connection_of(self, transport: Any) -> _Guarded | None:
        return self._by_transport.get(transport)

    def register(self, transport: Any, connection: _Guarded) -> None:
        self._by_transport[transport] = connection

    def forget(self, transport: Any) -> None:
        self._by_transport.pop(transport, None)


class _Slot:
    """One taken place under the cap, given back exactly once: at connection_lost, or when the
    protocol is collected without one (a transport that failed to set up)."""

    __slots__ = ("__weakref__", "_guard")

    def __init__(self, guard: ConnectionGuard) -> None:
        self._guard: ConnectionGuard | None = guard

    def release(self) -> None:
        guard, self._guard = self._guard, None
        if guard is not None:
            guard.release()


class _Refused(asyncio.Protocol):
    """A connection past the cap: closed as soon as it is made, before any TLS work."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class _Guarded(asyncio.Protocol):
    """aiohttp's RequestHandler behind the header-read and idle timers (delegating every call)."""

    def __init__(self, handler: asyncio.Protocol, guard: ConnectionGuard, slot: _Slot | None) -> None:
        self._handler = handler
        self.guard = guard
        self.connected = False
        self._slot = slot  # None behind TLS: the TLS layer holds it
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_phase = ""
        self._in_request = False
        self._unparsed_tail = False  # bytes of a next request may wait in aiohttp's parser

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self.connected = True
        self.guard.register(transport, self)
        self._arm("header", self.guard.limits.header_read_timeout_s)
        self._handler.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not data:
            return
        if self._in_request:
            self._unparsed_tail = True  # a pipelined request: timed when this one ends
        else:
            # A chunk that does not end where a head ends may leave part of the next request in
            # aiohttp's parser (pipelining), which this layer cannot see: time it as a head.
            self._unparsed_tail = not data.endswith((b"\r\n\r\n", b"\n\n"))
            if self._timer_phase != "header":
                self._arm("header", self.guard.limits.header_read_timeout_s)  # a request's first byte
        self._handler.data_received(data)

    def eof_received(self) -> bool | None:
        return self._handler.eof_received()

    def pause_writing(self) -> None:
        self._handler.pause_writing()

    def resume_writing(self) -> None:
        self._handler.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._transport is not None:
            self.guard.forget(self._transport)
        if self._slot is not None:
            self._slot.release()
        self._handler.connection_lost(exc)

    # -- from the middleware ------------------------------------------------------------------

    def request_started(self) -> None:
        self._disarm()
        self._in_request = True

    def request_ended(self) -> None:
        """As Go's server: the idle timeout while nothing of a next request has arrived, the
        header-read timeout as soon as something has (here: may have)."""
        self._in_request = False
        if self._unparsed_tail:
            self._arm("header", self.guard.limits.header_read_timeout_s)
        else:
            self._arm("idle", self.guard.limits.idle_timeout_s)

    # -- timers -------------------------------------------------------------------------------

    def _arm(self, phase: str, seconds: float) -> None:
        self._disarm()
        self._timer_phase = phase
        self._timer = self._loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_phase = None, ""

    def _expired(self) -> None:
        phase, self._timer, self._timer_phase = self._timer_phase, None, ""
        if self._transport is None or self._transport.is_closing():
            return
        self.guard.metrics.timed_out.labels(phase).inc()
        log.debug("closing a connection: %s timeout", phase)
        self._transport.close()


class _TLSConnection(sslproto.SSLProtocol):
    """asyncio's TLS protocol with a 16 KiB read buffer instead of 256 KiB, holding the cap's slot
    for the whole connection (a handshake that never finishes included), and counting handshake
    timeouts."""

    max_size = TLS_READ_BUFFER_BYTES

    def __init__(
        self, app_protocol: _Guarded, context: ssl.SSLContext, slot: _Slot, handshake_timeout_s: float
    ) -> None:
        super().__init__(
            asyncio.get_running_loop(),
            app_protocol,
            context,
            None,  # type: ignore[arg-type]  # no one awaits the handshake: connection_made follows it
            server_side=True,
            ssl_handshake_timeout=handshake_timeout_s,  # type: ignore[arg-type]  # typeshed says int
        )
        self._guarded = app_protocol
        self._slot = slot
        self._handshake_timeout_s = handshake_timeout_s
        self._handshake_deadline = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._handshake_deadline = asyncio.get_running_loop().time() + self._handshake_timeout_s
        super().connection_made(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        # the handshake is done exactly when the application protocol was connected
        if not self._guarded.connected and asyncio.get_running_loop().time() >= self._handshake_deadline:
            self._guarded.guard.metrics.timed_out.labels("handshake").inc()
        self._slot.release()
        super().connection_lost(exc)


def protocol_factory(
    server: web.Server, guard: ConnectionGuard, context: ssl.SSLContext | None
) -> Callable[[], asyncio.BaseProtocol]:
    """The site's protocol factory: one guarded aiohttp handler per accepted connection."""

    def make() -> asyncio.BaseProtocol:
        if not guard.take():
            return _Refused()
        slot = _Slot(guard)
        handler = server()
        if context is None:
            guarded = _Guarded(handler, guard, slot)
            weakref.finalize(guarded, slot.release)
            return guarded
        tls = _TLSConnection(
            _Guarded(handler, guard, None), context, slot, guard.limits.header_read_timeout_s
        )
        weakref.finalize(tls, slot.release)
        return tls

    return make


GUARD = web.AppKey("connection_guard", ConnectionGuard)


@web.middleware
async def request_timing(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Outermost: the head is complete (stop the header timer); afterwards, start the idle one."""
    guard = request.app.get(GUARD)
    connection = guard.connection_of(request.transport) if guard is not None else None
    if connection is None:  # a test client or a site not started by start_site
        return await handler(request)
    connection.request_started()
    try:
        return await handler(request)
    finally:
        connection.request_ended()


@dataclass(slots=True)
class GuardedSite:
    """What `start_site` started: the asyncio server and its guard."""

    server: asyncio.Server
    guard: ConnectionGuard

    @property
    def port(self) -> int:
        return int(self.server.sockets[0].getsockname()[1])

    def close(self) -> None:
        """Stop listening; `runner.cleanup()` then ends the open connections. (No wait_closed: from
        Python 3.12 it also waits for handshakes in progress, up to the header-read timeout.)"""
        self.server.close()


async def start_site(
    runner: web.AppRunner, host: str | None, port: int, *, ssl_context: ssl.SSLContext | None
) -> GuardedSite:
    """Listen on host:port with the cap and the timers of the app's `ConnectionGuard` (create_app
    makes it from `ServerConfig.connections`); `runner` must be set up. OSError when the address
    cannot be bound."""
    server = runner.server
    assert server is not None, "call runner.setup() first"
    guard = runner.app[GUARD]
    listening = await asyncio.get_running_loop().create_server(
        protocol_factory(server, guard, ssl_context), host, port, backlog=128, reuse_address=True
    )
    return GuardedSite(listening, guard)
