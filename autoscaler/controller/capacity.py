"""Capacity awareness: free whole GPUs per node, and whether k new replicas of G GPUs each fit.

Pure: nodes and pods (JSON) in, frozen values out. 16 idle GPUs spread 4+4+4+4 hold no 8-GPU
replica; a replica needs G whole GPUs on one node, so node i holds free_i // G more replicas.
Those that do not fit wait for a new node, whose provisioning time the predicted ready time then
includes (the cold-start model's placement, autoscaler/policy/coldstart.py, does the same sum);
`fit` itself lives with the observation builder (autoscaler/policy/observe.py), which uses it too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from autoscaler.controller.podfacts import GPU_RESOURCE, gpu_request, whole_count
from autoscaler.policy.observe import Fit, fit

__all__ = ["Fit", "GpuNodes", "fit", "gpu_nodes", "normalize_image"]


class HashedInts(tuple[int, ...]):
    """A tuple that hashes once. Free GPUs per node key the cold-start model's and the capacity
    check's caches several times a reconcile; hashing 625 ints costs ~9 µs each time, more than the
    rest of those lookups. Equal to, and hashing as, the plain tuple."""

    _hash: int

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            self._hash = tuple.__hash__(self)
            return self._hash


@dataclass(frozen=True, slots=True)
class GpuNodes:
    """Schedulable nodes with GPUs, in name order."""

    names: tuple[str, ...] = ()
    free_gpus: tuple[int, ...] = ()
    images: tuple[frozenset[str], ...] = ()  # normalized image references present on each node
    by_image: Mapping[str, tuple[int, ...]] = field(default_factory=dict, compare=False)  # image -> nodes

    def image_cached_nodes(self, image: str | None) -> tuple[int, ...]:
        """Indices of the nodes that hold `image` (asked per reconcile: looked up, not searched)."""
        if not image:
            return ()
        return self.by_image.get(normalize_image(image), ())


@lru_cache(maxsize=1024)
def normalize_image(ref: str) -> str:
    """`vllm/vllm-openai:v0.6` and `docker.io/vllm/vllm-openai:v0.6` name the same image; a
    reference without tag or digest means `:latest`, as the container runtime reads it."""
    name, _, digest = ref.partition("@")
    first, _, rest = name.partition("/")
    if not rest:
        name = f"docker.io/library/{name}"
    elif "." not in first and ":" not in first and first != "localhost":
        name = f"docker.io/{name}"
    if digest:
        return f"{name}@{digest}"
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last else f"{name}:latest"


def gpu_nodes(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> GpuNodes:
    """Allocatable GPUs minus the requests of the pods bound to each node. Cordoned and NotReady
    nodes take no new replica and are left out."""
    used: dict[str, int] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            used[node] = used.get(node, 0) + gpu_request(pod)
    rows = []
    for node in nodes:
        meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
        allocatable = whole_count((status.get("allocatable") or {}).get(GPU_RESOURCE, 0))
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
        )
        if allocatable <= 0 or spec.get("unschedulable") or not ready:
            continue
        name = str(meta.get("name", ""))
        images = frozenset(
            normalize_image(n) for image in status.get("images") or [] for n in image.get("names") or []
        )
        rows.append((name, max(0, allocatable - used.get(name, 0)), images))
    rows.sort()
    by_image: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        for image in row[2]:
            by_image.setdefault(image, []).append(i)
    return GpuNodes(
        tuple(r[0] for r in rows),
        HashedInts(r[1] for r in rows),
        tuple(r[2] for r in rows),
        {image: tuple(nodes) for image, nodes in by_image.items()},
    )
