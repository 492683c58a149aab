"""The emulator's engine: the pure scheduler against the replay's engine model, and the real-time loop
on a manual clock (no sleeping)."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field, replace

import numpy as np
import pytest

from common.clock import ManualClock
from replay.emulate.batching import EngineLoop, Gauges, Request, RequestRejected, Step, run_virtual, step_kind
from replay.emulate.metrics import new_stats
from replay.emulate.stats import EngineStats, Hist
from replay.engine import Engine
from replay.profiles import LLAMA_70B_TP4_H100, EngineProfile
from replay.scheduler import StepScheduler
from replay.trace import Trace

# 4 running requests, 10 ms + 1 ms per decode, 10 us per prompt token
FAST = EngineProfile(
    max_num_seqs=4,
    max_num_batched_tokens=2_048,
    kv_budget_tokens=10_000,
    step_base_s=0.01,
    prefill_token_s=1e-5,
    prefill_attention_s=0.0,
    decode_request_s=0.001,
    decode_context_s=0.0,
)


def decode_step(p: EngineProfile, running: int, context: int) -> float:
    return p.step_s(0, 0, running, context)


@pytest.mark.parametrize(
    ("profile", "input_tokens", "output_tokens"),
    [
        pytest.param(FAST, 1_000, 50, id="fast profile"),
        pytest.param(FAST, 1, 1, id="one token in, one out"),
        pytest.param(LLAMA_70B_TP4_H100, 2_000, 300, id="reference-70b engine"),
    ],
)
def test_a_request_alone_follows_the_step_formulas(
    profile: EngineProfile, input_tokens: int, output_tokens: int
) -> None:
    (r,) = run_virtual(profile, [2.0], [input_tokens], [output_tokens])
    ttft = profile.step_s(input_tokens, input_tokens * (input_tokens + 1) // 2, 0, 0)
    decode = sum(decode_step(profile, 1, input_tokens + g) for g in range(1, output_tokens))
    assert r.first_token_s - 2.0 == pytest.approx(ttft)
    assert r.finished_s - 2.0 == pytest.approx(ttft + decode)
    assert r.admitted_s == 2.0 and r.generated == output_tokens


def test_the_prefill_time_histogram_observes_a_request_at_its_finish_as_vllm_v1() -> None:
    """vllm:request_prefill_time_seconds (first token - first scheduled) is observed with the other
    per-request histograms when a request finishes (vLLM V1's loggers.py, for each of
    iteration_stats.finished_requests), not at its first token, as TTFT is."""
    core = StepScheduler(FAST)
    stats = EngineStats({Hist.PREFILL: (0.001, 1.0), Hist.TTFT: (1.0,)})
    requests = [core.submit(100, 1, 0.0), core.submit(100, 3, 0.0)]
    t, steps = 0.0, 0
    while not core.idle:
        step = core.schedule(t)
        assert step is not None
        stats.on_work(step, core.complete(step))
        t, steps = step.end_s, steps + 1
        finished = [r for r in requests if r.finished_s <= t]
        assert stats.hists[Hist.TTFT].count == 2  # both first tokens came out of the first step
        assert stats.hists[Hist.PREFILL].count == len(finished)
        assert stats.hists[Hist.PREFILL].total == sum(r.first_token_s - r.admitted_s for r in finished)
    assert steps == 3 and stats.hists[Hist.PREFILL].counts == [0, 2, 0]


def test_the_queue_time_histogram_is_observed_when_each_engine_observes_it() -> None:
    """vLLM V1 observes vllm:request_queue_time_seconds when a request finishes (loggers.py, for
    each of iteration_stats.finished_requests); TGI's and SGLang's queue histograms count a request
    once it is scheduled, and JetStream's once it takes its decode slot after its prefill, which the
    emulator counts at its first token. Two requests admitted together, one of one token and one of
    three: vLLM's count follows the finishes, the others' the first tokens, and all hold the same
    waits."""
    counts: dict[str, list[int]] = {}
    for engine in ("vllm", "sglang", "tgi", "jetstream"):
        core = StepScheduler(FAST)
        stats = new_stats(engine, 4096)
        requests = [core.submit(100, 1, 0.0), core.submit(100, 3, 0.0)]
        t, seen = 0.0, []
        while not core.idle:
            step = core.schedule(t)
            assert step is not None
            stats.on_work(step, core.complete(step))
            t = step.end_s
            seen.append(stats.hists[Hist.QUEUE].count)
        assert stats.hists[Hist.QUEUE].total == sum(r.admitted_s - r.arrival_s for r in requests)
        counts[engine] = seen
    assert counts["vllm"] == [1, 1, 2]
    assert counts["sglang"] == counts["tgi"] == counts["jetstream"] == [2, 2, 2]


def test_kv_blocks_admit_only_what_fits_and_refuse_the_impossible() -> None:
    profile = replace(FAST, kv_budget_tokens=96)  # 6 blocks of 16 tokens
    core = StepScheduler(profile)
    a = core.submit(50, 10, 0.0)  # 4 blocks for its prompt
    b = core.submit(40, 20, 0.0)  # 3 more: only 2 left, waits
    with pytest.raises(RequestRejected, match="97 tokens exceed the KV budget of 96"):
        core.submit(90, 7, 0.0)
    step = core.schedule(0.0)
    assert step is not None and [r for r, _ in step.chunks] == [a]
    assert core.gauges() == Gauges(waiting=1, running=1, kv_used_tokens=64, kv_budget_tokens=96)
    assert math.isnan(b.admitted_s)


@pytest.mark.parametrize(
    ("input_tokens", "output_tokens"),
    [pytest.param(0, 5, id="empty prompt"), pytest.param(5, 0, id="no output")],
)
def test_submit_refuses_empty_requests(input_tokens: int, output_tokens: int) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        StepScheduler(FAST).submit(input_tokens, output_tokens, 0.0)


def test_abort_frees_the_blocks() -> None:
    core = StepScheduler(FAST)
    a = core.submit(100, 10, 0.0)
    b = core.submit(3_000, 10, 0.0)  # its chunk fills the rest of the step's budget
    c = core.submit(6_000, 10, 0.0)  # waits: no budget left
    step = core.schedule(0.0)
    assert step is not None
    core.complete(step)  # a prefilled, b half-way
    assert core.gauges() == Gauges(1, 2, (7 + 122) * 16, FAST.kv_budget_tokens)
    core.abort(a)
    core.abort(b)  # still prefilling
    core.abort(c)  # still waiting
    assert core.gauges() == Gauges(0, 0, 0, FAST.kv_budget_tokens)
    assert core.idle and core.schedule(1.0) is None


def test_run_virtual_drops_what_can_never_fit() -> None:
    reqs = run_virtual(FAST, [0.0, 0.1], [20_000, 10], [10, 10])
    assert math.isnan(reqs[0].first_token_s) and reqs[0].id == -1
    assert math.isfinite(reqs[1].finished_s)


@pytest.mark.parametrize(
    "rate_per_s", [pytest.param(3.0, id="light load"), pytest.param(30.0, id="queueing")]
)
def test_emulator_engine_is_the_offline_engine(rate_per_s: float) -> None:
    """Both run the same scheduler: every request's times agree to rounding."""
    rng = np.random.default_rng(7)
    n = 150
    arrival = np.cumsum(rng.exponential(1 / rate_per_s, n))
    arrival -= arrival[0]
    trace = Trace("t", arrival, rng.integers(50, 3_000, n), rng.integers(1, 120, n))
    engine = Engine(FAST, trace)
    engine.run(math.inf, np.arange(n), targets=np.zeros(n, dtype=np.int64))
    offline = engine.results()
    reqs = run_virtual(FAST, arrival.tolist(), trace.input_tokens.tolist(), trace.output_tokens.tolist())
    np.testing.assert_allclose([r.first_token_s for r in reqs], offline.first_token_s, atol=1e-9)
    np.testing.assert_allclose([r.finished_s for r in reqs], offline.finished_s, atol=1e-9)


