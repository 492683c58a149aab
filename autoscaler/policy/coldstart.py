"""The cold-start model: when will k replicas started now be ready?

Sits under the predictive policy (its forecast horizon is `lead_time_s`), the replay simulator
(whose fleet runs the same start-up machine, startup.py) and `infscale coldstart`. Pure: no
clock, no I/O; every time is seconds relative to "now" = 0.

One replica's path to ready (startup.py has the rules of each phase):

    [node provisioning] -> [image pull] -> engine init -> [load gate] -> weight load -> compile -> warm-up
     only if no existing    once per       CPU, CUDA,     at most N     node cache,     cache hit
     node has G free GPUs   node           NCCL init      at once       peer or shared  or miss

Shared storage is split among the loaders reading from it (storage.py): 140 GB at a shared
10 GB/s takes 140 / 10 = 14 s alone; 8 together get 10 / 8 = 1.25 GB/s each and all finish at
140 / 1.25 = 112 s; behind a gate of one slot they finish 14 s apart.

Here: the spec's checks, and the per-replica breakdown built by placing the new replicas on nodes
(placement.py) and running a start-up machine of the cluster described to the end.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

from autoscaler.policy.placement import Cluster, Slot, place
from autoscaler.policy.spec import ColdStartSpec, CompileCache, GateScope
from autoscaler.policy.startphase import Start, StartPhase, Tier, phase_order
from autoscaler.policy.startup import Startups
from autoscaler.policy.storage import (
    BYTE_GB,
    ColdStartInputError,
    advance_loads,
    finite_at_least_zero,
    finite_positive,
    loader_gbps,
    next_load_completion_s,
    require,
    shared_load_finish_times,
)

__all__ = [
    "BYTE_GB",
    "ColdStartInputError",
    "ReplicaReadiness",
    "Slot",
    "advance_loads",
    "check_spec",
    "lead_time_s",
    "loader_gbps",
    "next_load_completion_s",
    "place_replicas",
    "predict_ready",
    "project_ready",
    "shared_load_finish_times",
]


def check_spec(spec: ColdStartSpec) -> None:
    """Raise ColdStartInputError naming the first field out of range."""
    _check_once(spec, type(spec.max_concurrent_loads).__name__)


@lru_cache(maxsize=256)
def _check_once(spec: ColdStartSpec, slots_type: str) -> None:
    """check_spec, remembered: specs are frozen, few, and checked on every prediction (a spec that
    fails raises every time, as exceptions are not cached). Keyed by the gate's type too: a spec
    with max_concurrent_loads=True equals and hashes as the one with 1, which passed."""
    require(finite_at_least_zero(spec.weights_gb), "weights_gb", spec.weights_gb, "a finite number >= 0")
    require(finite_positive(spec.storage_gbps), "storage_gbps", spec.storage_gbps, "a finite number > 0")
    for name in ("per_loader_gbps", "local_cache_gbps", "node_cache_gb", "peer_gbps"):
        value = getattr(spec, name)
        require(value is None or finite_positive(value), name, value, "unset or a finite number > 0")
    for name in (
        "image_pull_s",
        "warmup_s",
        "node_provision_s",
        "engine_init_s",
        "compile_s",
        "compile_cached_s",
    ):
        value = getattr(spec, name)
        require(finite_at_least_zero(value), name, value, "a finite number >= 0")
    require(
        spec.compile_cached_s <= spec.compile_s,
        "compile_cached_s",
        spec.compile_cached_s,
        f"<= compile_s ({spec.compile_s:g}): a cache hit is not slower than a miss",
    )
    for name, kind in (("compile_cache", CompileCache), ("load_gate_scope", GateScope)):
        value = getattr(spec, name)
        allowed = [member.value for member in kind]
        require(value in allowed, name, value, f"one of {', '.join(allowed)}")
    require(
        spec.node_cache_gb is None or spec.local_cache_gbps is not None,
        "node_cache_gb",
        spec.node_cache_gb,
        "unset when local_cache_gbps is unset (a capacity needs a cache)",
    )
    slots = spec.max_concurrent_loads
    require(
        slots is None or (isinstance(slots, int) and not isinstance(slots, bool) and slots >= 1),
        "max_concurrent_loads",
        slots,
        "unset or an integer >= 1",
    )
    require(spec.gpus_per_replica >= 1, "gpus_per_replica", spec.gpus_per_replica, ">= 1")
    require(spec.gpus_per_node >= 1, "gpus_per_node", spec.gpus_per_node, ">= 1")
    require(
        spec.gpus_per_replica <= spec.gpus_per_node,
        "gpus_per_replica",
        spec.gpus_per_replica,
        f"<= gpus_per_node ({spec.gpus_per_node}), as a replica's GPUs are on one node",
    )


# --- placement -----------------------------------------------------------------------------------


def place_replicas(
    spec: ColdStartSpec,
    k: int,
    *,
    free_gpus_per_node: Sequence[int] = (),
    image_cached_nodes: Collection[int] = (),
    weights_cached: Collection[int] = (),
    compile_cached_nodes: Collection[int] = (),
    compile_cache_warm: bool = False,
    peer_sources: int = 0,
) -> tuple[Slot, ...]:
    """Put k replicas of spec.gpus_per_replica whole GPUs each on one node apiece, fastest node
    first (placement.place has the rule), on the cluster as described, checked."""
    check_spec(spec)
    cluster = Cluster.of(
        spec,
        free_gpus_per_node,
        image_cached_nodes,
        weights_cached,
        compile_cached_nodes,
        compile_cache_warm,
        peer_sources,
        (),
    )
    require(k >= 0, "k", k, ">= 0")
    return place(spec, k, cluster)


# --- the whole prediction ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplicaReadiness:
    """One new replica's path to ready; every time is seconds after now.

    ready_s is the sum of the phases: provision_s + pull_s + init_s + gate_wait_s + load_s +
    compile_s + warmup_s, and the load starts at load_start_s, the sum of the phases before it.
    """

    replica: int  # 0-based, in placement order
    node: int  # existing node index, or numbered after them when new_node
    new_node: bool
    provision_s: float
    pull_s: float  # 0 when the node has the image; the wait for a pull in progress otherwise
    init_s: float  # engine init
    gate_wait_s: float  # waiting for a load-gate slot
    tier: str  # where the weights came from: "shared", "cache" (the node's) or "peer"
    from_cache: bool  # tier == "cache"
    load_start_s: float
    load_s: float  # start to finish of the weight load
    load_wait_s: float  # of load_s, the time lost to sharing storage with other loaders
    compile_s: float
    compile_hit: bool
    warmup_s: float
    ready_s: float


def compiled_after(spec: ColdStartSpec, ran_on: Collection[int]) -> tuple[Collection[int], bool]:
    """predict_ready's (compile_cached_nodes, compile_cache_warm) where replicas ran on the nodes
    `ran_on` (those with the image): each compiled there, filling its node's compile cache, or
    the cluster's shared one."""
    node = spec.compile_cache == CompileCache.NODE
    return (ran_on if node else (), spec.compile_cache == CompileCache.CLUSTER and bool(ran_on))


