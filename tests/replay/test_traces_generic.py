"""Generic CSV/JSONL with a column mapping: units, absolute and relative clocks, malformed input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from trace_files import write

from replay.traces import TraceError, generic

MAPPING = {"arrival_column": "ts", "input_column": "prompt", "output_column": "completion"}


@pytest.mark.parametrize(
    ("column", "unit", "expected"),
    [
        pytest.param(["3", "4.5", "10"], "s", [0.0, 1.5, 7.0], id="relative seconds"),
        pytest.param(
            ["1700000000000", "1700000001500", "1700000007000"], "ms", [0.0, 1.5, 7.0], id="epoch ms"
        ),
        pytest.param(["0", "1500000", "7000000"], "us", [0.0, 1.5, 7.0], id="microseconds"),
        pytest.param(
            ["1700000000.25", "1700000001.75", "1700000007.25"], "s", [0.0, 1.5, 7.0], id="epoch seconds"
        ),
        pytest.param(
            ["2024-01-01T00:00:00", "2024-01-01T00:00:01.5", "2024-01-01T00:00:07"],
            "datetime",
            [0.0, 1.5, 7.0],
            id="ISO date-times",
        ),
    ],
)
def test_csv_clocks_are_rebased(tmp_path: Path, column: list[str], unit: str, expected: list[float]) -> None:
    content = "prompt,ts,completion,other\n" + "".join(
        f"{10 + i},{t},{20 + i},x\n" for i, t in enumerate(column)
    )
    trace = generic.load_csv(write(tmp_path, content, "log.csv"), time_unit=unit, **MAPPING)  # type: ignore[arg-type]
    np.testing.assert_allclose(trace.arrival_s, expected, atol=1e-6)
    assert trace.input_tokens.tolist() == [10, 11, 12]
    assert trace.output_tokens.tolist() == [20, 21, 22]


def test_csv_with_another_delimiter_and_default_columns(tmp_path: Path) -> None:
    content = "timestamp;input_tokens;output_tokens\n1;5;6\n2;7;8\n"
    trace = generic.load_csv(write(tmp_path, content, "log.csv"), delimiter=";")
    assert (trace.arrival_s.tolist(), trace.input_tokens.tolist()) == ([0.0, 1.0], [5, 7])


def test_jsonl_with_a_mapping(tmp_path: Path) -> None:
    content = '{"ts": 2000, "prompt": 5, "completion": 6, "extra": [1]}\n'
    content += '{"ts": 3500, "prompt": 7, "completion": 8}\n'
    trace = generic.load_jsonl(write(tmp_path, content, "q.jsonl"), time_unit="ms", **MAPPING)
    assert (trace.arrival_s.tolist(), trace.output_tokens.tolist()) == ([0.0, 1.5], [6, 8])


def test_jsonl_date_times(tmp_path: Path) -> None:
    content = '{"ts": "2024-01-01 00:00:10Z", "prompt": 5, "completion": 6}\n'
    content += '{"ts": "2024-01-01 00:00:12Z", "prompt": 7, "completion": 8}\n'
    trace = generic.load_jsonl(write(tmp_path, content, "q.jsonl"), time_unit="datetime", **MAPPING)
    assert trace.arrival_s.tolist() == [0.0, 2.0]


@pytest.mark.parametrize(
    ("loader", "content", "options", "expected"),
    [
        pytest.param(
            "csv",
            "ts,prompt,completion\n1,2,3\n",
            {"output_column": "generated"},
            "log.csv row 1: missing column 'generated' (found 'ts', 'prompt', 'completion')",
            id="mapped column absent",
        ),
        pytest.param(
            "csv",
            "ts,prompt,completion\n1,2,3\n2,x,3\n",
            {},
            "log.csv row 3: prompt: expected a non-negative integer, got 'x'",
            id="bad mapped value",
        ),
        pytest.param(
            "csv",
            "ts,prompt,completion\n1,2,3\ninf,2,3\n",
            {},
            "log.csv row 3: ts: expected a finite number, got 'inf'",
            id="infinite time",
        ),
        pytest.param(
            "jsonl",
            '{"ts": 1, "prompt": 2, "completion": 3}\n{"ts": 2, "prompt": 2}\n',
            {},
            "log.csv row 2: missing key 'completion'",
            id="jsonl missing key",
        ),
        pytest.param(
            "csv", "ts,prompt,completion\n1,2,3\n", {"time_unit": "h"}, "time_unit: expected", id="bad unit"
        ),
        pytest.param(
            "csv",
            "ts,prompt,completion\n1,2,3\n",
            {"delimiter": ";;"},
            "delimiter: expected",
            id="bad delimiter",
        ),
    ],
)
def test_malformed(tmp_path: Path, loader: str, content: str, options: dict[str, str], expected: str) -> None:
    path = write(tmp_path, content, "log.csv")
    with pytest.raises(TraceError) as caught:
        if loader == "csv":
            generic.load_csv(path, **{**MAPPING, **options})  # type: ignore[arg-type]
        else:
            generic.load_jsonl(path, **{**MAPPING, **options})  # type: ignore[arg-type]
    assert str(caught.value).startswith(expected), str(caught.value)


def test_interior_blank_lines_keep_row_numbers(tmp_path: Path) -> None:
    content = "ts,prompt,completion\n1,2,3\n\n2,4,5\n\n\n3,x,7\n"
    with pytest.raises(
        TraceError, match=r"^log.csv row 7: prompt: expected a non-negative integer, got 'x'$"
    ):
        generic.load_csv(write(tmp_path, content, "log.csv"), **MAPPING)
    trace = generic.load_csv(write(tmp_path, content.replace("x", "6"), "log.csv"), **MAPPING)
    assert (trace.input_tokens.tolist(), trace.output_tokens.tolist()) == ([2, 4, 6], [3, 5, 7])


def test_a_number_where_a_date_time_belongs_is_reported_as_written(tmp_path: Path) -> None:
    content = '{"ts": "2024-01-01 00:00:10", "prompt": 5, "completion": 6}\n'
    content += '{"ts": 17, "prompt": 7, "completion": 8}\n'
    with pytest.raises(TraceError, match=r"^q.jsonl row 2: ts: expected a date-time like .*, got 17$"):
        generic.load_jsonl(write(tmp_path, content, "q.jsonl"), time_unit="datetime", **MAPPING)
