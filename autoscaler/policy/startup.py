"""Replicas on their way to ready: the cold-start phases as one pure, event-driven machine.

The replay's fleet runs it as the policy adds and removes replicas; the cold-start model
(coldstart.predict_ready) builds one from the cluster it is told about, or copies the fleet's,
and runs it to the end: "when is each replica ready if nobody else starts or stops?". So the
policy's predictions and the simulated cluster share one arithmetic. Pure: time comes in through
advance(to); no clock, no I/O. The phases and the weight tiers are in startphase.py, when
each event is due (the timers and the shared storage's loads) in startevents.py.

Gate order: first come, first served by the time a replica reaches the gate, replicas reaching
it at the same instant in the order they were started. Slots are handed out after every event of
an instant has been processed, so that order holds whatever order the events came in.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import pairwise

from autoscaler.policy.nodecache import NodeCache
from autoscaler.policy.spec import ColdStartSpec, CompileCache, GateScope
from autoscaler.policy.startevents import StartEvents
from autoscaler.policy.startphase import Start, StartPhase, Tier, phase_order
from autoscaler.policy.storage import BYTE_GB

MODEL = "model"  # the node cache's key for this spec's weights (one model per machine)
PSEUDO_NODE = -1  # the node of loaders the caller only knows by their bytes left or their start


# Enum members are slow to look up on their class (about 1 us each in CPython 3.11): the hot paths
# below compare against these module-level aliases instead.
_PROVISION, _PULL, _INIT, _GATE, _LOAD, _COMPILE, _WARMUP, _READY = StartPhase
_SHARED, _CACHE, _PEER = Tier.SHARED, Tier.CACHE, Tier.PEER


@dataclass(slots=True)
class NodeFacts:
    up_at: float
    image: bool
    cache: NodeCache
    compiled: bool
    pull_done_at: float | None = None  # a pull in progress ends then


_REPLICA, _NODE_PULL = 0, 1


class Startups:
    """The replicas of one spec between "asked for" and "ready", and the facts they depend on:
    per node (up time, image, weights cache, compile cache), the cluster's compile cache, the
    ready replicas that can serve weights peer-to-peer, the load gate and the shared storage.

    The spec must pass coldstart.check_spec. `on_phase(replica, phase, at)` is told every phase a
    replica enters (READY included); copies made by clone() tell nobody.
    """

    def __init__(
        self,
        spec: ColdStartSpec,
        *,
        now: float = 0.0,
        peer_sources: int = 0,
        compile_cache_warm: bool = False,
        on_phase: Callable[[int, StartPhase, float], None] | None = None,
    ) -> None:
        self.spec = spec
        self.now = now
        self.peer_sources = peer_sources  # READY replicas that can serve their weights
        self.compile_cache_warm = compile_cache_warm  # CLUSTER scope: some replica compiled
        self.on_phase = on_phase
        self.version = 0  # bumped on every change of state that is not the passing of time
        # bumped only by what the machine is told (starts, cancels, nodes, sources): between two
        # bumps the machine does exactly what a projection made after the first one foresaw
        self.told = 0
        self.nodes: dict[int, NodeFacts] = {}
        self._starts: dict[int, Start] = {}
        self._order = 0
        self._events = StartEvents()  # the timers and the shared loads
        self._holders: set[int] = set()  # replicas holding a gate slot
        self._queue: list[tuple[float, int, int]] = []  # (arrived at, start order, replica): heap
        self._order_phases = phase_order(spec)
        self._next_phase = dict(pairwise(self._order_phases))
        self._facts_of_spec()

    def _facts_of_spec(self) -> None:
        spec = self.spec
        self._init_s, self._warmup_s = spec.engine_init_s, spec.warmup_s
        self._compile_node = spec.compile_cache == CompileCache.NODE
        self._compile_cluster = spec.compile_cache == CompileCache.CLUSTER
        self._release_after_load = spec.load_gate_scope == GateScope.LOAD

    # --- what the machine is told -----------------------------------------------------------

    def add_node(
        self, node: int, *, up_at: float, image: bool = False, weights: bool = False, compiled: bool = False
    ) -> None:
        """A node replicas can be started on; `weights` counts only with a node cache."""
        cache = NodeCache(self.spec.node_cache_gb)
        if weights and self.spec.local_cache_gbps is not None:
            cache = cache.filled(MODEL, self.spec.weights_gb)
        self.nodes[node] = NodeFacts(up_at, image, cache, compiled)
        self.version += 1
        self.told += 1

    def drop_node(self, node: int) -> None:
        """The node is gone, and with it its image, weights and compile caches."""
        self.nodes.pop(node, None)
        self.version += 1
        self.told += 1

    def start(self, replica: int, node: int) -> Start:
        """Replica `replica` was asked for now, bound to `node` (added before). The record returned
        keeps the time each phase was entered, up to READY (when the machine lets go of it)."""
        s = Start(replica, node, self._order)
        self._order += 1
        self._starts[replica] = s
        self.version += 1
        self.told += 1
        self._enter(s, _PROVISION)
        self._grant()
        return s

    def add_loading(self, replica: int, left_gb: float) -> None:
        """A replica already reading `left_gb` from shared storage (and holding a gate slot), of
        which nothing else is known: it compiles and warms up like any other afterwards."""
        if PSEUDO_NODE not in self.nodes:
            self.add_node(PSEUDO_NODE, up_at=-math.inf, image=True)
        s = Start(replica, PSEUDO_NODE, self._order, _LOAD, tier=_SHARED)
        self._order += 1
        self._starts[replica] = s
        self._holders.add(replica)
        self.version += 1
        self.told += 1
        if left_gb <= BYTE_GB:
            self._leave(s)
        else:
            self._events.loads.join(s, left_gb)

    def add_upcoming(self, replica: int, begins_at: float) -> None:
        """A replica of which only the time its shared-storage load begins is known (`begins_at`,
        the caller's projection, its own gate wait included): it reaches the gate then (with a
        startup-scoped gate, engine_init_s before), ahead of every replica started here, which
        the caller started after it, and loads from shared storage."""
        if PSEUDO_NODE not in self.nodes:
            self.add_node(PSEUDO_NODE, up_at=-math.inf, image=True)
        gated = self._order_phases.index(_GATE)
        before = self._order_phases[gated - 1]
        s = Start(replica, PSEUDO_NODE, self._order, before, tier=_SHARED)
        self._order += 1
        self._starts[replica] = s
        self.version += 1
        self.told += 1
        ahead = self._init_s if before == _PULL else 0.0  # the phases between the gate and the load
        self._events.push(max(self.now, begins_at - ahead), _REPLICA, replica, s.token)

    def cancel(self, replica: int) -> None:
        """The replica was deleted before it was ready: its bandwidth and gate slot go to others."""
        s = self._starts.pop(replica, None)
        if s is None:
            return
        self.version += 1
        self.told += 1
        self._events.loads.drop(replica)
        self._holders.discard(replica)
        self._grant()

    def source_gone(self) -> None:
        """A ready replica stopped serving (drained or deleted): one peer source less."""
        self.peer_sources = max(0, self.peer_sources - 1)
        self.version += 1
        self.told += 1

    # --- what callers read -------------------------------------------------------------------

    def get(self, replica: int) -> Start | None:
        return self._starts.get(replica)

    def starting(self) -> Iterable[Start]:
        return self._starts.values()

    @property
    def shared_left_gb(self) -> list[float]:
        """GB still to read by each replica loading from shared storage, in the order they began."""
        return self._events.loads.left_gb()

    @property
    def busy(self) -> bool:
        """Something will happen without being told: a timer is pending or a load is running."""
        return self._events.busy

    def clone(self) -> Startups:
        """An independent copy that reports to nobody, for "what if nothing else changes"."""
        other = Startups.__new__(Startups)
        other.spec = self.spec
        other.now = self.now
        other.peer_sources = self.peer_sources
        other.compile_cache_warm = self.compile_cache_warm
        other.on_phase = None
        other.version = self.version
        other.told = self.told
        other.nodes = {
            n: NodeFacts(f.up_at, f.image, f.cache, f.compiled, f.pull_done_at) for n, f in self.nodes.items()
        }
        other._starts = {r: s.copy() for r, s in self._starts.items()}
        other._order = self._order
        other._events = self._events.copy(other._starts)
        other._holders = set(self._holders)
        other._queue = list(self._queue)
        other._order_phases = self._order_phases
        other._next_phase = self._next_phase
        other._facts_of_spec()
        return other

    # --- time ----------------------------------------------------------------------------------

    def advance(self, to: float) -> None:
        """Process every event up to `to` (inclusive), then stand at `to`."""
        if self._events.quiet_until(to):
            self.now = max(self.now, to)  # nothing happens before `to`: most calls
            return
        while self._step(to):
            pass

    def next_event_s(self) -> float:
        """When the next event is due (a timer, or a load finishing at the current rate); inf if
        none. A caller stepping in intervals (the replay's run loop) ends one there."""
        spec = self.spec
        return self._events.next_at(self.now, spec.storage_gbps, spec.per_loader_gbps)

    def run(self, until: Start | None = None) -> None:
        """Advance until every replica is ready, or only until `until` is."""
        while (until is None or until.phase != _READY) and self._step(math.inf):
            pass

    def _step(self, to: float) -> bool:
        """Process the next instant with events if it is not after `to` and say so; otherwise
        progress the loads to `to`, stand there and return False."""
        spec = self.spec
        at = self._events.step(self.now, to, spec.storage_gbps, spec.per_loader_gbps)
        if at is None:
            self.now = max(self.now, to)
            return False
        self.now = at
        self._instant()
        return True

    def _instant(self) -> None:
        """Everything due now: finished shared loads (smallest target first, ties in start
        order), then timers (in the order they were set), then the gate's free slots; again
        while any of them acted."""
        while True:
            acted = False
            for finished in self._events.loads.pop_done():
                self._leave(finished)
                acted = True
            while (timer := self._events.pop_due(self.now)) is not None:
                _, _, kind, ref, token = timer
                acted = True
                if kind == _NODE_PULL:
                    node = self.nodes.get(ref)
                    if node is not None and node.pull_done_at is not None and node.pull_done_at <= self.now:
                        node.image, node.pull_done_at = True, None
                        self.version += 1
                    continue
                due = self._starts.get(ref)
                if due is not None and due.token == token:
                    self._leave(due)
            if self._grant():
                acted = True
            if not acted:
                return

    # --- the phases --------------------------------------------------------------------------

    def _enter(self, s: Start, phase: StartPhase) -> None:
        """Enter `phase`, and go on through every phase that takes no time (a loop, not a call
        per phase: most phases of most replicas take none)."""
        while True:
            now = self.now
            s.phase = phase
            s.entered[phase] = now
            s.token += 1
            self.version += 1
            if self.on_phase is not None:
                self.on_phase(s.replica, phase, now)
            seconds = self._begin(s, phase)
            if seconds is None:  # it ends on another event: a gate slot, a shared load, never (READY)
                return
            if seconds > 0:
                self._events.push(now + seconds, _REPLICA, s.replica, s.token)
                return
            self._end(s)
            phase = self._next_phase[phase]

    def _begin(self, s: Start, phase: StartPhase) -> float | None:
        """Start `phase`: how long it takes, or None when another event ends it."""
        if phase == _INIT:
            return self._init_s
        if phase == _WARMUP:
            return self._warmup_s
        if phase == _PROVISION:
            return self.nodes[s.node].up_at - self.now
        if phase == _PULL:
            node = self.nodes[s.node]
            if node.image:
                return 0.0
            if node.pull_done_at is None:
                node.pull_done_at = self.now + self.spec.image_pull_s
                self._events.push(node.pull_done_at, _NODE_PULL, s.node, 0)
            return node.pull_done_at - self.now
        if phase == _GATE:
            if self.spec.max_concurrent_loads is None:
                return 0.0
            # _grant hands out slots; a load the caller told of (PSEUDO_NODE) reached the gate before
            # any replica started here, so it queues ahead of them
            arrived = -math.inf if s.node == PSEUDO_NODE else self.now
            heapq.heappush(self._queue, (arrived, s.order, s.replica))
            return None
        if phase == _LOAD:
            return self._load(s, self.nodes[s.node])
        if phase == _COMPILE:
            hit = (self._compile_node and self.nodes[s.node].compiled) or (
                self._compile_cluster and self.compile_cache_warm
            )
            s.compile_hit = hit
            return self.spec.compile_cached_s if hit else self.spec.compile_s
        # READY
        del self._starts[s.replica]
        self.peer_sources += 1
        self._holders.discard(s.replica)
        return None

    def _load(self, s: Start, node: NodeFacts) -> float | None:
        spec = self.spec
        if s.tier is None:  # else a load the caller told of (add_upcoming): shared storage
            if spec.local_cache_gbps is not None and node.cache.holds(MODEL):
                s.tier = _CACHE
                node.cache = node.cache.read(MODEL)
                return spec.weights_gb / spec.local_cache_gbps
            if spec.peer_gbps is not None and self.peer_sources > 0:
                s.tier = _PEER
                return spec.weights_gb / spec.peer_gbps
            s.tier = _SHARED
        if spec.weights_gb <= BYTE_GB:
            return 0.0
        self._events.loads.join(s, spec.weights_gb)
        return None

    def _end(self, s: Start) -> None:
        """The exit effects of the phase `s` is in."""
        phase = s.phase
        if phase == _LOAD:
            node = self.nodes.get(s.node)
            if s.tier == _SHARED and self.spec.local_cache_gbps is not None and node is not None:
                node.cache = node.cache.filled(MODEL, self.spec.weights_gb)
            if self._release_after_load:
                self._holders.discard(s.replica)
        elif phase == _COMPILE and not s.compile_hit:
            node = self.nodes.get(s.node)
            if self._compile_node and node is not None:
                node.compiled = True
            elif self._compile_cluster:
                self.compile_cache_warm = True

    def _leave(self, s: Start) -> None:
        """The current phase is over (a timer, a finished load, a gate slot): on to the next."""
        self._end(s)
        self._enter(s, self._next_phase[s.phase])

    def _grant(self) -> bool:
        """Hand free gate slots to the queue's head, first come first served."""
        slots = self.spec.max_concurrent_loads
        granted = False
        while self._queue and slots is not None and len(self._holders) < slots:
            _, _, replica = heapq.heappop(self._queue)
            s = self._starts.get(replica)
            if s is None or s.phase != _GATE:
                continue  # cancelled while waiting
            self._holders.add(replica)
            granted = True
            self._leave(s)
        return granted
