"""Σ x² per second from a histogram's buckets (adapter/histogram.py), the rule reading it and the
catalog refusing it on the Prometheus source."""

from __future__ import annotations

import numpy as np
import pytest

from adapter.catalogconfig import CatalogSettings
from adapter.exposition import Sample, parse_exposition
from adapter.histogram import Moments, bucket_moments, square_rate
from adapter.presetread import histogram_total, wanted_names
from adapter.presets import Signal, get_preset

# vLLM's prompt-length buckets: build_1_2_5_buckets(max_model_len), here up to 100,000
VLLM_BOUNDS = [m * 10**e for e in range(6) for m in (1, 2, 5) if m * 10**e <= 100_000]


def buckets(lengths: np.ndarray, bounds: list[int], **labels: str) -> list[Sample]:
    counts = [float((lengths <= b).sum()) for b in bounds] + [float(len(lengths))]
    les = [str(float(b)) for b in bounds] + ["+Inf"]
    return [Sample({**labels, "le": le}, c) for le, c in zip(les, counts, strict=True)]


def test_each_bucket_counts_the_mean_and_mean_square_of_its_span() -> None:
    got = bucket_moments([Sample({"le": "10"}, 2.0), Sample({"le": "100"}, 5.0), Sample({"le": "+Inf"}, 6.0)])
    assert got is not None
    # 2 in (0, 10]: 5 and 100 / 3 each; 3 in (10, 100]: 55 and (100 + 1,000 + 10,000) / 3 each;
    # 1 over: 100 and 100²
    assert got == pytest.approx((2 * 5 + 3 * 55 + 100, 2 * 100 / 3 + 3 * 11_100 / 3 + 10_000))


def test_series_apart_from_le_add_up_and_malformed_buckets_give_nothing() -> None:
    one = [Sample({"engine": "0", "le": "10"}, 1.0), Sample({"engine": "0", "le": "+Inf"}, 1.0)]
    two = [Sample({"engine": "1", "le": "+Inf"}, 0.0), Sample({"engine": "1", "le": "10"}, 0.0)]
    assert bucket_moments(one + two) == pytest.approx((5.0, 100 / 3))
    assert bucket_moments([]) is None
    assert bucket_moments([Sample({}, 1.0)]) is None  # no le
    assert bucket_moments([Sample({"le": "x"}, 1.0)]) is None
    assert bucket_moments([Sample({"le": "10"}, 5.0), Sample({"le": "+Inf"}, 4.0)]) is None  # not cumulative


def test_the_rate_is_the_windows_squares_at_its_exact_mean_and_a_drop_is_a_restart() -> None:
    before, after = Moments(100.0, 2_000.0, 90.0), Moments(300.0, 12_000.0, 240.0)
    # 10,000 estimated squares over 10 s, the window's Σ x 150 where the buckets said 200
    assert square_rate(before, 0.0, after, 10.0) == pytest.approx(1_000.0 * (150 / 200) ** 2)
    assert square_rate(after, 10.0, Moments(50.0, 900.0, 45.0), 15.0) == pytest.approx(180.0 * 0.9**2)
    assert square_rate(before, 0.0, before, 10.0) == 0.0  # nothing observed: no squares
    assert square_rate(before, 10.0, after, 10.0) is None


@pytest.mark.parametrize(("shape", "mean"), [(1.0, 1_200.0), (0.5, 12_000.0), (2.0, 3_000.0)])
def test_vllm_buckets_give_the_lengths_cv2_within_a_quarter(shape: float, mean: float) -> None:
    """Gamma prompt lengths (cv² 1 / shape) through vLLM's 1-2-5 buckets, counted from zero:
    the rate's Σ x² over the count, with the exact Σ x (the prompt counter, the _sum series),
    gives their cv² within 25 %: even spans within a bucket read 1.19 for 1.0 and 0.60 for 0.50
    (the squares alone, unscaled, read 1.74 and 0.93)."""
    x = np.maximum(1.0, np.random.default_rng(0).gamma(shape, mean / shape, 200_000)).round()
    estimated = bucket_moments(buckets(x, VLLM_BOUNDS))
    assert estimated is not None
    zero = Moments(0.0, 0.0, 0.0)
    rate = square_rate(zero, 0.0, Moments(*estimated, float(x.sum())), 1.0)
    assert rate is not None
    cv2 = rate * len(x) / x.sum() ** 2 - 1.0
    true = float((x * x).mean() / x.mean() ** 2 - 1.0)
    assert cv2 == pytest.approx(true, rel=0.25)


def test_the_vllm_rule_reads_the_prompt_histogram_of_an_exposition() -> None:
    rule = get_preset("vllm").rule(Signal.PROMPT_TOKEN_SQUARE_RATE)
    text = (
        "# TYPE vllm:request_prompt_tokens histogram\n"
        'vllm:request_prompt_tokens_bucket{engine="0",model_name="m",le="1000.0"} 3\n'
        'vllm:request_prompt_tokens_bucket{engine="0",model_name="m",le="+Inf"} 3\n'
        'vllm:request_prompt_tokens_sum{engine="0",model_name="m"} 1500\n'
        'vllm:request_prompt_tokens_count{engine="0",model_name="m"} 3\n'
    )
    samples = parse_exposition(text, wanted_names(get_preset("vllm")))
    assert histogram_total(rule, samples) == pytest.approx(Moments(3 * 500.0, 3 * 1e6 / 3, 1500.0))
    assert histogram_total(rule, parse_exposition("", wanted_names(get_preset("vllm")))) is None


@pytest.mark.parametrize(
    ("engine", "histogram"),
    [
        ("vllm", "vllm:request_generation_tokens"),
        ("tgi", "tgi_request_generated_tokens"),
        ("jetstream", "jetstream_request_output_length"),
    ],
)
def test_the_output_rule_reads_the_engines_output_length_histogram(engine: str, histogram: str) -> None:
    """output_token_square_rate: the same square rate over the output-length histogram (vLLM
    observes a request's generated tokens when it finishes)."""
    preset = get_preset(engine)
    rule = preset.rule(Signal.OUTPUT_TOKEN_SQUARE_RATE)
    text = (
        f"# TYPE {histogram} histogram\n"
        f'{histogram}_bucket{{model_name="m",le="1000.0"}} 4\n'
        f'{histogram}_bucket{{model_name="m",le="+Inf"}} 4\n'
        f'{histogram}_sum{{model_name="m"}} 1600\n'
        f'{histogram}_count{{model_name="m"}} 4\n'
    )
    samples = parse_exposition(text, wanted_names(preset))
    assert histogram_total(rule, samples) == pytest.approx(Moments(4 * 500.0, 4 * 1e6 / 3, 1600.0))


def test_the_catalog_refuses_it_on_the_prometheus_source() -> None:
    base = {"engine": "vllm", "prometheus": {"url": "http://prometheus:9090"}}
    metric = {"name": "infscale_prompt_token_square_rate", "signal": "prompt_token_square_rate"}
    with pytest.raises(ValueError, match="PromQL cannot: use source scrape"):
        CatalogSettings.model_validate({**base, "metrics": [{**metric, "source": "prometheus"}]})
    ok = CatalogSettings.model_validate({**base, "endpoints": ["http://e/metrics"], "metrics": [metric]})
    assert ok.metric_specs()[0].signal is Signal.PROMPT_TOKEN_SQUARE_RATE
