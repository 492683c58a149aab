"""The simulated fleet: replica lifecycle on GPU nodes (the router is in the engine, replay/engine.py).

Sits between replay/simulate.py (which asks for a replica count every sync period) and
replay/engine.py (which routes each arrival to a ready replica and serves it). Lifecycle of a replica:

    requested -> [node provisioning] -> [image pull] -> engine init -> [load gate] -> weight load
              -> compile -> warm-up -> ready -> draining -> deleted

Everything between "requested" and "ready" is the policy core's start-up machine
(autoscaler/policy/startup.py): the fleet tells it which node each replica is bound to and runs
it event by event, so the cluster the replay simulates and the cold-start model the policies ask
(coldstart.project_ready on a copy of the same machine) are one arithmetic: 8 replicas of 140 GB
at a shared 10 GB/s are all ready 112 s after their loads start, and behind a one-slot load gate
14 s apart. The fleet keeps what the machine does not: placement (coldstart.place_replicas),
nodes coming and going, GPU accounting and draining.
A replica holds its GPUs from scheduling (its node is up) to deletion: loading costs GPU-hours.
On scale-down, replicas that are not ready go first (the earliest in their start-up first, then
the newest, as a ReplicaSet does); ready ones drain and are deleted when their last request
finishes, so no request is lost.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from autoscaler.policy import coldstart
from autoscaler.policy.spec import ColdStartSpec, CompileCache
from autoscaler.policy.startphase import StartPhase, Tier
from autoscaler.policy.startup import MODEL, Startups
from replay.fleetrecords import Node, NodeState, Phase, Replica

I64 = npt.NDArray[np.int64]
PROBE = -1  # the replica id of "one more, started now" in lead-time projections


_PHASE_OF = {
    StartPhase.PROVISION: Phase.PROVISIONING,
    StartPhase.PULL: Phase.PULLING,
    StartPhase.INIT: Phase.INITIALIZING,
    StartPhase.GATE: Phase.GATED,
    StartPhase.LOAD: Phase.LOADING,
    StartPhase.COMPILE: Phase.COMPILING,
    StartPhase.WARMUP: Phase.WARMING,
    StartPhase.READY: Phase.READY,
}

_PULL, _READY = StartPhase.PULL, StartPhase.READY  # enum members are slow to look up on the class


class Fleet:
    """Replicas and nodes in continuous time; `advance(to)` processes every lifecycle event up to `to`."""

    def __init__(self, spec: ColdStartSpec, *, initial_ready: int, node_idle_remove_s: float) -> None:
        coldstart.check_spec(spec)
        self.spec = spec
        self.node_idle_remove_s = node_idle_remove_s
        self.now = 0.0
        self.replicas: list[Replica] = []
        self.nodes: list[Node] = []
        # the warm replicas have compiled and serve: a warm compile cache and peer sources
        self._machine = Startups(
            spec, peer_sources=initial_ready, compile_cache_warm=initial_ready > 0, on_phase=self._on_phase
        )
        self._idle: list[tuple[float, int, int]] = []  # (at, seq, node): a node empty since then
        self._seq = 0
        self._changes = 0  # fleet changes the machine does not see (drained replicas deleted)
        self._ready: list[int] = []
        self._starting: list[int] = []  # phase before READY, in creation order
        self._alive_nodes: list[Node] = []  # not removed (up or provisioning)
        self._startups: list[float] = []  # request-to-ready seconds of each replica started in the run
        self._draining: list[int] = []
        self._ready_array: I64 | None = None
        self._draining_array: I64 | None = None
        self._lead_time: tuple[object, float] | None = None  # (state, lead time) last computed
        self._probe_node: tuple[object, int | None] | None = None  # (state, where one more would go)
        self._projected: tuple[int, dict[int, float]] | None = None  # (machine.told, ready times)
        self._upcoming: tuple[int, tuple[float, ...]] | None = None  # (machine.told, load start times)
        per_node = spec.gpus_per_node // spec.gpus_per_replica
        for i in range(initial_ready):
            if i % per_node == 0:
                node = self._new_node(0.0)
                self._machine.add_node(node.id, up_at=0.0, image=True, weights=True, compiled=True)
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
    def draining_array(self) -> I64:
        """The draining replicas, as draining_ids (a new array when they change)."""
        if self._draining_array is None:
            self._draining_array = np.array(self._draining, dtype=np.int64)
        return self._draining_array

    @property
    def any_draining(self) -> bool:
        return bool(self._draining)

    @property
    def loading(self) -> bool:
        """A replica is reading weights from shared storage (advance() then progresses the loads
        by the time stepped, so stepping in smaller steps is not the same arithmetic)."""
        return bool(self._machine.shared_left_gb)

    @property
    def active_count(self) -> int:
        """Replicas that count towards the desired number: every one not draining or deleted."""
        return len(self._starting) + len(self._ready)

    def startup_durations(self) -> list[float]:
        """Request-to-ready times of the replicas started during the run that are ready by now."""
        return list(self._startups)

    def starting(self) -> list[Replica]:
        return [self.replicas[i] for i in self._starting]

    def next_event_s(self) -> float:
        """When the next lifecycle event is due (a start-up step, a node idle long enough), inf if
        none: the run loop ends its interval there, so a replica that becomes ready is routed to
        at once."""
        idle = self._idle[0][0] if self._idle else math.inf
        return min(idle, self._machine.next_event_s())

    def live_nodes(self) -> list[Node]:
        """Nodes that are up now (not removed, not still provisioning), in creation order."""
        return [n for n in self._alive_nodes if n.up_s <= self.now]

    @property
    def loading_remaining_gb(self) -> list[float]:
        """GB still to read by each replica loading from shared storage."""
        return self._machine.shared_left_gb

    def node_state(self, live: list[Node]) -> NodeState:
        """What the policy core's placement needs to know of these nodes."""
        spec, facts = self.spec, self._machine.nodes
        return NodeState(
            free_gpus_per_node=[n.gpus_free for n in live],
            image_cached_nodes={i for i, n in enumerate(live) if facts[n.id].image},
            weights_cached={i for i, n in enumerate(live) if facts[n.id].cache.holds(MODEL)}
            if spec.local_cache_gbps is not None
            else set(),
            compile_cached_nodes={i for i, n in enumerate(live) if facts[n.id].compiled}
            if spec.compile_cache == CompileCache.NODE
            else set(),
            compile_cache_warm=self._machine.compile_cache_warm,
            peer_sources=self._machine.peer_sources,
        )

    def lead_time_s(self) -> float:
        """Time to ready of one more replica started now, placed as scale_to would place it, with
        every replica already starting ahead of it (the policy core's machine, run on a copy).
        Reused while nothing changes and nothing is in flight."""
        live = sum(1 for n in self._alive_nodes if n.up_s <= self.now)
        state = (self._machine.version, self._changes, live)
        if self._lead_time is not None and self._lead_time[0] == state and not self._machine.busy:
            return self._lead_time[1]
        if self._probe_node is None or self._probe_node[0] != state:
            node = self._choose_node()
            self._probe_node = (state, None if node is None else node.id)
        copy = self._machine.clone()
        node_id = self._probe_node[1]
        if node_id is None:
            node_id = len(self.nodes)
            copy.add_node(node_id, up_at=self.now + self.spec.node_provision_s)
        probe = copy.start(PROBE, node_id)
        copy.run(until=probe)  # what comes after the probe is ready cannot change when it is
        lead = probe.entered[_READY] - self.now
        self._lead_time = (state, lead)
        return lead

    def upcoming_loads_s(self) -> tuple[float, ...]:
        """Seconds until each starting replica that has not begun its weight load begins reading
        from shared storage (not from a node cache or a peer), if nobody else starts or stops:
        loads a replica started now will compete with. Reused while the cluster is unchanged."""
        state = self._machine.told
        if self._upcoming is None or self._upcoming[0] != state:
            copy = self._machine.clone()
            loading = {s.replica for s in copy.starting() if s.phase >= StartPhase.LOAD}
            loads: dict[int, float] = {}

            def record(replica: int, phase: StartPhase, at: float) -> None:
                # the tier is known once the load began, so read it at the phase that follows
                if phase > StartPhase.LOAD and replica not in loading and replica not in loads:
                    s = copy.get(replica)
                    if s is not None and s.tier == Tier.SHARED:
                        loads[replica] = s.entered[StartPhase.LOAD]

            copy.on_phase = record
            copy.run()
            self._upcoming = (state, tuple(sorted(loads.values())))
        # a load whose time has come is in loading_remaining_gb now, or over
        return tuple(at - self.now for at in self._upcoming[1] if at > self.now)

    def coming_nodes(self) -> tuple[tuple[float, int], ...]:
        """(seconds until up, free GPUs) of each node on its way, the first up first: where
        scale_to puts a replica no up node fits (_choose_node)."""
        coming = [n for n in self._alive_nodes if n.up_s > self.now]
        return tuple((n.up_s - self.now, n.gpus_free) for n in sorted(coming, key=lambda n: n.up_s))

    def predicted_ready_at(self) -> tuple[float, ...]:
        """When each starting replica would be ready if nobody else started or stopped: what the
        controller can know from the pods and the cold-start model (the replay does not leak the
        future). Absolute times: until the machine is told of a change they stay what it will do,
        so they are reused."""
        state = self._machine.told
        if self._projected is None or self._projected[0] != state:
            self._projected = (state, coldstart.project_ready(self._machine) if self._starting else {})
        ready = self._projected[1]
        return tuple(sorted(ready[i] for i in self._starting))

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
                    self._draining_array = None
                    self._machine.source_gone()  # a draining replica serves no weights to peers
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
        """Start-ups up to `to`, and the removal of nodes idle long enough. The two do not
        interact: an idle node has no replica, and replicas are only placed by scale_to."""
        while self._idle and self._idle[0][0] <= to:
            at, _, node_id = heapq.heappop(self._idle)
            node = self.nodes[node_id]
            if (
                not node.removed
                and node.empty_since is not None
                and at >= node.empty_since + self.node_idle_remove_s
            ):
                node.removed = True
                self._alive_nodes.remove(node)
                self._machine.drop_node(node.id)
        self._machine.advance(to)
        self.now = max(self.now, to)

    # --- lifecycle steps -------------------------------------------------------------------------

    def _on_phase(self, replica: int, phase: StartPhase, at: float) -> None:
        """The machine moved a replica on: mirror it, and keep the fleet's own books."""
        r = self.replicas[replica]
        if phase == _PULL:  # left PROVISION: bound to an up node, holding its GPUs
            r.scheduled_s = at
        r.phase = _PHASE_OF[phase]
        if phase == _READY:
            r.ready_s = at
            self._starting.remove(r.id)
            self._ready.append(r.id)
            self._ready_array = None
            self._startups.append(at - r.requested_s)

    def _choose_node(self) -> Node | None:
        """Where one more replica goes now: an up node (coldstart.place_replicas), else a node
        already on its way with room, else None (a new node)."""
        spec = self.spec
        live = self.live_nodes()
        (slot,) = coldstart.place_replicas(spec, 1, **self.node_state(live))
        if not slot.new_node:
            return live[slot.node]
        coming = [n for n in self._alive_nodes if n.up_s > self.now and n.gpus_free >= spec.gpus_per_replica]
        return min(coming, key=lambda n: n.up_s) if coming else None

    def _new_node(self, up_s: float) -> Node:
        node = Node(len(self.nodes), self.spec.gpus_per_node, up_s)
        self.nodes.append(node)
        self._alive_nodes.append(node)
        return node

    def _create(self) -> None:
        spec = self.spec
        node = self._choose_node()
        if node is None:
            node = self._new_node(self.now + spec.node_provision_s)
            self._machine.add_node(node.id, up_at=node.up_s)
        node.gpus_free -= spec.gpus_per_replica
        node.empty_since = None
        r = Replica(len(self.replicas), node.id, Phase.PROVISIONING, self.now)
        self.replicas.append(r)
        self._starting.append(r.id)
        self._machine.start(r.id, node.id)

    def _delete(self, r: Replica, at: float | None = None) -> None:
        if r.phase < Phase.READY:
            r.ready_s = math.nan  # never became ready
            self._starting.remove(r.id)
            self._machine.cancel(r.id)
        if r.phase == Phase.READY:
            self._ready.remove(r.id)
            self._ready_array = None
        elif r.phase == Phase.DRAINING:
            self._draining.remove(r.id)
            self._draining_array = None
        self._changes += 1
        r.phase = Phase.DELETED
        r.deleted_s = self.now if at is None else at
        node = self.nodes[r.node]
        node.gpus_free += self.spec.gpus_per_replica
        if node.gpus_free == self.spec.gpus_per_node:
            node.empty_since = r.deleted_s
            heapq.heappush(self._idle, (r.deleted_s + self.node_idle_remove_s, self._seq, node.id))
            self._seq += 1

    # --- accounting ------------------------------------------------------------------------------

    def gpu_seconds(self, end: float, start: float = 0.0) -> float:
        """GPU-seconds held within [start, end]: from scheduling to deletion, loading included."""
        g = self.spec.gpus_per_replica
        total = 0.0
        for r in self.replicas:
            if math.isnan(r.scheduled_s):
                continue
            stop = end if math.isnan(r.deleted_s) else min(r.deleted_s, end)
            total += g * max(0.0, stop - max(r.scheduled_s, start))
        return total

    def replica_seconds(self, end: float, start: float = 0.0) -> float:
        """Seconds replicas existed (requested to deleted) within [start, end], whatever their phase."""
        total = 0.0
        for r in self.replicas:
            stop = end if math.isnan(r.deleted_s) else min(r.deleted_s, end)
            total += max(0.0, stop - max(r.requested_s, start))
        return total
