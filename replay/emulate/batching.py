"""Continuous batching in real time: the replay's engine model (replay/engine.py), one request at a time.

Sits under replay/emulate/server.py. `BatchCore` is the pure scheduler (no clock, no asyncio): it
hands out the next piece of GPU work and applies its result. `EngineLoop` runs it against a
`Clock` (the asyncio loop's in production; a manual one in tests) and streams each token to the
request that produced it. `run_virtual` runs the same core in virtual time, which is how tests
check the emulator against the offline engine without sleeping.

The model is EngineProfile's, as replay/engine.py applies it:

  admission  FCFS while a running slot is free and input + output tokens fit in the KV budget
             (reserved up front); a request that could never fit is refused at submission.
  prefill    one request at a time at prefill_tokens_per_s, FIFO, with priority over decode.
  decode     a step emits one token for every decoding request and takes
             decode_base_s + decode_per_running_s x n, n = requests running (prefilling or decoding).

So a request alone has TTFT = input / rate + step(1) and e2e = TTFT + (output - 1) x step(1), as
offline. Two differences, both at most one step: a step is not interrupted (a request arriving
mid-step starts its prefill at the step's end, where the offline engine pauses the decode clock),
and tokens come at step boundaries (offline, a request's progress is continuous).

The engine keeps its own nominal timeline: work starts when the previous work ended (or when the
request that made it possible arrived) and never at "whenever the event loop woke up", so event-loop
latency delays delivery but does not accumulate into the schedule.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from replay.profiles import EngineProfile


class RequestRejected(ValueError):
    """The request can never run on this engine (prompt + max_tokens over the KV budget)."""

    def __init__(self, input_tokens: int, output_tokens: int, limit: int) -> None:
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.limit = limit
        super().__init__(
            f"input {input_tokens} + output {output_tokens} = {input_tokens + output_tokens} tokens "
            f"exceed the KV budget of {limit} tokens"
        )


@dataclass(slots=True, eq=False)
class Request:
    """One request's progress; times on the engine's clock, NaN until the event happens."""

    id: int
    input_tokens: int
    output_tokens: int
    arrival_s: float
    admitted_s: float = math.nan
    prefill_end_s: float = math.nan
    first_token_s: float = math.nan
    last_token_s: float = math.nan
    prev_token_s: float = math.nan  # the token before the last (inter-token latency)
    finished_s: float = math.nan
    generated: int = 0
    aborted: bool = False

    @property
    def kv_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def done(self) -> bool:
        return self.aborted or self.generated >= self.output_tokens


class WorkKind(StrEnum):
    PREFILL = "prefill"
    DECODE = "decode"


@dataclass(frozen=True, slots=True)
class Work:
    """One piece of GPU work: a prefill of one request, or a decode step of a batch."""

    kind: WorkKind
    start_s: float
    end_s: float
    batch: tuple[Request, ...]


@dataclass(frozen=True, slots=True)
class Gauges:
    """What an engine's /metrics shows now."""

    waiting: int
    running: int
    kv_used_tokens: int
    kv_budget_tokens: int


