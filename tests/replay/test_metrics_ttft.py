"""infscale_ttft_bucket_rate: vLLM's time-to-first-token histogram (vllm:time_to_first_token_seconds),
its bounds against the emulator's and prometheus_client's, the direct path's items against
hand-computed rates and against the engines' first tokens."""

from __future__ import annotations

import numpy as np
import pytest

from replay.engine import Engine
from replay.metrics import PER_POD
from replay.metrics.signals import TTFT_BOUNDS, TTFT_BUCKETS, AggregationError
from replay.profiles import LLAMA_70B_TP4_H100
from replay.trace import Trace
from tests.replay.test_metrics import bucket_rounds, direct_rounds

TTFT_METRIC = "infscale_ttft_bucket_rate"
TTFT_LE = [
    "0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75", "1.0", "2.5",
    "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "160.0", "640.0", "2560.0", "+Inf",
]  # fmt: skip


def test_the_ttft_buckets_are_the_emulators_written_as_prometheus_client_writes_them() -> None:
    from replay.emulate.metrics import FLAVORS
    from replay.emulate.promclient import go_float
    from replay.emulate.stats import Hist

    assert tuple(FLAVORS["vllm"].buckets(440_000)[Hist.TTFT]) == TTFT_BOUNDS
    assert [go_float(b) for b in (*TTFT_BOUNDS, float("inf"))] == TTFT_LE
    assert len(TTFT_LE) == TTFT_BUCKETS


def test_direct_reads_each_ttft_bucket_as_a_rate_summed_over_pods() -> None:
    """One item per bucket, in bound order, labelled le: per bucket the two pods' increases between
    their rounds over the 5 s apart, summed."""
    first0 = [0] * 8 + [1, 2, 4, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 7]
    last0 = [0] * 7 + [1, 4, 8, 12, 14, 16, 16, 17, 17, 17, 17, 17, 17, 17, 17, 19]
    first1 = [0] * 9 + [3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3]
    last1 = [0] * 9 + [3, 5, 9, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 13]
    p = bucket_rounds(TTFT_METRIC, "ttft", (first0, first1), (last0, last1))
    got = p.read(TTFT_METRIC, 8.0)
    assert got.values_milli is not None and [dict(item) for item in got.labels] == [
        {"le": le} for le in TTFT_LE
    ]
    # le=0.1: 1 / 5; le=1.0: (14 - 5 + 9 - 3) / 5; +Inf: (19 - 7 + 13 - 3) / 5
    assert got.values_milli[7] == 200 and got.values_milli[11] == 3_000 and got.values_milli[-1] == 4_400
    want = [(b0 - a0 + b1 - a1) / 5 for a0, b0, a1, b1 in zip(first0, last0, first1, last1, strict=True)]
    assert [v / 1000 for v in got.values_milli] == pytest.approx(want, abs=1e-3)
    assert got.window_s == 5.0
    with pytest.raises(AggregationError, match="one item per bucket"):
        p.read(TTFT_METRIC, 8.0, PER_POD)


def test_direct_reads_the_engines_first_tokens_per_bound_over_a_round() -> None:
    """From the engines through the direct path: per bound, the requests whose first token came
    between two rounds 10 s apart, first token - arrival (routed as they arrive) <= it, per second
    (from the requests' results), whether they finished or not."""
    rng = np.random.default_rng(24)
    n = 200
    arrival = np.sort(rng.uniform(0, 20.0, n))
    inputs = rng.integers(1, 4_000, n).astype(np.int64)
    outputs = rng.integers(1, 300, n).astype(np.int64)
    engine = Engine(LLAMA_70B_TP4_H100, Trace("t", arrival, inputs, outputs))
    got = direct_rounds(engine, n).read(TTFT_METRIC, 23.0)
    results = engine.results()
    first = results.first_token_s
    between = (first > 12.5) & (first <= 22.5)
    seconds = first[between] - arrival[between]
    want = [(seconds <= float(le)).sum() / 10 for le in TTFT_LE[:-1]] + [len(seconds) / 10]
    assert got.values_milli is not None and [v / 1000 for v in got.values_milli] == pytest.approx(
        want, abs=1e-3
    )
    # first tokens on both sides of 0.1 s and of 1 s
    assert len(seconds) > 50 and 0 < want[7] < want[11] < want[-1]
    assert (between & ~(results.finished_s <= 22.5)).any()  # counted at the first token, not the finish
