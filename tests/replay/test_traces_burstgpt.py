"""BurstGPT CSV: both column layouts, failure handling, filters, malformed rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from trace_files import write

from replay.traces import TraceError, burstgpt

FILE = "BurstGPT_1.csv"  # the name the error messages below expect

V1 = (
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "5,ChatGPT,472,18,490,Conversation log\n"
    "45,ChatGPT,1087,230,1317,Conversation log\n"
    "118,GPT-4,417,276,693,Conversation log\n"
    "120,GPT-4,300,0,300,API log\n"
)
V3 = (
    "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "5,a1,1.2,ChatGPT,472,18,490,Conversation log\n"
    "45,a1,3.4,ChatGPT,1087,230,1317,Conversation log\n"
    "118,b2,2.0,GPT-4,417,276,693,Conversation log\n"
    "120,c3,0.1,GPT-4,300,0,300,API log\n"
)


@pytest.mark.parametrize("content", [pytest.param(V1, id="v1 layout"), pytest.param(V3, id="v3 layout")])
def test_failed_requests_are_dropped_by_default(tmp_path: Path, content: str) -> None:
    trace = burstgpt.load(write(tmp_path, content, FILE))
    assert trace.name == "BurstGPT_1"
    assert trace.arrival_s.tolist() == [0.0, 40.0, 113.0]
    assert trace.input_tokens.tolist() == [472, 1087, 417]
    assert trace.output_tokens.tolist() == [18, 230, 276]


@pytest.mark.parametrize(
    ("options", "inputs"),
    [
        pytest.param({"keep_failed": True}, [472, 1087, 417, 300], id="keep failed"),
        pytest.param({"model": "GPT-4"}, [417], id="one model"),
        pytest.param({"model": "GPT-4", "keep_failed": True}, [417, 300], id="one model with failures"),
        pytest.param({"log_type": "API log", "keep_failed": True}, [300], id="one log type"),
    ],
)
def test_filters(tmp_path: Path, options: dict[str, object], inputs: list[int]) -> None:
    trace = burstgpt.load(write(tmp_path, V3, FILE), **options)  # type: ignore[arg-type]
    assert trace.input_tokens.tolist() == inputs
    assert trace.arrival_s[0] == 0.0


def test_a_kept_failure_still_costs_one_output_token(tmp_path: Path) -> None:
    assert burstgpt.load(write(tmp_path, V1, FILE), keep_failed=True).output_tokens.tolist()[-1] == 1


@pytest.mark.parametrize(
    ("content", "options", "expected"),
    [
        pytest.param(
            V1 + "130,GPT-4,many,10,10,Conversation log\n",
            {},
            "BurstGPT_1.csv row 6: Request tokens: expected a non-negative integer, got 'many'",
            id="bad request tokens",
        ),
        pytest.param(
            V1 + "later,GPT-4,1,10,11,Conversation log\n",
            {},
            "BurstGPT_1.csv row 6: Timestamp: expected a finite number, got 'later'",
            id="bad timestamp",
        ),
        pytest.param(
            V1,
            {"model": "GPT-5"},
            "BurstGPT_1.csv: Model: no row has 'GPT-5' (found 'ChatGPT', 'GPT-4')",
            id="no model",
        ),
        pytest.param(
            V1.splitlines()[0] + "\n120,GPT-4,300,0,300,API log\n",
            {},
            "BurstGPT_1.csv: no request left after the filters",
            id="only failures",
        ),
        pytest.param(
            "Timestamp,Request tokens,Total tokens\n1,2,3\n",
            {},
            "BurstGPT_1.csv row 1: missing column 'Response tokens'",
            id="missing column",
        ),
    ],
)
def test_malformed(tmp_path: Path, content: str, options: dict[str, object], expected: str) -> None:
    with pytest.raises(TraceError) as caught:
        burstgpt.load(write(tmp_path, content, FILE), **options)  # type: ignore[arg-type]
    assert str(caught.value).startswith(expected), str(caught.value)


def test_unsorted_rows_reported_in_file_terms(tmp_path: Path) -> None:
    content = V1 + "100,GPT-4,5,5,10,Conversation log\n"
    assert burstgpt.load(write(tmp_path, content, FILE)).arrival_s.tolist() == [0.0, 40.0, 95.0, 113.0]
    with pytest.raises(
        TraceError, match=r"^BurstGPT_1.csv row 6: Timestamp: 100 is earlier than row 4's 118"
    ):
        burstgpt.load(write(tmp_path, content, FILE), on_unsorted="reject")
