"""The External Metrics API server: aiohttp app factory and one route table (the auth and error
middleware in adapter/middleware.py).

Pipeline position: the kube-apiserver's aggregator (and, through it, every HPA) -> this app ->
a `MetricsBackend` (adapter/catalog.py) for the numbers. The app knows HTTP, auth and the wire
format (adapter/wire.py); it never makes up a value: no data is a Status error, never a 0.

Every error, including the router's own 404/405, leaves as a `metav1.Status` JSON with `code`
equal to the HTTP status and no `Retry-After` (client-go would sleep and retry inside the HPA
worker). The health paths answer `ok` to anyone; everything else needs an authenticated,
authorized caller (adapter/auth.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from adapter import wire
from adapter.auth import Access
from adapter.backend import (
    BackendError,
    MetricSample,
    MetricsBackend,
    NoData,
    SourceUnavailable,
    UnknownMetric,
)
from adapter.connections import GUARD, ConnectionGuard, ConnectionLimits, connection_metrics, request_timing
from adapter.delegate import Delegate, DelegateUnavailable
from adapter.memory import Trimmer
from adapter.middleware import (
    ACCESS,
    API_ROOT,
    GO_TRUE,
    KEDA_ROOT,
    MALFORMED_REQUESTS,
    REQUEST_METRICS,
    USER,
    guard,
    json_response,
    request_metrics,
    status_errors,
)
from adapter.telemetry import Telemetry
from adapter.wire import Answer, Reason, StatusError
from common.selector import Selector, SelectorError, parse_selector

log = logging.getLogger(__name__)

# We never read a request body; anything beyond a few KiB is a mistake or an attack.
CLIENT_MAX_SIZE: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Defaults: backend reads time out after 10 s (the aggregator waits 60 s, the HPA has no
    timeout of its own), the KEDA metrics-api endpoint is on, connection limits as
    adapter/connections.py documents them."""

    version: str = "0.1.0"
    backend_timeout_s: float = 10.0
    keda_endpoint: bool = True
    connections: ConnectionLimits = field(default_factory=ConnectionLimits)


BACKEND = web.AppKey("backend", MetricsBackend)
TELEMETRY = web.AppKey("telemetry", Telemetry)
DELEGATE = web.AppKey("delegate", Delegate)
CONFIG = web.AppKey("config", ServerConfig)


# --- handlers -----------------------------------------------------------------------------------


def _negotiate(request: web.Request, *, discovery: bool = False) -> Answer:
    answer = wire.negotiate(request.headers.get("Accept"), discovery=discovery)
    if answer is None:
        raise wire.not_acceptable()
    return answer


async def apis(request: web.Request) -> web.Response:
    answer = _negotiate(request, discovery=True)
    if answer is Answer.JSON:
        return json_response(wire.api_group_list())
    version = answer.value
    doc = wire.api_group_discovery_list(request.app[BACKEND].metric_names(), version)
    return json_response(doc, content_type=wire.discovery_content_type(version))


async def group(request: web.Request) -> web.Response:
    _negotiate(request)
    return json_response(wire.api_group())


async def resources(request: web.Request) -> web.Response:
    """The availability probe: fast, and independent of whether the backend has data."""
    _negotiate(request)
    return json_response(wire.api_resource_list(request.app[BACKEND].metric_names()))


def _metric_target(request: web.Request) -> tuple[str, str, Selector]:
    """Namespace, metric and selector of a read, validated here: the router hands over `a/b` and
    `..` already percent-decoded."""
    namespace = request.match_info["namespace"]
    metric = request.match_info["metric"]
    if request.query.get("watch", "") in GO_TRUE:
        raise StatusError(
            Reason.METHOD_NOT_ALLOWED,
            f'watch is not supported on resources of kind "{metric}.{wire.GROUP}"',
        )
    if problem := wire.namespace_problem(namespace):
        raise StatusError(Reason.NOT_FOUND, problem, {"name": namespace, "kind": "namespaces"})
    if problem := wire.metric_name_problem(metric):
        raise StatusError(Reason.NOT_FOUND, problem, wire.metric_details(metric))
    try:
        selector = parse_selector(request.query.get("labelSelector", ""))
    except SelectorError as exc:
        raise StatusError(Reason.BAD_REQUEST, str(exc)) from None
    return namespace, metric, selector


async def _read(
    request: web.Request, namespace: str, metric: str, selector: Selector
) -> Sequence[MetricSample]:
    """The backend's answer, or the StatusError it maps to. UnknownMetric is left to the caller."""
    try:
        async with asyncio.timeout(request.app[CONFIG].backend_timeout_s):
            return await request.app[BACKEND].read(namespace, metric, selector)
    except NoData as exc:
        raise StatusError(
            Reason.NOT_FOUND, str(exc) or f"no data for metric {metric}", wire.metric_details(metric)
        ) from None
    except SourceUnavailable as exc:
        log.warning("source unavailable for %s/%s: %s", namespace, metric, exc)
        raise StatusError(
            Reason.SERVICE_UNAVAILABLE, str(exc) or "the metric source is unavailable"
        ) from None
    except TimeoutError:
        log.warning("backend read of %s/%s timed out", namespace, metric)
        raise StatusError(Reason.SERVICE_UNAVAILABLE, f"timed out reading metric {metric}") from None
    except UnknownMetric:
        raise
    except BackendError as exc:
        log.error("backend failed reading %s/%s: %s", namespace, metric, exc)
        raise StatusError(Reason.INTERNAL_ERROR, "Internal error occurred: unable to fetch metrics") from None


