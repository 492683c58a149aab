"""Engine presets: each engine's exposition gives the normalized signals the mapping table promises."""

from __future__ import annotations

import pytest
from engine_fixtures import EPP, EPP_V0, JETSTREAM, LLAMACPP, SGLANG, TGI, TRITON, TRTLLM, VLLM, VLLM_V0

from adapter.exposition import parse_exposition
from adapter.presetread import (
    bucket_counts,
    counter_rate,
    counter_total,
    gauge_value,
    histogram_total,
    is_counter,
    model_of,
    wanted_names,
)
from adapter.presets import PRESETS, Kind, Signal, get_preset

Q, B, KV = Signal.QUEUE_SIZE, Signal.BATCH_SIZE, Signal.KV_CACHE_USAGE


@pytest.mark.parametrize(
    ("engine", "text", "signal", "expected"),
    [
        pytest.param("vllm", VLLM, Q, 6.0, id="vllm queue sums data-parallel engines"),
        pytest.param("vllm", VLLM, B, 8.0, id="vllm batch sums engines"),
        pytest.param("vllm", VLLM, KV, 0.6, id="vllm kv cache averages engines"),
        pytest.param("vllm", VLLM_V0, KV, 0.25, id="vllm before 0.9: gpu_cache_usage_perc"),
        pytest.param("vllm", VLLM_V0, Q, 7.0, id="vllm V0 queue"),
        pytest.param("tgi", TGI, Q, 3.0, id="tgi queue"),
        pytest.param("tgi", TGI, B, 6.0, id="tgi batch"),
        pytest.param("tgi", TGI, KV, 0.25, id="tgi kv = current max tokens / max total tokens"),
        pytest.param("sglang", SGLANG, Q, 5.0, id="sglang queue"),
        pytest.param("sglang", SGLANG, B, 9.0, id="sglang running"),
        pytest.param("sglang", SGLANG, KV, 0.42, id="sglang token usage"),
        pytest.param("triton", TRITON, Q, 8.0, id="triton pending summed over models"),
        pytest.param("tensorrt-llm", TRTLLM, Q, 1.0, id="trt-llm request_type=waiting only"),
        pytest.param("tensorrt-llm", TRTLLM, B, 12.0, id="trt-llm request_type=active only"),
        pytest.param("tensorrt-llm", TRTLLM, KV, 0.3, id="trt-llm kv block fraction"),
        pytest.param("jetstream", JETSTREAM, Q, 7.0, id="jetstream prefill + generate backlogs"),
        pytest.param("jetstream", JETSTREAM, Signal.SLOT_USAGE, 0.375, id="jetstream slots averaged"),
        pytest.param("llama.cpp", LLAMACPP, Q, 2.0, id="llama.cpp deferred"),
        pytest.param("llama.cpp", LLAMACPP, B, 2.0, id="llama.cpp processing"),
        pytest.param("llama.cpp", LLAMACPP, KV, None, id="llama.cpp kv gone from new builds: no data"),
        pytest.param("tgi", VLLM, Q, None, id="wrong engine's text: no data, not 0"),
        pytest.param("vllm", VLLM, Signal.INFLIGHT, 14.0, id="vllm inflight = waiting 6 + running 8"),
        pytest.param("tgi", TGI, Signal.INFLIGHT, 9.0, id="tgi inflight = queue 3 + batch 6"),
        pytest.param("tensorrt-llm", TRTLLM, Signal.INFLIGHT, 13.0, id="trt-llm inflight = waiting + active"),
    ],
)
def test_gauge_signals(engine: str, text: str, signal: Signal, expected: float | None) -> None:
    got = gauge_value(get_preset(engine).rule(signal), parse_exposition(text))
    assert got == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize("text", [VLLM, VLLM_V0, TGI, SGLANG, TRITON, TRTLLM, JETSTREAM, LLAMACPP, EPP])
@pytest.mark.parametrize("engine", sorted(PRESETS))
def test_line_filter_changes_nothing_the_preset_reads(engine: str, text: str) -> None:
    preset = PRESETS[engine]
    full, filtered = parse_exposition(text), parse_exposition(text, wanted_names(preset))
    for rule in preset.rules.values():
        read = {
            Kind.RATE: counter_total,
            Kind.SQUARE_RATE: histogram_total,
            Kind.BUCKET_RATE: bucket_counts,
        }.get(rule.kind, gauge_value)
        assert read(rule, filtered) == read(rule, full)
    assert model_of(preset, filtered) == model_of(preset, full)


