"""Slim copies of the objects the controller caches: only the fields a reconcile reads (the HPA
controller's informers keep everything), and the /scale of an apps/v1 object derived from the
cached object as the apiserver derives it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autoscaler.controller.kube import Scale
from autoscaler.controller.podfacts import GPU_RESOURCE
from common.listwatch import Object
from common.selector import from_label_selector


def slim_pod(pod: Object) -> Object:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}

    def container(c: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"name": c.get("name"), "image": c.get("image")}
        if c.get("resources"):
            out["resources"] = c["resources"]
        if c.get("restartPolicy"):
            out["restartPolicy"] = c["restartPolicy"]
        return out

    def container_status(c: Mapping[str, Any]) -> dict[str, Any]:
        return {k: c[k] for k in ("name", "ready", "started", "restartCount") if k in c}

    return {
        "metadata": {
            k: meta[k]
            for k in (
                "name",
                "namespace",
                "uid",
                "labels",
                "creationTimestamp",
                "deletionTimestamp",
                "resourceVersion",
            )
            if k in meta
        },
        "spec": {
            "nodeName": spec.get("nodeName"),
            "containers": [container(c) for c in spec.get("containers") or ()],
            "initContainers": [container(c) for c in spec.get("initContainers") or ()],
        },
        "status": {
            "phase": status.get("phase"),
            "conditions": [
                {k: c[k] for k in ("type", "status", "reason", "lastTransitionTime") if k in c}
                for c in status.get("conditions") or ()
            ],
            "containerStatuses": [container_status(c) for c in status.get("containerStatuses") or ()],
            "initContainerStatuses": [container_status(c) for c in status.get("initContainerStatuses") or ()],
        },
    }


def slim_target(obj: Object) -> Object:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta},
        "spec": {"replicas": spec.get("replicas"), "selector": spec.get("selector")},
        "status": {"replicas": status.get("replicas")},
    }


def slim_hpa(obj: Object) -> Object:
    meta = obj.get("metadata") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta},
        "spec": {"scaleTargetRef": (obj.get("spec") or {}).get("scaleTargetRef") or {}},
    }


def slim_node(obj: Object) -> Object:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "resourceVersion") if k in meta},
        "spec": {"unschedulable": spec.get("unschedulable", False)},
        "status": {
            "allocatable": {k: v for k, v in (status.get("allocatable") or {}).items() if k == GPU_RESOURCE},
            "conditions": [
                {"type": c.get("type"), "status": c.get("status")}
                for c in status.get("conditions") or ()
                if c.get("type") == "Ready"
            ],
            "images": [{"names": i.get("names") or []} for i in status.get("images") or ()],
        },
    }


def scale_of(obj: Mapping[str, Any]) -> Scale:
    """/scale of an apps/v1 object, as the apiserver derives it (pkg/registry/apps/*: scaleFromX):
    the selector is metav1.LabelSelectorAsSelector(spec.selector).String()."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    selector = spec.get("selector") or {}
    text = str(from_label_selector(selector.get("matchLabels") or {}, selector.get("matchExpressions") or ()))
    return Scale(
        spec_replicas=int(spec.get("replicas") or 0),
        status_replicas=int(status.get("replicas") or 0),
        selector=text,
        resource_version=str((obj.get("metadata") or {}).get("resourceVersion") or ""),
    )
