"""The real traces in ../shared/traces (when present): counts, spans and means stated in its README."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from replay.traces import load_trace

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} is absent")


@pytest.mark.parametrize(
    ("file", "fmt", "rows", "span_s", "input_mean", "output_mean"),
    [
        pytest.param("azure_llm_2023_code.csv", "azure", 8_819, 3_435.9, 2_047.8, 27.9, id="azure code"),
        pytest.param("azure_llm_2023_conv.csv", "azure", 19_366, 3_501.7, 1_154.7, 211.1, id="azure conv"),
        pytest.param(
            "mooncake_fast25_synthetic.jsonl", "mooncake", 3_993, 1_022.0, 15_325.5, 149.1, id="mooncake"
        ),
    ],
)
def test_request_traces_match_the_readme(
    file: str, fmt: str, rows: int, span_s: float, input_mean: float, output_mean: float
) -> None:
    trace = load_trace(SHARED / file, fmt)
    assert len(trace) == rows
    assert trace.duration_s == pytest.approx(span_s, abs=0.05)
    assert trace.input_tokens.mean() == pytest.approx(input_mean, abs=0.05)
    assert trace.output_tokens.mean() == pytest.approx(output_mean, abs=0.05)


def test_mooncake_through_the_generic_jsonl_reader_is_the_same() -> None:
    direct = load_trace(SHARED / "mooncake_fast25_synthetic.jsonl", "mooncake")
    mapped = load_trace(
        SHARED / "mooncake_fast25_synthetic.jsonl",
        "jsonl",
        arrival_column="timestamp",
        input_column="input_length",
        output_column="output_length",
        time_unit="ms",
    )
    assert np.array_equal(direct.arrival_s, mapped.arrival_s)
    assert np.array_equal(direct.input_tokens, mapped.input_tokens)


def test_azure_code_per_minute_counts_match_the_readme() -> None:
    trace = load_trace(SHARED / "azure_llm_2023_code.csv", "azure")
    counts = np.bincount((trace.arrival_s // 60).astype(np.int64))
    assert counts[:10].tolist() == [63, 0, 0, 531, 187, 130, 15, 42, 38, 476]


def test_servegen_deepseek_day_has_every_request_and_the_readme_lengths() -> None:
    trace = load_trace(SHARED / "servegen_reason_deepseek-r1.tar.gz", "servegen", seed=0)
    assert len(trace) == 1_383_669  # every window's rate × 600, summed over 73 clients
    assert trace.duration_s == pytest.approx(86_400, abs=600)
    assert trace.input_tokens.mean() == pytest.approx(1_268.2, rel=0.02)
    assert trace.output_tokens.mean() == pytest.approx(1_527.4, rel=0.02)
    assert np.median(trace.input_tokens) == pytest.approx(208, rel=0.05)


def test_servegen_in_pieces_with_a_rate_scale() -> None:
    """An hour of the 14-day m-large model at 1 %: windows read lazily, counts scaled."""
    trace = load_trace(
        SHARED / "servegen_language_m-large.tar.gz", "servegen", start_s=72_000, end_s=75_600, rate_scale=0.01
    )
    assert 3_600 - 600 < trace.duration_s < 3_600
    assert 5_000 < len(trace) < 20_000  # README: ~11,750 req/min mean over 14 days → ~7,000 an hour at 1 %
