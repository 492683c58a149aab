"""One replica's engine, step by step, in plain Python: the exact model of the replay's engine.

Three users: the emulator runs it in real time (replay/emulate/batching.py), replay/referencerun.py
runs it over a trace in virtual time (the reference the fast engine, replay/kernel/, is tested against),
and the docs' validation against published measurements runs it closed-loop.

The model is vLLM V1's scheduler (vllm/v1/core/sched/scheduler.py), per step:

  1. running requests, in the order they were admitted, each get their missing tokens
     (tokens - computed: 1 when decoding, the rest of the prompt when prefilling), capped by what
     is left of the step's token budget (max_num_batched_tokens; chunked prefill). Each needs KV
     blocks for computed + new tokens; when the free blocks run out, the most recently admitted
     running request is preempted (its blocks freed, its progress dropped: recompute, as V1 does),
     possibly the request itself;
  2. only if nothing was preempted: waiting requests, FCFS (preempted ones first), while budget,
     max_num_seqs and free blocks allow; the first that does not fit stops admission. With
     prefix caching, a request's prompt blocks the replica has already computed are not computed
     again (the Mooncake traces' 512-token block ids), nor are a preempted request's own full KV
     blocks: vLLM frees them with their hash kept, so the request comes back once those blocks and
     its next chunk fit, rather than re-prefilling a prompt near the KV budget that is preempted
     again before it completes (a livelock that advanced the decodes beside it a token a cycle);
  3. the step takes profile.step_s(...) of its composition; at its end every request whose tokens
     are all computed emits one token: a request's first token comes at the end of the step that
     completes its own prefill, and it finishes with its last.

kind sglang / tgi (prefill-first): a step runs prompt chunks (running prefills, then admissions) if
any, else every decode; never both. Everything else is as above.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from replay.profiles import EngineProfile

PREFIX_BLOCK_TOKENS = 512  # the Mooncake traces' hash block


class RequestRejected(ValueError):
    """The request can never run on this engine (prompt + output over the KV budget)."""

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
    prefix_blocks: tuple[int, ...] = ()
    admitted_s: float = math.nan  # first scheduled
    first_token_s: float = math.nan
    last_token_s: float = math.nan
    prev_token_s: float = math.nan  # the token before the last (inter-token latency)
    finished_s: float = math.nan
    generated: int = 0
    computed: int = 0  # tokens whose KV is computed
    blocks: int = 0  # KV blocks held
    preemptions: int = 0
    prefix_hit_tokens: int = 0
    prefilled: bool = False  # its (re)computed prompt is done: it decodes
    kept: int = 0  # tokens of its own KV still cached since its preemption (prefix caching)
    aborted: bool = False

    @property
    def tokens(self) -> int:
        """Prompt + generated: what must be computed before the next token."""
        return self.input_tokens + self.generated

    @property
    def decoding(self) -> bool:
        return self.prefilled

    @property
    def done(self) -> bool:
        return self.aborted or self.generated >= self.output_tokens


@dataclass(frozen=True, slots=True)
class Step:
    """One forward pass: which requests computed how many tokens, and what it cost."""

    start_s: float
    end_s: float
    chunks: tuple[tuple[Request, int], ...]  # (request, tokens computed), in running order
    prefill_tokens: int
    attention_pairs: int
    decode_requests: int
    context_tokens: int
    preempted: tuple[Request, ...] = ()


@dataclass(frozen=True, slots=True)
class Gauges:
    """What an engine's /metrics shows now."""

    waiting: int
    running: int
    kv_used_tokens: int  # blocks in use x block size
    kv_budget_tokens: int


@dataclass(slots=True)
class Counters:
    """Cumulative, as vLLM's counters."""

    requests_finished: int = 0
    prompt_tokens: int = 0  # counted at the first token
    generation_tokens: int = 0
    preemptions: int = 0
    prefix_queries: int = 0  # prompt tokens looked up in the prefix cache
    prefix_hits: int = 0