def predict_ready(
    spec: ColdStartSpec,
    k: int,
    *,
    free_gpus_per_node: Sequence[int] = (),
    image_cached_nodes: Collection[int] = (),
    weights_cached: Collection[int] = (),
    loading_remaining_gb: Sequence[float] = (),
    compile_cached_nodes: Collection[int] = (),
    compile_cache_warm: bool = False,
    peer_sources: int = 0,
    coming_nodes: Sequence[tuple[float, int]] = (),
    upcoming_loads_s: Sequence[float] = (),
) -> tuple[ReplicaReadiness, ...]:
    """Per-replica ready times of k replicas started now, in placement order.

    free_gpus_per_node: free GPUs on each existing node (empty: every replica needs a new node).
    image_cached_nodes / weights_cached / compile_cached_nodes: indices into free_gpus_per_node of
    nodes that have the image / hold the weights in their cache (needs spec.local_cache_gbps) /
    hold compile artifacts (needs compile_cache node). compile_cache_warm: the shared compile
    cache is filled (compile_cache cluster). peer_sources: ready replicas that can serve weights.
    loading_remaining_gb: GB still to read for loaders already reading from shared storage; they
    compete for bandwidth (and hold gate slots) from now on. upcoming_loads_s: seconds until each
    replica already starting but not loading yet begins its shared load (its gate wait included);
    each reaches the gate then, ahead of the k, and competes from then on. coming_nodes: (seconds
    until up, free GPUs) of nodes on their way; replicas no existing node fits wait for them
    before new nodes.
    The defaults describe a cold cluster, the slow case a forecast horizon should plan for.
    """
    starts, _ = _run(
        spec,
        k,
        _checked(
            spec,
            k,
            free_gpus_per_node,
            image_cached_nodes,
            weights_cached,
            compile_cached_nodes,
            compile_cache_warm,
            peer_sources,
            loading_remaining_gb,
            coming_nodes,
            upcoming_loads_s,
        ),
    )
    order = phase_order(spec)
    shared_alone_s = spec.weights_gb / loader_gbps(1, spec.storage_gbps, spec.per_loader_gbps)
    out = []
    for i, (slot, s) in enumerate(starts):
        took = {p: s.entered[q] - s.entered[p] for p, q in pairwise(order)}
        load = took[StartPhase.LOAD]
        out.append(
            ReplicaReadiness(
                replica=i,
                node=slot.node,
                new_node=slot.new_node,
                provision_s=took[StartPhase.PROVISION],
                pull_s=took[StartPhase.PULL],
                init_s=took[StartPhase.INIT],
                gate_wait_s=took[StartPhase.GATE],
                tier=str(s.tier),
                from_cache=s.tier == Tier.CACHE,
                load_start_s=s.entered[StartPhase.LOAD],
                load_s=load,
                # max: float residue when a loader ran alone; other tiers never wait
                load_wait_s=max(0.0, load - shared_alone_s) if s.tier == Tier.SHARED else 0.0,
                compile_s=took[StartPhase.COMPILE],
                compile_hit=bool(s.compile_hit),
                warmup_s=took[StartPhase.WARMUP],
                ready_s=s.entered[StartPhase.READY],
            )
        )
    return tuple(out)


