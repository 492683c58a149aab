"""What a scale target's pods say, from their JSON: ready, starting, unschedulable, and startup samples.

Pure: pods in, a frozen summary out. Ready means Running with the Ready condition True and not being
deleted (upstream counts the same pods); a Pending, unschedulable replica is starting, not ready.
A startup sample is a pod's creation -> Ready time, split at scheduling, taken only from pods whose
containers never restarted (a restart moves the Ready transition, not the startup).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autoscaler.controller.kubetime import parse_time

GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class Startup:
    pod: str
    ready_at: float  # Unix seconds of the Ready transition
    startup_s: float  # creation -> Ready: what a user waits for
    load_s: float  # scheduled -> Ready: pull, weight load and warm-up (no node provisioning)


@dataclass(frozen=True, slots=True)
class StartingPod:
    name: str
    created_at: float
    scheduled_at: float | None  # None: not bound to a node yet
    unschedulable: bool  # the scheduler said no node fits (a new node is needed)


@dataclass(frozen=True, slots=True)
class PodFacts:
    matched: int  # pods the selector returned, terminating ones excluded
    ready: int
    starting: tuple[StartingPod, ...]
    startups: tuple[Startup, ...]
    image: str | None  # the first container's image, for the image-locality of new replicas
    gpus_per_pod: int  # the largest GPU request among the pods (0: none requested)

    @property
    def unschedulable(self) -> int:
        return sum(1 for p in self.starting if p.unschedulable)


def _condition(status: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == type_), None)


def _time(value: Any) -> float | None:
    if not value:
        return None
    try:
        return parse_time(str(value))
    except ValueError:
        return None


def whole_count(quantity: Any) -> int:
    """A count such as GPUs (`8`, `"8"`); absent or not a whole number: 0."""
    try:
        return int(str(quantity))
    except ValueError:
        return 0


def gpu_request(pod: Mapping[str, Any]) -> int:
    """Whole GPUs a pod holds: the containers' sum, or the largest init container if larger.

    Extended resources have requests equal to limits; a limit alone counts as the request.
    """

    def gpus(container: Mapping[str, Any]) -> int:
        resources = container.get("resources") or {}
        amount = (resources.get("requests") or {}).get(GPU_RESOURCE)
        if amount is None:
            amount = (resources.get("limits") or {}).get(GPU_RESOURCE)
        return whole_count(amount)

    spec = pod.get("spec") or {}
    main = sum(gpus(c) for c in spec.get("containers") or [])
    init = max((gpus(c) for c in spec.get("initContainers") or []), default=0)
    return max(main, init)


def summarize(pods: Iterable[Mapping[str, Any]]) -> PodFacts:
    matched = ready = gpus = 0
    starting: list[StartingPod] = []
    startups: list[Startup] = []
    image: str | None = None
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        status = pod.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        matched += 1
        gpus = max(gpus, gpu_request(pod))
        containers = (pod.get("spec") or {}).get("containers") or []
        if image is None and containers:
            image = containers[0].get("image")
        created = _time(meta.get("creationTimestamp"))
        ready_cond = _condition(status, "Ready")
        scheduled_cond = _condition(status, "PodScheduled")
        scheduled_at = _time(scheduled_cond.get("lastTransitionTime")) if scheduled_cond else None
        is_scheduled = scheduled_cond is not None and scheduled_cond.get("status") == "True"
        if status.get("phase") == "Running" and ready_cond is not None and ready_cond.get("status") == "True":
            ready += 1
            ready_at = _time(ready_cond.get("lastTransitionTime"))
            restarts = sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or [])
            if created is not None and ready_at is not None and restarts == 0 and ready_at >= created:
                load_from = scheduled_at if is_scheduled and scheduled_at is not None else created
                startups.append(
                    Startup(
                        str(meta.get("name", "")),
                        ready_at,
                        ready_at - created,
                        ready_at - max(load_from, created),
                    )
                )
            continue
        starting.append(
            StartingPod(
                name=str(meta.get("name", "")),
                created_at=created if created is not None else 0.0,
                scheduled_at=scheduled_at if is_scheduled else None,
                unschedulable=scheduled_cond is not None
                and scheduled_cond.get("status") == "False"
                and scheduled_cond.get("reason") == "Unschedulable",
            )
        )
    return PodFacts(matched, ready, tuple(starting), tuple(startups), image, gpus)