# --- real time, on a manual clock ----------------------------------------------------------------


@dataclass
class Recorder:
    works: list[Step] = field(default_factory=list)
    gauges: list[Gauges] = field(default_factory=list)
    aborted: list[Request] = field(default_factory=list)

    def on_submit(self, request: Request) -> None:
        pass

    def on_work(self, step: Step, emitted: object) -> None:
        self.works.append(step)

    def on_abort(self, request: Request) -> None:
        self.aborted.append(request)

    def on_gauges(self, gauges: Gauges) -> None:
        self.gauges.append(gauges)


async def test_engine_loop_streams_tokens_at_their_times() -> None:
    clock = ManualClock(t=10.0)
    recorder = Recorder()
    engine = EngineLoop(FAST, clock, observers=[recorder])
    task = asyncio.create_task(engine.run())
    try:
        stream = engine.open(1_000, 3)
        seen: list[tuple[int, float]] = []

        async def consume() -> None:
            async with stream:
                async for count in stream:
                    seen.append((count, clock.now()))

        consumer = asyncio.create_task(consume())
        prefill = FAST.step_s(1_000, 0, 0, 0)  # 20 ms: its first token at its end
        await clock.advance_to(10.0 + prefill / 2)
        assert seen == []
        await clock.advance_to(11.0)
        await consumer
    finally:
        task.cancel()
    step = decode_step(FAST, 1, 0)
    assert seen == [(k, pytest.approx(10.0 + prefill + (k - 1) * step)) for k in (1, 2, 3)]
    assert [step_kind(w).value for w in recorder.works] == ["prefill", "decode", "decode"]
    assert recorder.gauges[0] == Gauges(1, 0, 0, FAST.kv_budget_tokens)  # queued
    assert recorder.gauges[-1] == Gauges(0, 0, 0, FAST.kv_budget_tokens)  # finished


async def test_leaving_a_stream_early_aborts_the_request() -> None:
    clock = ManualClock()
    recorder = Recorder()
    engine = EngineLoop(FAST, clock, observers=[recorder])
    task = asyncio.create_task(engine.run())
    try:
        stream = engine.open(100, 1_000)

        async def first_token_only() -> int:
            async with stream:
                async for count in stream:
                    return count
            return 0

        consumer = asyncio.create_task(first_token_only())
        await clock.advance_to(0.5)
        assert await consumer == 1
        await clock.advance_to(1.0)
    finally:
        task.cancel()
    assert recorder.aborted == [stream.request]
    assert engine.core.gauges() == Gauges(0, 0, 0, FAST.kv_budget_tokens)
    assert engine.core.idle


def test_refused_request_raises_at_open() -> None:
    engine = EngineLoop(FAST, ManualClock())
    with pytest.raises(RequestRejected, match="exceed the KV budget"):
        engine.open(FAST.kv_budget_tokens, 2)


async def test_a_slow_reader_still_sees_each_token_in_turn() -> None:
    """The engine may be several tokens ahead of the HTTP writer: items carry their own count."""
    clock = ManualClock()
    engine = EngineLoop(FAST, clock)
    task = asyncio.create_task(engine.run())
    try:
        stream = engine.open(10, 3)
        await clock.advance_to(1.0)  # all three decoded before anyone reads
        assert stream.request.generated == 3
        async with stream:
            counts = [count async for count in stream]
    finally:
        task.cancel()
    assert counts == [1, 2, 3]
