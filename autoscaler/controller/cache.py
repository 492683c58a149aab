"""The controller's view of the cluster: informer caches (common/listwatch.py) and what a reconcile
looks up in them, plus which InferenceAutoscalers a change concerns.

Cached, each one list then a watch (steady state: no requests beyond the watches' renewals):

  InferenceAutoscalers   every change queues that object
  targets                Deployments, StatefulSets, ReplicaSets (apps/v1), one informer per kind in
                         use; their /scale is read from the object (spec.replicas, status.replicas,
                         spec.selector in the string form /scale gives); a change queues the
                         autoscalers of that target. Other kinds: GET /scale per reconcile
  pods                   slimmed to what the decision reads; a change queues the autoscalers whose
                         target selector matches the pod (before or after the change)
  HPAs                   a change queues the autoscalers of the HPA's target (the foreign-HPA check)
  nodes                  with spec.coldStart only (GPU capacity); a change does not queue anyone: the
                         next periodic reconcile reads it (capacity moves the horizon, not the count)

Pods and HPAs are watched in the controller's namespace (`--namespace`) or cluster-wide; GPU
capacity needs every pod bound to a node, so with `--namespace` it has its own cluster-wide pod
informer (fieldSelector spec.nodeName!=, started on first need).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio.client import ApiClient

from autoscaler.controller import capacity, crd
from autoscaler.controller.capacity import GpuNodes
from autoscaler.controller.crd import TargetRef
from autoscaler.controller.slim import slim_hpa, slim_node, slim_pod, slim_target
from common.listwatch import Informer, Object, object_key
from common.selector import Operator, Selector, parse_selector

# apps/v1 kinds whose /scale is their own spec.replicas, status.replicas and spec.selector
SCALABLE = {
    ("apps", "Deployment"): "deployments",
    ("apps", "StatefulSet"): "statefulsets",
    ("apps", "ReplicaSet"): "replicasets",
}


def _ns_path(root: str, namespace: str | None, plural: str) -> str:
    return f"{root}/namespaces/{namespace}/{plural}" if namespace else f"{root}/{plural}"


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def _namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def _target_key(namespace: str, api_version: str, kind: str, name: str) -> tuple[str, str, str, str]:
    return (namespace, api_version.rpartition("/")[0], kind, name)


@dataclass(frozen=True, slots=True)
class Watched:
    """An autoscaler's target and its pod selector, as last seen (for routing changes to it)."""

    target: tuple[str, str, str, str]  # (namespace, group, kind, name)
    selector: Selector | None = None


