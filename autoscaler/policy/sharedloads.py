"""The replicas reading their weights from shared storage, tracked as one number.

Every loader reading from the storage gets the same speed (storage.loader_gbps), so one number, the
GB each has received since the storage was last idle (S, `served`), says how far all of them are;
a loader joining at S with g GB to read is done when S reaches S + g (its target). This keeps an
event O(log n) where stepping every loader's bytes would be O(n). The start-up machine's events
(startevents.py) own one and move S on with time, the machine (startup.py) adds and drops its
loaders; pure, no clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from autoscaler.policy.startphase import Start
from autoscaler.policy.storage import BYTE_GB


class SharedLoads:
    __slots__ = ("_targets", "loaders", "served")

    def __init__(self) -> None:
        self.loaders: dict[int, Start] = {}  # replica -> record, in the order they began
        self.served = 0.0  # S
        self._targets: list[tuple[float, int, int]] = []  # (target, start order, replica): heap

    def copy(self, starts: Mapping[int, Start]) -> SharedLoads:
        """The same loads on `starts`, the records of a cloned machine."""
        other = SharedLoads()
        other.loaders = {r: starts[r] for r in self.loaders}
        other.served = self.served
        other._targets = list(self._targets)
        return other

    def join(self, s: Start, gb: float) -> None:
        s.target_gb = self.served + gb
        self.loaders[s.replica] = s
        heapq.heappush(self._targets, (s.target_gb, s.order, s.replica))

    def drop(self, replica: int) -> None:
        """The replica was deleted: it reads no more (a replica not loading is ignored)."""
        if self.loaders.pop(replica, None) is not None and not self.loaders:
            self._idle()

    def next_target(self) -> float:
        """The smallest target of a loader still reading (dropping entries of dropped ones)."""
        targets, loaders = self._targets, self.loaders
        while loaders.get(targets[0][2]) is None:
            heapq.heappop(targets)
        return targets[0][0]

    def pop_done(self) -> list[Start]:
        """The loaders S has reached the targets of (within a byte), smallest target first, ties
        in start order; they read no more."""
        done = []
        while self.loaders and self.next_target() - self.served <= BYTE_GB:
            _, _, replica = heapq.heappop(self._targets)
            done.append(self.loaders.pop(replica))
        if done and not self.loaders:
            self._idle()
        return done

    def left_gb(self) -> list[float]:
        """GB still to read by each loader, in the order they began."""
        served = self.served
        return [max(0.0, s.target_gb - served) for s in self.loaders.values()]

    def _idle(self) -> None:
        """Nobody reads: S restarts from 0 (keeps its floats small) and old targets are stale."""
        self.served = 0.0
        self._targets.clear()
