"""kube-apiserver I/O, and nothing else: every call the controller makes, through kubernetes-asyncio's
ApiClient (its configuration, auth hooks and connection pool) with plain JSON bodies.

Plain dicts instead of the generated models on purpose: the models' (de)serialization costs more CPU
than the rest of a tick, drops fields it does not know, and writes MicroTime without its fraction
when the microseconds are 0 (../shared/kubernetes_api_gotchas.md). Errors are translated here into
`KubeError`, which carries the Status (code, reason, message) or says the request timed out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from autoscaler.controller import crd
from autoscaler.controller.crd import TargetRef
from common.status import parse_status

_OBJECT = {code: "object" for code in (200, 201, 202)}
MERGE_PATCH = "application/merge-patch+json"


class KubeError(Exception):
    """A failed request: the Status's code, reason and message (code 0: no HTTP answer)."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"{code} {reason}: {message}" if code else f"{reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message

    @property
    def conflict(self) -> bool:
        return self.code == 409

    @property
    def not_found(self) -> bool:
        return self.code == 404


_FAILURES = (ApiException, TimeoutError, aiohttp.ClientError)  # what one exchange can fail with


def _from_api_exception(exc: ApiException, what: str) -> KubeError:
    body = exc.body.decode("utf-8", "replace") if isinstance(exc.body, bytes) else str(exc.body or "")
    status = parse_status(body)
    reason = (status.reason if status else "") or str(exc.reason or "")
    message = status.message if status else ""
    return KubeError(int(exc.status or 0), reason, f"{what}: {message or body or reason}")


@dataclass(frozen=True, slots=True)
class Scale:
    """autoscaling/v1 Scale. Zero counts are omitted by the API: absent means 0."""

    spec_replicas: int
    status_replicas: int
    selector: str  # status.selector, the string form; "" when the target publishes none
    resource_version: str


def scale_from_json(data: Mapping[str, Any]) -> Scale:
    spec = data.get("spec") or {}
    status = data.get("status") or {}
    return Scale(
        spec_replicas=int(spec.get("replicas") or 0),
        status_replicas=int(status.get("replicas") or 0),
        selector=str(status.get("selector") or ""),
        resource_version=str((data.get("metadata") or {}).get("resourceVersion") or ""),
    )