def lead_time_s(
    spec: ColdStartSpec,
    *,
    free_gpus_per_node: Sequence[int] = (),
    image_cached_nodes: Collection[int] = (),
    weights_cached: Collection[int] = (),
    loading_remaining_gb: Sequence[float] = (),
    compile_cached_nodes: Collection[int] = (),
    compile_cache_warm: bool = False,
    peer_sources: int = 0,
) -> float:
    """Seconds until ONE more replica started now is ready, given the loaders already in progress.

    The predictive policy forecasts this far ahead: capacity asked for now arrives only then.
    Same arithmetic as predict_ready(spec, 1, ...)[0].ready_s, without building the breakdown.
    """
    cluster = _checked(
        spec,
        1,
        free_gpus_per_node,
        image_cached_nodes,
        weights_cached,
        compile_cached_nodes,
        compile_cache_warm,
        peer_sources,
        loading_remaining_gb,
    )
    ((_, start),), _ = _run(spec, 1, cluster, until_ready=True)
    return start.entered[StartPhase.READY]


def project_ready(machine: Startups) -> dict[int, float]:
    """When each replica the machine is starting becomes ready if nothing else starts or stops
    (absolute times, on the machine's clock). The machine itself is left as it was."""
    copy = machine.clone()
    ready: dict[int, float] = {}

    def record(replica: int, phase: StartPhase, at: float) -> None:
        if phase == StartPhase.READY:
            ready[replica] = at

    copy.on_phase = record
    copy.run()
    return ready


def _checked(
    spec: ColdStartSpec,
    k: int,
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
    check_spec(spec)
    require(k >= 0, "k", k, ">= 0")
    return Cluster.of(spec, free, image, weights, compiled, compile_warm, peers, loading, coming, upcoming)


def _run(
    spec: ColdStartSpec, k: int, cluster: Cluster, *, until_ready: bool = False
) -> tuple[list[tuple[Slot, Start]], Startups]:
    """Place k replicas, start them on a machine of the described cluster, run it to the end (or,
    with until_ready and k = 1, until that one is ready)."""
    slots = place(spec, k, cluster)
    machine = Startups(spec, peer_sources=cluster.peers, compile_cache_warm=cluster.compile_warm)
    for node in range(len(cluster.free)):
        machine.add_node(
            node,
            up_at=0.0,
            image=node in cluster.image,
            weights=node in cluster.weights,
            compiled=node in cluster.compiled,
        )
    for c, (up, _) in enumerate(cluster.coming):
        machine.add_node(len(cluster.free) + c, up_at=up)
    for slot in slots:
        if slot.new_node and slot.node not in machine.nodes:
            machine.add_node(slot.node, up_at=spec.node_provision_s)
    for i, left in enumerate(cluster.loading):
        machine.add_loading(-1 - i, left)  # negative ids: never one of the k
    for i, at in enumerate(cluster.upcoming, start=len(cluster.loading)):
        machine.add_upcoming(-1 - i, at)
    starts = [(slot, machine.start(i, slot.node)) for i, slot in enumerate(slots)]
    machine.run(until=starts[0][1] if until_ready else None)
    return starts, machine
