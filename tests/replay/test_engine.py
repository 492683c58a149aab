"""The engine model: hand-computed cases on the exact scheduler (replay/scheduler.py), and the fast
engine (replay/engine.py + replay/kernel/) against the exact one on random cases."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from replay.engine import Engine, RequestResults
from replay.kernel import layout
from replay.metrics.signals import (
    COLUMNS,
    GENERATION_TOKENS,
    OUTPUT_LENGTH,
    OUTPUT_LENGTH_BUCKETS,
    OUTPUT_SQUARES,
    OUTPUT_SUMS,
    PREFILL_TIME,
    PREFILL_TIME_BOUNDS,
    PREFILL_TIME_BUCKETS,
    PROMPT_SQUARES,
    PROMPT_TOKENS,
    REQUESTS,
)
from replay.profiles import LLAMA_8B_H100, LLAMA_70B_TP4_H100, EngineProfile
from replay.referencerun import ReferenceRun, reference_run
from replay.trace import PrefixBlocks, Trace

P70 = LLAMA_70B_TP4_H100
# every step 10 ms whatever it holds: times count steps
STEPS = EngineProfile(
    max_num_seqs=8,
    kv_budget_tokens=64,
    step_base_s=0.01,
    prefill_token_s=0.0,
    prefill_attention_s=0.0,
    decode_request_s=0.0,
    decode_context_s=0.0,
)


def pairs(chunk: int, computed: int) -> int:
    """Attention pairs of a prompt chunk after `computed` tokens."""
    return chunk * computed + chunk * (chunk + 1) // 2


def fast(
    profile: EngineProfile,
    arrival: list[float] | np.ndarray,
    inputs: list[int] | np.ndarray,
    outputs: list[int] | np.ndarray,
    *,
    replicas: int = 1,
    targets: np.ndarray | None = None,
    prefix: PrefixBlocks | None = None,
    interval_s: float = 5.0,
) -> RequestResults:
    """Drive the fast engine as the run loop does: each interval's arrivals, then run to its end."""
    trace = Trace(
        "t",
        np.asarray(arrival, dtype=np.float64),
        np.asarray(inputs, np.int64),
        np.asarray(outputs, np.int64),
        prefix,
    )
    engine = Engine(profile, trace)
    ready = np.arange(replicas, dtype=np.int64)
    sent, t = 0, 0.0
    while sent < len(trace) or engine.in_flight:
        end = t + interval_s
        upto = int(np.searchsorted(trace.arrival_s, end, side="left"))
        ids = np.arange(sent, upto, dtype=np.int64)
        engine.run(end, ids, ready, None if targets is None else targets[ids])
        sent, t = upto, end
        assert t < 1e6, "engine never drained"
    return engine.results()


def both(profile: EngineProfile, arrival: list[float], inputs: list[int], outputs: list[int]) -> ReferenceRun:
    """The exact run, after checking the fast engine gives the same first tokens and finishes."""
    ref = reference_run(profile, arrival, inputs, outputs)
    got = fast(profile, arrival, inputs, outputs)
    np.testing.assert_allclose(got.first_token_s, ref.first_token_s, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got.finished_s, ref.finished_s, rtol=0, atol=1e-9)
    assert got.preemptions.tolist() == ref.preemptions
    return ref


# --- hand-computed cases ---------------------------------------------------------------------------


