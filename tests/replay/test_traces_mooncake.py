"""Mooncake JSONL: tiny files written here, good and malformed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from trace_files import write

from replay.traces import TraceError, mooncake

FILE = "m.jsonl"  # the name the error messages below expect

GOOD = (
    '{"timestamp": 0, "input_length": 40160, "output_length": 6, "hash_ids": [0, 1, 2]}\n'
    '{"timestamp": 0, "input_length": 36640, "output_length": 4, "hash_ids": [3, 4]}\n'
    '{"timestamp": 1500, "input_length": 513, "output_length": 1, "hash_ids": [0, 5]}\n'
)


def test_milliseconds_become_seconds_and_duplicates_stay(tmp_path: Path) -> None:
    trace = mooncake.load(write(tmp_path, GOOD, "mooncake_trace.jsonl"))
    assert trace.name == "mooncake_trace"
    np.testing.assert_allclose(trace.arrival_s, [0.0, 0.0, 1.5])
    assert trace.input_tokens.tolist() == [40160, 36640, 513]
    assert trace.output_tokens.tolist() == [6, 4, 1]


def test_hash_ids_become_the_prefix_blocks_in_arrival_order(tmp_path: Path) -> None:
    unsorted = (
        '{"timestamp": 900, "input_length": 1024, "output_length": 2, "hash_ids": [0, 9]}\n'
        '{"timestamp": 100, "input_length": 600, "output_length": 2, "hash_ids": [0]}\n'
        '{"timestamp": 500, "input_length": 5, "output_length": 2}\n'
    )
    trace = mooncake.load(write(tmp_path, unsorted, FILE))
    assert trace.input_tokens.tolist() == [600, 5, 1024]
    assert trace.prefix is not None and trace.prefix.block_tokens == 512
    assert trace.prefix.offsets.tolist() == [0, 1, 1, 3]
    assert trace.prefix.ids.tolist() == [0, 0, 9]


def test_hash_ids_are_optional_and_blank_lines_keep_row_numbers(tmp_path: Path) -> None:
    content = (
        '{"timestamp": 5, "input_length": 1, "output_length": 2}\n\n{"timestamp": 7, "input_length": 3}\n'
    )
    with pytest.raises(TraceError, match=r"^m.jsonl row 3: missing key 'output_length'$"):
        mooncake.load(write(tmp_path, content, FILE))
    trace = mooncake.load(write(tmp_path, content.replace("3}", '3, "output_length": 4}'), FILE))
    assert trace.arrival_s.tolist() == [0.0, 0.002]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(
            GOOD + '{"timestamp": 2000, "input_length": 5\n', "m.jsonl row 4: not valid JSON", id="truncated"
        ),
        pytest.param("[1, 2]\n", "m.jsonl row 1: expected a JSON object, got list", id="not an object"),
        pytest.param(
            GOOD + '{"timestamp": 2000, "input_length": 1.5, "output_length": 1}\n',
            "m.jsonl row 4: input_length: expected a non-negative integer, got 1.5",
            id="fractional length",
        ),
        pytest.param(
            GOOD + '{"timestamp": 2000, "input_length": "12", "output_length": 1}\n',
            "m.jsonl row 4: input_length: expected a non-negative integer, got '12'",
            id="length as a string",
        ),
        pytest.param(
            GOOD + '{"timestamp": 2000, "input_length": 12, "output_length": true}\n',
            "m.jsonl row 4: output_length: expected a non-negative integer, got True",
            id="boolean length",
        ),
        pytest.param(
            GOOD + '{"timestamp": 2000, "input_length": 12, "output_length": -1}\n',
            "m.jsonl row 4: output_length: expected a non-negative integer, got -1",
            id="negative length",
        ),
        pytest.param(
            GOOD + '{"timestamp": NaN, "input_length": 12, "output_length": 1}\n',
            "m.jsonl row 4: timestamp: expected a finite number, got nan",
            id="NaN timestamp",
        ),
        pytest.param(
            GOOD + '{"timestamp": "soon", "input_length": 12, "output_length": 1}\n',
            "m.jsonl row 4: timestamp: expected a finite number, got 'soon'",
            id="timestamp as a word",
        ),
        pytest.param(
            GOOD + '{"timestamp": 2000, "input_length": 12, "output_length": 1, "hash_ids": 7}\n',
            "m.jsonl row 4: hash_ids: expected a list of block ids, got 7",
            id="hash_ids not a list",
        ),
        pytest.param("\n  \n", "m.jsonl: empty file", id="empty file"),
        pytest.param(
            GOOD.encode() + b'{"timestamp": 2\xe9}\n',
            "m.jsonl row 4: not valid UTF-8: byte 0xe9",
            id="latin-1",
        ),
        pytest.param("1, 2\n", "m.jsonl row 1: not valid JSON", id="two values on a line"),
    ],
)
def test_malformed_lines_name_file_row_and_field(tmp_path: Path, content: str | bytes, expected: str) -> None:
    with pytest.raises(TraceError) as caught:
        mooncake.load(write(tmp_path, content, FILE))
    assert str(caught.value).startswith(expected), str(caught.value)


def test_unsorted_lines_sorted_or_rejected(tmp_path: Path) -> None:
    content = GOOD + '{"timestamp": 1000, "input_length": 9, "output_length": 9}\n'
    trace = mooncake.load(write(tmp_path, content, FILE))
    assert trace.arrival_s.tolist() == [0.0, 0.0, 1.0, 1.5]
    assert trace.input_tokens.tolist() == [40160, 36640, 9, 513]
    with pytest.raises(TraceError, match=r"^m.jsonl row 4: timestamp: 1000 is earlier than row 3's 1500"):
        mooncake.load(write(tmp_path, content, FILE), on_unsorted="reject")
