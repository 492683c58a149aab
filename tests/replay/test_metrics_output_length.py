"""infscale_output_length_bucket_rate: vLLM's output-length histogram (vllm:request_generation_tokens),
its bounds against the emulator's and prometheus_client's, both paths' items against hand-computed
rates and against the engines' finished requests."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from replay.engine import Engine
from replay.metrics import PER_POD, MetricsSpec, PrometheusPath, build_pipeline
from replay.metrics.signals import (
    OUTPUT_LENGTH_BOUNDS,
    OUTPUT_LENGTH_BUCKETS,
    AggregationError,
    one_two_five,
)
from replay.profiles import LLAMA_70B_TP4_H100
from replay.trace import Trace
from tests.replay.test_metrics import bucket_rounds, direct_rounds, row, scrape

OUTPUT_LE = [
    "1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "1000.0", "2000.0", "5000.0",
    "10000.0", "20000.0", "50000.0", "100000.0", "200000.0", "+Inf",
]  # fmt: skip


def test_the_output_length_buckets_are_the_emulators_for_every_replay_scenario() -> None:
    """The emulator's vllm:request_generation_tokens has build_1_2_5_buckets(max_model_len) bounds,
    its max_model_len the KV cache: every replay scenario's engine gives the replay's bounds,
    written as prometheus_client writes them."""
    from replay.emulate.metrics import FLAVORS
    from replay.emulate.promclient import go_float
    from replay.emulate.stats import Hist
    from replay.profiles import SCENARIOS
    from replay.scheduler import context_limit

    contexts = {context_limit(s.engine) for s in SCENARIOS.values()}
    assert contexts == {440_000, 444_992}
    for context in contexts:
        assert tuple(FLAVORS["vllm"].buckets(context)[Hist.GENERATION_TOKENS]) == OUTPUT_LENGTH_BOUNDS
    assert [go_float(b) for b in (*OUTPUT_LENGTH_BOUNDS, float("inf"))] == OUTPUT_LE


@pytest.mark.parametrize(
    ("limit", "top"), [(1, 1.0), (4, 2.0), (5, 5.0), (499_999, 200_000.0), (500_000, 500_000.0)]
)
def test_one_two_five_is_vllms_build_1_2_5_buckets_up_to_and_with_its_limit(limit: int, top: float) -> None:
    """vLLM appends each of 1, 2, 5 x 10^k while it is <= max_value."""
    bounds = one_two_five(limit)
    assert bounds[-1] == top and bounds[:3] == (1.0, 2.0, 5.0)[: len(bounds)]
    assert all(b / a in (2.0, 2.5) for a, b in itertools.pairwise(bounds))


# --- both paths' items -------------------------------------------------------------------------------

OUTPUT_BUCKETS = "infscale_output_length_bucket_rate"


def test_direct_reads_each_output_length_bucket_as_a_rate_summed_over_pods() -> None:
    """One item per bucket, in bound order, labelled le: per bucket the two pods' increases between
    their rounds over the 5 s apart, summed; pod 1 restarted (its buckets dropped), so its whole
    new count is the increase, as the adapter reads a reset."""
    first0 = [0, 0, 0, 1, 1, 2, 4, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8]
    last0 = [0, 1, 1, 3, 5, 9, 14, 20, 24, 25, 25, 25, 25, 25, 25, 25, 25, 27]
    first1 = [3, 3, 3, 3, 3, 3, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9]
    last1 = [0, 0, 0, 0, 0, 1, 2, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5]
    p = bucket_rounds(OUTPUT_BUCKETS, "output_lengths", (first0, first1), (last0, last1))
    got = p.read(OUTPUT_BUCKETS, 8.0)
    assert got.values_milli is not None and [dict(item) for item in got.labels] == [
        {"le": le} for le in OUTPUT_LE
    ]
    # le=1: 0 + 0; le=50: (9 - 2) + 1 (reset); le=100: (14 - 4) + 2 (reset: 2 < 9); +Inf: 19 + 5
    assert got.values_milli[0] == 0 and got.values_milli[5] == 1_600 and got.values_milli[6] == 2_400
    assert got.values_milli[-1] == 4_800 and got.window_s == 5.0
    want = [
        (b0 - a0 + (b1 - a1 if b1 >= a1 else b1)) / 5
        for a0, b0, a1, b1 in zip(first0, last0, first1, last1, strict=True)
    ]
    assert [v / 1000 for v in got.values_milli] == pytest.approx(want, abs=1e-3)
    with pytest.raises(AggregationError, match="one item per bucket"):
        p.read(OUTPUT_BUCKETS, 8.0, PER_POD)


def test_prometheus_reads_each_output_length_bucket_as_promqls_rate_summed_over_pods() -> None:
    """Per bucket, rate(bucket[120s]) of each pod, summed: two samples 30 s apart read at the
    second. Pod 0 is new (from 0): each increase extrapolated to its zero point only, / 120; pod 1's
    first samples are at least half their increase up: extrapolated by half an interval before the
    first, increase x 45 / 30 / 120 = increase / 80."""
    spec = MetricsSpec(
        path="prometheus",
        prometheus=PrometheusPath(scrape_interval_s=30.0, offset_step_s=0.0, rate_window_s=120.0),
    )
    p = build_pipeline(spec, sync_period_s=15.0)
    increase0 = [0, 0, 6, 12, 24, 48, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 72]
    first1 = [100 + 10 * k for k in range(OUTPUT_LENGTH_BUCKETS)]
    increase1 = [0, 8, 8, 16, 16, 40, 80, 80, 80, 80, 80, 80, 80, 80, 80, 80, 80, 160]
    p.scrape(scrape(7.5, {0: row(), 1: row(output_lengths=first1)}))
    p.scrape(
        scrape(
            37.5,
            {
                0: row(output_lengths=increase0),
                1: row(output_lengths=[a + d for a, d in zip(first1, increase1, strict=True)]),
            },
        )
    )
    got = p.read(OUTPUT_BUCKETS, 37.5)
    assert got.values_milli is not None and [dict(item) for item in got.labels] == [
        {"le": le} for le in OUTPUT_LE
    ]
    # le=2: 0 / 120 + 8 / 80; le=100: 60 / 120 + 80 / 80; +Inf: 72 / 120 + 160 / 80
    assert got.values_milli[1] == 100 and got.values_milli[6] == 1_500 and got.values_milli[-1] == 2_600
    want = [d0 / 120 + d1 / 80 for d0, d1 in zip(increase0, increase1, strict=True)]
    assert [v / 1000 for v in got.values_milli] == pytest.approx(want, abs=1e-3)
    assert got.window_s == 120.0


def test_direct_reads_the_engines_finished_outputs_per_bound_over_a_round() -> None:
    """From the engines through the direct path: per bound, the requests that finished between two
    rounds 10 s apart with an output <= it, per second (from the requests' results)."""
    rng = np.random.default_rng(23)
    n = 300
    arrival = np.sort(rng.uniform(0, 20.0, n))
    outputs = rng.integers(1, 700, n).astype(np.int64)
    engine = Engine(
        LLAMA_70B_TP4_H100, Trace("t", arrival, rng.integers(1, 3_000, n).astype(np.int64), outputs)
    )
    got = direct_rounds(engine, n).read(OUTPUT_BUCKETS, 23.0)
    finished = engine.results().finished_s
    between = outputs[(finished > 12.5) & (finished <= 22.5)]
    want = [(between <= float(le)).sum() / 10 for le in OUTPUT_LE[:-1]] + [len(between) / 10]
    assert got.values_milli is not None and [v / 1000 for v in got.values_milli] == pytest.approx(
        want, abs=1e-3
    )
    assert len(between) > 20 and 0 < want[5] < want[7] < want[-1]  # outputs on both sides of 50 and 200
