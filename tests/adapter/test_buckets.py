"""A histogram's cumulative buckets and their rates per bound (adapter/buckets.py), and the rules
reading the prefill-time and time-to-first-token histograms of an exposition."""

from __future__ import annotations

import math
import re

import pytest
from engine_fixtures import SGLANG, TGI, VLLM

from adapter.buckets import BucketError, BucketProblem, Buckets, counts_of, in_bound_order, rates_between
from adapter.exposition import Sample, parse_exposition
from adapter.presetread import bucket_counts, wanted_names
from adapter.presets import PRESETS, Kind, Signal, get_preset

PREFILL = get_preset("vllm").rule(Signal.PREFILL_TIME_BUCKET_RATE)
TTFT = Signal.TTFT_BUCKET_RATE
# engine -> its histogram of first token - the request's arrival at the server (engine_metrics.md)
TTFT_HISTOGRAMS = {"vllm": "vllm:time_to_first_token_seconds", "sglang": "sglang:time_to_first_token_seconds"}


def series(*pairs: tuple[str | None, float], **labels: str) -> list[Sample]:
    return [Sample({**labels, **({} if le is None else {"le": le})}, v) for le, v in pairs]


def test_bounds_come_in_numeric_order_as_spelled_and_data_parallel_series_add_up() -> None:
    # exposed out of order, spelled as the engine does; engine 1 saw 2 more prefills, 1 over 2.5 s
    zero = series(("2.5", 5.0), ("+Inf", 6.0), ("0.3", 1.0), engine="0")
    one = series(("0.3", 0.0), ("2.5", 1.0), ("+Inf", 2.0), engine="1")
    assert counts_of(zero + one) == Buckets(("0.3", "2.5", "+Inf"), (1.0, 6.0, 8.0))


@pytest.mark.parametrize(
    ("samples", "problem", "message"),
    [
        pytest.param(series((None, 1.0)), BucketProblem.LE_MISSING, "without an le", id="no le label"),
        pytest.param(
            series(("fast", 1.0), ("+Inf", 1.0)), BucketProblem.LE_NOT_NUMERIC, "'fast'", id="le not a number"
        ),
        pytest.param(series(("NaN", 1.0), ("+Inf", 1.0)), BucketProblem.LE_NOT_NUMERIC, "'NaN'", id="le NaN"),
        pytest.param(
            series(("-Inf", 0.0), ("+Inf", 1.0)), BucketProblem.LE_NOT_NUMERIC, "'-Inf'", id="le -Inf"
        ),
        pytest.param(
            series(("1", 1.0), ("1.0", 1.0), ("+Inf", 1.0)),
            BucketProblem.DUPLICATE_LE,
            "'1' and le='1.0'",
            id="one bound spelled twice",
        ),
        pytest.param(
            series(("0.3", math.nan), ("+Inf", 1.0)),
            BucketProblem.NOT_FINITE,
            "le='0.3' is nan",
            id="NaN count",
        ),
        pytest.param(
            series(("0.3", 1.0), ("+Inf", math.inf)), BucketProblem.NOT_FINITE, "inf", id="Inf count"
        ),
        pytest.param(series(("0.3", -2.0), ("+Inf", 1.0)), BucketProblem.NEGATIVE, "-2", id="negative count"),
        pytest.param(
            series(("0.3", 5.0), ("2.5", 3.0), ("+Inf", 6.0)),
            BucketProblem.NOT_CUMULATIVE,
            "count at le='2.5' (3) is below the count at le='0.3' (5)",
            id="a higher bound counting fewer",
        ),
        pytest.param(series(("0.3", 1.0), ("2.5", 2.0)), BucketProblem.NO_INF_BUCKET, "+Inf", id="no +Inf"),
        pytest.param(
            series(("0.3", 1.0), ("+Inf", 2.0), engine="0") + series(("0.5", 1.0), ("+Inf", 2.0), engine="1"),
            BucketProblem.LAYOUTS_DIFFER,
            "('0.3', '+Inf')",
            id="data-parallel engines with other bounds",
        ),
    ],
)
def test_what_is_no_histogram_is_refused_naming_the_problem(
    samples: list[Sample], problem: BucketProblem, message: str
) -> None:
    with pytest.raises(BucketError, match=re.escape(message)) as caught:
        counts_of(samples)
    assert caught.value.problem is problem


def test_rates_are_each_bounds_increase_per_second() -> None:
    before = Buckets(("0.3", "2.5", "+Inf"), (10.0, 14.0, 15.0))
    # 10 s later: 6 prefills within 0.3 s, 2 more within 2.5 s, 1 beyond
    after = Buckets(("0.3", "2.5", "+Inf"), (16.0, 22.0, 24.0))
    assert rates_between(before, 100.0, after, 110.0) == Buckets(("0.3", "2.5", "+Inf"), (0.6, 0.8, 0.9))
    assert rates_between(before, 100.0, before, 110.0) == Buckets(("0.3", "2.5", "+Inf"), (0.0, 0.0, 0.0))
    assert rates_between(before, 110.0, after, 110.0) is None  # no time passed


