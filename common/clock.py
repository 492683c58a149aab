"""Time from an injected clock: the protocol the servers and loops take, and a manual clock for tests.

Only the outer loops read time; below them "now" is a parameter. A test moves a `ManualClock` by hand
and never sleeps: `advance`/`set` jump (sleepers due by then wake at the new time), `advance_to`
wakes each sleeper at its own time and lets the event loop react between them.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep_until(self, t: float) -> None: ...


class WallClock:
    """Unix seconds (time.time), asyncio sleeps."""

    def now(self) -> float:
        return time.time()

    def __call__(self) -> float:
        return time.time()

    async def sleep_until(self, t: float) -> None:
        await asyncio.sleep(max(0.0, t - time.time()))


@dataclass
class ManualClock:
    """Time moves only when the test says so. Callable (`clock()`) where a `Callable[[], float]` is
    taken, and a `Clock` where sleeping is needed."""

    t: float = 0.0
    _sleepers: list[tuple[float, asyncio.Future[None]]] = field(default_factory=list, repr=False)

    def __call__(self) -> float:
        return self.t

    def now(self) -> float:
        return self.t

    def set(self, t: float) -> float:
        """Jump to `t`; sleepers due by then wake (at `t`). Time never goes back."""
        if t < self.t:
            raise ValueError(f"a clock does not go back: {t} < {self.t}")
        self.t = t
        for entry in [s for s in self._sleepers if s[0] <= t]:
            self._sleepers.remove(entry)
            if not entry[1].done():
                entry[1].set_result(None)
        return self.t

    def advance(self, seconds: float) -> float:
        return self.set(self.t + seconds)

    async def sleep_until(self, t: float) -> None:
        if t <= self.t:
            return
        fut = asyncio.get_running_loop().create_future()
        self._sleepers.append((t, fut))
        try:
            await fut
        finally:  # woken (already removed) or cancelled while asleep
            self._sleepers = [s for s in self._sleepers if s[1] is not fut]

    async def sleep(self, seconds: float) -> None:
        await self.sleep_until(self.t + seconds)

    @property
    def sleepers(self) -> int:
        return len(self._sleepers)

    async def advance_to(self, to: float) -> None:
        """Move to `to`, waking each sleeper at its own time and letting the loop react."""
        while True:
            await settle()
            due = sorted((s for s in self._sleepers if s[0] <= to), key=lambda s: s[0])
            if not due:
                break
            when, fut = due[0]
            self._sleepers.remove(due[0])
            self.t = max(self.t, when)
            if not fut.done():
                fut.set_result(None)
        self.t = max(self.t, to)
        await settle()


async def settle(turns: int = 20) -> None:
    """Let every task that can run, run (a few loop turns; no wall-clock wait)."""
    for _ in range(turns):
        await asyncio.sleep(0)
