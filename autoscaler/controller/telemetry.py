"""The controller's own /metrics (prometheus-client) and health endpoints (aiohttp, from a factory).

`infscale_desired_replicas{namespace, autoscaler}` is also the signal of `mode: hpa`: Prometheus
scrapes it, the adapter serves it as an External metric, and an HPA with an AverageValue target of
1 on it makes the HPA the actuator of infscale's recommendation (docs/controller.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

_KEY = ("namespace", "autoscaler")
EXTERNAL_PATH = "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}"


@dataclass
class Health:
    """What the probes look at. Times are the loop's clock."""

    started: bool = False  # the caches are synced and the CRD is served (leader or not)
    not_ready: str = "starting"  # why /readyz fails ("" once started)
    last_tick_at: float | None = None  # the loop's last housekeeping round
    stall_after_s: float = 60.0  # liveness fails when the loop made no round for this long


@dataclass
class Telemetry:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    health: Health = field(default_factory=Health)

    def __post_init__(self) -> None:
        r = self.registry
        self.desired = Gauge(
            "infscale_desired_replicas", "The last decision's desired replicas.", _KEY, registry=r
        )
        self.current = Gauge(
            "infscale_current_replicas", "scale.spec.replicas of the target.", _KEY, registry=r
        )
        self.ready = Gauge(
            "infscale_ready_replicas", "Running and Ready pods of the target.", _KEY, registry=r
        )
        self.forecast = Gauge(
            "infscale_forecast_value",
            "Each metric's forecast at now + lead time (sum over items).",
            (*_KEY, "metric"),
            registry=r,
        )
        self.metric_value = Gauge(
            "infscale_metric_value",
            "Each metric's current value (sum over items).",
            (*_KEY, "metric"),
            registry=r,
        )
        self.lead_time = Gauge("infscale_lead_time_seconds", "The forecast horizon used.", _KEY, registry=r)
        self.predicted_ready = Gauge(
            "infscale_predicted_ready_seconds",
            "Seconds until the last replica the decision adds is predicted ready (0: none added).",
            _KEY,
            registry=r,
        )
        self.cold_start = Gauge(
            "infscale_cold_start_seconds",
            "Startup time: the model's prediction beside the observed median and p90 (creation -> Ready).",
            (*_KEY, "source"),
            registry=r,
        )
        self.decisions = Counter(
            "infscale_decisions_total",
            "Decisions by the reason of the stage that set the count.",
            (*_KEY, "reason"),
            registry=r,
        )
        self.scales = Counter(
            "infscale_scales_total", "Successful /scale writes.", (*_KEY, "direction"), registry=r
        )
        self.errors = Counter(
            "infscale_errors_total", "Failed reads and writes by kind.", ("operation",), registry=r
        )
        self.tick_seconds = Histogram(
            "infscale_tick_duration_seconds",
            "Wall time of one loop round: leader election and readiness (run), every due object (step).",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.reconcile_seconds = Histogram(
            "infscale_reconcile_duration_seconds",
            "Wall time of one object's read-decide-write.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=r,
        )
        self.leader = Gauge("infscale_leader", "1 while this replica holds the lease.", registry=r)
        self._labelled = (self.desired, self.current, self.ready, self.lead_time, self.predicted_ready)
        self._series: dict[tuple[str, str], set[tuple[Gauge | Counter, tuple[str, ...]]]] = {}
        # labels() costs a lock and a lookup; a reconcile sets about ten series: keep the children
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._values: dict[tuple[int, tuple[str, ...]], float] = {}  # the last value each gauge was set to

    def _child(self, key: tuple[str, str], metric: Gauge | Counter, labels: tuple[str, ...]) -> Any:
        child = self._children.get((id(metric), labels))
        if child is None:
            child = self._children[(id(metric), labels)] = metric.labels(*labels)
            self._series.setdefault(key, set()).add((metric, labels))
        return child

    def put(self, key: tuple[str, str], metric: Gauge, value: float, *extra: str) -> None:
        labels = (*key, *extra)
        if self._values.get((id(metric), labels)) == value:  # most reconciles change no figure
            return
        self._child(key, metric, labels).set(value)
        self._values[(id(metric), labels)] = value

    def count(self, key: tuple[str, str], metric: Counter, *extra: str) -> None:
        self._child(key, metric, (*key, *extra)).inc()

    def forget(self, key: tuple[str, str]) -> None:
        """An autoscaler was deleted (or this replica stopped leading): drop its series."""
        for metric, labels in self._series.pop(key, set()):
            self._children.pop((id(metric), labels), None)
            self._values.pop((id(metric), labels), None)
            with contextlib.suppress(KeyError):
                metric.remove(*labels)

    def forget_all(self) -> None:
        for key in list(self._series):
            self.forget(key)

    def known(self) -> set[tuple[str, str]]:
        return set(self._series)


async def _metrics(request: web.Request) -> web.Response:
    telemetry = request.app[TELEMETRY]
    body = generate_latest(telemetry.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _livez(request: web.Request) -> web.Response:
    health = request.app[TELEMETRY].health
    now = request.app[CLOCK]()
    if health.last_tick_at is not None and now - health.last_tick_at > health.stall_after_s:
        return web.Response(
            status=503, text=f"the loop made no round for {now - health.last_tick_at:.0f} s\n"
        )
    return web.Response(text="ok\n")


async def _readyz(request: web.Request) -> web.Response:
    health = request.app[TELEMETRY].health
    if not health.started:
        return web.Response(status=503, text=f"not ready: {health.not_ready or 'starting'}\n")
    return web.Response(text="ok\n")


TELEMETRY = web.AppKey("telemetry", Telemetry)
CLOCK: web.AppKey[Callable[[], float]] = web.AppKey("clock")


def make_app(
    telemetry: Telemetry,
    clock: Callable[[], float],
    external: Callable[[web.Request], Awaitable[web.Response]] | None = None,
) -> web.Application:
    """`external`: the mode-hpa External Metrics handler (publish.py), served when given."""
    app = web.Application()
    app[TELEMETRY] = telemetry
    app[CLOCK] = clock
    app.router.add_routes(
        [
            web.get("/metrics", _metrics),
            web.get("/healthz", _livez),
            web.get("/livez", _livez),
            web.get("/readyz", _readyz),
        ]
    )
    if external is not None:
        app.router.add_get(EXTERNAL_PATH, external)
    return app
