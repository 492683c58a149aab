"""Contention-aware scale-up: how many of the replicas a deficit needs to start now, and when the
last of them is ready as they are started.

Replicas loading weights from one shared storage split its bandwidth (coldstart.py): k started
together all finish at about k × W ÷ B, while started one after another the first is ready after
W ÷ B. Node provisioning, image pulls and engine start-up do not share anything, so starting
early is free for them; only the loads compete. Hence:

- with a load gate (at most N loaders at once, the loaders queueing for a slot), every missing
  replica starts now: the gate staggers the loads and the other phases overlap;
- without one, the policy staggers them itself, one decision period at a time. The k-th replica
  starts now only if that makes the sum of ready times (its own, the k-1 before it and the loaders
  already in progress) smaller than starting it one period later, when the loads ahead of it have
  moved on. Starting a load the storage cannot serve in time buys only GPU-hours. When even the
  first would load at once beside the loads in progress, the first k start together if that beats
  all k a period later: a later one on a node still to come loads after its node and pull, when
  the storage may be free, and waiting for the storage first made it wait for those too.
- replicas placed where the weights are cached read them locally and start at once.

A replica no up node fits goes to a node on its way with room (the observation lists them), as
the scheduler binds it: its load begins when that node is up, beside those waiting there, and
held back a decision it begins later only if the node is up before then. Every load about to
begin counts from when it begins: counted as begun now, one beside ours looked done before ours
began.

The first replica waits only for loads already in progress (never for nothing). The horizon is
the ready time of the last replica of that stagger (staggered_ready_s): its starts are spread over
the decisions to come, and a start held back a decision holds back its pull and warm-up too.
Pure and cached per cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from autoscaler.policy import coldstart
from autoscaler.policy.clusterview import Cluster, marginal_ready_s, readiness
from autoscaler.policy.spec import ColdStartSpec
from autoscaler.policy.storage import BYTE_GB, loads_left_at

# decisions the stagger is played forward before the rest are taken as started together (the last
# is then ready about as late: the storage is busy throughout). An hour of 15 s decisions.
MAX_DECISIONS = 240


def starts_now(cold: ColdStartSpec, deficit: int, cluster: Cluster, period_s: float) -> tuple[int, str]:
    """(replicas to start now, why) of `deficit` missing ones, decisions coming every period_s."""
    if deficit <= 0:  # before the cache: a fleet at its need (or at maxReplicas) asks this every tick
        return 0, "nothing missing"
    return _starts_now(cold, deficit, cluster, period_s)


@lru_cache(maxsize=4096)
def _starts_now(cold: ColdStartSpec, deficit: int, cluster: Cluster, period_s: float) -> tuple[int, str]:
    if cold.max_concurrent_loads is not None:
        return deficit, "the load gate staggers the loads"
    k = 1
    if (cluster[3] or cluster[4]) and not _better_now(cold, 1, cluster, period_s):
        # the next would load at once, beside those in progress; a later one on a node still to
        # come loads only after its node and pull, when the storage may be free: worth starting
        # now with those before it, which the scheduler puts where there is room now
        k = next(
            (j for j in range(2, deficit + 1) if _better_now(cold, j, cluster, period_s, together=True)), 0
        )
        if not k:
            ahead = len(cluster[3]) + len(cluster[4])
            return (
                0,
                f"the {ahead} load(s) in progress or about to start have the storage;"
                " the next starts when it frees",
            )
    while k < deficit:
        if not _better_now(cold, k + 1, cluster, period_s):
            break
        k += 1
    if k == deficit:
        return k, "no replica waits for the storage longer than a decision period"
    return k, f"the storage serves {k} load(s) in time; the rest start at later decisions"


def _better_now(
    cold: ColdStartSpec, k: int, cluster: Cluster, period_s: float, together: bool = False
) -> bool:
    """Is starting the k-th replica now better than one period later (sum of ready times)? With
    `together`, all k now against all k one period later."""
    plan = readiness(cold, k, cluster)
    last = plan[-1]
    if last.from_cache:
        return True  # a local read takes nothing from the others
    shared = [r for r in plan if not r.from_cache]
    size = cold.weights_gb
    # every shared load from when it begins, as the horizon's schedule has them: counted as begun
    # now, one about to begin on the node ours waits for too looked done before ours began
    loading = (*cluster[3], *[size] * len(cluster[4]))
    begun = (*[0.0] * len(cluster[3]), *cluster[4])
    starts = [r.load_start_s for r in shared]
    up, coming = len(cluster[0]), len(cluster[5])
    # held back a period, a load begins as much later, unless its node on the way is up later still
    held = [
        t + (max(0.0, period_s - r.provision_s) if up <= r.node < up + coming else period_s)
        for t, r in zip(starts, shared, strict=True)
    ]

    def total(later: bool) -> float:
        ours = starts if not later else held if together else [*starts[:-1], held[-1]]
        finish = coldstart.shared_load_finish_times(
            [*loading, *[size] * len(shared)],
            [*begun, *ours],
            storage_gbps=cold.storage_gbps,
            per_loader_gbps=cold.per_loader_gbps,
        )
        # after its load a replica still has the fixed phases the model put after it
        after = sum(r.ready_s - r.load_start_s - r.load_s for r in shared)
        return sum(finish) + after

    return total(False) <= total(True)


# --- the stagger played forward ------------------------------------------------------------------


@dataclass(slots=True)
class _Node:
    """A node of the played-forward cluster; times are seconds after now (inf: never)."""

    up_at: float
    free: int  # GPUs
    image_at: float  # its image is there (a pull, once begun, ends then)
    weights_at: float  # its cache holds the weights (a shared load on it wrote them through)


@lru_cache(maxsize=4096)
def staggered_ready_s(
    cold: ColdStartSpec, k: int, cluster: Cluster, period_s: float, at_once: bool = False
) -> tuple[float, int]:
    """(seconds until the last of k replicas is ready, decisions their starts take) when they
    start as the stagger starts them: starts_now now, then at each decision period_s apart on the
    cluster that decision will observe (the loads begun by then and what they have left, the loads
    still to begin, the nodes up and on their way, the images pulled, the weights cached), until
    all k have started. With `at_once`, all k start now, on the same exact schedule.

    Each decision sees the cluster as the observation shows it, so it decides as the policy will;
    the ready times are the storage's exact schedule of every load at the time it begins (a load
    about to begin shares the storage from then: counted as begun now, a replica loading beside it
    on the node it waits for looked free of it).
    """
    if k <= 0:
        return 0.0, 0
    if cold.max_concurrent_loads is not None:  # every one starts now (starts_now)
        return marginal_ready_s(cold, k, cluster), 1
    free, image, weights, loading, upcoming, coming = cluster
    cached = cold.local_cache_gbps is not None
    nodes = [
        _Node(0.0, gpus, 0.0 if i in image else math.inf, 0.0 if i in weights else math.inf)
        for i, gpus in enumerate(free)
    ]
    view = list(nodes)  # the nodes the observation lists as up, in its order
    nodes += [_Node(up, gpus, math.inf, math.inf) for up, gpus in coming]
    # every shared load: those in progress (from now), those about to begin, then ours
    sizes = [*loading, *[cold.weights_gb] * len(upcoming)]
    begins = [*[0.0] * len(loading), *upcoming]
    on_node: list[_Node | None] = [None] * len(sizes)
    after: list[tuple[int, float]] = []  # ours: (shared load index or -1, then the seconds after it)
    left, t, decisions = k, 0.0, 0
    while left:
        now_k = left
        if not at_once and decisions < MAX_DECISIONS:
            now_k = starts_now(cold, left, cluster, period_s)[0]
        if now_k:
            listed = {id(n) for n in view}
            for r in readiness(cold, now_k, cluster):
                node = view[r.node] if not r.new_node else _coming(cold, nodes, listed, t)
                node.free -= cold.gpus_per_replica
                arrive = max(t, node.up_at)
                if node.image_at == math.inf:  # the first replica there pulls; the others wait for it
                    node.image_at = arrive + cold.image_pull_s
                begin = max(arrive, node.image_at) + r.init_s + r.gate_wait_s
                rest = r.compile_s + r.warmup_s
                if r.from_cache:
                    after.append((-1, begin + r.load_s + rest))
                else:
                    sizes.append(cold.weights_gb)
                    begins.append(begin)
                    on_node.append(node)
                    after.append((len(sizes) - 1, rest))
            left -= now_k
        decisions += 1
        if not left:
            break
        t += period_s
        cluster, view = _observed(cold, nodes, sizes, begins, on_node, t, cached)
    finish = coldstart.shared_load_finish_times(
        sizes, begins, storage_gbps=cold.storage_gbps, per_loader_gbps=cold.per_loader_gbps
    )
    return max(rest if i < 0 else finish[i] + rest for i, rest in after), decisions


def _coming(cold: ColdStartSpec, nodes: list[_Node], listed: set[int], t: float) -> _Node:
    """Where a replica the model puts on a node not up yet goes: a node on its way (observed, or
    asked for by this schedule) with room, the first up, as the scheduler binds a pending pod to a
    node coming up; else a new node. The decisions' model places it alike (the cluster lists the
    nodes on their way)."""
    g = cold.gpus_per_replica
    coming = [n for n in nodes if id(n) not in listed and n.free >= g]
    if coming:
        return min(coming, key=lambda n: n.up_at)
    node = _Node(t + cold.node_provision_s, cold.gpus_per_node, math.inf, math.inf)
    nodes.append(node)
    return node


def _observed(
    cold: ColdStartSpec,
    nodes: list[_Node],
    sizes: list[float],
    begins: list[float],
    on_node: list[_Node | None],
    t: float,
    cached: bool,
) -> tuple[Cluster, list[_Node]]:
    """The cluster an observation at t shows of the played-forward one, and its nodes in order."""
    storage, cap = cold.storage_gbps, cold.per_loader_gbps
    if cached:  # a shared load done by t wrote the weights to its node's cache
        done = coldstart.shared_load_finish_times(sizes, begins, storage_gbps=storage, per_loader_gbps=cap)
        for node, end in zip(on_node, done, strict=True):
            if node is not None and end <= t and end < node.weights_at:
                node.weights_at = end
    view = [n for n in nodes if n.up_at <= t]
    coming = sorted((n.up_at - t, n.free) for n in nodes if n.up_at > t and n.free >= cold.gpus_per_replica)
    left = loads_left_at(sizes, begins, t, storage_gbps=storage, per_loader_gbps=cap)
    cluster = (
        tuple(n.free for n in view),
        tuple(i for i, n in enumerate(view) if n.image_at <= t),
        tuple(i for i, n in enumerate(view) if n.weights_at <= t) if cached else (),
        tuple(gb for gb, b in zip(left, begins, strict=True) if b <= t and gb > BYTE_GB),
        tuple(sorted(b - t for b in begins if b > t)),
        tuple(coming),
    )
    return cluster, view