def _unknown_metric(metric: str, namespace: str) -> StatusError:
    return StatusError(
        Reason.NOT_FOUND,
        f"the server could not find the metric {metric} for namespace {namespace}",
        wire.metric_details(metric),
    )


def _no_usable_value(metric: str, exc: wire.QuantityError) -> StatusError:
    """NaN or beyond the HPA's range: no usable value, which is an error and never a 0."""
    return StatusError(
        Reason.NOT_FOUND, f"metric {metric} has no usable value: {exc}", wire.metric_details(metric)
    )


async def read_metric(request: web.Request) -> web.Response:
    _negotiate(request)
    namespace, metric, selector = _metric_target(request)
    try:
        samples = await _read(request, namespace, metric, selector)
    except UnknownMetric:
        delegate = request.app.get(DELEGATE)
        if delegate is None:
            raise _unknown_metric(metric, namespace) from None
        return await _delegated(request, delegate, namespace, metric)
    try:
        doc = wire.metric_value_list(metric, samples)
    except wire.QuantityError as exc:
        raise _no_usable_value(metric, exc) from None
    return json_response(doc)


async def _delegated(request: web.Request, delegate: Delegate, namespace: str, metric: str) -> web.Response:
    try:
        answer = await delegate.forward(
            namespace, metric, request.rel_url.raw_query_string, request[USER], request.headers.get("Accept")
        )
    except DelegateUnavailable as exc:
        log.warning("delegate failed for %s/%s: %s", namespace, metric, exc)
        raise StatusError(
            Reason.SERVICE_UNAVAILABLE, f"the delegate metrics server is unavailable: {exc}"
        ) from None
    headers = {"Content-Type": answer.content_type} if answer.content_type else {}
    return web.Response(body=answer.body, status=answer.status, headers=headers)


async def keda_value(request: web.Request) -> web.Response:
    """KEDA `metrics-api` trigger: one number per read (`valueLocation: value`).

    The value is what the HPA would compute from the same read: the sum of the matching items.
    An empty match is an error here (KEDA has no "hold" answer; a 0 would scale to the minimum).
    """
    _negotiate(request)
    namespace, metric, selector = _metric_target(request)
    try:
        samples = await _read(request, namespace, metric, selector)
    except UnknownMetric:
        raise _unknown_metric(metric, namespace) from None
    if not samples:
        raise StatusError(
            Reason.NOT_FOUND,
            f"no series of metric {metric} in namespace {namespace} matches labelSelector {str(selector)!r}",
            wire.metric_details(metric),
        )
    total = sum(s.value for s in samples)
    try:
        quantity = wire.format_quantity(total)
    except wire.QuantityError as exc:
        raise _no_usable_value(metric, exc) from None
    return json_response(
        {
            "metricName": metric,
            "namespace": namespace,
            "labelSelector": str(selector),
            "value": wire.milli_round(total),
            "quantity": quantity,
            "items": len(samples),
            "timestamp": wire.format_time(min(s.timestamp for s in samples)),
        }
    )


async def health(request: web.Request) -> web.Response:
    """Always ok while the process serves: readiness must not follow the backend, or the Service
    loses its endpoints and the APIService turns Available=False for every kubectl user."""
    return web.Response(text="ok", content_type="text/plain")


async def version(request: web.Request) -> web.Response:
    _negotiate(request)
    return json_response(wire.version_info(request.app[CONFIG].version))


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[TELEMETRY].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def routes(config: ServerConfig) -> list[web.RouteDef]:
    """The one route table. Trailing-slash twins are explicit: a normalizing redirect would be a 3xx."""
    table = [
        web.get("/apis", apis),
        web.get(f"/apis/{wire.GROUP}", group),
        web.get(f"/apis/{wire.GROUP}/", group),
        web.get(API_ROOT, resources),
        web.get(API_ROOT + "/", resources),
        web.get(API_ROOT + "/namespaces/{namespace}/{metric}", read_metric),
        web.get("/healthz", health),
        web.get("/livez", health),
        web.get("/readyz", health),
        web.get("/version", version),
        web.get("/metrics", metrics),
    ]
    if config.keda_endpoint:
        table.append(web.get(KEDA_ROOT + "/namespaces/{namespace}/{metric}", keda_value))
    return table


def create_app(
    backend: MetricsBackend,
    access: Access,
    telemetry: Telemetry,
    *,
    delegate: Delegate | None = None,
    config: ServerConfig | None = None,
    background: Sequence[Callable[[], Awaitable[None]]] = (),
) -> web.Application:
    """The application. `background` coroutines (certificate reloads, ConfigMap refreshes) run
    while the app runs and are cancelled on shutdown."""
    config = config or ServerConfig()
    app = web.Application(middlewares=[request_timing, status_errors, guard], client_max_size=CLIENT_MAX_SIZE)
    app[GUARD] = ConnectionGuard(config.connections, connection_metrics(telemetry), Trimmer())
    app[BACKEND] = backend
    app[ACCESS] = access
    app[TELEMETRY] = telemetry
    app[CONFIG] = config
    app[REQUEST_METRICS] = request_metrics(telemetry)
    if delegate is not None:
        app[DELEGATE] = delegate
    app.add_routes(routes(config))
    logging.getLogger("aiohttp.server").addFilter(MALFORMED_REQUESTS)  # once: the same instance
    if background:
        app.cleanup_ctx.append(_background_tasks(background))
    return app


def _background_tasks(
    jobs: Sequence[Callable[[], Awaitable[None]]],
) -> Callable[[web.Application], AsyncIterator[None]]:
    async def run(app: web.Application) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(_logged(job)) for job in jobs]
        yield
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    return run


async def _logged(job: Callable[[], Awaitable[None]]) -> None:
    try:
        await job()
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("background task %r stopped", job)