def test_twenty_prompts_at_once_get_their_first_tokens_step_by_step() -> None:
    # 20 x 2,000-token prompts at t = 0 on reference-70b (budget 8,192 tokens a step): step 1
    # prefills four whole prompts and 192 tokens of the fifth; from step 2 on the finished ones
    # decode (one token each) beside the next prompts' chunks
    ref = both(P70, [0.0] * 20, [2_000] * 20, [100] * 20)
    full = pairs(2_000, 0)
    step1 = P70.step_s(8_192, 4 * full + pairs(192, 0), 0, 0)
    step2 = P70.step_s(8_188, pairs(1_808, 192) + 3 * full + pairs(380, 0), 4, 4 * 2_001)
    step3 = P70.step_s(8_184, pairs(1_620, 380) + 3 * full + pairs(564, 0), 8, 4 * 2_002 + 4 * 2_001)
    first = np.array(ref.first_token_s)
    np.testing.assert_allclose(first[:4], step1, rtol=1e-12)
    np.testing.assert_allclose(first[4:8], step1 + step2, rtol=1e-12)
    np.testing.assert_allclose(first[8:12], step1 + step2 + step3, rtol=1e-12)
    # ~0.54 s apart: 12 of the 20 within 2 s (the first 5 steps), the last at 2.67 s
    assert first[:4] == pytest.approx(0.544, abs=0.001)
    assert float(np.mean(first <= 2.0)) == 0.6
    assert first[-1] == pytest.approx(2.671, abs=0.001)


def test_one_request_alone_prefills_in_one_step_then_decodes_reading_its_context() -> None:
    ref = both(P70, [3.2], [1_600], [50])
    ttft = P70.step_s(1_600, pairs(1_600, 0), 0, 0)
    decode = sum(P70.step_s(0, 0, 1, 1_600 + g) for g in range(1, 50))
    assert ref.first_token_s[0] - 3.2 == pytest.approx(ttft, rel=1e-12)
    assert ref.finished_s[0] - 3.2 == pytest.approx(ttft + decode, rel=1e-12)


def test_a_long_prompt_is_chunked_and_decodes_go_on_beside_it() -> None:
    # a request decoding when a 20,000-token prompt arrives: the prompt takes 8,191 + 8,191 + 3,618
    # tokens in three steps (the budget minus the one decode), the decode gets a token every step
    p = P70
    ref = both(p, [0.0, 1.0], [100, 20_000], [400, 5])
    r0_first = p.step_s(100, pairs(100, 0), 0, 0)
    t, g = r0_first, 1
    while t + p.step_s(0, 0, 1, 100 + g) <= 1.0:  # alone until the prompt arrives
        t += p.step_s(0, 0, 1, 100 + g)
        g += 1
    t += p.step_s(0, 0, 1, 100 + g)  # the step running when it arrives
    g += 1
    for chunk, done in ((8_191, 0), (8_191, 8_191), (3_618, 16_382)):
        t += p.step_s(chunk, pairs(chunk, done), 1, 100 + g)
        g += 1
    assert ref.first_token_s[1] == pytest.approx(t, rel=1e-12)
    assert ref.first_token_s[1] - 1.0 > p.prefill_alone_s(20_000)  # it waited for the step in progress


def test_kv_exhaustion_preempts_the_newest_request_which_recomputes() -> None:
    # 4 KV blocks of 16 tokens, two requests of 16 + 40 tokens: both hold 2 blocks by step 17; at
    # step 18 both need a third, the newer is preempted (its 2 blocks freed) and the older goes on
    # alone; the newer comes back at step 41, after the older finished, recomputing 16 + 17 tokens
    # in one step, then decodes its 22 last tokens: finish at step 63
    ref = both(STEPS, [0.0, 0.0], [16, 16], [40, 40])
    assert ref.first_token_s == pytest.approx([0.01, 0.01])
    assert ref.finished_s == pytest.approx([0.40, 0.63])
    assert ref.preemptions == [0, 1]


