"""Continuous batching in real time: the replay's engine model, step by step, for the emulator.

Sits under replay/emulate/server.py. The scheduler is replay/scheduler.py's StepScheduler, the
exact model the offline engine (replay/engine.py) is tested against: vLLM V1's steps with chunked
prefill, paged KV and recompute preemption. `EngineLoop` runs it against a `Clock` (the asyncio
loop's in production; a manual one in tests): it takes the next step, waits for its end, and
streams the token of every request that got one. `run_virtual` runs the same scheduler in virtual
time, which is how tests check the emulator against the offline engine without sleeping.

The engine keeps its own nominal timeline: a step starts when the previous one ended (or when the
request that woke an idle engine arrived), never at "whenever the event loop woke up", so
event-loop latency delays delivery but does not accumulate into the schedule. A request that
arrives during a step joins the next one, as in vLLM.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol

from replay.profiles import EngineProfile
from replay.scheduler import Gauges, Request, RequestRejected, Step, StepScheduler

__all__ = [
    "Clock",
    "EngineLoop",
    "Gauges",
    "LoopClock",
    "Observer",
    "Request",
    "RequestRejected",
    "Step",
    "StepKind",
    "TokenStream",
    "run_virtual",
    "step_kind",
]


class StepKind(StrEnum):
    """How an engine's own metrics name a forward pass: with prompt tokens in it, or decodes only."""

    PREFILL = "prefill"
    DECODE = "decode"


def step_kind(step: Step) -> StepKind:
    return StepKind.PREFILL if step.prefill_tokens else StepKind.DECODE


def run_virtual(
    profile: EngineProfile,
    arrival_s: Sequence[float],
    input_tokens: Sequence[int],
    output_tokens: Sequence[int],
) -> list[Request]:
    """The emulator's engine on a whole arrival sequence in virtual time (sorted arrivals).
    Requests over the KV budget come back with nothing happened (NaN times), as dropped."""
    core = StepScheduler(profile)
    out: list[Request] = []
    n = len(arrival_s)
    i = 0
    busy_until = -math.inf

    def submit_until(t: float) -> None:
        nonlocal i
        while i < n and arrival_s[i] <= t:
            try:
                out.append(core.submit(int(input_tokens[i]), int(output_tokens[i]), float(arrival_s[i])))
            except RequestRejected:
                out.append(Request(-1, int(input_tokens[i]), int(output_tokens[i]), float(arrival_s[i])))
            i += 1

    while True:
        if core.idle:
            if i >= n:
                return out
            busy_until = max(busy_until, float(arrival_s[i]))
            submit_until(busy_until)
        step = core.schedule(busy_until)
        if step is None:  # only requests that can never run were submitted
            continue
        submit_until(step.end_s)  # arrivals during the step join the next one
        core.complete(step)
        busy_until = step.end_s


# --- real time -----------------------------------------------------------------------------------


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep_until(self, t: float) -> None: ...


class LoopClock:
    """The running asyncio loop's monotonic clock."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep_until(self, t: float) -> None:
        delay = t - self.now()
        if delay > 0:
            await asyncio.sleep(delay)


class Observer(Protocol):
    """Sees the engine work (metrics): every submission, every finished piece of work with the
    requests that got a token from it, every abort, and the gauges whenever they may have changed."""

    def on_submit(self, request: Request) -> None: ...

    def on_work(self, step: Step, emitted: Sequence[Request]) -> None: ...

    def on_abort(self, request: Request) -> None: ...

    def on_gauges(self, gauges: Gauges) -> None: ...


class TokenStream:
    """One request's tokens as they are decoded: `async with` it, `async for` over it. Each item is
    the number of tokens generated when that token was (1, 2, ... output_tokens): the request object
    itself may already be further along when a slow reader gets to an item. Leaving early aborts."""

    def __init__(self, engine: EngineLoop, request: Request) -> None:
        self.request = request
        self._engine = engine
        self._tokens: asyncio.Queue[int] = asyncio.Queue()  # token count so far; -1: the end

    def push(self, count: int) -> None:
        self._tokens.put_nowait(count)

    def __aiter__(self) -> TokenStream:
        return self

    async def __anext__(self) -> int:
        count = await self._tokens.get()
        if count < 0:
            raise StopAsyncIteration
        return count

    async def __aenter__(self) -> TokenStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._engine.close(self)


class EngineLoop:
    """Drives a StepScheduler in real time and streams each request's tokens as they are decoded.

    Observers see submissions, work, aborts and gauge changes (metrics, the gauge history)."""

    def __init__(
        self, profile: EngineProfile, clock: Clock | None = None, *, observers: Sequence[Observer] = ()
    ) -> None:
        self.core = StepScheduler(profile)
        self._busy_until = -math.inf
        self.clock: Clock = clock or LoopClock()
        self._observers = tuple(observers)
        self._streams: dict[int, TokenStream] = {}
        self._wake = asyncio.Event()

    def open(self, input_tokens: int, output_tokens: int) -> TokenStream:
        """Submit a request now; RequestRejected at once if it can never run."""
        request = self.core.submit(input_tokens, output_tokens, self.clock.now())
        stream = TokenStream(self, request)
        self._streams[request.id] = stream
        for o in self._observers:
            o.on_submit(request)
        self._changed()
        self._wake.set()
        return stream

    def close(self, stream: TokenStream) -> None:
        self._streams.pop(stream.request.id, None)
        if not stream.request.done:
            self.core.abort(stream.request)
            for o in self._observers:
                o.on_abort(stream.request)
            self._changed()
            self._wake.set()

    async def run(self) -> None:
        """Forever: take the next work, wait for its end, deliver its tokens."""
        core = self.core
        while True:
            if core.idle:
                self._wake.clear()
                await self._wake.wait()
                continue
            start = self._busy_until
            if not core.running:  # an idle engine starts when the request that woke it arrived
                start = max(start, min(r.arrival_s for r in core.waiting))
            step = core.schedule(start)
            if step is None:  # nothing runnable (cannot happen: an idle engine admits its first request)
                self._wake.clear()
                await self._wake.wait()
                continue
            self._busy_until = step.end_s
            if step.prefill_tokens or step.preempted:
                self._changed()  # admissions and preemptions move requests between waiting and running
            await self.clock.sleep_until(step.end_s)
            emitted = core.complete(step)
            for o in self._observers:
                o.on_work(step, emitted)
            ended = False
            for request in emitted:
                stream = self._streams.get(request.id)
                if stream is not None:
                    stream.push(request.generated)
                if request.finished_s == request.finished_s:  # not NaN: its last token
                    ended = True
                    if stream is not None:
                        stream.push(-1)
            if ended:
                self._changed()

    def _changed(self) -> None:
        if self._observers:
            g = self.core.gauges()
            for o in self._observers:
                o.on_gauges(g)
