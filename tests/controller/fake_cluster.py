"""The fake kube-apiserver's cluster (fake_apiserver.py serves it): its objects, kept by
fake_machinery.py so that lists and watches see every change, and what kubelets, schedulers and
users would do to them, for tests to call (`add_pod`, `mark_pod_ready`, `set_metric`, `fail`, ...).
"""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fake_machinery import NODE_FIELDS, POD_FIELDS, Machinery, Resource
from fake_validation import apply_defaults, crd_schema, validate_builtin, validate_custom

GPU = "nvidia.com/gpu"


@dataclass
class Failure:
    method: str
    pattern: re.Pattern[str]
    status: int | str  # an HTTP code, or "timeout": never answer
    times: int
    message: str = ""  # the Status message; default: "injected failure ..."


def _resources() -> list[Resource]:
    return [
        Resource("pods", "Pod", "v1", fields=POD_FIELDS),
        Resource("nodes", "Node", "v1", namespaced=False, fields=NODE_FIELDS),
        Resource("deployments", "Deployment", "apps/v1"),
        Resource("horizontalpodautoscalers", "HorizontalPodAutoscaler", "autoscaling/v2"),
        Resource("events", "Event", "events.k8s.io/v1"),
        Resource("leases", "Lease", "coordination.k8s.io/v1"),
        Resource("inferenceautoscalers", "InferenceAutoscaler", "infscale.io/v1alpha1", builtin=False),
    ]


