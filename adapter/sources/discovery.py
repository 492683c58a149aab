"""Engine pods from the Kubernetes API: list, then watch, re-listing when the watch expires.

Pipeline position: a `TargetSet` for adapter/sources/scrape.py. `target_of` (pure) turns one pod
object into a scrape target (or None when the pod cannot be scraped); `KubernetesPods.run` keeps the
set current. Watch semantics of the real API (../shared/kubernetes_api_gotchas.md): a watch from a
too-old resourceVersion answers 200 with one ERROR event holding a 410 Status, after which only a
fresh list helps; a label change that takes a pod out of the selector arrives as DELETED.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from adapter.sources import DEPLOYMENT, NAMESPACE, POD
from adapter.sources.scrape import Target
from adapter.telemetry import Telemetry
from common.kubeconfig import load_configuration

if TYPE_CHECKING:
    from adapter.catalog import KubernetesDiscovery

log = logging.getLogger(__name__)
_RETRY_AFTER_ERROR_S = 5.0  # API unreachable or forbidden: retry, without hammering the apiserver


def _deployment_of(pod: Mapping[str, Any], label: str | None) -> str | None:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    if label is not None:
        value = labels.get(label)
        return str(value) if value is not None else None
    for owner in meta.get("ownerReferences") or ():
        if not owner.get("controller"):
            continue
        name = str(owner.get("name", ""))
        template_hash = labels.get("pod-template-hash")
        # a Deployment's pods belong to ReplicaSet "<deployment>-<pod-template-hash>"
        if owner.get("kind") == "ReplicaSet" and template_hash and name.endswith(f"-{template_hash}"):
            return name[: -len(template_hash) - 1]
        return name  # StatefulSet, LeaderWorkerSet, a bare ReplicaSet…: the owner's name
    return None


def _port_of(pod: Mapping[str, Any], port: int | str) -> int | None:
    if isinstance(port, int):
        return port
    for container in (pod.get("spec") or {}).get("containers") or ():
        for p in container.get("ports") or ():
            if p.get("name") == port:
                return int(p["containerPort"])
    return None


def target_of(pod: Mapping[str, Any], settings: KubernetesDiscovery) -> Target | None:
    """The scrape target of a pod, or None while it is not running, has no IP, is terminating or
    lacks the named port."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    ip = status.get("podIP")
    if status.get("phase") != "Running" or not ip or meta.get("deletionTimestamp"):
        return None
    port = _port_of(pod, settings.port)
    if port is None:
        return None
    host = f"[{ip}]" if ":" in ip else ip  # IPv6 pod IPs need brackets in a URL
    labels = {NAMESPACE: str(meta.get("namespace", "")), POD: str(meta.get("name", ""))}
    deployment = _deployment_of(pod, settings.deployment_label)
    if deployment:
        labels[DEPLOYMENT] = deployment
    key = f"{labels[NAMESPACE]}/{labels[POD]}"
    return Target(key=key, url=f"{settings.scheme}://{host}:{port}{settings.path}", labels=labels)


class KubernetesPods:
    """Pods matching the discovery settings, kept current by a watch. `ready` is set after the first
    list."""

    def __init__(self, api_client: Any, settings: KubernetesDiscovery, telemetry: Telemetry) -> None:
        self._api = client.CoreV1Api(api_client)
        self._settings = settings
        self._telemetry = telemetry
        self._targets: dict[str, Target] = {}
        self.ready = asyncio.Event()

    def targets(self) -> Sequence[Target]:
        return list(self._targets.values())

    def _list_call(self) -> Any:
        if self._settings.namespace is None:
            return self._api.list_pod_for_all_namespaces
        return _bind_namespace(self._api.list_namespaced_pod, self._settings.namespace)

    async def _relist(self) -> str:
        response = await self._list_call()(
            label_selector=self._settings.label_selector, _preload_content=False
        )
        body = await response.json()
        targets = {}
        for pod in body.get("items") or ():
            target = target_of(pod, self._settings)
            if target is not None:
                targets[target.key] = target
        self._targets = targets
        self.ready.set()
        return str((body.get("metadata") or {}).get("resourceVersion", ""))

    def _apply(self, kind: str, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        target = None if kind == "DELETED" else target_of(pod, self._settings)
        if target is None:
            self._targets.pop(key, None)
        else:
            self._targets[key] = target

    async def _watch(self, resource_version: str) -> str:
        """Follow events until the server ends the watch; return the resourceVersion to resume from."""
        w = watch.Watch(return_type="object")  # keep raw dicts: no V1Pod models per event
        try:
            stream = w.stream(
                self._list_call(),
                label_selector=self._settings.label_selector,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                # a server-side timeout also turns off the client's own 410 retry, which would
                # re-watch from the same expired version instead of re-listing
                timeout_seconds=self._settings.watch_timeout_s,
            )
            async for event in stream:
                kind = event["type"]
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self._apply(kind, event["raw_object"])
        finally:
            await w.close()
        return str(w.resource_version or resource_version)

    async def run(self) -> None:
        """List and watch until cancelled."""
        while True:
            try:
                resource_version = await self._relist()
                while True:
                    resource_version = await self._watch(resource_version)
            except ApiException as exc:
                if exc.status == 410:  # resourceVersion expired: re-list at once
                    self._telemetry.discovery_restarts.labels("expired").inc()
                    continue
                self._telemetry.discovery_restarts.labels("error").inc()
                log.warning("pod discovery: Kubernetes API error %s %s; retrying", exc.status, exc.reason)
            except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                self._telemetry.discovery_restarts.labels("error").inc()
                log.warning("pod discovery: %s: %s; retrying", type(exc).__name__, exc)
            except Exception:  # a bug must not freeze the targets for good: log it, list again
                self._telemetry.discovery_restarts.labels("error").inc()
                log.exception("pod discovery failed unexpectedly; retrying")
            await asyncio.sleep(_RETRY_AFTER_ERROR_S)


def _bind_namespace(func: Any, namespace: str) -> Any:
    # Watch.stream inspects the function's docstring for the return type, so wrap without hiding it
    def call(*args: Any, **kwargs: Any) -> Any:
        return func(namespace, *args, **kwargs)

    call.__doc__ = func.__doc__
    return call


@asynccontextmanager
async def kube_api_client(kubeconfig: Path | None = None) -> AsyncIterator[Any]:
    """An ApiClient from `kubeconfig`, else the pod's service account, else ~/.kube/config
    (common/kubeconfig.py; KubeconfigError names the problem)."""
    async with client.ApiClient(await load_configuration(kubeconfig)) as api:
        yield api
