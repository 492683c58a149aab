"""mode hpa: the recommendation served as the External metric `infscale_desired_replicas`.

The controller's HTTP port answers `GET /apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/
infscale_desired_replicas?labelSelector=autoscaler=<name>` with an ExternalMetricValueList. The
adapter, which owns the aggregated API, forwards reads of metrics it does not serve to its
`delegate` (adapter/delegate.py): point it here and an HPA with an AverageValue target of 1 on this
metric becomes the actuator of infscale's decision, with no Prometheus in between.

Values come from the InferenceAutoscalers' status (`desiredReplicas`, `lastDecision.time`), so the
standby replica answers as well as the leader. A recommendation older than `max_age_s` is not
served: a stopped controller must make the HPA hold (FailedGetExternalMetric), never steer it with
an old number. Matching (common/selector.py, the adapter's parser) and the items are pure; the
handler does one namespaced LIST per read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from aiohttp import web

from autoscaler.controller.crd import Mode
from autoscaler.controller.kubetime import parse_time, rfc3339
from common.selector import Selector, SelectorError, parse_selector
from common.status import status_body

METRIC = "infscale_desired_replicas"


def items_from(
    autoscalers: Sequence[Mapping[str, Any]], selector: Selector, now: float, max_age_s: float
) -> list[dict[str, Any]]:
    """One item per mode-hpa autoscaler whose last decision is fresh and whose labels match."""
    items = []
    for obj in autoscalers:
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        if spec.get("mode") != Mode.HPA or "desiredReplicas" not in status:
            continue
        labels = {"namespace": str(meta.get("namespace", "")), "autoscaler": str(meta.get("name", ""))}
        if not selector.matches(labels):
            continue
        try:
            decided = parse_time(str((status.get("lastDecision") or {}).get("time", "")))
        except ValueError:
            continue
        if now - decided > max_age_s:
            continue
        items.append(
            {
                "metricName": METRIC,
                "metricLabels": labels,
                "timestamp": rfc3339(decided),
                "value": str(int(status["desiredReplicas"])),
            }
        )
    return items


def _status(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(status_body(code, reason, message), status=code)


def handler(
    list_autoscalers: Callable[[str], Awaitable[list[dict[str, Any]]]],
    clock: Callable[[], float],
    max_age_s: float,
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def serve(request: web.Request) -> web.Response:
        namespace, metric = request.match_info["namespace"], request.match_info["metric"]
        if metric != METRIC:
            return _status(404, "NotFound", f"the controller serves only {METRIC}, not {metric}")
        try:
            selector = parse_selector(request.query.get("labelSelector", ""))
        except SelectorError as exc:
            return _status(400, "BadRequest", f"labelSelector: {exc}")
        try:
            autoscalers = await list_autoscalers(namespace)
        except Exception as exc:  # the kube read failed: the HPA must hold, not see an empty answer
            return _status(
                503, "ServiceUnavailable", f"cannot read InferenceAutoscalers in {namespace}: {exc}"
            )
        items = items_from(autoscalers, selector, clock(), max_age_s)
        if not items:  # the HPA treats an empty list as an error too; say why
            return _status(
                404, "NotFound", f"no fresh recommendation for {METRIC} in {namespace} matching the selector"
            )
        body = {
            "kind": "ExternalMetricValueList",
            "apiVersion": "external.metrics.k8s.io/v1beta1",
            "metadata": {},
        }
        return web.json_response({**body, "items": items})

    return serve
