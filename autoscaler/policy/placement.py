"""Where new replicas land: each on one node with enough free GPUs, the node that would make it
ready soonest first, then new nodes. Pure; the cold-start model (coldstart.py) places the replicas
it predicts for, and the replay's fleet places every replica it starts, with place_replicas."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from autoscaler.policy.spec import ColdStartSpec, CompileCache
from autoscaler.policy.storage import ColdStartInputError, finite_at_least_zero, loader_gbps, require


@dataclass(frozen=True, slots=True)
class Slot:
    """Where one new replica lands. Existing nodes keep their index; new ones are numbered after."""

    node: int
    new_node: bool
    image_cached: bool
    weights_cached: bool
    compile_cached: bool = False


@dataclass(frozen=True, slots=True)
class Cluster:
    """The cluster as the caller described it, checked."""

    free: Sequence[int]
    image: Collection[int]
    weights: Collection[int]
    compiled: Collection[int]
    compile_warm: bool
    peers: int
    loading: Sequence[float]
    coming: Sequence[tuple[float, int]] = ()  # (seconds until up, free GPUs) of nodes on their way
    upcoming: Sequence[float] = ()  # seconds until each shared load not begun yet begins

    @classmethod
    def of(
        cls,
        spec: ColdStartSpec,
        free: Sequence[int],
        image: Collection[int],
        weights: Collection[int],
        compiled: Collection[int],
        compile_warm: bool,
        peers: int,
        loading: Sequence[float],
        coming: Sequence[tuple[float, int]] = (),
        upcoming: Sequence[float] = (),
    ) -> Cluster:
        for i, gpus in enumerate(free):
            require(gpus >= 0, f"free_gpus_per_node[{i}]", gpus, ">= 0")
        nodes = len(free)
        for name, indices in (
            ("image_cached_nodes", image),
            ("weights_cached", weights),
            ("compile_cached_nodes", compiled),
        ):
            for node in indices:
                require(
                    0 <= node < nodes, name, node, f"a node index in [0, {nodes}) (one per free_gpus entry)"
                )
        if weights and spec.local_cache_gbps is None:
            raise ColdStartInputError(
                "weights_cached", tuple(weights), "empty when local_cache_gbps is unset"
            )
        if compiled and spec.compile_cache != CompileCache.NODE:
            raise ColdStartInputError(
                "compile_cached_nodes", tuple(compiled), "empty unless compile_cache is node"
            )
        require(peers >= 0, "peer_sources", peers, ">= 0")
        for i, left in enumerate(loading):
            require(finite_at_least_zero(left), f"loading_remaining_gb[{i}]", left, "a finite number >= 0")
        for i, (up, gpus) in enumerate(coming):
            require(finite_at_least_zero(up), f"coming_nodes[{i}] (up in)", up, "a finite number >= 0")
            require(gpus >= 0, f"coming_nodes[{i}] (free GPUs)", gpus, ">= 0")
        for i, at in enumerate(upcoming):
            require(finite_at_least_zero(at), f"upcoming_loads_s[{i}]", at, "a finite number >= 0")
        return cls(free, image, weights, compiled, compile_warm, peers, loading, coming, upcoming)

    def compile_hit(self, spec: ColdStartSpec, node: int) -> bool:
        if spec.compile_cache == CompileCache.CLUSTER:
            return self.compile_warm
        return spec.compile_cache == CompileCache.NODE and node in self.compiled


def place(spec: ColdStartSpec, k: int, cluster: Cluster) -> tuple[Slot, ...]:
    """Put k replicas of spec.gpus_per_replica (G) whole GPUs each on one node apiece.

    Existing node i takes free_gpus_per_node[i] // G replicas: free GPUs on different nodes do not
    add up (16 idle GPUs as 4+4+4+4 hold no 8-GPU replica). Nodes are filled fastest first, by the
    time one replica alone would take there (image pull unless cached, its weights from the node
    cache, a peer or shared storage, its compile with a hit or a miss), ties going best-fit
    (fewest free GPUs, keeping big holes for big replicas) and then to the lower index.
    kube-scheduler's ImageLocality score leans the same way; a scheduler that spreads makes this
    an optimistic estimate. Replicas that do not fit wait for a node on its way with room, the
    first up first, as the cluster autoscaler counts pending pods onto the nodes it is bringing
    up (numbered after the existing nodes, in the order given), then go to new nodes (numbered
    after those), gpus_per_node // G per node; neither has an image, weights or compile cache.
    """
    g = spec.gpus_per_replica
    shared_alone_s = spec.weights_gb / loader_gbps(1, spec.storage_gbps, spec.per_loader_gbps)
    remote_s = (
        shared_alone_s if spec.peer_gbps is None or not cluster.peers else spec.weights_gb / spec.peer_gbps
    )
    candidates: list[tuple[float, int, int]] = []  # (alone time to ready, free GPUs, node)
    for node, free in enumerate(cluster.free):
        if free < g:
            continue
        cost = 0.0 if node in cluster.image else spec.image_pull_s
        if node in cluster.weights and spec.local_cache_gbps is not None:
            cost += spec.weights_gb / spec.local_cache_gbps
        else:
            cost += remote_s
        cost += spec.compile_cached_s if cluster.compile_hit(spec, node) else spec.compile_s
        candidates.append((cost, free, node))
    candidates.sort()

    slots: list[Slot] = []
    for _, free, node in candidates:
        take = min(free // g, k - len(slots))
        slot = Slot(node, False, node in cluster.image, node in cluster.weights, node in cluster.compiled)
        slots.extend([slot] * take)
        if len(slots) == k:
            return tuple(slots)
    first_coming = len(cluster.free)
    for c, (_, gpus) in sorted(enumerate(cluster.coming), key=lambda e: e[1][0]):
        take = min(gpus // g, k - len(slots))
        slots.extend([Slot(first_coming + c, True, False, False)] * take)
        if len(slots) == k:
            return tuple(slots)
    per_new_node = spec.gpus_per_node // g
    first_new = first_coming + len(cluster.coming)
    missing = k - len(slots)
    for j in range(0, missing, per_new_node):  # one Slot value per new node, shared by its replicas
        slots.extend(
            [Slot(first_new + j // per_new_node, True, False, False)] * min(per_new_node, missing - j)
        )
    return tuple(slots)