class FakeCluster:
    """The fake's objects and what tests do to them; fake_apiserver.FakeKube serves them."""

    def __init__(self) -> None:
        self.machinery = Machinery()
        for res in _resources():
            self.machinery.resources[res.plural] = res
        # (namespace, metric) -> [(labels, value quantity, timestamp)]
        self.external: dict[tuple[str, str], list[tuple[dict[str, str], str, str]]] = {}
        self.failures: list[Failure] = []
        self.log: list[tuple[str, str]] = []  # (method, path) of every request; WATCH for watches
        self.scale_writes: list[tuple[str, int]] = []  # (deployment, replicas)
        self.on_scale_write: Callable[[str, int], None] | None = None  # e.g. a kubelet starting pods
        self.before_put_scale: Callable[[str], None] | None = None  # e.g. a user scaling at the same moment
        self.hang = asyncio.Event()
        self.crd_installed = True

    # --- views (read them; change objects through the methods below, so watches see it) -------------

    @property
    def rv(self) -> int:
        return self.machinery.rv

    def _objects(self, plural: str) -> dict[tuple[str, str], dict[str, Any]]:
        return self.machinery.resources[plural].objects

    @property
    def pods(self) -> dict[tuple[str, str], dict[str, Any]]:
        return self._objects("pods")

    @property
    def deployments(self) -> dict[tuple[str, str], dict[str, Any]]:
        return self._objects("deployments")

    @property
    def leases(self) -> dict[tuple[str, str], dict[str, Any]]:
        return self._objects("leases")

    @property
    def autoscalers(self) -> dict[tuple[str, str], dict[str, Any]]:
        return self._objects("inferenceautoscalers")

    @property
    def events(self) -> list[dict[str, Any]]:
        """In the order they were created."""
        return sorted(self._objects("events").values(), key=lambda e: int(e["metadata"]["resourceVersion"]))

    def _commit(self, plural: str, obj: dict[str, Any], *, delete: bool = False) -> dict[str, Any]:
        return self.machinery.commit(plural, obj, delete=delete)

    def compact(self) -> None:
        self.machinery.compact()

    def bookmark(self) -> None:
        self.machinery.bookmark()

    def drop_watches(self) -> None:
        self.machinery.drop_watches()

    # --- test set-up: what kubelets, schedulers and users would do --------------------------------

    def add_deployment(
        self, namespace: str, name: str, replicas: int, *, labels: Mapping[str, str] | None = None
    ) -> None:
        labels = dict(labels or {"app": name})
        obj = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.10.1"}]},
                },
            },
            "status": {"replicas": replicas},
        }
        validate_builtin(obj)
        self._commit("deployments", obj)

    def set_replicas(
        self, namespace: str, name: str, replicas: int, *, status_replicas: int | None = None
    ) -> None:
        """Someone else (a user, an HPA) changes the count: the resourceVersion moves. The status
        follows at once unless `status_replicas` says otherwise (pods the ReplicaSet still counts)."""
        dep = copy.deepcopy(self.deployments[(namespace, name)])
        dep["spec"]["replicas"] = replicas
        dep["status"]["replicas"] = replicas if status_replicas is None else status_replicas
        self._commit("deployments", dep)

    def delete_deployment(self, namespace: str, name: str) -> None:
        self._commit("deployments", copy.deepcopy(self.deployments[(namespace, name)]), delete=True)

    def replicas(self, namespace: str, name: str) -> int:
        return int(self.deployments[(namespace, name)]["spec"].get("replicas") or 0)

    def add_pod(
        self,
        namespace: str,
        name: str,
        *,
        labels: Mapping[str, str],
        created: str,
        ready_at: str | None = None,
        scheduled_at: str | None = None,
        node: str | None = None,
        gpus: int = 0,
        unschedulable: bool = False,
        image: str = "vllm/vllm-openai:v0.10.1",
    ) -> None:
        conditions: list[dict[str, Any]] = []
        if unschedulable:
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "lastTransitionTime": created,
                }
            )
        elif scheduled_at or node:
            conditions.append(
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled_at or created}
            )
        if ready_at:
            conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": ready_at})
        container: dict[str, Any] = {"name": "engine", "image": image}
        if gpus:
            container["resources"] = {"limits": {GPU: str(gpus)}}
        spec: dict[str, Any] = {"containers": [container]}
        if node:
            spec["nodeName"] = node
        obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-pod-{namespace}-{name}",
                "labels": dict(labels),
                "creationTimestamp": created,
            },
            "spec": spec,
            "status": {
                "phase": "Running" if ready_at else "Pending",
                "conditions": conditions,
                "containerStatuses": [
                    {
                        "name": "engine",
                        "image": image,
                        "imageID": "",
                        "ready": bool(ready_at),
                        "restartCount": 0,
                    }
                ],
            },
        }
        validate_builtin(obj)
        self._commit("pods", obj)

    def update_pod(self, namespace: str, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        """`change` edits a copy of the pod (a kubelet's status update, a label change)."""
        pod = copy.deepcopy(self.pods[(namespace, name)])
        change(pod)
        validate_builtin(pod)
        self._commit("pods", pod)

    def mark_pod_ready(self, namespace: str, name: str, at: str) -> None:
        def ready(pod: dict[str, Any]) -> None:
            status = pod["status"]
            status["phase"] = "Running"
            status["conditions"] = [c for c in status["conditions"] if c["type"] != "Ready"]
            status["conditions"].append({"type": "Ready", "status": "True", "lastTransitionTime": at})
            for c in status.get("containerStatuses") or []:
                c["ready"] = True

        self.update_pod(namespace, name, ready)

    def delete_pod(self, namespace: str, name: str) -> None:
        self._commit("pods", copy.deepcopy(self.pods[(namespace, name)]), delete=True)

    def add_node(self, name: str, *, gpus: int, images: tuple[str, ...] = (), ready: bool = True) -> None:
        obj = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name},
            "spec": {},
            "status": {
                "allocatable": {GPU: str(gpus), "cpu": "64"},
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                "images": [{"names": [image]} for image in images],
            },
        }
        validate_builtin(obj)
        self._commit("nodes", obj)

    def add_hpa(self, namespace: str, name: str, target: str) -> None:
        obj = {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                "maxReplicas": 10,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 80},
                        },
                    }
                ],
            },
        }
        validate_builtin(obj)
        self._commit("horizontalpodautoscalers", obj)

    def delete_hpa(self, namespace: str, name: str) -> None:
        res = self._objects("horizontalpodautoscalers")
        self._commit("horizontalpodautoscalers", copy.deepcopy(res[(namespace, name)]), delete=True)

    def add_autoscaler(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """kubectl apply of an InferenceAutoscaler: validated against the CRD, defaults filled."""
        stored = apply_defaults(crd_schema(), copy.deepcopy(dict(obj)))
        meta = stored.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-ia-{meta['name']}")
        meta["generation"] = 1
        meta.setdefault("creationTimestamp", "2026-11-29T10:00:00Z")
        validate_custom(stored)
        return self._commit("inferenceautoscalers", stored)

    def update_autoscaler(self, namespace: str, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        """A user edits the object: a spec change moves the generation, as the API does."""
        obj = copy.deepcopy(self.autoscalers[(namespace, name)])
        before = copy.deepcopy(obj.get("spec"))
        change(obj)
        if obj.get("spec") != before:
            obj["metadata"]["generation"] = int(obj["metadata"].get("generation") or 0) + 1
        validate_custom(obj, self.autoscalers[(namespace, name)])
        self._commit("inferenceautoscalers", obj)

    def corrupt_autoscaler(self, namespace: str, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        """What no validation stopped: etcd edited or restored from a backup taken under another
        schema. The change is stored as it is (update_autoscaler is the API's way, validated)."""
        obj = copy.deepcopy(self.autoscalers[(namespace, name)])
        change(obj)
        self._commit("inferenceautoscalers", obj)

    def delete_autoscaler(self, namespace: str, name: str) -> None:
        self._commit("inferenceautoscalers", copy.deepcopy(self.autoscalers[(namespace, name)]), delete=True)

    def set_metric(
        self,
        namespace: str,
        metric: str,
        *values: float | str,
        labels: Mapping[str, str] | None = None,
        timestamp: str = "",
    ) -> None:
        """What the adapter would answer for this metric and these labels (other series stay); no
        values: none for these labels (a read that selects them gets an empty list)."""
        wanted = dict(labels or {})
        kept = [item for item in self.external.get((namespace, metric), []) if item[0] != wanted]
        self.external[(namespace, metric)] = kept + [(wanted, str(v), timestamp) for v in values]

    def drop_metric(self, namespace: str, metric: str) -> None:
        self.external.pop((namespace, metric), None)

    def fail(
        self, method: str, path_regex: str, status: int | str, times: int = 1, message: str = ""
    ) -> None:
        self.failures.append(Failure(method, re.compile(path_regex), status, times, message))

    def status_of(self, namespace: str, name: str) -> dict[str, Any]:
        return dict(self.autoscalers[(namespace, name)].get("status") or {})
