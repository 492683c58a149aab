"""What an emulated engine counts: `EngineStats` observes the engine loop (an Observer) and keeps the
counters and histograms every engine's /metrics derives from (replay/emulate/metrics.py renders them)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from replay.emulate.batching import Gauges, Request, Step, StepKind, step_kind


class Hist(StrEnum):
    """The distributions an engine may export; each engine picks its own buckets for those it has."""

    TTFT = "ttft"
    ITL = "itl"  # one observation per token after the first
    E2E = "e2e"
    QUEUE = "queue"
    PREFILL = "prefill"
    DECODE = "decode"
    INFERENCE = "inference"  # prefill + decode
    PROMPT_TOKENS = "prompt_tokens"
    GENERATION_TOKENS = "generation_tokens"
    MEAN_TPOT = "mean_tpot"  # per request: mean time per output token (TGI)
    STEP_TOKENS = "step_tokens"  # tokens per engine step (vLLM iteration_tokens)
    PREFILL_BATCH_S = "prefill_batch_s"  # per forward pass (TGI method="prefill")
    DECODE_BATCH_S = "decode_batch_s"  # per forward pass (TGI method="decode")
    BATCH_NEXT_SIZE = "batch_next_size"  # size of each new batch (TGI)
    # JetStream observes these at a request's first token (its prefill's end) or at its finish
    PREFILL_AT_FIRST = "prefill_at_first"  # first token - admitted, at the first token
    PREFILL_PER_TOKEN = "prefill_per_token"  # the same / prompt tokens, at the first token
    PROMPT_TOKENS_AT_FIRST = "prompt_tokens_at_first"  # prompt tokens, at the first token
    DECODE_PER_TOKEN = "decode_per_token"  # (finished - first token) / output tokens, at the finish
    WAIT = "wait"  # admitted - arrival, at the finish


class Histogram:
    """A Prometheus histogram: per-bucket counts (a value v lands in the first bucket with le >= v)."""

    __slots__ = ("bounds", "count", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        if list(bounds) != sorted(set(bounds)):
            raise ValueError(f"histogram bounds must increase strictly, got {list(bounds)}")
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound (+Inf only)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1

    def cumulative(self) -> list[tuple[float, int]]:
        """(le, cumulative count) per bucket, +Inf last."""
        out, running = [], 0
        for le, c in zip((*self.bounds, math.inf), self.counts, strict=True):
            running += c
            out.append((le, running))
        return out


@dataclass(slots=True)
class EngineStats:
    """Counters and histograms of one engine, fed by EngineLoop (it is an Observer)."""

    buckets: Mapping[Hist, Sequence[float]]
    # the queue time at the request's finish, with vLLM V1's other per-request histograms
    # (loggers.py, for each of iteration_stats.finished_requests); else at its first token
    queue_at_finish: bool = False
    hists: dict[Hist, Histogram] = field(init=False)
    requests_received: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    requests_finished: int = 0
    requests_aborted: int = 0
    requests_rejected: int = 0  # refused before reaching the engine (validation, context length)
    forward_passes: dict[StepKind, int] = field(default_factory=lambda: dict.fromkeys(StepKind, 0))
    gen_throughput: float = 0.0  # tokens per second of the last decode step (SGLang's gauge)
    slots: int = 0  # the engine's decode slots (max_num_seqs): JetStream reports their occupancy

    def __post_init__(self) -> None:
        self.hists = {h: Histogram(b) for h, b in self.buckets.items()}

    def _observe(self, hist: Hist, value: float) -> None:
        h = self.hists.get(hist)
        if h is not None:
            h.observe(value)

    # --- Observer ---

    def on_submit(self, request: Request) -> None:
        self.requests_received += 1

    def on_abort(self, request: Request) -> None:
        self.requests_aborted += 1

    def on_gauges(self, gauges: Gauges) -> None:
        pass

    def on_work(self, step: Step, emitted: Sequence[Request]) -> None:
        kind = step_kind(step)
        self.forward_passes[kind] += 1
        duration = step.end_s - step.start_s
        self._observe(Hist.STEP_TOKENS, step.prefill_tokens + step.decode_requests)
        if kind is StepKind.PREFILL:
            self._observe(Hist.PREFILL_BATCH_S, duration)
            self._observe(Hist.BATCH_NEXT_SIZE, len(step.chunks))
        else:
            self._observe(Hist.DECODE_BATCH_S, duration)
        self.generation_tokens += len(emitted)
        self.gen_throughput = len(emitted) / duration if duration > 0 else 0.0
        for r in emitted:
            if r.generated == 1:
                self.prompt_tokens += r.input_tokens  # counted at the first token, as vLLM V1
                self._observe(Hist.TTFT, r.first_token_s - r.arrival_s)
                self._observe(Hist.PREFILL_AT_FIRST, r.first_token_s - r.admitted_s)
                self._observe(Hist.PREFILL_PER_TOKEN, (r.first_token_s - r.admitted_s) / r.input_tokens)
                self._observe(Hist.PROMPT_TOKENS_AT_FIRST, r.input_tokens)
                if not self.queue_at_finish:
                    self._observe(Hist.QUEUE, r.admitted_s - r.arrival_s)
            else:
                self._observe(Hist.ITL, r.last_token_s - r.prev_token_s)
            if r.generated >= r.output_tokens:
                self.requests_finished += 1
                self._observe(Hist.E2E, r.finished_s - r.arrival_s)
                if self.queue_at_finish:
                    self._observe(Hist.QUEUE, r.admitted_s - r.arrival_s)
                self._observe(Hist.DECODE, r.finished_s - r.first_token_s)
                self._observe(Hist.PREFILL, r.first_token_s - r.admitted_s)  # at the finish, as vLLM V1
                self._observe(Hist.INFERENCE, r.finished_s - r.admitted_s)
                self._observe(Hist.PROMPT_TOKENS, r.input_tokens)
                self._observe(Hist.GENERATION_TOKENS, r.output_tokens)
                self._observe(Hist.MEAN_TPOT, (r.finished_s - r.admitted_s) / r.output_tokens)
                self._observe(Hist.DECODE_PER_TOKEN, (r.finished_s - r.first_token_s) / r.output_tokens)
                self._observe(Hist.WAIT, r.admitted_s - r.arrival_s)