def test_a_drop_in_any_bound_is_a_restart_for_every_bound() -> None:
    """After a restart the new counts are all increase, bound by bound alike. Read bucket by
    bucket, the 0.3 s bucket (12 >= 10) would give (12 - 10) / 5 = 0.4 beside +Inf's 13 / 5 = 2.6:
    most of the new prefills seen as slow."""
    before = Buckets(("0.3", "+Inf"), (10.0, 20.0))
    after = Buckets(("0.3", "+Inf"), (12.0, 13.0))
    assert rates_between(before, 0.0, after, 5.0) == Buckets(("0.3", "+Inf"), (2.4, 2.6))
    relaid = Buckets(("0.5", "+Inf"), (30.0, 40.0))  # other bounds: another engine build, restarted
    assert rates_between(before, 0.0, relaid, 10.0) == Buckets(("0.5", "+Inf"), (3.0, 4.0))


def test_increases_that_are_not_cumulative_are_refused() -> None:
    """Each count grew, yet 5 new prefills under 0.3 s and only 1 in all: no histogram did that."""
    before = Buckets(("0.3", "+Inf"), (0.0, 10.0))
    with pytest.raises(
        BucketError, match=re.escape("increase at le='+Inf' (1) is below the increase at le='0.3' (5)")
    ) as caught:
        rates_between(before, 0.0, Buckets(("0.3", "+Inf"), (5.0, 11.0)), 10.0)
    assert caught.value.problem is BucketProblem.NOT_CUMULATIVE


def test_rates_equal_but_for_float_rounding_are_cumulative() -> None:
    # 0.1 + 0.2 summed in one order, 0.2 + 0.1 in the other: Prometheus adds a pod's series so
    low, high = 0.1 + 0.2 + 0.3, 0.3 + 0.2 + 0.1
    assert low > high
    assert in_bound_order([("0.3", low), ("+Inf", high)]).values == (low, high)


def test_the_vllm_rule_reads_the_prefill_histogram_of_an_exposition() -> None:
    """engine_fixtures.VLLM: engine 0 counts (70, 96, 99, 100), engine 1 (30, 40, 40, 41)."""
    samples = parse_exposition(VLLM, wanted_names(get_preset("vllm")))
    assert bucket_counts(PREFILL, samples) == Buckets(
        ("0.3", "2.5", "10.0", "+Inf"), (100.0, 136.0, 139.0, 141.0)
    )
    assert bucket_counts(PREFILL, parse_exposition(TGI)) is None  # not exposed: no data, not 0


def test_a_nan_bucket_is_refused_not_skipped() -> None:
    """The other rules skip NaN samples; a skipped bucket would be a bound missing unseen."""
    text = (
        'vllm:request_prefill_time_seconds_bucket{le="0.3"} 1.0\n'
        'vllm:request_prefill_time_seconds_bucket{le="2.5"} NaN\n'
        'vllm:request_prefill_time_seconds_bucket{le="+Inf"} 3.0\n'
    )
    with pytest.raises(BucketError) as caught:
        bucket_counts(PREFILL, parse_exposition(text))
    assert caught.value.problem is BucketProblem.NOT_FINITE


def test_the_prefill_signal_is_vllms_alone() -> None:
    """TGI times prefill per batch (tgi_batch_inference_duration{method="prefill"}), not per
    request; the other engines have no prefill-time histogram (../shared/engine_metrics.md)."""
    have = sorted(name for name, p in PRESETS.items() if Signal.PREFILL_TIME_BUCKET_RATE in p.rules)
    assert have == ["vllm"]


def test_the_ttft_signal_is_vllms_and_sglangs_alone() -> None:
    """TGI and llama.cpp have no time-to-first-token histogram; JetStream's
    jetstream_time_to_first_token starts at the prefill's dequeue, its wait left out; Triton's (and
    the TensorRT-LLM backend's) nv_inference_first_response_histogram_ms is opt-in and in
    milliseconds (docs/adapter-sources.md)."""
    have = {name: p.rules[TTFT] for name, p in PRESETS.items() if TTFT in p.rules}
    assert {
        name: (r.kind, [a.name for t in r.terms for a in t.alternatives]) for name, r in have.items()
    } == {
        engine: (Kind.BUCKET_RATE, [f"{histogram}_bucket"]) for engine, histogram in TTFT_HISTOGRAMS.items()
    }


def test_the_ttft_rules_read_each_engines_exposition() -> None:
    """engine_fixtures.VLLM: 12 of engine 0's 20 first tokens within 0.1 s; SGLANG: 300 first
    tokens over SGLang's 18 bounds, 12 within 0.1 s, 255 within 1 s."""
    assert bucket_counts(get_preset("vllm").rule(TTFT), parse_exposition(VLLM)) == Buckets(
        ("0.1", "+Inf"), (12.0, 20.0)
    )
    sglang = bucket_counts(get_preset("sglang").rule(TTFT), parse_exposition(SGLANG))
    assert sglang is not None and len(sglang.bounds) == 19
    assert sglang.bounds[:3] == ("0.1", "0.2", "0.4") and sglang.bounds[-2:] == ("400.0", "+Inf")
    counts = dict(zip(sglang.bounds, sglang.values, strict=True))
    assert (counts["0.1"], counts["1.0"], counts["+Inf"]) == (12.0, 255.0, 300.0)
    assert bucket_counts(get_preset("vllm").rule(TTFT), parse_exposition(SGLANG)) is None  # no data, not 0
