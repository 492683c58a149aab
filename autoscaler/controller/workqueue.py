"""The work queue: which InferenceAutoscaler to reconcile next, and when.

client-go's workqueue semantics (k8s.io/client-go/util/workqueue), on one asyncio loop:

- a key is queued at most once; `add` while it is being processed marks it dirty, and it is queued
  again when `done` (so no change is lost and no key is reconciled twice at once);
- `add_at`/`add_after` delay a key; a key already waiting keeps the earlier time;
- `add_rate_limited` delays by the key's own exponential backoff, 5 ms doubling per failure up to
  `max_backoff_s` (ItemExponentialFailureRateLimiter); `forget` resets it after a success.

The controller requeues every key after its period and on every relevant change, so one slow or
failing object delays only itself. Time is the injected clock's; `pop_due(now)` serves `step()`
(tests), `get()` the real-time driver.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable


class WorkQueue:
    def __init__(
        self,
        clock: Callable[[], float],
        *,
        base_backoff_s: float = 0.005,
        max_backoff_s: float = 1000.0,
    ) -> None:
        self.clock = clock
        self.base_backoff_s = base_backoff_s
        self.max_backoff_s = max_backoff_s
        self._ready: deque[str] = deque()
        self._queued: set[str] = set()  # in _ready
        self._processing: set[str] = set()
        self._dirty: set[str] = set()  # added while processing
        self._waiting: list[tuple[float, int, str]] = []  # heap of (at, seq, key); stale entries skipped
        self._wait_at: dict[str, float] = {}
        self._seq = itertools.count()
        self._failures: dict[str, int] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()  # get() calls waiting: one is woken per key
        self._timer: asyncio.TimerHandle | None = None  # wakes a waiter when the next delayed key is due
        self._timer_at: float | None = None
        self.closed = False

    def __len__(self) -> int:
        return len(self._queued) + len(self._wait_at)

    # --- adding -----------------------------------------------------------------------------------------

    def add(self, key: str) -> None:
        """Reconcile `key` as soon as possible."""
        if key in self._processing:
            self._dirty.add(key)
            return
        self._wait_at.pop(key, None)
        if key not in self._queued:
            self._queued.add(key)
            self._ready.append(key)
            self._wake_one()

    def add_at(self, key: str, at: float) -> None:
        if at <= self.clock():
            self.add(key)
            return
        if key in self._queued:
            return
        if key in self._wait_at and self._wait_at[key] <= at:
            return
        self._wait_at[key] = at
        heapq.heappush(self._waiting, (at, next(self._seq), key))
        self._arm()

    def add_after(self, key: str, delay_s: float, *, align_s: float = 0.0) -> None:
        """`align_s` shorter than the delay: at the last multiple of it before the delay ends, so keys
        falling due close together share one timer and one wake-up (the delay up to `align_s` shorter)."""
        at = self.clock() + delay_s
        self.add_at(key, math.floor(at / align_s) * align_s if 0 < align_s < delay_s else at)

    def backoff_s(self, key: str) -> float:
        """The delay the next failure of `key` earns (counting it)."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        return min(self.max_backoff_s, self.base_backoff_s * 2.0**failures)

    def add_rate_limited(self, key: str) -> None:
        self.add_after(key, self.backoff_s(key))

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def failures(self, key: str) -> int:
        return self._failures.get(key, 0)

    def remove(self, key: str) -> None:
        """The object is gone: drop it wherever it waits."""
        self._wait_at.pop(key, None)
        self._dirty.discard(key)
        self._failures.pop(key, None)
        if key in self._queued:
            self._queued.discard(key)
            self._ready.remove(key)

    def clear(self) -> None:
        """Drop every key (this replica stopped leading); keys being processed finish normally."""
        self._ready.clear()
        self._queued.clear()
        self._waiting.clear()
        self._wait_at.clear()
        self._dirty.clear()
        self._failures.clear()

    # --- taking ------------------------------------------------------------------------------------------

    def _promote(self, now: float) -> None:
        while self._waiting and self._waiting[0][0] <= now:
            at, _, key = heapq.heappop(self._waiting)
            if self._wait_at.get(key) == at:
                del self._wait_at[key]
                self.add(key)

    def next_at(self) -> float | None:
        """When the next waiting key is due (None: nothing waits)."""
        while self._waiting and self._wait_at.get(self._waiting[0][2]) != self._waiting[0][0]:
            heapq.heappop(self._waiting)  # superseded by an earlier time, or added now
        return self._waiting[0][0] if self._waiting else None

    def pop(self, now: float) -> str | None:
        """The next key due by `now`, marked as processing; None when none is due."""
        self._promote(now)
        if not self._ready:
            return None
        key = self._ready.popleft()
        self._queued.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    # --- waiting (the real-time driver's workers) ------------------------------------------------------

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _arm(self) -> None:
        """One timer for the earliest delayed key (not one per waiting worker)."""
        if not self._waiters:
            return
        due = self.next_at()
        if due == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = None, due
        if due is not None:
            self._timer = asyncio.get_running_loop().call_later(max(0.0, due - self.clock()), self._fire)

    def _fire(self) -> None:
        self._timer, self._timer_at = None, None
        self._wake_one()

    async def get(self) -> str | None:
        """Wait (real time) for the next due key; None once closed."""
        while not self.closed:
            key = self.pop(self.clock())
            if key is not None:
                if self._ready:  # more are due: the next worker takes one
                    self._wake_one()
                return key
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            self._arm()
            try:
                await waiter
            finally:
                if not waiter.done():
                    waiter.cancel()
        return None

    def close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()