class BatchCore:
    """The scheduler of one engine. Pure: time only ever arrives as a parameter."""

    def __init__(self, profile: EngineProfile) -> None:
        self.profile = profile
        self._queue: deque[Request] = deque()  # waiting for a slot, FCFS
        self._prefill: deque[Request] = deque()  # admitted, prompt not yet processed
        self._decoding: list[Request] = []
        self._running = 0  # admitted and not finished (prefilling or decoding): the step's n
        self._kv_used = 0
        self._busy_until = -math.inf  # end of the last work handed out
        self._next_id = 0

    def gauges(self) -> Gauges:
        return Gauges(len(self._queue), self._running, self._kv_used, self.profile.kv_budget_tokens)

    @property
    def idle(self) -> bool:
        return not (self._queue or self._prefill or self._decoding)

    def submit(self, input_tokens: int, output_tokens: int, now: float) -> Request:
        """A new request at `now`; refused at once if it could never be admitted."""
        if input_tokens < 1 or output_tokens < 1:
            raise ValueError(f"input and output tokens must be >= 1, got {input_tokens}, {output_tokens}")
        budget = self.profile.kv_budget_tokens
        if input_tokens + output_tokens > budget:
            raise RequestRejected(input_tokens, output_tokens, budget)
        request = Request(self._next_id, input_tokens, output_tokens, now)
        self._next_id += 1
        self._queue.append(request)
        return request

    def abort(self, request: Request) -> None:
        """The client went away: free the request's slot and KV at once."""
        if request.done:
            return
        request.aborted = True
        if request in self._queue:
            self._queue.remove(request)
            return
        if request in self._prefill:
            self._prefill.remove(request)
        elif request in self._decoding:
            self._decoding.remove(request)
        self._release(request)

    def next_work(self) -> Work | None:
        """The next GPU work, or None when idle. It starts when the previous work ended, or when the
        first waiting request arrived if the engine had nothing to do by then."""
        if not self._prefill and not self._decoding:
            if not self._queue:
                return None
            start = max(self._busy_until, self._queue[0].arrival_s)
        else:
            start = self._busy_until
        self._admit(start)
        p = self.profile
        if self._prefill:  # prefill has priority: the GPU does one thing at a time
            request = self._prefill.popleft()
            end = start + request.input_tokens / p.prefill_tokens_per_s
            work = Work(WorkKind.PREFILL, start, end, (request,))
        elif self._decoding:
            work = Work(WorkKind.DECODE, start, start + p.step_s(self._running), tuple(self._decoding))
        else:  # unreachable: an idle engine always admits its queue head (it fits an empty budget)
            return None
        self._busy_until = work.end_s
        return work

    def finish(self, work: Work) -> list[Request]:
        """Apply finished work; returns the requests that got a token (in batch order)."""
        end = work.end_s
        if work.kind is WorkKind.PREFILL:
            (request,) = work.batch
            if not request.aborted:
                request.prefill_end_s = end
                self._decoding.append(request)
            return []
        emitted: list[Request] = []
        finished = False
        for request in work.batch:
            if request.aborted:
                continue
            request.generated += 1
            if request.generated == 1:
                request.first_token_s = end
            request.prev_token_s = request.last_token_s
            request.last_token_s = end
            if request.generated >= request.output_tokens:
                request.finished_s = end
                self._release(request)
                finished = True
            emitted.append(request)
        if finished:
            self._decoding = [r for r in self._decoding if not r.done]
        return emitted

    def _admit(self, now: float) -> None:
        """FCFS from the queue head: stop at the first request that has not arrived or does not fit."""
        p = self.profile
        while self._queue and self._running < p.max_running:
            head = self._queue[0]
            if head.arrival_s > now or self._kv_used + head.kv_tokens > p.kv_budget_tokens:
                return
            self._queue.popleft()
            head.admitted_s = now
            self._running += 1
            self._kv_used += head.kv_tokens
            self._prefill.append(head)

    def _release(self, request: Request) -> None:
        self._running -= 1
        self._kv_used -= request.kv_tokens


def run_virtual(
    profile: EngineProfile,
    arrival_s: Sequence[float],
    input_tokens: Sequence[int],
    output_tokens: Sequence[int],
) -> list[Request]:
    """The emulator's engine on a whole arrival sequence in virtual time (sorted arrivals).
    Requests over the KV budget come back with nothing happened (NaN times), as dropped."""
    core = BatchCore(profile)
    out: list[Request] = []
    n = len(arrival_s)
    i = 0

    def submit_until(t: float) -> None:
        nonlocal i
        while i < n and arrival_s[i] <= t:
            try:
                out.append(core.submit(int(input_tokens[i]), int(output_tokens[i]), float(arrival_s[i])))
            except RequestRejected:
                out.append(Request(-1, int(input_tokens[i]), int(output_tokens[i]), float(arrival_s[i])))
            i += 1

    while True:
        work = core.next_work()
        if work is None:
            if i >= n:
                return out
            submit_until(arrival_s[i])
            continue
        submit_until(work.end_s)  # arrivals during the work wait for the next boundary
        core.finish(work)


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

    def on_work(self, work: Work, emitted: Sequence[Request]) -> None: ...

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
    """Drives a BatchCore in real time and streams each request's tokens as they are decoded.

    Observers see submissions, work, aborts and gauge changes (metrics, the gauge history)."""

    def __init__(
        self, profile: EngineProfile, clock: Clock | None = None, *, observers: Sequence[Observer] = ()
    ) -> None:
        self.core = BatchCore(profile)
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
        while True:
            work = self.core.next_work()
            if work is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            if work.kind is WorkKind.PREFILL:
                self._changed()  # admissions may have moved requests from waiting to running
            await self.clock.sleep_until(work.end_s)
            emitted = self.core.finish(work)
            for o in self._observers:
                o.on_work(work, emitted)
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