class StepScheduler:
    """The scheduler of one replica. Pure: time only ever arrives as a parameter."""

    def __init__(self, profile: EngineProfile, *, prefix_block_tokens: int = PREFIX_BLOCK_TOKENS) -> None:
        self.profile = profile
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.free_blocks = profile.kv_blocks
        self.counters = Counters()
        self._prefix_block_tokens = prefix_block_tokens
        self._cache: OrderedDict[int, None] = OrderedDict()  # prefix block ids, least recently used first
        self._cache_size = max(1, profile.kv_budget_tokens // prefix_block_tokens)
        self._next_id = 0

    # --- requests in and out -------------------------------------------------------------------

    def submit(
        self, input_tokens: int, output_tokens: int, now: float, prefix_blocks: Sequence[int] = ()
    ) -> Request:
        """A new request at `now`; refused at once if it could never run."""
        if input_tokens < 1 or output_tokens < 1:
            raise ValueError(f"input and output tokens must be >= 1, got {input_tokens}, {output_tokens}")
        if not fits_at_all(self.profile, input_tokens, output_tokens):
            raise RequestRejected(input_tokens, output_tokens, context_limit(self.profile))
        request = Request(self._next_id, input_tokens, output_tokens, now, tuple(prefix_blocks))
        self._next_id += 1
        self.waiting.append(request)
        return request

    def abort(self, request: Request) -> None:
        """The client went away: free the request's blocks at once."""
        if request.done:
            return
        request.aborted = True
        if request in self.waiting:
            self.waiting.remove(request)
        elif request in self.running:
            self.running.remove(request)
            self.free_blocks += request.blocks
            request.blocks = 0

    @property
    def idle(self) -> bool:
        return not (self.waiting or self.running)

    def gauges(self) -> Gauges:
        p = self.profile
        used = (p.kv_blocks - self.free_blocks) * p.block_size
        return Gauges(len(self.waiting), len(self.running), used, p.kv_budget_tokens)

    # --- one step ------------------------------------------------------------------------------

    def schedule(self, now: float) -> Step | None:
        """The step starting at `now` (None when there is nothing to run)."""
        p = self.profile
        chunks: list[tuple[Request, int]] = []
        preempted: list[Request] = []
        budget = p.max_num_batched_tokens
        if p.mixed_batches:
            budget = self._schedule_running(chunks, preempted, budget, lambda r: True)
            if not preempted:
                self._admit(chunks, budget, now)
        else:  # prefill-first: prompt chunks alone if there are any, else the decodes alone
            budget = self._schedule_running(chunks, preempted, budget, lambda r: not r.decoding)
            if not preempted:
                self._admit(chunks, budget, now)
            if not chunks:
                self._schedule_running(chunks, preempted, p.max_num_batched_tokens, lambda r: r.decoding)
        if not chunks:
            return None
        prefill = pairs = decodes = context = 0
        for r, new in chunks:
            if r.decoding:
                decodes += 1
                context += r.tokens
            else:
                prefill += new
                pairs += new * r.computed + new * (new + 1) // 2
        end = now + p.step_s(prefill, pairs, decodes, context)
        return Step(now, end, tuple(chunks), prefill, pairs, decodes, context, tuple(preempted))

    def _schedule_running(
        self,
        chunks: list[tuple[Request, int]],
        preempted: list[Request],
        budget: int,
        take: Callable[[Request], bool],
    ) -> int:
        p = self.profile
        victims: list[Request] = []
        i = 0
        while i < len(self.running) and budget > 0:
            r = self.running[i]
            if not take(r):
                i += 1
                continue
            new = min(r.tokens - r.computed, budget)
            need = blocks_for(r.computed + new, p.block_size) - r.blocks
            scheduled = True
            while need > self.free_blocks:  # preempt the newest until it fits (maybe r itself)
                victim = self.running.pop()
                self._preempt(victim)
                victims.append(victim)
                if victim is r:
                    scheduled = False
                    break
            if not scheduled:
                break
            r.blocks += need
            self.free_blocks -= need
            chunks.append((r, new))
            budget -= new
            i += 1
        for victim in victims:  # each one goes before the waiting queue, oldest first
            self.waiting.appendleft(victim)
        preempted.extend(victims)
        return budget

    def _preempt(self, r: Request) -> None:
        if self.profile.prefix_caching:  # its full blocks stay cached until it comes back
            r.kept = r.computed // self.profile.block_size * self.profile.block_size
        self.free_blocks += r.blocks
        r.blocks = 0
        r.computed = 0
        r.prefilled = False
        r.preemptions += 1
        self.counters.preemptions += 1

    def _admit(self, chunks: list[tuple[Request, int]], budget: int, now: float) -> None:
        p = self.profile
        while self.waiting and budget > 0 and len(self.running) < p.max_num_seqs:
            r = self.waiting[0]
            hit = self._prefix_hit(r) if p.prefix_caching else 0
            # its own kept blocks could only have been evicted while fewer were free than they fill,
            # when it could not be admitted anyway
            start = max(hit, min(r.kept, r.tokens - 1))
            new = min(r.tokens - start, budget)
            need = blocks_for(start + new, p.block_size)
            if need > self.free_blocks:
                return
            self.waiting.popleft()
            if p.prefix_caching:
                self._touch(r, hit)
            r.computed = start
            r.kept = 0
            r.blocks = need
            self.free_blocks -= need
            if math.isnan(r.admitted_s):
                r.admitted_s = now
            self.running.append(r)
            chunks.append((r, new))
            budget -= new

    def complete(self, step: Step) -> list[Request]:
        """Apply a step at its end; returns the requests that got a token, in running order."""
        end = step.end_s
        emitted: list[Request] = []
        finished = False
        for r, new in step.chunks:
            if r.aborted:
                continue
            r.computed += new
            if r.computed < r.tokens:
                continue
            if r.generated == 0:
                r.first_token_s = end
                self.counters.prompt_tokens += r.input_tokens
                if self.profile.prefix_caching:
                    self._insert(r)
            r.generated += 1
            r.prefilled = True
            self.counters.generation_tokens += 1
            r.prev_token_s, r.last_token_s = r.last_token_s, end
            emitted.append(r)
            if r.generated >= r.output_tokens:
                r.finished_s = end
                self.free_blocks += r.blocks
                r.blocks = 0
                self.counters.requests_finished += 1
                finished = True
        if finished:
            self.running = [r for r in self.running if not r.done]
        return emitted

    # --- prefix cache --------------------------------------------------------------------------

    def _full_prefix_blocks(self, r: Request) -> tuple[int, ...]:
        return r.prefix_blocks[: r.input_tokens // self._prefix_block_tokens]

    def _prefix_hit(self, r: Request) -> int:
        """Prompt tokens already cached: the longest run of the request's leading blocks the replica
        has computed, never the whole prompt (the last token is always computed, as vLLM)."""
        matched = 0
        for block in self._full_prefix_blocks(r):
            if block not in self._cache:
                break
            matched += 1
        return min(matched * self._prefix_block_tokens, r.tokens - 1)

    def _touch(self, r: Request, hit: int) -> None:
        self.counters.prefix_queries += r.tokens
        self.counters.prefix_hits += hit
        r.prefix_hit_tokens += hit
        for block in self._full_prefix_blocks(r)[: hit // self._prefix_block_tokens]:
            self._cache.move_to_end(block)

    def _insert(self, r: Request) -> None:
        for block in self._full_prefix_blocks(r):
            self._cache[block] = None
            self._cache.move_to_end(block)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)


def blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def context_limit(profile: EngineProfile) -> int:
    """The longest request (prompt + output tokens) the engine accepts: its whole KV, in blocks
    (vLLM's max_model_len when the KV cache is what bounds it)."""
    return profile.kv_blocks * profile.block_size


def fits_at_all(profile: EngineProfile, input_tokens: int, output_tokens: int) -> bool:
    return input_tokens + output_tokens <= context_limit(profile)
