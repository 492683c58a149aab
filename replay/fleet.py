"""The simulated fleet: replica lifecycle on GPU nodes, and the router in front of the replicas.

Sits between replay/simulate.py (which asks for a replica count every sync period and routes each
tick's arrivals) and replay/engine.py (which serves what was routed). Lifecycle of a replica:

    requested -> [node provisioning] -> [image pull] -> weight load -> warm-up -> ready -> draining -> deleted
                  only when no node has   cached per    shared storage,               no new requests;
                  its GPUs free            node          loaders come and go           in-flight finish

Placement asks the policy core (coldstart.place_replicas); loaders share the storage bandwidth with
the policy core's arithmetic (coldstart.advance_loads / next_load_completion_s), advanced exactly
between events, so 8 replicas of 140 GB at 10 GB/s are all ready 112 s after their loads start.
A replica holds its GPUs from scheduling (its node is up) to deletion: loading costs GPU-hours.
On scale-down, replicas that are not ready go first (newest first, as a ReplicaSet does); ready
ones drain and are deleted when their last request finishes, so no request is lost.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import TypedDict

import numpy as np
import numpy.typing as npt

from autoscaler.policy import coldstart
from autoscaler.policy.spec import ColdStartSpec

I64 = npt.NDArray[np.int64]


class Phase(IntEnum):
    """Ordered by how early in its life a replica is: scale-down removes the lowest first."""

    PROVISIONING = 0  # waiting for a new node
    PULLING = 1
    LOADING = 2
    WARMING = 3
    READY = 4
    DRAINING = 5
    DELETED = 6


@dataclass(slots=True)
class Replica:
    """Mutable bookkeeping of one replica (internal to the fleet; reports read copies)."""

    id: int
    node: int
    phase: Phase
    requested_s: float
    scheduled_s: float = math.nan  # GPUs held from here ...
    deleted_s: float = math.nan  # ... to here
    load_left_gb: float = 0.0
    ready_s: float = math.nan
    drain_s: float = math.nan
    cold: bool = True  # False for the warm replicas present at t = 0


@dataclass(slots=True)
class Node:
    id: int
    gpus_free: int
    up_s: float
    image_cached: bool = False
    weights_cached: bool = False
    pull_done_s: float | None = None  # a pull in progress finishes then; others on the node wait for it
    empty_since: float | None = None
    removed: bool = False


class NodeState(TypedDict):
    """The up nodes as the policy core's placement and lead-time arithmetic take them."""

    free_gpus_per_node: list[int]
    image_cached_nodes: set[int]
    weights_cached: set[int]


def _node_state(spec: ColdStartSpec, live: list[Node]) -> NodeState:
    cache = spec.local_cache_gbps is not None  # weights stay on a node only with a local cache
    return NodeState(
        free_gpus_per_node=[n.gpus_free for n in live],
        image_cached_nodes={i for i, n in enumerate(live) if n.image_cached},
        weights_cached={i for i, n in enumerate(live) if n.weights_cached} if cache else set(),
    )


class _Ev(IntEnum):
    NODE_UP = 0
    PULL_DONE = 1
    CACHE_LOAD_DONE = 2
    WARM_DONE = 3
    NODE_IDLE = 4