@pytest.mark.parametrize("with_block_ids", [True, False])
def test_a_preempted_prompt_near_the_kv_budget_keeps_its_blocks_instead_of_thrashing(
    with_block_ids: bool,
) -> None:
    # 256 KV blocks: two decodes with 1,000-token prompts hold 126 blocks and more, so a 3,584-token
    # prompt (224 blocks) cannot complete beside them and is preempted once its chunks fill the rest.
    # Recomputed from scratch (prefix caching off, as vLLM then does) it is re-admitted at once and
    # preempted again a few chunks later, over and over while the decodes advance a few tokens a
    # cycle. With prefix caching its own full blocks stay cached (vLLM frees them with their hash):
    # it comes back only when they and its next chunk fit, so the decodes run on at full speed
    p = EngineProfile(
        max_num_seqs=64,
        max_num_batched_tokens=512,
        kv_budget_tokens=4_096,
        prefix_caching=True,
        step_base_s=0.01,
        prefill_token_s=1e-4,
        prefill_attention_s=0.0,
        decode_request_s=0.0,
        decode_context_s=0.0,
    )
    arrival, inputs, outputs = [0.0, 0.0, 1.0], [1_000, 1_000, 3_584], [600, 600, 1]
    blocks = [[1, 2], [3, 4], list(range(10, 17))] if with_block_ids else None
    prefix = None
    if blocks is not None:
        prefix = PrefixBlocks(np.array([0, 2, 4, 11]), np.array([x for b in blocks for x in b]))
    thrash = reference_run(replace(p, prefix_caching=False), arrival, inputs, outputs)
    ref = reference_run(p, arrival, inputs, outputs, prefix_blocks=blocks)
    got = fast(p, arrival, inputs, outputs, prefix=prefix)
    assert thrash.preemptions[2] > 100
    assert ref.preemptions == [0, 0, 2]
    assert got.preemptions.tolist() == ref.preemptions
    np.testing.assert_allclose(got.first_token_s, ref.first_token_s, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got.finished_s, ref.finished_s, rtol=0, atol=1e-9)
    # the decodes no longer wait for a prefill chunk every other step: 600 tokens at 10 ms a step
    # plus the prompts' chunks and the long prompt's last pass
    assert ref.finished_s[1] < 7.0 < 20.0 < thrash.finished_s[1]


def test_max_num_seqs_holds_requests_in_the_queue_fcfs() -> None:
    p = replace(STEPS, max_num_seqs=2, kv_budget_tokens=10_000)
    ref = both(p, [0.0] * 4, [1] * 4, [3] * 4)
    assert ref.finished_s == pytest.approx([0.03, 0.03, 0.06, 0.06])


def test_requests_longer_than_the_kv_cache_are_dropped() -> None:
    got = fast(STEPS, [0.0, 0.0], [50, 10], [15, 10])  # 65 > 64 tokens
    assert got.dropped.tolist() == [True, False]
    assert np.isnan(got.finished_s[0]) and got.replica[0] == -1
    assert got.finished_s[1] == pytest.approx(0.10)


def test_prefix_cache_hit_skips_the_shared_blocks() -> None:
    # two 2,048-token prompts with the same four 512-token blocks, the second after the first
    # finished: its prefill computes only the last token (vLLM always computes one)
    p = replace(P70, prefix_caching=True)
    prefix = PrefixBlocks(np.array([0, 4, 8]), np.array([7, 8, 9, 10, 7, 8, 9, 10]))
    got = fast(p, [0.0, 10.0], [2_048, 2_048], [2, 2], prefix=prefix)
    ref = reference_run(p, [0.0, 10.0], [2_048, 2_048], [2, 2], prefix_blocks=[[7, 8, 9, 10], [7, 8, 9, 10]])
    assert got.prefix_hit_tokens.tolist() == ref.prefix_hit_tokens == [0, 2_047]
    assert got.first_token_s[1] - 10.0 == pytest.approx(p.step_s(1, pairs(1, 2_047), 0, 0), rel=1e-12)
    np.testing.assert_allclose(got.finished_s, ref.finished_s, atol=1e-9)


def test_prefill_first_kinds_never_mix_prompts_and_decodes() -> None:
    # sglang: the second prompt's step holds no decode, so the first request's decode waits for it
    p = replace(P70, kind="sglang")
    ref = both(p, [0.0, 0.2], [100, 4_000], [50, 2])
    mixed = reference_run(P70, [0.0, 0.2], [100, 4_000], [50, 2])
    assert ref.finished_s[0] > mixed.finished_s[0]
    assert ref.first_token_s[1] < mixed.first_token_s[1]


