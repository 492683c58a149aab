"""The start-up machine's pending events in time order: its timers, and the shared storage's loads,
whose next finish is an event too. Between two events every loader reads at one rate
(storage.loader_gbps, at the spec's bandwidths, which the caller passes), so the loads are moved on
in one step to the next event, or to the time asked for where that comes first. Startups
(startup.py) owns one and does what each event says: this keeps when, that what. Pure: time comes
in as arguments; no clock. Built with no arguments, as a compiled class is when deep-copied (the
clairvoyant copies the fleet).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping

from autoscaler.policy.sharedloads import SharedLoads
from autoscaler.policy.startphase import Start
from autoscaler.policy.storage import loader_gbps

Timer = tuple[float, int, int, int, int]  # (at, seq, kind, ref, token): heap order, ties as set


class StartEvents:
    __slots__ = ("_seq", "loads", "timers")

    def __init__(self) -> None:
        self.timers: list[Timer] = []  # a heap
        self._seq = 0
        self.loads = SharedLoads()

    def copy(self, starts: Mapping[int, Start]) -> StartEvents:
        """The same events, the loads on `starts`, the records of a cloned machine."""
        other = StartEvents()
        other.timers = list(self.timers)
        other._seq = self._seq
        other.loads = self.loads.copy(starts)
        return other

    def push(self, at: float, kind: int, ref: int, token: int) -> None:
        heapq.heappush(self.timers, (at, self._seq, kind, ref, token))
        self._seq += 1

    def pop_due(self, now: float) -> Timer | None:
        """The first timer due by `now`, taken off; None if none is."""
        timers = self.timers
        if timers and timers[0][0] <= now:
            return heapq.heappop(timers)
        return None

    @property
    def busy(self) -> bool:
        """A timer is pending or a load is running."""
        return bool(self.loads.loaders or self.timers)

    def quiet_until(self, to: float) -> bool:
        """Nothing happens up to `to` (inclusive): no load runs and no timer is due by then."""
        return not self.loads.loaders and (not self.timers or self.timers[0][0] > to)

    def next_at(self, now: float, storage_gbps: float, per_loader_gbps: float | None) -> float:
        """When the next event is due (a timer, or a load finishing at the current rate); inf if
        none."""
        timer = self.timers[0][0] if self.timers else math.inf
        loads = self.loads
        if loads.loaders:
            rate = loader_gbps(len(loads.loaders), storage_gbps, per_loader_gbps)
            timer = min(timer, now + max(0.0, loads.next_target() - loads.served) / rate)
        return timer

    def step(self, now: float, to: float, storage_gbps: float, per_loader_gbps: float | None) -> float | None:
        """The next instant with events, the loads moved on to it, if it is not after `to`;
        otherwise None, the loads moved on to `to`."""
        timer = self.timers[0][0] if self.timers else math.inf
        rate, load_done = 0.0, math.inf
        loads = self.loads
        if loads.loaders:
            rate = loader_gbps(len(loads.loaders), storage_gbps, per_loader_gbps)
            load_done = now + max(0.0, loads.next_target() - loads.served) / rate
        at = max(min(timer, load_done), now)  # a timer stamped in the past fires now
        if at > to or at == math.inf:
            if rate and now < to < math.inf:  # a `to` in the past changes nothing
                loads.served += (to - now) * rate
            return None
        if load_done <= timer:
            # the instant is a load's finish: its target is reached by definition. Stepping by
            # (at - now) x rate instead can fall short by more than a byte when the time step is
            # below now's float resolution (a 140 GB load at 3e6 GB/s takes 47 us), and then no
            # step ever advances: the loop hung.
            loads.served = loads.next_target()
        else:
            loads.served += (at - now) * rate
        return at