def route(outstanding: I64, k: int) -> I64:
    """Send k requests, one after another, each to the replica with the fewest outstanding requests
    (ties to the lowest index); returns each request's index into `outstanding`.

    Water-filling without a loop: the k requests take the k smallest (level, index) pairs where
    replica r offers levels o_r, o_r + 1, ... Find the level L that k requests fill up to; the
    pairs below it, in (level, index) order, are the row-major nonzeros of the table
    "replica j offers level l" (rows min(o) .. L - 1: at most k + the spread of o).
    """
    r = len(outstanding)
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    o = outstanding.astype(np.int64)
    sorted_o = np.sort(o)
    cs = np.cumsum(sorted_o)
    fill_to_own = np.arange(1, r + 1) * sorted_o - cs  # requests needed to lift the j lowest to level o_(j)
    m = int(np.searchsorted(fill_to_own, k, side="left"))  # replicas below the final level
    level = -(-(k + int(cs[m - 1])) // m)  # ceil: smallest L with m*L - sum >= k
    _, owner = np.nonzero(o <= np.arange(int(sorted_o[0]), level)[:, None])
    out: I64 = owner[:k]
    return out


class Fleet:
    """Replicas and nodes in continuous time; `advance(to)` processes every lifecycle event up to `to`."""

    def __init__(self, spec: ColdStartSpec, *, initial_ready: int, node_idle_remove_s: float) -> None:
        coldstart.check_spec(spec)
        self.spec = spec
        self.node_idle_remove_s = node_idle_remove_s
        self.now = 0.0
        self.replicas: list[Replica] = []
        self.nodes: list[Node] = []
        self._events: list[tuple[float, int, _Ev, int]] = []
        self._seq = 0
        self._loading: list[int] = []  # replica ids reading from shared storage
        self._ready: list[int] = []
        self._starting: list[int] = []  # phase before READY, in creation order
        self._alive_nodes: list[Node] = []  # not removed (up or provisioning)
        self._startups: list[float] = []  # request-to-ready seconds of each replica started in the run
        self._draining: list[int] = []
        self._ready_array: I64 | None = None
        self._lead_time: tuple[object, float] | None = None  # (cluster state, lead time) last computed
        per_node = spec.gpus_per_node // spec.gpus_per_replica
        for i in range(initial_ready):
            if i % per_node == 0:
                self.nodes.append(Node(len(self.nodes), spec.gpus_per_node, 0.0, True, True))
                self._alive_nodes.append(self.nodes[-1])
            node = self.nodes[-1]
            node.gpus_free -= spec.gpus_per_replica
            rep = Replica(len(self.replicas), node.id, Phase.READY, 0.0, 0.0, ready_s=0.0, cold=False)
            self.replicas.append(rep)
            self._ready.append(rep.id)

    # --- what the rest of the replay reads -------------------------------------------------------

    @property
    def ready_ids(self) -> I64:
        """Routable replicas, oldest first."""
        if self._ready_array is None:
            self._ready_array = np.array(self._ready, dtype=np.int64)
        return self._ready_array

    @property
    def draining_ids(self) -> list[int]:
        return list(self._draining)

    @property
    def active_count(self) -> int:
        """Replicas that count towards the desired number: every one not draining or deleted."""
        return len(self._starting) + len(self._ready)

    def startup_durations(self) -> list[float]:
        """Request-to-ready times of the replicas started during the run that are ready by now."""
        return list(self._startups)

    def starting(self) -> list[Replica]:
        return [self.replicas[i] for i in self._starting]

    def live_nodes(self) -> list[Node]:
        """Nodes that are up now (not removed, not still provisioning), in creation order."""
        return [n for n in self._alive_nodes if n.up_s <= self.now]

    def lead_time_s(self) -> float:
        """Time to ready of one more replica started now, from the cluster's state (the policy
        core's coldstart.lead_time_s); the last answer is reused while that state is unchanged."""
        live = self.live_nodes()
        loading = self.loading_remaining_gb
        key = (tuple((n.gpus_free, n.image_cached, n.weights_cached) for n in live), tuple(loading))
        if self._lead_time is None or self._lead_time[0] != key:
            lead = coldstart.lead_time_s(
                self.spec, **_node_state(self.spec, live), loading_remaining_gb=loading
            )
            self._lead_time = (key, lead)
        return self._lead_time[1]

    @property
    def loading_remaining_gb(self) -> list[float]:
        """GB still to read by each replica loading from shared storage."""
        return [self.replicas[i].load_left_gb for i in self._loading]

    def predicted_ready_at(self) -> tuple[float, ...]:
        """When each starting replica would be ready if nobody else started: what the controller
        can know from the pods and the cold-start model (the replay does not leak the future)."""
        spec = self.spec
        sizes: list[float] = []
        starts: list[float] = []
        out: list[float] = []
        for r in self.starting():
            if r.phase == Phase.WARMING:
                out.append(r.ready_s)
                continue
            if r.phase == Phase.LOADING:
                sizes.append(r.load_left_gb)
                starts.append(self.now)
                continue
            node = self.nodes[r.node]
            up = max(node.up_s, self.now)
            pull = 0.0 if node.image_cached else spec.image_pull_s
            if node.pull_done_s is not None:
                pull = max(0.0, node.pull_done_s - up)
            sizes.append(spec.weights_gb)
            starts.append(up + pull)
        if sizes:
            finish = coldstart.shared_load_finish_times(
                sizes, starts, storage_gbps=spec.storage_gbps, per_loader_gbps=spec.per_loader_gbps
            )
            out.extend(f + spec.warmup_s for f in finish)
        return tuple(sorted(out))

    # --- scaling ---------------------------------------------------------------------------------

    def scale_to(self, desired: int) -> tuple[int, int]:
        """Make `desired` replicas count (not draining); returns (created, removed)."""
        current = self.active_count
        if desired > current:
            for _ in range(desired - current):
                self._create()
            return desired - current, 0
        if desired < current:
            candidates = [self.replicas[i] for i in (*self._starting, *self._ready)]
            # unready before ready, then the newest first (ReplicaSet's deletion preference)
            candidates.sort(key=lambda r: (r.phase, -r.requested_s, -r.id))
            for r in candidates[: current - desired]:
                if r.phase == Phase.READY:
                    r.phase = Phase.DRAINING
                    r.drain_s = self.now
                    self._ready.remove(r.id)
                    self._draining.append(r.id)
                    self._ready_array = None
                else:
                    self._delete(r)
            return 0, current - desired
        return 0, 0

    def finish_draining(self, outstanding: I64, last_finish_s: Callable[[int], float] | None = None) -> None:
        """Delete the draining replicas that have nothing left in flight, at their last request's
        finish when `last_finish_s` tells it (else now)."""
        for rid in list(self._draining):
            if rid >= len(outstanding) or outstanding[rid] == 0:
                r = self.replicas[rid]
                at = self.now if last_finish_s is None else max(r.drain_s, last_finish_s(rid))
                self._delete(r, at=min(at, self.now))

    # --- time ------------------------------------------------------------------------------------

    def advance(self, to: float) -> None:
        spec = self.spec
        if not self._loading and (not self._events or self._events[0][0] > to):
            self.now = to  # nothing happens before `to` (most of the loop's ticks)
            return
        while True:
            timer = self._events[0][0] if self._events else math.inf
            left = [self.replicas[i].load_left_gb for i in self._loading]
            load_done = self.now + coldstart.next_load_completion_s(
                left, spec.storage_gbps, spec.per_loader_gbps
            )
            at = max(min(timer, load_done), self.now)  # an event stamped in the past happens now
            if at > to:
                self._advance_loads(left, to - self.now)
                self.now = to
                return
            self._advance_loads(left, at - self.now)
            self.now = at
            for rid in [i for i in self._loading if self.replicas[i].load_left_gb <= 0.0]:
                self._loading.remove(rid)
                self._loaded(self.replicas[rid])
            while self._events and self._events[0][0] <= self.now:
                _, _, kind, ref = heapq.heappop(self._events)
                self._handle(kind, ref)

    def _advance_loads(self, left: list[float], dt: float) -> None:
        if not left or dt <= 0:
            return
        after = coldstart.advance_loads(left, dt, self.spec.storage_gbps, self.spec.per_loader_gbps)
        for rid, gb in zip(self._loading, after, strict=True):
            self.replicas[rid].load_left_gb = gb

    def _push(self, at: float, kind: _Ev, ref: int) -> None:
        heapq.heappush(self._events, (at, self._seq, kind, ref))
        self._seq += 1

    def _handle(self, kind: _Ev, ref: int) -> None:
        if kind == _Ev.NODE_IDLE:
            node = self.nodes[ref]
            if (
                not node.removed
                and node.empty_since is not None
                and self.now >= node.empty_since + self.node_idle_remove_s
            ):
                node.removed = True
                self._alive_nodes.remove(node)
            return
        if kind == _Ev.NODE_UP:
            for i in list(self._starting):
                r = self.replicas[i]
                if r.node == ref and r.phase == Phase.PROVISIONING:
                    self._schedule(r)
            return
        r = self.replicas[ref]
        if r.phase == Phase.DELETED:
            return
        if kind == _Ev.PULL_DONE:
            node = self.nodes[r.node]
            node.image_cached = True
            node.pull_done_s = None
            self._start_load(r)
        elif kind == _Ev.CACHE_LOAD_DONE:
            self._loaded(r)
        elif kind == _Ev.WARM_DONE:
            self._become_ready(r)

    # --- lifecycle steps -------------------------------------------------------------------------

    def _create(self) -> None:
        spec = self.spec
        live = self.live_nodes()
        (slot,) = coldstart.place_replicas(spec, 1, **_node_state(spec, live))
        if not slot.new_node:
            node = live[slot.node]
        else:  # a node already on its way with room, else a new one
            coming = [
                n for n in self._alive_nodes if n.up_s > self.now and n.gpus_free >= spec.gpus_per_replica
            ]
            if coming:
                node = min(coming, key=lambda n: n.up_s)
            else:
                node = Node(len(self.nodes), spec.gpus_per_node, self.now + spec.node_provision_s)
                self.nodes.append(node)
                self._alive_nodes.append(node)
                self._push(node.up_s, _Ev.NODE_UP, node.id)
        node.gpus_free -= spec.gpus_per_replica
        node.empty_since = None
        r = Replica(len(self.replicas), node.id, Phase.PROVISIONING, self.now)
        self.replicas.append(r)
        self._starting.append(r.id)
        if node.up_s <= self.now:
            self._schedule(r)

    def _schedule(self, r: Replica) -> None:
        """Bound to an up node: from here the replica holds its GPUs."""
        node = self.nodes[r.node]
        r.scheduled_s = self.now
        if node.image_cached:
            self._start_load(r)
            return
        r.phase = Phase.PULLING
        if node.pull_done_s is None:
            node.pull_done_s = self.now + self.spec.image_pull_s
        self._push(node.pull_done_s, _Ev.PULL_DONE, r.id)

    def _start_load(self, r: Replica) -> None:
        spec = self.spec
        r.phase = Phase.LOADING
        node = self.nodes[r.node]
        if node.weights_cached and spec.local_cache_gbps is not None:
            self._push(self.now + spec.weights_gb / spec.local_cache_gbps, _Ev.CACHE_LOAD_DONE, r.id)
            return
        r.load_left_gb = spec.weights_gb
        if spec.weights_gb <= 0:
            self._loaded(r)
            return
        self._loading.append(r.id)

    def _loaded(self, r: Replica) -> None:
        r.phase = Phase.WARMING
        r.load_left_gb = 0.0
        if self.spec.local_cache_gbps is not None:
            self.nodes[r.node].weights_cached = True
        r.ready_s = self.now + self.spec.warmup_s
        if self.spec.warmup_s <= 0:
            self._become_ready(r)
        else:
            self._push(r.ready_s, _Ev.WARM_DONE, r.id)

    def _become_ready(self, r: Replica) -> None:
        r.phase = Phase.READY
        self._starting.remove(r.id)
        self._ready.append(r.id)
        self._ready_array = None
        self._startups.append(self.now - r.requested_s)

    def _delete(self, r: Replica, at: float | None = None) -> None:
        if r.phase < Phase.READY:
            r.ready_s = math.nan  # never became ready
            self._starting.remove(r.id)
        if r.phase == Phase.READY:
            self._ready.remove(r.id)
            self._ready_array = None
        elif r.phase == Phase.DRAINING:
            self._draining.remove(r.id)
        if r.id in self._loading:
            self._loading.remove(r.id)
        r.phase = Phase.DELETED
        r.deleted_s = self.now if at is None else at
        node = self.nodes[r.node]
        node.gpus_free += self.spec.gpus_per_replica
        if node.gpus_free == self.spec.gpus_per_node:
            node.empty_since = r.deleted_s
            self._push(r.deleted_s + self.node_idle_remove_s, _Ev.NODE_IDLE, node.id)

    # --- accounting ------------------------------------------------------------------------------

    def gpu_seconds(self, end: float) -> float:
        """GPU-seconds held up to `end`: from scheduling to deletion, loading included."""
        g = self.spec.gpus_per_replica
        total = 0.0
        for r in self.replicas:
            if math.isnan(r.scheduled_s):
                continue
            stop = end if math.isnan(r.deleted_s) else min(r.deleted_s, end)
            total += g * max(0.0, stop - r.scheduled_s)
        return total

    def replica_seconds(self, end: float) -> float:
        """Seconds replicas existed (requested to deleted), whatever their phase."""
        total = 0.0
        for r in self.replicas:
            stop = end if math.isnan(r.deleted_s) else min(r.deleted_s, end)
            total += max(0.0, stop - r.requested_s)
        return total