class KubeClient:
    def __init__(self, api: ApiClient, *, timeout_s: float = 5.0) -> None:
        self.api = api
        self.timeout_s = timeout_s
        self._resources: dict[tuple[str, str], str] = {}  # (apiVersion, kind) -> plural

    def _error(self, exc: BaseException, what: str) -> KubeError:
        """A failed exchange as a KubeError: the apiserver's Status, a timeout or a lost connection."""
        if isinstance(exc, ApiException):
            return _from_api_exception(exc, what)
        if isinstance(exc, TimeoutError):
            return KubeError(0, "Timeout", f"{what}: no answer within {self.timeout_s:g} s")
        return KubeError(0, "ConnectionError", f"{what}: {exc}")

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        what: str = "",
    ) -> Any:
        """One request; the parsed JSON answer, or KubeError."""
        what = what or f"{method} {path}"
        try:
            result = await self.api.call_api(
                path,
                method,
                query_params=list(query),
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body,
                response_types_map=_OBJECT,
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=True,
                _request_timeout=self.timeout_s,
            )
        except _FAILURES as exc:
            raise self._error(exc, what) from exc
        return result

    async def request_body(
        self, path: str, *, query: Sequence[tuple[str, str]] = (), what: str = ""
    ) -> bytes:
        """One GET; the answer's body as it came (the caller parses it, or reuses the last parse when
        the bytes are the same), or KubeError."""
        what = what or f"GET {path}"
        try:
            response = await self.api.call_api(
                path,
                "GET",
                query_params=list(query),
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=False,
                _request_timeout=self.timeout_s,
            )
            async with response:
                body: bytes = await response.read()
                if not 200 <= response.status <= 299:
                    error = ApiException(status=response.status, reason=response.reason)
                    error.body = body
                    raise error
        except _FAILURES as exc:
            raise self._error(exc, what) from exc
        return body

    # --- targets and their /scale --------------------------------------------------------------

    async def plural(self, ref: TargetRef) -> str:
        """The resource name of a kind, from API discovery (cached): any kind with a /scale works."""
        key = (ref.api_version, ref.kind)
        if key not in self._resources:
            path = f"/apis/{ref.api_version}" if ref.group else f"/api/{ref.api_version}"
            listing = await self.request("GET", path, what=f"discovery of {ref.api_version}")
            names = {r.get("name", "") for r in listing.get("resources", [])}
            for resource in listing.get("resources", []):
                name = resource.get("name", "")
                if resource.get("kind") == ref.kind and "/" not in name:
                    if f"{name}/scale" not in names:
                        raise KubeError(
                            422,
                            "NoScaleSubresource",
                            f"{ref.api_version} {ref.kind} has no /scale subresource",
                        )
                    self._resources[key] = name
                    break
            else:
                raise KubeError(404, "NotFound", f"{ref.api_version} serves no kind {ref.kind!r}")
        return self._resources[key]

    async def _scale_path(self, namespace: str, ref: TargetRef) -> str:
        plural = await self.plural(ref)
        root = f"/apis/{ref.api_version}" if ref.group else f"/api/{ref.api_version}"
        return f"{root}/namespaces/{quote(namespace)}/{plural}/{quote(ref.name)}/scale"

    async def get_scale(self, namespace: str, ref: TargetRef) -> Scale:
        path = await self._scale_path(namespace, ref)
        return scale_from_json(await self.request("GET", path, what=f"get scale of {ref}"))

    async def put_scale(self, namespace: str, ref: TargetRef, current: Scale, replicas: int) -> Scale:
        """Optimistic: carries the resourceVersion read, so a concurrent change is a 409 (KubeError)."""
        path = await self._scale_path(namespace, ref)
        body = {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {
                "name": ref.name,
                "namespace": namespace,
                "resourceVersion": current.resource_version,
            },
            "spec": {"replicas": replicas},
        }
        return scale_from_json(await self.request("PUT", path, body=body, what=f"update scale of {ref}"))

    # --- the custom resource -------------------------------------------------------------------

    async def list_autoscalers(self, namespace: str | None) -> list[dict[str, Any]]:
        ns = f"/namespaces/{quote(namespace)}" if namespace else ""
        path = f"/apis/{crd.API_VERSION}{ns}/{crd.PLURAL}"
        return list((await self.request("GET", path, what=f"list {crd.PLURAL}")).get("items") or [])

    async def patch_autoscaler_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """A merge patch of /status (a dict body must not go as json-patch, see the gotchas)."""
        path = f"/apis/{crd.API_VERSION}/namespaces/{quote(namespace)}/{crd.PLURAL}/{quote(name)}/status"
        await self.request(
            "PATCH",
            path,
            body={"status": dict(status)},
            content_type=MERGE_PATCH,
            what=f"update status of {crd.KIND} {namespace}/{name}",
        )

    # --- what the decision reads ---------------------------------------------------------------

    async def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        path = f"/api/v1/namespaces/{quote(namespace)}/pods"
        answer = await self.request("GET", path, query=[("labelSelector", selector)], what="list pods")
        return list(answer.get("items") or [])

    async def list_assigned_pods(self) -> list[dict[str, Any]]:
        """Every pod bound to a node and not finished: their GPU requests use the nodes' GPUs."""
        selector = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
        answer = await self.request(
            "GET", "/api/v1/pods", query=[("fieldSelector", selector)], what="list pods on nodes"
        )
        return list(answer.get("items") or [])

    async def list_nodes(self) -> list[dict[str, Any]]:
        return list((await self.request("GET", "/api/v1/nodes", what="list nodes")).get("items") or [])

    async def list_hpas(self, namespace: str) -> list[dict[str, Any]]:
        path = f"/apis/autoscaling/v2/namespaces/{quote(namespace)}/horizontalpodautoscalers"
        return list((await self.request("GET", path, what="list HPAs")).get("items") or [])

    async def patch_pod_status_conditions(
        self, namespace: str, name: str, conditions: Sequence[Mapping[str, Any]]
    ) -> None:
        """A strategic merge patch: conditions merge by type, so the kubelet's own are kept (a JSON
        merge patch would replace the whole list)."""
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/status"
        await self.request(
            "PATCH",
            path,
            body={"status": {"conditions": [dict(c) for c in conditions]}},
            content_type="application/strategic-merge-patch+json",
            what=f"update status of pod {namespace}/{name}",
        )

    async def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        path = f"/apis/events.k8s.io/v1/namespaces/{quote(namespace)}/events"
        await self.request("POST", path, body=dict(event), what="create event")

    # --- leases --------------------------------------------------------------------------------

    def _lease_path(self, namespace: str, name: str = "") -> str:
        base = f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace)}/leases"
        return f"{base}/{quote(name)}" if name else base

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            lease: dict[str, Any] = await self.request(
                "GET", self._lease_path(namespace, name), what="get lease"
            )
        except KubeError as exc:
            if exc.not_found:
                return None
            raise
        return lease

    async def create_lease(self, namespace: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = await self.request(
            "POST", self._lease_path(namespace), body=dict(lease), what="create lease"
        )
        return created

    async def replace_lease(self, namespace: str, name: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        replaced: dict[str, Any] = await self.request(
            "PUT", self._lease_path(namespace, name), body=dict(lease), what="update lease"
        )
        return replaced
