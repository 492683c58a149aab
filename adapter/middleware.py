"""The External Metrics API server's middleware: every error as a metav1.Status, request metrics,
authentication and authorization before any route (adapter/server.py builds the app around them)."""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from prometheus_client import Counter, Histogram

from adapter import wire
from adapter.auth import Access
from adapter.identity import (
    Forbidden,
    RateLimited,
    RequestAttributes,
    ReviewFailed,
    Unauthenticated,
    UserInfo,
    request_attributes,
)
from adapter.telemetry import Telemetry
from adapter.wire import Reason, StatusError

log = logging.getLogger(__name__)

API_ROOT: Final = f"/apis/{wire.GROUP_VERSION}"
KEDA_ROOT: Final = "/keda/v1"
HEALTH_PATHS: Final = frozenset({"/healthz", "/livez", "/readyz"})
ALLOWED_METHODS: Final = frozenset({"GET", "HEAD"})
GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})  # Go strconv.ParseBool
ACCESS = web.AppKey("access", Access)
USER = web.RequestKey("user", UserInfo)  # the authenticated caller, set by guard


# --- request metrics ----------------------------------------------------------------------------


class RequestMetrics:
    """Request count by route and code, latency by route; labelled children are looked up once
    (`labels()` costs more than the observation itself on the hot path)."""

    def __init__(self, requests: Counter, duration_s: Histogram) -> None:
        self.requests = requests
        self.duration_s = duration_s
        self._counts: dict[tuple[str, int], Any] = {}
        self._durations: dict[str, Any] = {}

    def observe(self, route: str, code: int, seconds: float) -> None:
        count = self._counts.get((route, code))
        if count is None:
            count = self._counts[(route, code)] = self.requests.labels(route, str(code))
        duration = self._durations.get(route)
        if duration is None:
            duration = self._durations[route] = self.duration_s.labels(route)
        count.inc()
        duration.observe(seconds)


REQUEST_METRICS = web.AppKey("request_metrics", RequestMetrics)
_REQUEST_METRICS: weakref.WeakKeyDictionary[Telemetry, RequestMetrics] = weakref.WeakKeyDictionary()


def request_metrics(telemetry: Telemetry) -> RequestMetrics:
    """The request counters in `telemetry.registry`, created once per registry."""
    found = _REQUEST_METRICS.get(telemetry)
    if found is None:
        found = RequestMetrics(
            Counter(
                "infscale_adapter_requests",
                "HTTP requests served, by route and status code.",
                ["route", "code"],
                registry=telemetry.registry,
            ),
            Histogram(
                "infscale_adapter_request_duration_seconds",
                "Time to answer an HTTP request, by route.",
                ["route"],
                buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
                registry=telemetry.registry,
            ),
        )
        _REQUEST_METRICS[telemetry] = found
    return found


# --- requests the HTTP parser refuses ------------------------------------------------------------


