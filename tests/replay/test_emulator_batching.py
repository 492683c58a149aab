"""The emulator's engine: the pure scheduler against the replay's engine model, and the real-time loop
on a manual clock (no sleeping)."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from common.clock import ManualClock
from replay.emulate.batching import BatchCore, EngineLoop, Gauges, Request, RequestRejected, Work, run_virtual
from replay.engine import Engine
from replay.profiles import EngineProfile
from replay.trace import Trace

FAST = EngineProfile(
    max_running=4,
    kv_budget_tokens=10_000,
    prefill_tokens_per_s=100_000.0,
    decode_base_s=0.01,
    decode_per_running_s=0.001,
)


@pytest.mark.parametrize(
    ("profile", "input_tokens", "output_tokens"),
    [
        pytest.param(FAST, 1_000, 50, id="fast profile"),
        pytest.param(FAST, 1, 1, id="one token in, one out"),
        pytest.param(EngineProfile(), 2_000, 300, id="reference-70b engine"),
    ],
)
def test_a_request_alone_follows_the_offline_formulas(
    profile: EngineProfile, input_tokens: int, output_tokens: int
) -> None:
    (r,) = run_virtual(profile, [2.0], [input_tokens], [output_tokens])
    ttft = input_tokens / profile.prefill_tokens_per_s + profile.step_s(1)
    assert r.first_token_s - 2.0 == pytest.approx(ttft)
    assert r.finished_s - 2.0 == pytest.approx(ttft + (output_tokens - 1) * profile.step_s(1))
    assert r.admitted_s == 2.0 and r.generated == output_tokens


def test_max_running_holds_requests_in_the_queue_fcfs() -> None:
    profile = EngineProfile(
        max_running=2,
        kv_budget_tokens=10_000,
        prefill_tokens_per_s=1e9,
        decode_base_s=0.1,
        decode_per_running_s=0,
    )
    reqs = run_virtual(profile, [0.0, 0.0, 0.0, 0.0], [1, 1, 1, 1], [3, 3, 3, 3])
    admitted = [r.admitted_s for r in reqs]
    # two run for 3 steps of 0.1 s; the next two are admitted at the boundary their slots freed
    assert admitted[:2] == [0.0, 0.0]
    assert admitted[2:] == pytest.approx([0.3, 0.3])
    assert [r.finished_s for r in reqs] == pytest.approx([0.3, 0.3, 0.6, 0.6])


def test_kv_budget_admits_only_what_fits_and_refuses_the_impossible() -> None:
    profile = EngineProfile(
        max_running=8,
        kv_budget_tokens=100,
        prefill_tokens_per_s=1e9,
        decode_base_s=0.1,
        decode_per_running_s=0,
    )
    core = BatchCore(profile)
    a = core.submit(50, 10, 0.0)  # 60 tokens reserved
    b = core.submit(30, 20, 0.0)  # 50 more: over 100, waits
    with pytest.raises(RequestRejected, match="101 tokens exceed the KV budget of 100"):
        core.submit(100, 1, 0.0)
    work = core.next_work()
    assert work is not None and work.batch == (a,)
    assert core.gauges() == Gauges(waiting=1, running=1, kv_used_tokens=60, kv_budget_tokens=100)
    assert math.isnan(b.admitted_s)


@pytest.mark.parametrize(
    ("input_tokens", "output_tokens"),
    [pytest.param(0, 5, id="empty prompt"), pytest.param(5, 0, id="no output")],
)
def test_submit_refuses_empty_requests(input_tokens: int, output_tokens: int) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        BatchCore(FAST).submit(input_tokens, output_tokens, 0.0)


def test_abort_frees_the_slot_and_the_kv_reservation() -> None:
    core = BatchCore(FAST)
    a = core.submit(100, 10, 0.0)
    b = core.submit(100, 10, 0.0)
    c = core.submit(9_800, 10, 0.0)  # 220 + 9,810 tokens: over the 10,000 budget, waits
    work = core.next_work()
    assert work is not None
    core.finish(work)  # a prefilled
    assert core.gauges() == Gauges(1, 2, 220, FAST.kv_budget_tokens)
    core.abort(a)
    core.abort(b)  # still waiting for its prefill
    core.abort(c)  # still waiting for a slot
    assert core.gauges() == Gauges(0, 0, 0, FAST.kv_budget_tokens)
    assert core.idle and core.next_work() is None


def test_run_virtual_drops_what_can_never_fit() -> None:
    reqs = run_virtual(FAST, [0.0, 0.1], [20_000, 10], [10, 10])
    assert math.isnan(reqs[0].first_token_s) and reqs[0].id == -1
    assert math.isfinite(reqs[1].finished_s)


def _offline(profile: EngineProfile, trace: Trace, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """replay/engine.py with one replica, every arrival routed to it, ticking by dt."""
    engine = Engine(profile, trace)
    n, t, step, nxt = len(trace), 0.0, 0, 0
    while True:
        upto = int(np.searchsorted(trace.arrival_s, t + dt, side="left"))
        if upto > nxt:
            engine.submit(np.arange(nxt, upto), np.zeros(upto - nxt, dtype=np.int64))
            nxt = upto
        engine.advance(t, dt, 1)
        step += 1
        t = step * dt
        if nxt >= n and engine.in_flight == 0:
            break
    r = engine.results()
    return r.first_token_s - trace.arrival_s, r.finished_s - trace.arrival_s


@pytest.mark.parametrize(
    ("rate_per_s", "p50_tolerance"),
    [
        pytest.param(3.0, 0.01, id="light load"),
        pytest.param(8.0, 0.03, id="heavy load with queueing"),
    ],
)
def test_emulator_engine_agrees_with_the_offline_engine(rate_per_s: float, p50_tolerance: float) -> None:
    rng = np.random.default_rng(7)
    n = 120
    arrival = np.cumsum(rng.exponential(1 / rate_per_s, n))
    arrival -= arrival[0]
    trace = Trace("t", arrival, rng.integers(50, 3_000, n), rng.integers(1, 120, n))
    ttft_off, e2e_off = _offline(FAST, trace, dt=0.002)
    reqs = run_virtual(FAST, arrival.tolist(), trace.input_tokens.tolist(), trace.output_tokens.tolist())
    ttft_on = np.array([r.first_token_s for r in reqs]) - arrival
    e2e_on = np.array([r.finished_s for r in reqs]) - arrival
    step_max = FAST.step_s(FAST.max_running)
    # each request: at most a step of waiting for a step in progress, a tick of offline admission
    # delay, per request ahead of it in a queue; light load means few requests ahead
    if rate_per_s < 4:
        assert np.percentile(np.abs(ttft_on - ttft_off), 90) <= step_max + 0.002
    for on, off in ((ttft_on, ttft_off), (e2e_on, e2e_off)):
        assert np.percentile(on, 50) == pytest.approx(np.percentile(off, 50), rel=p50_tolerance, abs=step_max)
        assert np.percentile(on, 95) == pytest.approx(np.percentile(off, 95), rel=0.05, abs=step_max)


# --- real time, on a manual clock ----------------------------------------------------------------


@dataclass
class Recorder:
    works: list[Work] = field(default_factory=list)
    gauges: list[Gauges] = field(default_factory=list)
    aborted: list[Request] = field(default_factory=list)

    def on_submit(self, request: Request) -> None:
        pass

    def on_work(self, work: Work, emitted: object) -> None:
        self.works.append(work)

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
        await clock.advance_to(10.0 + 0.01 + FAST.step_s(1) / 2)
        assert seen == []  # prefill 10 ms, then half a step
        await clock.advance_to(11.0)
        await consumer
    finally:
        task.cancel()
    step = FAST.step_s(1)
    assert seen == [(k, pytest.approx(10.01 + k * step)) for k in (1, 2, 3)]
    assert [w.kind.value for w in recorder.works] == ["prefill", "decode", "decode", "decode"]
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
        engine.open(FAST.kv_budget_tokens, 1)


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