@pytest.mark.parametrize(
    ("engine", "text", "signal", "expected"),
    [
        pytest.param("vllm", VLLM, Signal.REQUEST_RATE, 100.0, id="vllm successes over finished_reason"),
        pytest.param("vllm", VLLM, Signal.GENERATION_TOKEN_RATE, 5000.0, id="vllm generation tokens"),
        pytest.param("tgi", TGI, Signal.REQUEST_RATE, 41.0, id="tgi counter without _total"),
        pytest.param("tgi", TGI, Signal.GENERATION_TOKEN_RATE, 8200.0, id="tgi histogram _sum"),
        pytest.param("sglang", SGLANG, Signal.REQUEST_RATE, 300.0, id="sglang requests"),
        pytest.param("triton", TRITON, Signal.REQUEST_RATE, 120.0, id="triton successes"),
        pytest.param("llama.cpp", LLAMACPP, Signal.GENERATION_TOKEN_RATE, 900.0, id="llama.cpp predicted"),
        pytest.param("vllm", VLLM_V0, Signal.REQUEST_RATE, None, id="counter absent: no data"),
        pytest.param(
            "gateway-api-inference-extension",
            EPP,
            Signal.ARRIVAL_RATE,
            100.0,
            id="gateway's requests summed over target models",
        ),
        pytest.param(
            "gateway-api-inference-extension",
            EPP_V0,
            Signal.ARRIVAL_RATE,
            42.0,
            id="gateway before v1.0: inference_model_request_total",
        ),
        pytest.param("gateway-api-inference-extension", VLLM, Signal.ARRIVAL_RATE, None, id="engine text"),
    ],
)
def test_counter_totals(engine: str, text: str, signal: Signal, expected: float | None) -> None:
    assert counter_total(get_preset(engine).rule(signal), parse_exposition(text)) == expected


@pytest.mark.parametrize(
    ("previous", "previous_t", "current", "current_t", "expected"),
    [
        pytest.param(100.0, 0.0, 160.0, 10.0, 6.0, id="steady increase"),
        pytest.param(100.0, 0.0, 30.0, 10.0, 3.0, id="reset: the new value is all increase"),
        pytest.param(100.0, 0.0, 100.0, 5.0, 0.0, id="idle engine: a real 0"),
        pytest.param(100.0, 5.0, 120.0, 5.0, None, id="no time passed"),
        pytest.param(100.0, 6.0, 120.0, 5.0, None, id="clock went back"),
    ],
)
def test_counter_rate(
    previous: float, previous_t: float, current: float, current_t: float, expected: float | None
) -> None:
    assert counter_rate(previous, previous_t, current, current_t) == expected


def test_new_kv_name_wins_over_old_when_both_are_exposed() -> None:
    text = (
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.9\n'
        'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.1\n'
    )
    assert gauge_value(get_preset("vllm").rule(KV), parse_exposition(text)) == 0.9


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "tgi_batch_current_max_tokens 10\ntgi_batch_max_total_tokens 0\n", None, id="zero capacity"
        ),
        pytest.param("tgi_batch_current_max_tokens 10\n", None, id="no denominator"),
        pytest.param("tgi_batch_max_total_tokens 10\n", None, id="no numerator"),
    ],
)
def test_ratio_without_a_usable_denominator_is_no_data(text: str, expected: float | None) -> None:
    assert gauge_value(get_preset("tgi").rule(KV), parse_exposition(text)) is expected


def test_nan_samples_are_no_data() -> None:
    text = 'vllm:num_requests_waiting{engine="0",model_name="m"} NaN\n'
    assert gauge_value(get_preset("vllm").rule(Q), parse_exposition(text)) is None


@pytest.mark.parametrize(
    ("engine", "text", "expected"),
    [
        pytest.param("vllm", VLLM, "meta-llama/Llama-3.1-8B-Instruct", id="vllm model_name"),
        pytest.param("tensorrt-llm", TRTLLM, "tensorrt_llm", id="triton model label"),
        pytest.param("triton", TRITON, None, id="two models in one pod: none served"),
        pytest.param("tgi", TGI, None, id="tgi has no model label"),
    ],
)
def test_model_of(engine: str, text: str, expected: str | None) -> None:
    assert model_of(get_preset(engine), parse_exposition(text)) == expected


@pytest.mark.parametrize("engine", ["triton", "jetstream"])
def test_inflight_only_where_both_queue_and_batch_exist(engine: str) -> None:
    assert Signal.INFLIGHT not in get_preset(engine).rules


def test_jetstream_serves_no_kv_cache_usage() -> None:
    """Its kv_cache_utilization_perc is the decode slots in use x 100 / the slots (upstream's
    orchestrator), not the KV cache: a metric asking for kv_cache_usage is told so, by name."""
    refused = r"engine 'jetstream' has no signal 'kv_cache_usage' \(it has: .*slot_usage"
    with pytest.raises(KeyError, match=refused):
        get_preset("jetstream").rule(KV)


def test_unknown_engine_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown engine 'vlm'; known engines: .*vllm"):
        get_preset("vlm")


def test_missing_signal_names_engine_and_alternatives() -> None:
    with pytest.raises(KeyError, match=r"engine 'triton' has no signal 'batch_size'"):
        get_preset("triton").rule(B)


def test_gauge_value_refuses_rate_rules() -> None:
    with pytest.raises(ValueError, match="two scrapes"):
        gauge_value(get_preset("vllm").rule(Signal.REQUEST_RATE), {})


@pytest.mark.parametrize("engine", sorted(PRESETS))
def test_every_engine_has_a_queue_and_well_formed_rules(engine: str) -> None:
    preset = PRESETS[engine]
    # the quick start's first metric works for every engine; a gateway serves its arrivals
    assert Q in preset.rules or set(preset.rules) == {Signal.ARRIVAL_RATE}
    for signal, rule in preset.rules.items():
        assert rule.terms and all(t.alternatives for t in rule.terms), signal
        assert rule.kind is not Kind.RATIO or len(rule.terms) == 2, signal
        assert is_counter(rule) == signal.value.endswith("_rate"), signal
