"""Engine pods from the Kubernetes API: list, then watch, re-listing when the watch expires.

Pipeline position: a `TargetSet` for adapter/sources/scrape.py. `target_of` (pure) turns one pod
object into a scrape target (or None when the pod cannot be scraped); `KubernetesPods.run` keeps the
set current through the informer the controller uses too (common/listwatch.py: paginated list, watch
with bookmarks, a re-list after 410 Expired, backoff after errors). A label change that takes a pod
out of the selector arrives as DELETED.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from kubernetes_asyncio import client

from adapter.sources import DEPLOYMENT, NAMESPACE, POD
from adapter.sources.scrape import Target
from adapter.telemetry import Telemetry
from common.kubeconfig import load_configuration
from common.listwatch import Informer

if TYPE_CHECKING:
    from adapter.catalogconfig import KubernetesDiscovery

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
    """Pods matching the discovery settings, kept current by the shared informer (list + watch,
    common/listwatch.py). `ready` is set after the first list."""

    def __init__(self, api_client: Any, settings: KubernetesDiscovery, telemetry: Telemetry) -> None:
        self._settings = settings
        self._targets: dict[str, Target] = {}
        ns = settings.namespace
        path = f"/api/v1/namespaces/{quote(ns, safe='')}/pods" if ns is not None else "/api/v1/pods"
        self._informer = Informer(
            api_client,
            path,
            label_selector=settings.label_selector,
            # the server ends each watch after this; the informer resumes from the last version seen
            watch_timeout_s=(settings.watch_timeout_s, settings.watch_timeout_s),
            backoff_initial_s=_RETRY_AFTER_ERROR_S,
            backoff_max_s=max(_RETRY_AFTER_ERROR_S, 30.0),
            on_restart=lambda reason: telemetry.discovery_restarts.labels(reason).inc(),
            name="engine pods",
        )
        self._informer.add_handler(self._apply)
        self.ready = self._informer.synced

    def targets(self) -> Sequence[Target]:
        return list(self._targets.values())

    def _apply(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        pod = new or old or {}
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        target = None if new is None else target_of(new, self._settings)
        if target is None:
            self._targets.pop(key, None)
        else:
            self._targets[key] = target

    async def run(self) -> None:
        """List and watch until cancelled."""
        await self._informer.run()


@asynccontextmanager
async def kube_api_client(kubeconfig: Path | None = None) -> AsyncIterator[Any]:
    """An ApiClient from `kubeconfig`, else the pod's service account, else ~/.kube/config
    (common/kubeconfig.py; KubeconfigError names the problem)."""
    async with client.ApiClient(await load_configuration(kubeconfig)) as api:
        yield api
