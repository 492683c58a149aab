"""`output_scale`: every output length ×k, for any format (replay/traces/outputscale.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from replay.trace import Trace
from replay.traces import MAX_TOKENS, TraceError, load_trace, options_from_pairs, scale_output

AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
    f"2023-11-16 18:17:{i:02d}.0,{100 + i},{10 + i}\n" for i in range(40)
)


@pytest.fixture
def azure_file(tmp_path: Path) -> Path:
    path = tmp_path / "a.csv"
    path.write_text(AZURE)
    return path


def test_the_option_stretches_outputs_and_keeps_the_rest(azure_file: Path) -> None:
    plain = load_trace(azure_file, "azure")
    stretched = load_trace(azure_file, "azure", **options_from_pairs(["output_scale=7.1"]))
    assert stretched.output_tokens.tolist() == [round(7.1 * (10 + i)) for i in range(40)]
    assert np.array_equal(stretched.input_tokens, plain.input_tokens)
    assert np.array_equal(stretched.arrival_s, plain.arrival_s)
    assert stretched.name == "a-outx7.1"


def test_the_option_goes_with_the_window_and_the_rate_scale(azure_file: Path) -> None:
    both = load_trace(azure_file, "azure", start_s=10, end_s=30, rate_scale=2.0, seed=1, output_scale=3.0)
    assert len(both) == 40
    assert sorted(both.output_tokens.tolist()) == sorted(3 * (10 + i) for i in range(10, 30) for _ in "ab")


def test_lengths_are_rounded_and_kept_at_least_one() -> None:
    trace = Trace("t", np.array([0.0, 1.0, 2.0]), np.array([5, 5, 5]), np.array([1, 3, 10]))
    assert scale_output(trace, 0.1).output_tokens.tolist() == [1, 1, 1]
    assert scale_output(trace, 1.5).output_tokens.tolist() == [2, 4, 15]  # 1.5 and 4.5 to even
    assert scale_output(trace, 1.0) is trace


@pytest.mark.parametrize("k", [0.0, -2.0, float("nan"), float("inf")])
def test_a_scale_that_is_no_positive_number_is_refused(k: float) -> None:
    trace = Trace("t", np.array([0.0]), np.array([5]), np.array([10]))
    with pytest.raises(TraceError, match="output_scale: expected a number > 0"):
        scale_output(trace, k)


def test_a_scale_past_the_token_bound_is_refused_not_clipped() -> None:
    trace = Trace("t", np.array([0.0, 1.0]), np.array([5, 5]), np.array([10, 1_000]))
    assert scale_output(trace, MAX_TOKENS / 1_000).output_tokens.max() == MAX_TOKENS
    with pytest.raises(TraceError, match=r"longest output \(1,000 tokens\) would become 2,001,000"):
        scale_output(trace, (MAX_TOKENS + 1_000) / 1_000)


def test_a_string_that_is_no_number_is_named(azure_file: Path) -> None:
    expected = "format 'azure': option output_scale: expected a number, got 'long'"
    with pytest.raises(TraceError, match=expected):
        load_trace(azure_file, "azure", output_scale="long")
