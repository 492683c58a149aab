"""The cold-start model: when will k replicas started now be ready?

Sits under the predictive policy (its forecast horizon is `lead_time_s`), the replay simulator
(which reuses the shared-storage arithmetic for loaders that come and go) and `infscale coldstart`.
Pure: no clock, no I/O; every time is seconds relative to "now" = 0.

One replica's path to ready:

    [node provisioning] -> [image pull] -> weight load -> warm-up -> ready
     only if no existing    skipped on a   shared storage,
     node has G free GPUs   node that has  or the node-local
                            the image      cache if it holds them

Loaders reading from shared storage split its bandwidth: each of the n loaders still loading
gets min(per-loader cap, shared / n), recomputed whenever one starts or finishes (egalitarian
processor sharing with a cap). Rates are constant between such events, so the schedule is exact.
Seed: 140 GB at a shared 10 GB/s takes 140 / 10 = 14 s alone; 8 together get 10 / 8 = 1.25 GB/s
each and all finish at 140 / 1.25 = 112 s.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from autoscaler.policy.spec import ColdStartSpec

# Bytes are discrete: a loader with at most one byte left (GB = 10^9 bytes) is done, everywhere
# (at its start too). This absorbs the float residue of "advance by exactly the time to the next
# completion"; the price is that a finish may come one byte's transfer time early.
BYTE_GB = 1e-9


class ColdStartInputError(ValueError):
    """A cold-start input out of range; `field` names it (a ColdStartSpec field or an argument)."""

    def __init__(self, field: str, value: object, requirement: str) -> None:
        super().__init__(f"{field} must be {requirement}, got {value!r}")
        self.field = field
        self.value = value
        self.requirement = requirement


def _require(ok: bool, field: str, value: object, requirement: str) -> None:
    if not ok:
        raise ColdStartInputError(field, value, requirement)


def _finite_at_least_zero(x: float) -> bool:
    return math.isfinite(x) and x >= 0  # also rejects NaN, for which every comparison is False


def _finite_positive(x: float) -> bool:
    return math.isfinite(x) and x > 0


def check_spec(spec: ColdStartSpec) -> None:
    """Raise ColdStartInputError naming the first field out of range."""
    _require(_finite_at_least_zero(spec.weights_gb), "weights_gb", spec.weights_gb, "a finite number >= 0")
    _require(_finite_positive(spec.storage_gbps), "storage_gbps", spec.storage_gbps, "a finite number > 0")
    for name, cap in (("per_loader_gbps", spec.per_loader_gbps), ("local_cache_gbps", spec.local_cache_gbps)):
        _require(cap is None or _finite_positive(cap), name, cap, "unset or a finite number > 0")
    for name, seconds in (
        ("image_pull_s", spec.image_pull_s),
        ("warmup_s", spec.warmup_s),
        ("node_provision_s", spec.node_provision_s),
    ):
        _require(_finite_at_least_zero(seconds), name, seconds, "a finite number >= 0")
    _require(spec.gpus_per_replica >= 1, "gpus_per_replica", spec.gpus_per_replica, ">= 1")
    _require(spec.gpus_per_node >= 1, "gpus_per_node", spec.gpus_per_node, ">= 1")
    _require(
        spec.gpus_per_replica <= spec.gpus_per_node,
        "gpus_per_replica",
        spec.gpus_per_replica,
        f"<= gpus_per_node ({spec.gpus_per_node}), as a replica's GPUs are on one node",
    )


# --- shared storage: processor sharing with a per-loader cap ------------------------------------


def loader_gbps(loaders: int, storage_gbps: float, per_loader_gbps: float | None = None) -> float:
    """The speed of each of `loaders` concurrent loaders: min(cap, shared / loaders)."""
    fair = storage_gbps / loaders
    return fair if per_loader_gbps is None else min(per_loader_gbps, fair)


def next_load_completion_s(
    remaining_gb: Sequence[float], storage_gbps: float, per_loader_gbps: float | None = None
) -> float:
    """Seconds until the first of these loaders finishes if nobody joins; inf when there are none.

    Every loader gets the same speed, so the one with the fewest bytes left finishes first.
    """
    if not remaining_gb:
        return math.inf
    least = min(remaining_gb)
    return 0.0 if least <= BYTE_GB else least / loader_gbps(len(remaining_gb), storage_gbps, per_loader_gbps)


def advance_loads(
    remaining_gb: Sequence[float], dt_s: float, storage_gbps: float, per_loader_gbps: float | None = None
) -> tuple[float, ...]:
    """GB left for each loader after `dt_s` seconds in which nobody joins; finished loaders read 0.0.

    Exact across the completions inside `dt_s` (the survivors speed up at each). The replay
    simulator calls this between its own events, then adds the loaders that start.
    """
    _require(_finite_at_least_zero(dt_s), "dt_s", dt_s, "a finite number >= 0")
    served = 0.0  # GB each still-active loader has received since the start of dt_s (all equal)
    t = 0.0
    active = len(remaining_gb)
    for size in sorted(remaining_gb):
        if size - served <= BYTE_GB:  # done already, or together with the previous one
            active -= 1
            continue
        rate = loader_gbps(active, storage_gbps, per_loader_gbps)
        done_at = t + (size - served) / rate
        if done_at >= dt_s:
            served += (dt_s - t) * rate
            break
        t, served, active = done_at, size, active - 1
    else:
        return (0.0,) * len(remaining_gb)
    return tuple(left if (left := size - served) > BYTE_GB else 0.0 for size in remaining_gb)


def shared_load_finish_times(
    sizes_gb: Sequence[float],
    start_s: Sequence[float] | None = None,
    *,
    storage_gbps: float,
    per_loader_gbps: float | None = None,
) -> tuple[float, ...]:
    """When each loader finishes, loader i reading sizes_gb[i] from start_s[i] (default: all at 0).

    Event-driven and exact: between two events (a start or a finish) n is constant, so every
    active loader has received the same number of GB since any common instant. We track that
    "service per active loader" S(t); a loader joining at S = S_j with size s finishes when S
    reaches S_j + s, so finishes come off a heap in order of that target. Cost O(n log n).

    Worked example, 140 GB each at 10 GB/s, one loader at t = 0 and one at t = 7: alone until
    t = 7 the first reads 70 GB; then both run at 5 GB/s and the first finishes its last 70 GB at
    t = 21; the second has read 14 * 5 = 70 GB by then, runs alone at 10 GB/s and finishes its
    last 70 GB at t = 28.
    """
    n = len(sizes_gb)
    starts: Sequence[float] = start_s if start_s is not None else (0.0,) * n
    if len(starts) != n:
        raise ColdStartInputError("start_s", len(starts), f"as long as sizes_gb ({n})")
    for i in range(n):
        _require(_finite_at_least_zero(sizes_gb[i]), f"sizes_gb[{i}]", sizes_gb[i], "a finite number >= 0")
        _require(math.isfinite(starts[i]), f"start_s[{i}]", starts[i], "finite")
    _require(_finite_positive(storage_gbps), "storage_gbps", storage_gbps, "a finite number > 0")
    _require(
        per_loader_gbps is None or _finite_positive(per_loader_gbps),
        "per_loader_gbps",
        per_loader_gbps,
        "unset or a finite number > 0",
    )
    return _finish_times(sizes_gb, starts, storage_gbps, per_loader_gbps)


def _finish_times(
    sizes_gb: Sequence[float], starts: Sequence[float], storage_gbps: float, per_loader_gbps: float | None
) -> tuple[float, ...]:
    n = len(sizes_gb)
    finish = [0.0] * n
    arrivals = sorted(range(n), key=starts.__getitem__)
    active: list[tuple[float, int]] = []  # heap of (target service, loader)
    served = 0.0  # S(t)
    t = -math.inf
    nxt = 0  # index into arrivals
    while nxt < n or active:
        if not active:  # idle storage: jump to the next start; no target is pending, so S restarts
            t, served = starts[arrivals[nxt]], 0.0
        while nxt < n and starts[arrivals[nxt]] <= t:
            i = arrivals[nxt]
            heapq.heappush(active, (served + sizes_gb[i], i))
            nxt += 1
        gap = active[0][0] - served
        if gap > BYTE_GB:  # otherwise the first is already done (and takes no bandwidth from S)
            rate = loader_gbps(len(active), storage_gbps, per_loader_gbps)
            done_at = t + gap / rate
            if nxt < n and starts[arrivals[nxt]] < done_at:
                start = starts[arrivals[nxt]]
                served += (start - t) * rate
                t = start
                continue
            t, served = done_at, active[0][0]
        while active and active[0][0] - served <= BYTE_GB:
            finish[heapq.heappop(active)[1]] = t
    return tuple(finish)


# --- placement -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Slot:
    """Where one new replica lands. Existing nodes keep their index; new ones are numbered after."""

    node: int
    new_node: bool
    image_cached: bool
    weights_cached: bool


def place_replicas(
    spec: ColdStartSpec,
    k: int,
    *,
    free_gpus_per_node: Sequence[int] = (),
    image_cached_nodes: Collection[int] = (),
    weights_cached: Collection[int] = (),
) -> tuple[Slot, ...]:
    """Put k replicas of spec.gpus_per_replica (G) whole GPUs each on one node apiece.

    Existing node i takes free_gpus_per_node[i] // G replicas: free GPUs on different nodes do not
    add up (16 idle GPUs as 4+4+4+4 hold no 8-GPU replica). Nodes are filled fastest first, by the
    time one replica alone would take there (image pull unless cached, then its weights from the
    local cache or shared storage), ties going best-fit (fewest free GPUs, keeping big holes for
    big replicas) and then to the lower index. kube-scheduler's ImageLocality score leans the same
    way; a scheduler that spreads makes this an optimistic estimate. Replicas that do not fit go
    to new nodes, gpus_per_node // G per node, which have neither the image nor the weights.
    """
    check_spec(spec)
    _check_placement_inputs(spec, k, free_gpus_per_node, image_cached_nodes, weights_cached)
    return _place(spec, k, free_gpus_per_node, image_cached_nodes, weights_cached)


def _check_placement_inputs(
    spec: ColdStartSpec,
    k: int,
    free_gpus_per_node: Sequence[int],
    image_cached_nodes: Collection[int],
    weights_cached: Collection[int],
) -> None:
    _require(k >= 0, "k", k, ">= 0")
    for i, free in enumerate(free_gpus_per_node):
        _require(free >= 0, f"free_gpus_per_node[{i}]", free, ">= 0")
    nodes = len(free_gpus_per_node)
    for name, indices in (("image_cached_nodes", image_cached_nodes), ("weights_cached", weights_cached)):
        for node in indices:
            _require(0 <= node < nodes, name, node, f"a node index in [0, {nodes}) (one per free_gpus entry)")
    if weights_cached and spec.local_cache_gbps is None:
        raise ColdStartInputError(
            "weights_cached", tuple(weights_cached), "empty when local_cache_gbps is unset"
        )


def _place(
    spec: ColdStartSpec,
    k: int,
    free_gpus_per_node: Sequence[int],
    image_cached_nodes: Collection[int],
    weights_cached: Collection[int],
) -> tuple[Slot, ...]:
    g = spec.gpus_per_replica
    shared_alone_s = spec.weights_gb / loader_gbps(1, spec.storage_gbps, spec.per_loader_gbps)
    candidates: list[tuple[float, int, int]] = []  # (alone time to ready, free GPUs, node)
    for node, free in enumerate(free_gpus_per_node):
        if free < g:
            continue
        cost = 0.0 if node in image_cached_nodes else spec.image_pull_s
        if node in weights_cached and spec.local_cache_gbps is not None:
            cost += spec.weights_gb / spec.local_cache_gbps
        else:
            cost += shared_alone_s
        candidates.append((cost, free, node))
    candidates.sort()

    slots: list[Slot] = []
    for _, free, node in candidates:
        take = min(free // g, k - len(slots))
        slot = Slot(node, False, node in image_cached_nodes, node in weights_cached)
        slots.extend([slot] * take)
        if len(slots) == k:
            return tuple(slots)
    per_new_node = spec.gpus_per_node // g
    first_new = len(free_gpus_per_node)
    missing = k - len(slots)
    for j in range(0, missing, per_new_node):  # one Slot value per new node, shared by its replicas
        slots.extend(
            [Slot(first_new + j // per_new_node, True, False, False)] * min(per_new_node, missing - j)
        )
    return tuple(slots)


# --- the whole prediction ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplicaReadiness:
    """One new replica's path to ready; every time is seconds after now.

    ready_s = provision_s + pull_s + load_s + warmup_s, and load_start_s = provision_s + pull_s.
    """

    replica: int  # 0-based, in placement order
    node: int  # existing node index, or numbered after them when new_node
    new_node: bool
    provision_s: float
    pull_s: float  # 0 when the node has the image
    from_cache: bool  # weights read from the node-local cache rather than shared storage
    load_start_s: float
    load_s: float  # start to finish of the weight load
    load_wait_s: float  # of load_s, the time lost to sharing storage with other loaders
    warmup_s: float
    ready_s: float


def predict_ready(
    spec: ColdStartSpec,
    k: int,
    *,
    free_gpus_per_node: Sequence[int] = (),
    image_cached_nodes: Collection[int] = (),
    weights_cached: Collection[int] = (),
    loading_remaining_gb: Sequence[float] = (),
) -> tuple[ReplicaReadiness, ...]:
    """Per-replica ready times of k replicas started now, in placement order.

    free_gpus_per_node: free GPUs on each existing node (empty: every replica needs a new node).
    image_cached_nodes / weights_cached: indices into free_gpus_per_node of nodes that have the
    image / hold the weights in their local cache (needs spec.local_cache_gbps).
    loading_remaining_gb: GB still to read for loaders already reading from shared storage; they
    compete for bandwidth from now on.
    The defaults describe a cold cluster, the slow case a forecast horizon should plan for.
    """
    slots, load_starts, loads = _plan(
        spec, k, free_gpus_per_node, image_cached_nodes, weights_cached, loading_remaining_gb
    )
    shared_alone_s = spec.weights_gb / loader_gbps(1, spec.storage_gbps, spec.per_loader_gbps)
    return tuple(
        ReplicaReadiness(
            replica=i,
            node=slot.node,
            new_node=slot.new_node,
            provision_s=spec.node_provision_s if slot.new_node else 0.0,
            pull_s=0.0 if slot.image_cached else spec.image_pull_s,
            from_cache=slot.weights_cached,
            load_start_s=load_starts[i],
            load_s=loads[i],
            # max: float residue when a loader ran alone; local reads never wait
            load_wait_s=0.0 if slot.weights_cached else max(0.0, loads[i] - shared_alone_s),
            warmup_s=spec.warmup_s,
            ready_s=load_starts[i] + loads[i] + spec.warmup_s,
        )
        for i, slot in enumerate(slots)
    )


def lead_time_s(
    spec: ColdStartSpec,
    *,
    free_gpus_per_node: Sequence[int] = (),
    image_cached_nodes: Collection[int] = (),
    weights_cached: Collection[int] = (),
    loading_remaining_gb: Sequence[float] = (),
) -> float:
    """Seconds until ONE more replica started now is ready, given the loaders already in progress.

    The predictive policy forecasts this far ahead: capacity asked for now arrives only then.
    Same arithmetic as predict_ready(spec, 1, ...)[0].ready_s, without building the breakdown.
    """
    _, (start,), (load,) = _plan(
        spec, 1, free_gpus_per_node, image_cached_nodes, weights_cached, loading_remaining_gb
    )
    return start + load + spec.warmup_s


def _plan(
    spec: ColdStartSpec,
    k: int,
    free_gpus_per_node: Sequence[int],
    image_cached_nodes: Collection[int],
    weights_cached: Collection[int],
    loading_remaining_gb: Sequence[float],
) -> tuple[tuple[Slot, ...], list[float], list[float]]:
    """Validated placement, then per replica: when its load starts and how long it takes."""
    check_spec(spec)
    for i, left in enumerate(loading_remaining_gb):
        _require(_finite_at_least_zero(left), f"loading_remaining_gb[{i}]", left, "a finite number >= 0")
    _check_placement_inputs(spec, k, free_gpus_per_node, image_cached_nodes, weights_cached)
    slots = _place(spec, k, free_gpus_per_node, image_cached_nodes, weights_cached)

    load_starts = [
        (spec.node_provision_s if s.new_node else 0.0) + (0.0 if s.image_cached else spec.image_pull_s)
        for s in slots
    ]
    # local reads run at the cache's speed and leave the shared bandwidth to the others
    local_s = spec.weights_gb / spec.local_cache_gbps if spec.local_cache_gbps is not None else math.nan
    loads = [local_s] * k
    shared = [i for i, s in enumerate(slots) if not s.weights_cached]
    if shared:
        busy = len(loading_remaining_gb)
        finish = _finish_times(
            [*loading_remaining_gb, *[spec.weights_gb] * len(shared)],
            [*[0.0] * busy, *[load_starts[i] for i in shared]],
            spec.storage_gbps,
            spec.per_loader_gbps,
        )
        for i, done in zip(shared, finish[busy:], strict=True):
            loads[i] = done - load_starts[i]
    return slots, load_starts, loads
