"""A small in-process kube-apiserver for the controller's tests: aiohttp on loopback, spoken to by the
REAL kubernetes-asyncio client over HTTP.

It serves only what the controller and the load gate use (discovery of apps/v1, Deployments and their
/scale, pods and pods/status, nodes, HPAs, events.k8s.io Events, coordination Leases,
InferenceAutoscalers and their /status, and the aggregated External Metrics API) and behaves as the
real API does where a lenient fake would hide bugs (../../../shared/kubernetes_api_gotchas.md):

- lists and watches come from fake_machinery.py: resourceVersions, pages with expiring continue
  tokens, watches with bookmarks, 410 Expired after compaction, selectors as the apiserver applies
  them; every change a test makes goes through it (`add_pod`, `update_pod`, ...), so watches see it;
- every write is validated (fake_validation.py): built-in kinds against the Kubernetes 1.37
  schemas (kubernetes-validate, strict: unknown fields are errors), the custom resource against the
  CRD's openAPIV3Schema from deploy/controller/crd.yaml (unknown fields are errors too: the real API
  would prune them silently, which would lose state without a trace; date-time and int32/int64
  formats are checked), and its CEL rules and list-type map keys (fake_crdrules.py, ratcheted on
  update as the apiserver does);
  MicroTime fields need six fractional digits and a zone;
- sizes: a request body over 3 MiB is 413, a custom resource whose JSON exceeds etcd's 1.5 MiB is
  500 "etcdserver: request is too large", as the real API answers;
- resourceVersions: a stale one is 409 Conflict; a PUT of a Lease or a custom resource without one
  is 422; creating an existing name is 409 AlreadyExists;
- /scale: spec.replicas (absent at 0: omitempty), status.replicas (always) and status.selector (a
  string); a count sent as "3" or 3.0 is 400, a negative one 422;
- a dict PATCH sent as json-patch is 400, strategic merge on a custom resource 415; /status writes
  change only .status; pods/status takes a strategic merge patch, conditions merged by type;
- list items of built-in kinds carry no kind/apiVersion, custom-resource items do;
- without the CRD (`crd_installed = False`) the infscale.io paths are 404, as on a fresh cluster;
- errors are metav1.Status JSON; failures on demand (any status, or a hang until the client times out).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web
from fake_cluster import FakeCluster
from fake_machinery import ApiStatus
from fake_validation import check_micro_time, validate_builtin, validate_custom
from kubernetes_asyncio import client

from autoscaler.controller.kube import KubeClient
from common.selector import parse_selector

# etcd's default --max-request-bytes (1.5 MiB): a custom resource is stored as JSON, so its JSON is
# what counts; the apiserver answers 500 "etcdserver: request is too large" (kubernetes#112152). A
# request body over 3 MiB is refused before it is decoded: 413 (kubernetes#73805).
MAX_OBJECT_BYTES = 1_572_864
MAX_REQUEST_BYTES = 3 * 1024 * 1024
_MODIFIED = (
    'Operation cannot be fulfilled on {resource} "{name}": the object has been modified;'
    " please apply your changes to the latest version and try again"
)
_NOT_SERVED = "the server could not find the requested resource"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: null deletes, objects merge, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class FakeKube(FakeCluster):
    """The fake kube-apiserver: FakeCluster's objects, served over HTTP as the real API answers."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        watching = request.query.get("watch", "").lower() in ("true", "1")
        method = "WATCH" if watching and request.method == "GET" else request.method
        self.log.append((method, path))
        for failure in self.failures:
            if failure.times > 0 and failure.method == method and failure.pattern.search(path):
                failure.times -= 1
                if failure.status == "timeout":
                    await self.hang.wait()  # released at shutdown; the client gives up first
                    raise ApiStatus(504, "Timeout", "the fake was told to hang")
                code = int(failure.status)
                reason = {
                    404: "NotFound",
                    409: "Conflict",
                    410: "Expired",
                    429: "TooManyRequests",
                    500: "InternalError",
                }.get(code, "Failure")
                raise ApiStatus(
                    code, reason, failure.message or f"injected failure {code} for {method} {path}"
                )
        if not self.crd_installed and path.startswith("/apis/infscale.io/"):
            raise ApiStatus(404, "NotFound", f"{_NOT_SERVED} ({request.method} {path})")
        for route_method, pattern, handler in _ROUTES:
            if route_method == request.method and (match := pattern.fullmatch(path)):
                return await handler(self, request, **match.groupdict())
        raise ApiStatus(404, "NotFound", f"{_NOT_SERVED} ({request.method} {path})")

    @staticmethod
    async def _json(request: web.Request) -> Any:
        body = await request.read()
        if len(body) > MAX_REQUEST_BYTES:
            too_large = f"Request entity too large: limit is {MAX_REQUEST_BYTES}"
            raise ApiStatus(413, "RequestEntityTooLarge", too_large)
        try:
            return json.loads(body)
        except ValueError as exc:
            raise ApiStatus(400, "BadRequest", f"the body is not JSON: {exc}") from None

    async def _discovery(self, request: web.Request, group: str, version: str) -> web.Response:
        if (group, version) != ("apps", "v1"):
            raise ApiStatus(404, "NotFound", f"{_NOT_SERVED} /apis/{group}/{version}")
        resources = [
            {
                "name": "deployments",
                "singularName": "deployment",
                "namespaced": True,
                "kind": "Deployment",
                "verbs": ["get", "list", "watch"],
            },
            {
                "name": "deployments/scale",
                "singularName": "",
                "namespaced": True,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            },
            {
                "name": "deployments/status",
                "singularName": "",
                "namespaced": True,
                "kind": "Deployment",
                "verbs": ["get"],
            },
            {
                "name": "controllerrevisions",
                "singularName": "controllerrevision",
                "namespaced": True,
                "kind": "ControllerRevision",
                "verbs": ["get"],
            },
        ]
        return web.json_response(
            {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "apps/v1", "resources": resources}
        )

    # lists and watches of every resource: fake_machinery.py
    async def _pods(self, request: web.Request, namespace: str | None = None) -> web.StreamResponse:
        return await self.machinery.list("pods", request, namespace)

    async def _nodes(self, request: web.Request) -> web.StreamResponse:
        return await self.machinery.list("nodes", request)

    async def _deployments(self, request: web.Request, namespace: str | None = None) -> web.StreamResponse:
        return await self.machinery.list("deployments", request, namespace)

    async def _hpas(self, request: web.Request, namespace: str | None = None) -> web.StreamResponse:
        return await self.machinery.list("horizontalpodautoscalers", request, namespace)

    async def _leases(self, request: web.Request, namespace: str | None = None) -> web.StreamResponse:
        return await self.machinery.list("leases", request, namespace)

    async def _autoscalers(self, request: web.Request, namespace: str | None = None) -> web.StreamResponse:
        return await self.machinery.list("inferenceautoscalers", request, namespace)

    async def _get_autoscaler(self, request: web.Request, namespace: str, name: str) -> web.Response:
        return web.json_response(self._autoscaler(namespace, name))

    def _deployment(self, namespace: str, name: str) -> dict[str, Any]:
        dep = self.deployments.get((namespace, name))
        if dep is None:
            raise ApiStatus(404, "NotFound", f'deployments.apps "{name}" not found')
        return dep

    def _scale_of(self, dep: Mapping[str, Any]) -> dict[str, Any]:
        meta = dep["metadata"]
        labels = dep["spec"]["selector"]["matchLabels"]
        spec: dict[str, Any] = {}
        # status.replicas is required (always sent), spec.replicas is omitempty: 0 is absent
        status: dict[str, Any] = {
            "replicas": dep["status"].get("replicas") or 0,
            "selector": ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
        }
        if dep["spec"].get("replicas"):
            spec["replicas"] = dep["spec"]["replicas"]
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
                "resourceVersion": meta["resourceVersion"],
            },
            "spec": spec,
            "status": status,
        }

    async def _get_deployment(self, request: web.Request, namespace: str, name: str) -> web.Response:
        return web.json_response(copy.deepcopy(self._deployment(namespace, name)))

    async def _get_scale(self, request: web.Request, namespace: str, name: str) -> web.Response:
        return web.json_response(self._scale_of(self._deployment(namespace, name)))

    async def _put_scale(self, request: web.Request, namespace: str, name: str) -> web.Response:
        body = await self._json(request)
        if self.before_put_scale is not None:
            self.before_put_scale(name)
        dep = self._deployment(namespace, name)
        replicas = (body.get("spec") or {}).get("replicas")
        if replicas is not None and (isinstance(replicas, bool) or not isinstance(replicas, int)):
            raise ApiStatus(
                400,
                "BadRequest",
                f'Scale in version "v1" cannot be handled as a Scale: spec.replicas: {replicas!r}'
                " is not an int32",
            )
        validate_builtin(body)
        if (body.get("metadata") or {}).get("name") not in (None, name):
            raise ApiStatus(400, "BadRequest", "the name of the object does not match the name on the URL")
        if (replicas or 0) < 0:
            raise ApiStatus(
                422,
                "Invalid",
                f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: {replicas}:'
                " must be greater than or equal to 0",
                [{"field": "spec.replicas", "message": "must be greater than or equal to 0"}],
            )
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if rv and rv != dep["metadata"]["resourceVersion"]:
            raise ApiStatus(409, "Conflict", _MODIFIED.format(resource="deployments.apps", name=name))
        dep = copy.deepcopy(dep)
        dep["spec"]["replicas"] = replicas or 0
        self._commit("deployments", dep)
        self.scale_writes.append((name, replicas or 0))
        if self.on_scale_write is not None:
            self.on_scale_write(name, replicas or 0)
        return web.json_response(self._scale_of(dep))

    async def _get_pod(self, request: web.Request, namespace: str, name: str) -> web.Response:
        pod = self.pods.get((namespace, name))
        if pod is None:
            raise ApiStatus(404, "NotFound", f'pods "{name}" not found')
        return web.json_response(copy.deepcopy(pod))

    async def _patch_pod_status(self, request: web.Request, namespace: str, name: str) -> web.Response:
        """Strategic merge patch of .status: conditions merge by type (patchMergeKey), as for the
        controller's own readiness-gate style condition; other fields merge as JSON merge patch."""
        content_type = request.headers.get("Content-Type", "").split(";")[0]
        body = await self._json(request)
        pod = self.pods.get((namespace, name))
        if pod is None:
            raise ApiStatus(404, "NotFound", f'pods "{name}" not found')
        if content_type not in ("application/strategic-merge-patch+json", "application/merge-patch+json"):
            raise ApiStatus(
                415, "UnsupportedMediaType", f"the fake takes merge patches only, got {content_type}"
            )
        updated = copy.deepcopy(pod)
        patch = copy.deepcopy((body or {}).get("status") or {})
        conditions = patch.pop("conditions", None)
        updated["status"] = merge_patch(updated.get("status"), patch)
        if conditions is not None:
            if content_type == "application/merge-patch+json":  # a JSON merge patch replaces lists
                updated["status"]["conditions"] = conditions
            else:
                merged = {c["type"]: c for c in updated["status"].get("conditions") or []}
                for c in conditions:
                    merged[c["type"]] = {**merged.get(c["type"], {}), **c}
                updated["status"]["conditions"] = list(merged.values())
        validate_builtin(updated)
        return web.json_response(self._commit("pods", updated))

    async def _create_event(self, request: web.Request, namespace: str) -> web.Response:
        body = await self._json(request)
        validate_builtin(body)
        check_micro_time(body, ("eventTime",))
        missing = [
            k
            for k in (
                "eventTime",
                "reportingController",
                "reportingInstance",
                "action",
                "reason",
                "regarding",
            )
            if not body.get(k)
        ]
        if missing:
            raise ApiStatus(
                422,
                "Invalid",
                f"Event is invalid: {missing} Required value",
                [{"field": m, "message": "Required value"} for m in missing],
            )
        note = body.get("note") or ""
        if len(note.encode("utf-8")) > 1024:  # events.k8s.io/v1 validation: the note in bytes
            raise ApiStatus(
                422,
                "Invalid",
                "Event.events.k8s.io is invalid: note: Too long: may not be more than 1024 bytes",
                [{"field": "note", "message": "Too long: may not be more than 1024 bytes"}],
            )
        if body["metadata"].get("namespace") not in (None, namespace):
            raise ApiStatus(
                400, "BadRequest", "the namespace of the object does not match the namespace on the request"
            )
        body["metadata"]["namespace"] = namespace
        if (namespace, body["metadata"]["name"]) in self._objects("events"):
            raise ApiStatus(
                409, "AlreadyExists", f'events.events.k8s.io "{body["metadata"]["name"]}" already exists'
            )
        return web.json_response(self._commit("events", body), status=201)

    def _check_lease(self, body: Mapping[str, Any]) -> None:
        validate_builtin(body)
        check_micro_time(body, ("spec", "acquireTime"), ("spec", "renewTime"))

    async def _get_lease(self, request: web.Request, namespace: str, name: str) -> web.Response:
        lease = self.leases.get((namespace, name))
        if lease is None:
            raise ApiStatus(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found')
        return web.json_response(lease)

    async def _create_lease(self, request: web.Request, namespace: str) -> web.Response:
        body = await self._json(request)
        self._check_lease(body)
        name = body["metadata"]["name"]
        if (namespace, name) in self.leases:
            raise ApiStatus(409, "AlreadyExists", f'leases.coordination.k8s.io "{name}" already exists')
        body["metadata"]["namespace"] = namespace
        return web.json_response(self._commit("leases", body), status=201)

    async def _put_lease(self, request: web.Request, namespace: str, name: str) -> web.Response:
        body = await self._json(request)
        self._check_lease(body)
        current = self.leases.get((namespace, name))
        if current is None:
            raise ApiStatus(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found')
        rv = body["metadata"].get("resourceVersion")
        if not rv:
            raise ApiStatus(
                422,
                "Invalid",
                f'Lease.coordination.k8s.io "{name}" is invalid: metadata.resourceVersion:'
                " Invalid value: 0x0: must be specified for an update",
                [{"field": "metadata.resourceVersion", "message": "must be specified for an update"}],
            )
        if rv != current["metadata"]["resourceVersion"]:
            raise ApiStatus(
                409, "Conflict", _MODIFIED.format(resource="leases.coordination.k8s.io", name=name)
            )
        body["metadata"]["namespace"] = namespace
        return web.json_response(self._commit("leases", body))

    def _autoscaler(self, namespace: str, name: str) -> dict[str, Any]:
        obj = self.autoscalers.get((namespace, name))
        if obj is None:
            raise ApiStatus(404, "NotFound", f'inferenceautoscalers.infscale.io "{name}" not found')
        return obj

    def _store_status(self, obj: dict[str, Any], status: Any) -> web.Response:
        updated = copy.deepcopy(obj)
        if status is None:
            updated.pop("status", None)
        else:
            updated["status"] = status
        validate_custom(updated, obj)
        if len(json.dumps(updated, separators=(",", ":"))) > MAX_OBJECT_BYTES:
            raise ApiStatus(500, "InternalError", "etcdserver: request is too large")
        return web.json_response(self._commit("inferenceautoscalers", updated))

    async def _patch_status(self, request: web.Request, namespace: str, name: str) -> web.Response:
        content_type = request.headers.get("Content-Type", "").split(";")[0]
        body = await self._json(request)
        obj = self._autoscaler(namespace, name)
        if content_type == "application/strategic-merge-patch+json":
            raise ApiStatus(
                415, "UnsupportedMediaType", "strategic merge patch is not supported for custom resources"
            )
        if content_type == "application/json-patch+json":
            if not isinstance(body, list):
                raise ApiStatus(
                    400,
                    "BadRequest",
                    "json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
                )
            raise ApiStatus(415, "UnsupportedMediaType", "the fake applies merge patches only")
        if content_type != "application/merge-patch+json":
            raise ApiStatus(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include:"
                " application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml;"
                f" got {content_type}",
            )
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if rv and rv != obj["metadata"]["resourceVersion"]:
            raise ApiStatus(
                409, "Conflict", _MODIFIED.format(resource="inferenceautoscalers.infscale.io", name=name)
            )
        # a /status write changes only .status
        status = merge_patch(obj.get("status"), body.get("status")) if "status" in body else obj.get("status")
        return self._store_status(obj, status)

    async def _put_status(self, request: web.Request, namespace: str, name: str) -> web.Response:
        body = await self._json(request)
        obj = self._autoscaler(namespace, name)
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if not rv:
            raise ApiStatus(
                422,
                "Invalid",
                "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
            )
        if rv != obj["metadata"]["resourceVersion"]:
            raise ApiStatus(
                409, "Conflict", _MODIFIED.format(resource="inferenceautoscalers.infscale.io", name=name)
            )
        return self._store_status(obj, body.get("status"))

    async def _external(self, request: web.Request, namespace: str, metric: str) -> web.Response:
        series = self.external.get((namespace, metric))
        if series is None:
            raise ApiStatus(
                404, "NotFound", f"the server could not find the metric {metric} for namespace {namespace}"
            )
        selector = parse_selector(request.query.get("labelSelector", ""))
        items = [
            {
                "metricName": metric,
                "metricLabels": labels,
                "timestamp": stamp or "2026-11-29T10:00:00Z",
                "value": value,
            }
            for labels, value, stamp in series
            if selector.matches(labels)
        ]
        return web.json_response(
            {
                "kind": "ExternalMetricValueList",
                "apiVersion": "external.metrics.k8s.io/v1beta1",
                "metadata": {},
                "items": items,
            }
        )


_NS = r"/namespaces/(?P<namespace>[^/]+)"
_NAME = r"/(?P<name>[^/]+)"
_LEASES = r"/apis/coordination.k8s.io/v1"
_IA = r"/apis/infscale.io/v1alpha1"
_APPS = r"/apis/apps/v1"
_HPA = r"/apis/autoscaling/v2"
# (method, path, handler), tried in order; compiled once, not per request
_ROUTES: tuple[tuple[str, re.Pattern[str], Callable[..., Awaitable[web.StreamResponse]]], ...] = tuple(
    (method, re.compile(path), handler)
    for method, path, handler in (
        ("GET", rf"{_APPS}{_NS}/deployments{_NAME}/scale", FakeKube._get_scale),
        ("PUT", rf"{_APPS}{_NS}/deployments{_NAME}/scale", FakeKube._put_scale),
        ("GET", rf"{_APPS}{_NS}/deployments{_NAME}", FakeKube._get_deployment),
        ("GET", rf"{_APPS}{_NS}/deployments", FakeKube._deployments),
        ("GET", rf"{_APPS}/deployments", FakeKube._deployments),
        ("GET", r"/apis/(?P<group>[^/.]+(?:\.[^/]+)*)/(?P<version>[^/]+)", FakeKube._discovery),
        ("GET", rf"/api/v1{_NS}/pods{_NAME}", FakeKube._get_pod),
        ("PATCH", rf"/api/v1{_NS}/pods{_NAME}/status", FakeKube._patch_pod_status),
        ("GET", rf"/api/v1{_NS}/pods", FakeKube._pods),
        ("GET", r"/api/v1/pods", FakeKube._pods),
        ("GET", r"/api/v1/nodes", FakeKube._nodes),
        ("GET", rf"{_HPA}{_NS}/horizontalpodautoscalers", FakeKube._hpas),
        ("GET", rf"{_HPA}/horizontalpodautoscalers", FakeKube._hpas),
        ("POST", rf"/apis/events.k8s.io/v1{_NS}/events", FakeKube._create_event),
        ("GET", rf"{_LEASES}{_NS}/leases{_NAME}", FakeKube._get_lease),
        ("PUT", rf"{_LEASES}{_NS}/leases{_NAME}", FakeKube._put_lease),
        ("POST", rf"{_LEASES}{_NS}/leases", FakeKube._create_lease),
        ("GET", rf"{_LEASES}{_NS}/leases", FakeKube._leases),
        ("GET", rf"{_IA}/inferenceautoscalers", FakeKube._autoscalers),
        ("GET", rf"{_IA}{_NS}/inferenceautoscalers", FakeKube._autoscalers),
        ("GET", rf"{_IA}{_NS}/inferenceautoscalers{_NAME}", FakeKube._get_autoscaler),
        ("PATCH", rf"{_IA}{_NS}/inferenceautoscalers{_NAME}/status", FakeKube._patch_status),
        ("PUT", rf"{_IA}{_NS}/inferenceautoscalers{_NAME}/status", FakeKube._put_status),
        ("GET", rf"/apis/external.metrics.k8s.io/v1beta1{_NS}/(?P<metric>[^/]+)", FakeKube._external),
    )
)


@web.middleware
async def _status_errors(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except ApiStatus as exc:
        return exc.response()


@asynccontextmanager
async def serve(fake: FakeKube, *, timeout_s: float = 5.0) -> AsyncIterator[KubeClient]:
    """Start the fake on a loopback port; yield a KubeClient (the real ApiClient) pointed at it."""
    # aiohttp refuses bodies over 1 MiB itself (a bare 413): read up to 4x the apiserver's limit so
    # that the limit is answered as the apiserver answers it, a Status
    app = web.Application(middlewares=[_status_errors], client_max_size=4 * MAX_REQUEST_BYTES)
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    api = client.ApiClient(configuration=client.Configuration(host=f"http://127.0.0.1:{port}"))
    try:
        yield KubeClient(api, timeout_s=timeout_s)
    finally:
        fake.hang.set()
        fake.drop_watches()
        await api.close()
        await runner.cleanup()
