"""`load_trace`: the format table, option checking (typed or CLI strings), window and rate scale."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from replay.traces import FORMATS, TraceError, load_trace, options_from_pairs

AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
    f"2023-11-16 18:17:{i:02d}.0,{100 + i},{10 + i}\n" for i in range(40)
)
BURSTGPT = (
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "1,GPT-4,10,0,10,Conversation log\n2,GPT-4,11,5,16,Conversation log\n3,ChatGPT,12,6,18,Conversation log\n"
)


@pytest.fixture
def azure_file(tmp_path: Path) -> Path:
    path = tmp_path / "a.csv"
    path.write_text(AZURE)
    return path


def test_the_table_lists_every_format_the_cli_offers() -> None:
    assert list(FORMATS) == ["azure", "mooncake", "burstgpt", "servegen", "csv", "jsonl"]
    assert [name for name, f in FORMATS.items() if f.synthesizes] == ["servegen"]


def test_window_then_rate_scale(azure_file: Path) -> None:
    trace = load_trace(azure_file, "azure", start_s=10, end_s=30)
    assert len(trace) == 20 and trace.input_tokens[0] == 110
    doubled = load_trace(azure_file, "azure", start_s=10, end_s=30, rate_scale=2.0, seed=1)
    assert len(doubled) == 40
    assert np.array_equal(np.sort(doubled.input_tokens), np.sort(np.tile(trace.input_tokens, 2)))


@pytest.mark.parametrize(
    ("pairs", "inputs"),
    [
        pytest.param([], [11, 12], id="defaults"),
        pytest.param(["keep_failed=yes"], [10, 11, 12], id="bool from a string"),
        pytest.param(["model=GPT-4", "keep_failed=true"], [10, 11], id="two options"),
        pytest.param(["model=none"], [11, 12], id="none for an optional"),
        pytest.param(["on_unsorted=reject"], [11, 12], id="literal"),
    ],
)
def test_cli_strings_are_coerced(tmp_path: Path, pairs: list[str], inputs: list[int]) -> None:
    path = tmp_path / "b.csv"
    path.write_text(BURSTGPT)
    trace = load_trace(path, "burstgpt", **options_from_pairs(pairs))
    assert trace.input_tokens.tolist() == inputs


@pytest.mark.parametrize(
    ("fmt", "options", "expected"),
    [
        pytest.param(
            "parquet",
            {},
            "format: expected one of azure, mooncake, burstgpt, servegen, csv, jsonl",
            id="format",
        ),
        pytest.param(
            "azure",
            {"model": "x"},
            "format 'azure': unknown option 'model' (accepted: max_span_s, on_unsorted, output_scale)",
            id="option",
        ),
        pytest.param(
            "azure",
            {"on_unsorted": "ignore"},
            "format 'azure': option on_unsorted: expected one of sort, reject",
            id="literal",
        ),
        pytest.param(
            "burstgpt",
            {"keep_failed": "maybe"},
            "option keep_failed: expected true or false, got 'maybe'",
            id="bool",
        ),
        pytest.param(
            "servegen",
            {"max_requests": "lots"},
            "option max_requests: expected an integer, got 'lots'",
            id="int",
        ),
        pytest.param(
            "servegen", {"clients": "1,x"}, "option clients: expected an integer, got 'x'", id="tuple item"
        ),
        pytest.param(
            "csv",
            {"time_unit": 3},
            "option time_unit: expected one of s, ms, us, ns, datetime, got 3",
            id="typed",
        ),
    ],
)
def test_bad_formats_and_options_are_named(
    azure_file: Path, fmt: str, options: dict[str, object], expected: str
) -> None:
    with pytest.raises(TraceError) as caught:
        load_trace(azure_file, fmt, **options)
    assert expected in str(caught.value), str(caught.value)


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        pytest.param(
            ["time_unit=ms", " arrival_column = ts "], {"time_unit": "ms", "arrival_column": "ts"}, id="ok"
        ),
        pytest.param(["delimiter=="], {"delimiter": "="}, id="value with equals sign"),
    ],
)
def test_options_from_pairs(pairs: list[str], expected: dict[str, str]) -> None:
    assert options_from_pairs(pairs) == expected


@pytest.mark.parametrize(
    "pair", [pytest.param("time_unit", id="no equals"), pytest.param("=ms", id="no key")]
)
def test_options_from_pairs_refuses(pair: str) -> None:
    with pytest.raises(TraceError, match="trace option: expected key=value"):
        options_from_pairs([pair])


@pytest.mark.parametrize(
    ("name", "flag"),
    [("start_s", "--start-s"), ("end_s", "--end-s"), ("rate_scale", "--rate-scale"), ("seed", "--seed")],
)
def test_options_from_pairs_refuses_load_trace_arguments_naming_their_flag(name: str, flag: str) -> None:
    with pytest.raises(TraceError, match=f"trace option {name}: give it with {flag}[ ,]"):
        options_from_pairs([f" {name} =1"])


def test_cli_compare_refuses_a_window_given_as_trace_option(
    azure_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--trace-option start_s=…` reached load_trace beside its own start_s: a TypeError, not an error."""
    from infscale.cli import main

    argv = [
        "replay",
        "compare",
        "--trace",
        str(azure_file),
        "--format",
        "azure",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main([*argv, "--trace-option", "start_s=10", "--quiet", "--no-plots"]) == 2
    assert "trace option start_s: give it with --start-s" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