class Caches:
    def __init__(
        self,
        api: ApiClient,
        *,
        namespace: str | None,
        enqueue: Callable[[str], None],
        informer_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.enqueue = enqueue
        self.options = dict(informer_options or {})
        ia_root = f"/apis/{crd.API_VERSION}"
        self.autoscalers = self._informer(
            _ns_path(ia_root, namespace, crd.PLURAL), name="inferenceautoscalers"
        )
        self.hpas = self._informer(
            _ns_path("/apis/autoscaling/v2", namespace, "horizontalpodautoscalers"),
            transform=slim_hpa,
            name="hpas",
        )
        self.pods = self._informer(_ns_path("/api/v1", namespace, "pods"), transform=slim_pod, name="pods")
        self.pods.add_index("label", _pod_labels)
        self.pods.add_index("namespace", lambda p: (_namespace(p),))
        self.targets: dict[tuple[str, str], Informer] = {}
        self.nodes: Informer | None = None
        self.node_pods: Informer | None = None  # cluster-wide bound pods, with --namespace only
        self._watched: dict[str, Watched] = {}  # autoscaler key -> what routes changes to it
        self._by_target: dict[tuple[str, str, str, str], set[str]] = {}
        self._by_label: dict[tuple[str, str, str], set[str]] = {}  # (ns, key, value) -> autoscalers
        self._unindexed: dict[str, set[str]] = {}  # ns -> autoscalers whose selector has no key=value
        self._actuators: dict[tuple[str, str, str, str], set[str]] = {}  # target -> direct-mode autoscalers
        self._acting: dict[str, tuple[str, str, str, str]] = {}  # direct-mode autoscaler -> its target
        self._gpu: GpuNodes | None = None  # recomputed after a node or bound pod changed
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.autoscalers.add_handler(self._on_autoscaler)
        self.hpas.add_handler(self._on_hpa)
        self.pods.add_handler(self._on_pod)

    def _informer(self, path: str, **kwargs: Any) -> Informer:
        return Informer(self.api, path, **{**self.options, **kwargs})

    # --- running ----------------------------------------------------------------------------------------

    def _start(self, informer: Informer) -> None:
        if informer.name not in self._tasks:
            self._tasks[informer.name] = asyncio.create_task(informer.run(), name=f"informer {informer.name}")

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Caches]:
        for informer in (self.autoscalers, self.hpas, self.pods):
            self._start(informer)
        try:
            yield self
        finally:
            for task in self._tasks.values():
                task.cancel()
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)
            self._tasks.clear()

    def informers(self) -> list[Informer]:
        extra = [i for i in (self.nodes, self.node_pods) if i is not None]
        return [self.autoscalers, self.hpas, self.pods, *self.targets.values(), *extra]

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers())

    async def wait_synced(self) -> None:
        await asyncio.gather(*(i.synced.wait() for i in self.informers()))

    # --- lookups ----------------------------------------------------------------------------------------

    def target_informer(self, ref: TargetRef) -> Informer | None:
        """The cache of this kind's objects (started on first need); None: the kind is read by GET."""
        plural = SCALABLE.get((ref.group, ref.kind))
        if plural is None or ref.api_version != "apps/v1":
            return None
        key = (ref.group, ref.kind)
        informer = self.targets.get(key)
        if informer is None:
            informer = self._informer(
                _ns_path("/apis/apps/v1", self.namespace, plural), transform=slim_target, name=plural
            )
            informer.add_handler(self._target_handler(key))
            self.targets[key] = informer
            if self._tasks:
                self._start(informer)
        return informer

    def pod_candidates(self, namespace: str, selector: Selector) -> list[Object]:
        """The pods that may match: narrowed by one key=value of the selector (else the namespace)."""
        for r in selector.requirements:
            if r.operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN) and len(r.values) == 1:
                return self.pods.by_index("label", (namespace, r.key, r.values[0]))
        return self.pods.by_index("namespace", namespace)

    def pods_matching(
        self, namespace: str, selector: Selector, candidates: list[Object] | None = None
    ) -> list[Object]:
        """The pods `selector` matches, out of `candidates` (pod_candidates() when None)."""
        if candidates is None:
            candidates = self.pod_candidates(namespace, selector)
        return [p for p in candidates if selector.matches(_labels(p))]

    def hpas_in(self, namespace: str) -> list[Object]:
        return [h for h in self.hpas.items() if _namespace(h) == namespace]

    async def gpu_nodes(self, wait_s: float) -> tuple[GpuNodes | None, str]:
        """Free GPUs per node, from the node and bound-pod caches (started on first need, then
        waited for up to `wait_s`)."""
        if self.nodes is None:
            self.nodes = self._informer("/api/v1/nodes", transform=slim_node, name="nodes")
            self.nodes.add_handler(self._on_capacity)
            if self.namespace is not None:
                self.node_pods = self._informer(
                    "/api/v1/pods", transform=slim_pod, field_selector="spec.nodeName!=", name="bound pods"
                )
                self.node_pods.add_handler(self._on_capacity)
            if self._tasks:
                self._start(self.nodes)
                if self.node_pods is not None:
                    self._start(self.node_pods)
        pods = self.node_pods or self.pods
        if not (self.nodes.synced.is_set() and pods.synced.is_set()) and self._tasks:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(self.nodes.synced.wait(), pods.synced.wait()), wait_s)
        if not (self.nodes.synced.is_set() and pods.synced.is_set()):
            why = self.nodes.last_error or pods.last_error or "listing"
            return None, f"the node and pod caches are not synced yet: {why}"
        if self._gpu is None:
            self._gpu = capacity.gpu_nodes(self.nodes.items(), pods.items())
        return self._gpu, ""

    # --- routing changes to autoscalers ------------------------------------------------------------------

    def watch(self, key: str, target: tuple[str, str, str, str], selector: Selector | None) -> None:
        """Route target, pod and HPA changes to autoscaler `key` (called by every reconcile)."""
        old = self._watched.get(key)
        new = Watched(target, selector)
        if old == new:
            return
        self.unwatch(key)
        self._watched[key] = new
        self._by_target.setdefault(target, set()).add(key)
        if selector is not None:
            for slot in _selector_slots(target[0], selector):
                if isinstance(slot, tuple):
                    self._by_label.setdefault(slot, set()).add(key)
                else:
                    self._unindexed.setdefault(slot, set()).add(key)

    def unwatch(self, key: str) -> None:
        old = self._watched.pop(key, None)
        if old is None:
            return
        self._by_target.get(old.target, set()).discard(key)
        if old.selector is not None:
            for slot in _selector_slots(old.target[0], old.selector):
                if isinstance(slot, tuple):
                    self._by_label.get(slot, set()).discard(key)
                else:
                    self._unindexed.get(slot, set()).discard(key)

    def actuators(self, target: tuple[str, str, str, str]) -> frozenset[str]:
        """The direct-mode autoscalers (keys) that target this object."""
        return frozenset(self._actuators.get(target, ()))

    def _on_autoscaler(self, old: Object | None, new: Object | None) -> None:
        """Created, deleted, or its spec changed (a new generation); our own status writes are not news."""
        key = object_key(new or old or {})
        was = self._acting.pop(key, None)
        if was is not None:
            self._actuators.get(was, set()).discard(key)
        spec = (new or {}).get("spec") or {}
        if new is not None and (spec.get("mode") or "direct") == "direct":
            ref = spec.get("scaleTargetRef") or {}
            target = _target_key(
                _namespace(new),
                str(ref.get("apiVersion") or ""),
                str(ref.get("kind") or ""),
                str(ref.get("name") or ""),
            )
            self._acting[key] = target
            self._actuators.setdefault(target, set()).add(key)
        generation = [((o or {}).get("metadata") or {}).get("generation") for o in (old, new)]
        if old is None or new is None or generation[0] != generation[1]:
            self.enqueue(key)

    def _target_handler(self, kind: tuple[str, str]) -> Callable[[Object | None, Object | None], None]:
        def on_target(old: Object | None, new: Object | None) -> None:
            meta = (new or old or {}).get("metadata") or {}
            target = (str(meta.get("namespace") or ""), kind[0], kind[1], str(meta.get("name") or ""))
            for key in list(self._by_target.get(target, ())):
                self.enqueue(key)

        return on_target

    def _on_hpa(self, old: Object | None, new: Object | None) -> None:
        for obj in (old, new):
            if obj is None:
                continue
            ref = (obj.get("spec") or {}).get("scaleTargetRef") or {}
            target = _target_key(
                _namespace(obj),
                str(ref.get("apiVersion") or ""),
                str(ref.get("kind") or ""),
                str(ref.get("name") or ""),
            )
            for key in list(self._by_target.get(target, ())):
                self.enqueue(key)

    def _on_pod(self, old: Object | None, new: Object | None) -> None:
        if self.node_pods is None and self.nodes is not None:
            self._on_capacity(old, new)
        obj = new or old or {}
        namespace = _namespace(obj)
        labels_old, labels_new = _labels(old), _labels(new)
        candidates = set(self._unindexed.get(namespace, ()))
        for labels in (labels_old, labels_new):
            for k, v in labels.items():
                candidates.update(self._by_label.get((namespace, k, v), ()))
        for key in candidates:
            selector = self._watched[key].selector
            if selector is not None and (selector.matches(labels_old) or selector.matches(labels_new)):
                self.enqueue(key)

    def _on_capacity(self, old: Object | None, new: Object | None) -> None:
        self._gpu = None


def _pod_labels(pod: Object) -> Iterable[Hashable]:
    namespace = _namespace(pod)
    return [(namespace, k, v) for k, v in _labels(pod).items()]


def _selector_slots(namespace: str, selector: Selector) -> list[tuple[str, str, str] | str]:
    """Where an autoscaler waits for pod changes: under one key=value of its selector, or, without
    one, under its namespace (every pod change there is checked against it)."""
    for r in selector.requirements:
        if r.operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN) and len(r.values) == 1:
            return [(namespace, r.key, r.values[0])]
    return [namespace]


def parse_target_selector(text: str) -> Selector | None:
    """The scale's selector string; None when it is empty (the target publishes none)."""
    return parse_selector(text) if text else None
