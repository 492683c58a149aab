"""The engines' output-length histogram (vllm:request_generation_tokens, observed at a request's
finish): each pod's cumulative buckets against the requests' results, at the end of a run and at
every scrape."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from replay.engine import Engine, RequestResults
from replay.metrics.signals import OUTPUT_LENGTH, OUTPUT_LENGTH_BUCKETS, REQUESTS
from replay.trace import Trace
from tests.replay.test_engine import _STOPPED_N, P70, _run_with_stops, finished_histogram, run_to_end

BUCKETS = slice(OUTPUT_LENGTH, OUTPUT_LENGTH + OUTPUT_LENGTH_BUCKETS)
# vLLM's build_1_2_5_buckets up to the scenarios' context (440,000 tokens), written out
BOUNDS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000]


def output_histogram(
    results: RequestResults, outputs: npt.NDArray[np.int64], replicas: int, at: float = np.inf
) -> npt.NDArray[np.int64]:
    """Per replica, the output lengths of the requests finished by `at`, from the requests'
    results: the count of outputs <= each bound, then all."""
    return finished_histogram(results, outputs, BOUNDS, replicas, at)


def test_the_output_length_buckets_count_each_replicas_finished_outputs_by_bound() -> None:
    """At the end of a run, each pod's output-length columns are the histogram of its requests'
    output lengths, preempted requests (which recompute, then finish) included; an output equal
    to a bound is in that bound's bucket (le)."""
    rng = np.random.default_rng(21)
    n, replicas = 600, 3
    arrival = np.sort(rng.uniform(0, 60.0, n))
    small = np.array([b for b in BOUNDS if b <= 2_000])
    near_bounds = rng.choice(small, n) + rng.integers(0, 2, n)  # on a bound, or just past it
    outputs = np.where(rng.random(n) < 0.5, near_bounds, rng.integers(1, 3_000, n))
    inputs = rng.integers(1, 8_000, n)
    trace = Trace("t", arrival, inputs.astype(np.int64), outputs.astype(np.int64))
    rows, results = run_to_end(trace, 40_000, replicas)
    want = output_histogram(results, outputs, replicas)
    np.testing.assert_array_equal(rows[:, BUCKETS], want)
    assert want[:, -1].sum() == n and results.preemptions.sum() > 0
    assert len(np.unique(want.sum(axis=0))) >= 12  # the outputs span a dozen buckets
    on_bound = np.isin(outputs, small)
    assert on_bound.sum() > 100 and (~on_bound).sum() > 100


def test_the_output_length_buckets_count_the_requests_finished_by_each_scrape() -> None:
    """Scraped at every second of a run, each pod's output-length buckets count the requests
    finished by then, as the finished requests' counter does: not the tokens decoded so far."""
    rng = np.random.default_rng(22)
    outputs = rng.integers(1, 400, _STOPPED_N).astype(np.int64)
    engine, rows, stops = _run_with_stops(rng, rng.integers(1, 4_000, _STOPPED_N).astype(np.int64), outputs)
    results = engine.results()
    for k_stop, at in enumerate(stops):
        np.testing.assert_array_equal(rows[k_stop, :, BUCKETS], output_histogram(results, outputs, 2, at))
        np.testing.assert_array_equal(rows[k_stop, :, BUCKETS.stop - 1], rows[k_stop, :, REQUESTS])
    final = output_histogram(results, outputs, 2)
    assert 0 < final[:, 5].sum() < final[:, -1].sum()  # outputs on both sides of 50 tokens
    assert any((results.first_token_s <= at).sum() > (results.finished_s <= at).sum() for at in stops)


def test_an_output_beyond_the_last_bound_counts_in_inf_only() -> None:
    """An output of 200,001 tokens (the KV holds 440,000) is past le=200000: +Inf alone counts it;
    one of 200,000 is in every bucket from le=200000 on."""
    trace = Trace("long", np.array([0.0, 0.0]), np.array([10, 10]), np.array([200_001, 200_000]))
    engine = Engine(P70, trace)
    one, none = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    engine.run(1e6, np.arange(2), targets=np.array([0, 0], dtype=np.int64))
    assert not engine.in_flight
    assert engine.pod_rows(1, one, none)[0, BUCKETS].tolist() == [0] * (len(BOUNDS) - 1) + [1, 2]