class _OneLineForMalformedRequests(logging.Filter):
    """aiohttp's parser refuses a request line or header field over 8190 bytes, or more than 128
    headers, before any handler or middleware runs, answers a plain-text 400 (Go's net/http answers
    a plain-text 431 there, not a Status, so the apiserver does not either) and logs the parser's
    traceback at ERROR. A client's malformed request is not our error: one INFO line, as for a 401.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.msg, record.args = "refused a malformed request: %s", (exc.message,)
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


MALFORMED_REQUESTS: Final = _OneLineForMalformedRequests()


# --- responses ----------------------------------------------------------------------------------


def json_response(doc: dict[str, Any], status: int = 200, content_type: str = wire.JSON) -> web.Response:
    return web.Response(body=wire.dumps(doc), status=status, headers={"Content-Type": content_type})


def status_response(error: StatusError) -> web.Response:
    return json_response(wire.status(error), status=error.code)


def _http_exception_status(exc: web.HTTPException) -> StatusError:
    if exc.status == 405:
        return StatusError(
            Reason.METHOD_NOT_ALLOWED, "the server does not allow this method on the requested resource"
        )
    if exc.status == 404:
        return wire.not_found_route()
    if exc.status == 413:
        return StatusError(Reason.BAD_REQUEST, "the request body is too large")
    if 400 <= exc.status < 500:
        return StatusError(Reason.BAD_REQUEST, exc.reason or "bad request")
    return StatusError(Reason.INTERNAL_ERROR, "Internal error occurred")


def _route_label(request: web.Request) -> str:
    route = request.match_info.route
    return route.resource.canonical if route.resource is not None else "unmatched"


@web.middleware
async def status_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Outermost: every error becomes a metav1.Status; every request is counted and timed."""
    started = time.perf_counter()
    try:
        response = await handler(request)
    except StatusError as exc:
        response = status_response(exc)
    except web.HTTPException as exc:
        if exc.status < 400:  # never redirect: the aggregator rejects 3xx
            response = status_response(wire.not_found_route())
        else:
            response = status_response(_http_exception_status(exc))
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("unhandled error serving %s %s", request.method, request.path)
        response = status_response(StatusError(Reason.INTERNAL_ERROR, "Internal error occurred"))
    request.app[REQUEST_METRICS].observe(
        _route_label(request), response.status, time.perf_counter() - started
    )
    return response


def _peer_certificate(request: web.Request) -> bytes | None:
    transport = request.transport
    if transport is None:
        return None
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    der: bytes | None = ssl_object.getpeercert(binary_form=True)
    return der


def attributes_for(request: web.Request) -> RequestAttributes:
    """Authorization attributes. The KEDA endpoint is authorized exactly like the metric read it
    mirrors, so one RBAC rule (`list` on external.metrics.k8s.io) grants both."""
    path = request.path
    if path.startswith(KEDA_ROOT + "/"):
        path = API_ROOT + path[len(KEDA_ROOT) :]
    watch = request.query.get("watch", "") in GO_TRUE
    # raw_path keeps %2F inside a segment, as Go's RequestInfo sees segments
    raw = request.rel_url.raw_path
    if raw.startswith(KEDA_ROOT + "/"):
        raw = API_ROOT + raw[len(KEDA_ROOT) :]
    attributes = request_attributes(request.method, raw, watch=watch)
    if not attributes.resource_request:
        return RequestAttributes(verb=attributes.verb, path=path)
    return attributes


def _forbidden(user_name: str, attributes: RequestAttributes) -> StatusError:
    if attributes.resource_request:
        return StatusError(
            Reason.FORBIDDEN,
            f'{attributes.resource}.{attributes.group} is forbidden: User "{user_name}" cannot '
            f"{attributes.describe()}",
            {"group": attributes.group, "kind": attributes.resource},
        )
    return StatusError(Reason.FORBIDDEN, f'forbidden: User "{user_name}" cannot {attributes.describe()}', {})


@web.middleware
async def guard(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Authentication and authorization before any route; health checks are open to anyone."""
    if request.path in HEALTH_PATHS and request.method in ALLOWED_METHODS:
        return await handler(request)
    if request.method not in ALLOWED_METHODS:
        raise StatusError(
            Reason.METHOD_NOT_ALLOWED, "the server does not allow this method on the requested resource"
        )
    attributes = attributes_for(request)
    try:
        user = await request.app[ACCESS].check(
            _peer_certificate(request), request.headers, attributes, request.remote or ""
        )
    except RateLimited as exc:
        raise StatusError(Reason.TOO_MANY_REQUESTS, str(exc)) from None  # logged once by the budget
    except Unauthenticated as exc:
        log.info("401 for %s: %s", request.path, exc)
        raise StatusError(Reason.UNAUTHORIZED, f"Unauthorized: {exc}") from None
    except Forbidden as exc:
        log.info("403 for %s: %s", request.path, exc)
        raise _forbidden(exc.user.name, attributes) from None
    except ReviewFailed as exc:
        log.error("access review for %s failed: %s", request.path, exc)
        raise StatusError(Reason.INTERNAL_ERROR, "Internal error occurred: unable to check access") from None
    request[USER] = user
    return await handler(request)