# --- the fast engine against the exact one -------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "replicas", "routed"),
    [
        pytest.param(P70, 3, True, id="reference-70b, routed on arrival"),
        pytest.param(LLAMA_8B_H100, 2, False, id="8b, fixed targets"),
        pytest.param(
            replace(P70, kv_budget_tokens=60_000, max_num_seqs=64, max_num_batched_tokens=2_048),
            3,
            True,
            id="small KV and budget: preemptions, long chunked prefills",
        ),
        pytest.param(replace(P70, kind="sglang", kv_budget_tokens=60_000), 2, True, id="prefill-first"),
        pytest.param(replace(P70, block_size=1, kv_budget_tokens=30_000), 2, True, id="block size 1"),
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_fast_engine_equals_the_exact_one(
    profile: EngineProfile, replicas: int, routed: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    n = 250
    arrival = np.sort(rng.uniform(0, n / 6.0, n))
    inputs, outputs = rng.integers(1, 6_000, n), rng.integers(1, 400, n)
    targets = None if routed else rng.integers(0, replicas, n).astype(np.int64)
    got = fast(profile, arrival, inputs, outputs, replicas=replicas, targets=targets)
    ref = reference_run(profile, arrival, inputs, outputs, replicas=replicas, targets=targets)
    assert got.replica.tolist() == ref.replica
    np.testing.assert_allclose(got.admitted_s, ref.admitted_s, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got.first_token_s, ref.first_token_s, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got.finished_s, ref.finished_s, rtol=0, atol=1e-9)
    assert got.preemptions.tolist() == ref.preemptions
    assert np.isfinite(got.finished_s[~got.dropped]).all()


def test_routing_follows_the_ready_set_of_each_interval_to_the_least_loaded_replica() -> None:
    """The ready set changes between intervals (a replica leaves while it still serves, another
    comes back): each request goes to the ready replica with the fewest requests routed to it and
    not finished by its arrival, the oldest first on a tie, as the exact run's times count them."""
    rng = np.random.default_rng(3)
    n = 400
    arrival = np.sort(rng.uniform(0, 60.0, n))
    inputs, outputs = rng.integers(1, 4_000, n), rng.integers(1, 300, n)
    trace = Trace("t", arrival, inputs.astype(np.int64), outputs.astype(np.int64))
    engine = Engine(P70, trace)
    sets = ([0, 1, 2], [1, 2], [2, 0], [0, 1, 2], [1], [0, 1, 2, 3], [3, 1])
    ready_at: list[list[int]] = []
    sent, t, i = 0, 0.0, 0
    while sent < n or engine.in_flight:
        ready = sets[i % len(sets)]
        end = t + 2.0
        upto = int(np.searchsorted(arrival, end, side="left"))
        ready_at += [ready] * (upto - sent)
        engine.run(end, np.arange(sent, upto, dtype=np.int64), np.array(ready, dtype=np.int64))
        sent, t, i = upto, end, i + 1
    got = engine.results()
    ref = reference_run(P70, arrival, inputs, outputs, replicas=4, targets=got.replica.tolist())
    np.testing.assert_allclose(got.finished_s, ref.finished_s, rtol=0, atol=1e-9)
    for j in range(n):
        load = {r: 0 for r in ready_at[j]}
        for e in range(j):
            if got.replica[e] in load and ref.finished_s[e] > arrival[j]:
                load[int(got.replica[e])] += 1
        assert got.replica[j] == min(ready_at[j], key=lambda r: load[r]), j
    assert len(set(got.replica.tolist())) == 4


def test_a_call_through_several_scrapes_gives_each_one_the_rows_of_a_call_ending_there() -> None:
    """Engine.run with `stops` against one call per stop then pod_rows: the same rows, results and
    state, with stops on arrival instants, inside runs and between them."""
    rng = np.random.default_rng(4)
    n = 300
    arrival = np.sort(np.round(rng.uniform(0, 40.0, n), 1))  # many arrivals at the same instants
    inputs, outputs = rng.integers(1, 5_000, n), rng.integers(1, 300, n)
    trace = Trace("t", arrival, inputs.astype(np.int64), outputs.astype(np.int64))
    profile = replace(P70, kv_budget_tokens=20_000)  # preemptions too
    ready = np.arange(3, dtype=np.int64)
    one, many = Engine(profile, trace), Engine(profile, trace)
    t, sent = 0.0, 0
    while sent < n or one.in_flight:
        end = t + 7.0
        stops = np.array([t + 0.5, arrival[min(sent + 5, n - 1)], t + 3.3, t + 6.95])
        stops = np.unique(stops[(stops > t) & (stops < end)])
        upto = int(np.searchsorted(arrival, end, side="left"))
        ids = np.arange(sent, upto, dtype=np.int64)
        got = many.run(end, ids, ready, stops=stops)
        assert got is not None and got.shape == (len(stops), 3, COLUMNS)
        prev = t
        for k_stop, at in enumerate(stops):
            part = ids[(arrival[ids] >= prev) & (arrival[ids] < at)]
            one.run(at, part, ready)
            np.testing.assert_array_equal(got[k_stop], one.pod_rows(3, ready, np.zeros(0, dtype=np.int64)))
            prev = at
        one.run(end, ids[arrival[ids] >= prev], ready)
        np.testing.assert_array_equal(many.pod_rows(3, ready, ready[:0]), one.pod_rows(3, ready, ready[:0]))
        sent, t = upto, end
    a, b = one.results(), many.results()
    for name in ("replica", "admitted_s", "first_token_s", "finished_s", "preemptions"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.preemptions.sum() > 0


_STOPPED_N = 200  # requests over 30 s on two replicas, scraped every second for a minute


def _run_with_stops(
    rng: np.random.Generator, inputs: npt.NDArray[np.int64], outputs: npt.NDArray[np.int64]
) -> tuple[Engine, npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Two P70 replicas serving _STOPPED_N requests arriving uniformly over 30 s, scraped at every
    second up to 59 s: (the engine, its scrape rows per stop, the stops)."""
    arrival = np.sort(rng.uniform(0, 30.0, _STOPPED_N))
    engine = Engine(P70, Trace("t", arrival, inputs, outputs))
    stops = np.arange(1.0, 60.0, 1.0)
    rows = engine.run(60.0, np.arange(_STOPPED_N, dtype=np.int64), np.arange(2, dtype=np.int64), stops=stops)
    assert rows is not None
    return engine, rows, stops


def test_the_prompt_squares_counter_sums_the_square_of_every_prompt_finished() -> None:
    """The scrape's PROMPT_SQUARES column (an engine's prompt-length histogram, as its second
    moment, which vLLM observes as a request finishes: vllm/v1/metrics/loggers.py) counts x² for
    every request the REQUESTS column counts, at every stop; the prompt counter PROMPT_TOKENS counts
    x at the first token, so between the two a request is in the one and not yet in the other."""
    rng = np.random.default_rng(6)
    inputs = rng.integers(1, 20_000, _STOPPED_N).astype(np.int64)
    engine, rows, stops = _run_with_stops(rng, inputs, rng.integers(1, 50, _STOPPED_N).astype(np.int64))
    results = engine.results()
    first, finished = results.first_token_s, results.finished_s
    between = 0
    for k_stop, at in enumerate(stops):
        done = inputs[finished <= at]  # prompts counted once their request has finished
        assert rows[k_stop, :, REQUESTS].sum() == len(done)
        assert rows[k_stop, :, PROMPT_SQUARES].sum() == float((done * done).sum())
        assert rows[k_stop, :, PROMPT_TOKENS].sum() == inputs[first <= at].sum()
        between += int(((first <= at) & ~(finished <= at)).sum())
    assert between > 0  # some stops fell between a request's first token and its finish
    assert 0 < (finished <= stops[20]).sum() < (finished <= stops[-1]).sum()  # the stops saw counts grow


def test_the_output_squares_counter_sums_the_square_of_every_output_finished() -> None:
    """The scrape's OUTPUT_SQUARES and OUTPUT_SUMS columns (an engine's output-length histogram,
    which vLLM observes as a request finishes) count o² and o for every request the REQUESTS
    column counts, at every stop; the generation counter counts the tokens decoded, finished or not."""
    rng = np.random.default_rng(7)
    outputs = rng.integers(1, 400, _STOPPED_N).astype(np.int64)
    engine, rows, stops = _run_with_stops(rng, rng.integers(1, 4_000, _STOPPED_N).astype(np.int64), outputs)
    finished = engine.results().finished_s
    for k_stop, at in enumerate(stops):
        done = outputs[finished <= at]
        assert rows[k_stop, :, REQUESTS].sum() == len(done)
        assert rows[k_stop, :, OUTPUT_SQUARES].sum() == float((done * done).sum())
        assert rows[k_stop, :, OUTPUT_SUMS].sum() == float(done.sum())
        assert rows[k_stop, :, GENERATION_TOKENS].sum() >= float(done.sum())
    assert 0 < (finished <= stops[20]).sum() < (finished <= stops[-1]).sum()
    assert (rows[:, :, GENERATION_TOKENS].sum(axis=1) > rows[:, :, OUTPUT_SUMS].sum(axis=1)).any()


def finished_histogram(
    results: RequestResults,
    values: npt.NDArray[Any],
    bounds: Sequence[float],
    replicas: int,
    at: float = np.inf,
) -> npt.NDArray[np.int64]:
    """Per replica, the cumulative histogram (`le` buckets) of `values`, one per request, over the
    requests finished by `at` (vLLM V1 observes its per-request histograms at a request's finish):
    the count <= each bound, then all."""
    out = np.zeros((replicas, len(bounds) + 1), dtype=np.int64)
    for r in range(replicas):
        mine = values[(results.replica == r) & (results.finished_s <= at)]
        out[r] = [*((mine <= bound).sum() for bound in bounds), len(mine)]
    return out


def prefill_histogram(results: RequestResults, replicas: int, at: float = np.inf) -> npt.NDArray[np.int64]:
    """Per replica, vLLM's prefill-time histogram of the requests finished by `at`, from the
    requests' results: first token - first scheduled."""
    seconds = results.first_token_s - results.admitted_s
    return finished_histogram(results, seconds, PREFILL_TIME_BOUNDS, replicas, at)


def run_to_end(trace: Trace, kv_budget_tokens: int, replicas: int) -> tuple[npt.NDArray[Any], RequestResults]:
    """The trace on `replicas` replicas of P70 at a KV budget, fed in 5 s rounds until every request
    finished: the pods' rows at the end and the requests' results."""
    engine = Engine(replace(P70, kv_budget_tokens=kv_budget_tokens), trace)
    arrival = trace.arrival_s
    ready = np.arange(replicas, dtype=np.int64)
    t, sent = 0.0, 0
    while sent < len(arrival) or engine.in_flight:
        upto = int(np.searchsorted(arrival, t + 5.0, side="left"))
        engine.run(t + 5.0, np.arange(sent, upto, dtype=np.int64), ready)
        sent, t = upto, t + 5.0
    return engine.pod_rows(replicas, ready, ready[:0]), engine.results()


def test_the_prefill_time_buckets_count_each_replicas_prefill_times_by_bound() -> None:
    """At the end of a run, each pod's prefill-time columns (vllm:request_prefill_time_seconds's
    cumulative buckets) are the histogram of its requests' first token - first scheduled times,
    preempted prefills (which keep their first scheduled time) included."""
    rng = np.random.default_rng(11)
    n, replicas = 600, 3
    arrival = np.sort(rng.uniform(0, 60.0, n))
    inputs, outputs = rng.integers(1, 16_000, n), rng.integers(1, 400, n)
    trace = Trace("t", arrival, inputs.astype(np.int64), outputs.astype(np.int64))
    rows, results = run_to_end(trace, 40_000, replicas)
    want = prefill_histogram(results, replicas)
    np.testing.assert_array_equal(rows[:, PREFILL_TIME : PREFILL_TIME + PREFILL_TIME_BUCKETS], want)
    assert want[:, -1].sum() == n and results.preemptions.sum() > 0
    assert len(np.unique(want.sum(axis=0))) >= 12  # the prefill times span a dozen buckets


def test_the_prefill_time_buckets_count_the_requests_finished_by_each_scrape() -> None:
    """Scraped at every second of a run, each pod's prefill-time buckets count the requests
    finished by then (vLLM V1 observes the histogram at a request's finish), as the finished
    requests' counter does."""
    rng = np.random.default_rng(12)
    inputs = rng.integers(1, 6_000, _STOPPED_N).astype(np.int64)
    engine, rows, stops = _run_with_stops(rng, inputs, rng.integers(1, 50, _STOPPED_N).astype(np.int64))
    results = engine.results()
    for k_stop, at in enumerate(stops):
        want = prefill_histogram(results, 2, at)
        np.testing.assert_array_equal(
            rows[k_stop, :, PREFILL_TIME : PREFILL_TIME + PREFILL_TIME_BUCKETS], want
        )
        np.testing.assert_array_equal(
            rows[k_stop, :, PREFILL_TIME + PREFILL_TIME_BUCKETS - 1], rows[k_stop, :, REQUESTS]
        )
    final = prefill_histogram(results, 2)
    assert 0 < final[:, 0].sum() < final[:, -1].sum()  # some prefills took longer than the first bound
    # the first tokens run ahead of the finishes: a scrape that counted them would differ
    assert any((results.first_token_s <= at).sum() > (results.finished_s <= at).sum() for at in stops)


@pytest.mark.parametrize("short_output", [3, 4])
def test_a_request_finishing_at_a_steps_end_keeps_it_out_of_a_merged_head_step(short_output: int) -> None:
    """A prompt chunked over three 0.25 s steps, beside a short one prefilled in the first and then
    decoding. When the short one's third token, at the third step's end, finishes it, that step is
    not merged with the run after it (a scrape inside a merged head step sees the counters of
    before it, which holds for the finishes only because none happens there): a scrape inside it
    counts no prefill time, one at its end the short one's (0.25 s). With a fourth token to go,
    the same step is merged, and nothing finishes by its end."""
    p = replace(STEPS, step_base_s=0.25, max_num_batched_tokens=16, kv_budget_tokens=1_024)
    engine = Engine(p, Trace("head", np.zeros(2), np.array([4, 40]), np.array([short_output, 10])))
    one, none = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    engine.run(0.6, np.arange(2), targets=np.zeros(2, dtype=np.int64))
    merged = short_output == 4
    assert engine._ri[0, layout.R_HEAD] == merged  # the step [0.5, 0.75] is a merged head step
    assert engine._rf[0, layout.RF_T0 if merged else layout.RF_TEND] == 0.75
    buckets = slice(PREFILL_TIME, PREFILL_TIME + PREFILL_TIME_BUCKETS)
    outputs = slice(OUTPUT_LENGTH, OUTPUT_LENGTH + OUTPUT_LENGTH_BUCKETS)  # counted at the finish too
    inside = engine.pod_rows(1, one, none)[0]
    assert inside[buckets].tolist() == [0] * PREFILL_TIME_BUCKETS
    assert inside[outputs].tolist() == [0] * OUTPUT_LENGTH_BUCKETS
    engine.run(0.75, none)
    after = engine.pod_rows(1, one, none)[0]
    assert after[buckets].tolist() == [0 if merged else 1] * PREFILL_TIME_BUCKETS
    # the short one's 3 tokens: past le=1 and le=2, in le=5 and every bucket after it
    assert after[outputs].tolist() == ([0] * OUTPUT_LENGTH_BUCKETS if merged else [0, 0] + [1] * 16)
    results = engine.results()
    assert (results.first_token_s - results.admitted_s).tolist() == [0.25, 0.75]
    assert np.isnan(results.finished_s[0]) if merged else results.finished_s[0] == 0.75


def test_fast_engine_equals_the_exact_one_with_prefix_caching() -> None:
    rng = np.random.default_rng(5)
    n = 200
    arrival = np.sort(rng.uniform(0, 40, n))
    inputs = rng.integers(600, 5_000, n)
    # a few shared system prompts (blocks 0-3 of family f) then private blocks
    blocks = [
        [1000 * int(rng.integers(0, 4)) + j for j in range(int(rng.integers(0, 4)))]
        + [10_000 + 100 * i + j for j in range(int(inputs[i]) // 512)]
        for i in range(n)
    ]
    offsets = np.cumsum([0] + [len(b) for b in blocks])
    prefix = PrefixBlocks(offsets, np.array([x for b in blocks for x in b], dtype=np.int64))
    outputs = rng.integers(1, 200, n)
    p = replace(P70, prefix_caching=True, kv_budget_tokens=40_000)
    got = fast(p, arrival, inputs, outputs, replicas=2, prefix=prefix)
    ref = reference_run(p, arrival, inputs, outputs, replicas=2, prefix_blocks=blocks)
    assert got.prefix_hit_tokens.tolist() == ref.prefix_hit_tokens
    assert sum(ref.prefix_hit_tokens) > 0
    np.testing.assert_allclose(got.first_token_s, ref.first_token_s, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got.finished_s, ref.finished_s, rtol=0, atol=1e-9)


def test_scrape_counts_finished_requests_and_tokens_per_replica() -> None:
    trace = Trace("scrape", np.zeros(3), np.array([100, 200, 300]), np.array([5, 7, 9]))
    engine = Engine(P70, trace)
    engine.run(0.0, np.arange(3), targets=np.array([0, 1, 1]))
    first = engine.scrape(2)
    assert first.waiting.tolist() == [0, 0] and first.running.tolist() == [1, 2]
    assert first.requests_finished.tolist() == [0, 0] and first.kv_usage[1] > 0
    engine.run(10.0, np.zeros(0, dtype=np.int64))
    s = engine.scrape(2)
    assert s.requests_finished.tolist() == [1, 2]
    assert s.prompt_tokens.tolist() == [100, 500]
    assert s.generation_tokens.tolist() == [5, 16]
    assert s.running.tolist() == [0, 0] and s.kv_usage.tolist() == [0.0, 0.0]


def test_scrape_inside_a_run_counts_the_tokens_of_the_steps_done() -> None:
    trace = Trace("one", np.zeros(1), np.array([100]), np.array([1_000]))
    engine = Engine(P70, trace)
    ttft = P70.step_s(100, pairs(100, 0), 0, 0)
    engine.run(ttft + 0.5, np.arange(1), targets=np.zeros(1, dtype=np.int64))
    t, g = ttft, 1
    while t + P70.step_s(0, 0, 1, 100 + g) <= ttft + 0.5:
        t += P70.step_s(0, 0, 1, 100 + g)
        g += 1
    assert engine.scrape(1).generation_tokens.tolist() == [g]


def test_scrape_inside_the_admission_step_shows_the_counters_of_before_it() -> None:
    # the step that admits a request is planned with the run after it (one event): until it
    # ends, a scrape sees neither its first token nor the blocks the next step takes
    trace = Trace("one", np.zeros(1), np.array([100]), np.array([1_000]))
    engine = Engine(P70, trace)
    ttft = P70.step_s(100, pairs(100, 0), 0, 0)
    engine.run(ttft / 2, np.arange(1), targets=np.zeros(1, dtype=np.int64))
    inside = engine.scrape(1)
    assert inside.prompt_tokens.tolist() == [0] and inside.generation_tokens.tolist() == [0]
    assert inside.running.tolist() == [1] and inside.requests_finished.tolist() == [0]
    assert inside.kv_usage[0] * P70.kv_blocks == pytest.approx(-(-100 // P70.block_size))
    engine.run(ttft, np.zeros(0, dtype=np.int64))
    after = engine.scrape(1)
    assert after.prompt_tokens.tolist() == [100] and after.generation_tokens.tolist() == [1]
    assert engine.results().first_token_s[0] == ttft
