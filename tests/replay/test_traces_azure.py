"""Azure LLM inference CSV: tiny files written here, good and malformed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from trace_files import write

from replay.traces import TraceError, azure

FILE = "t.csv"  # the name the error messages below expect

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
GOOD = HEADER + (
    "2023-11-16 18:17:03.9799600,4808,10\n"
    "2023-11-16 18:17:04.0319600,3180,8\n"
    "2023-11-16 18:17:06.4799600,110,27"  # no trailing newline, like the real files
)


def test_reads_rows_rebased_to_the_first_request(tmp_path: Path) -> None:
    trace = azure.load(write(tmp_path, GOOD, "azure_llm_2023_code.csv"))
    assert trace.name == "azure_llm_2023_code"
    np.testing.assert_allclose(trace.arrival_s, [0.0, 0.052, 2.5], atol=1e-9)
    assert trace.input_tokens.tolist() == [4808, 3180, 110]
    assert trace.output_tokens.tolist() == [10, 8, 27]
    assert trace.input_tokens.dtype == np.int64 and trace.arrival_s.dtype == np.float64


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(
            GOOD + "\n2023-11-16 18:17:07.0,abc,3\n",
            "t.csv row 5: ContextTokens: expected a non-negative integer, got 'abc'",
            id="non-numeric tokens",
        ),
        pytest.param(
            GOOD + "\n2023-11-16 18:17:07.0,12,-3\n",
            "t.csv row 5: GeneratedTokens: expected a non-negative integer, got '-3'",
            id="negative tokens",
        ),
        pytest.param(
            GOOD + "\n2023-11-16 18:17:07.0,12.5,3\n",
            "t.csv row 5: ContextTokens: expected a non-negative integer, got '12.5'",
            id="fractional tokens",
        ),
        pytest.param(
            GOOD + "\n2023-11-16 18:17:07.0,99999999999999999999,3\n",
            "t.csv row 5: ContextTokens: expected a non-negative integer, got '99999999999999999999'",
            id="tokens past int64",
        ),
        pytest.param(
            GOOD + "\n2023-11-16 18:17:07.0,,3\n",
            "t.csv row 5: ContextTokens: expected a non-negative integer, got ''",
            id="empty field",
        ),
        pytest.param(
            GOOD + "\n2023-11-16 25:17:07.0,12,3\n",
            "t.csv row 5: TIMESTAMP: expected a date-time like 2023-11-16 18:17:03.9799600, "
            "got '2023-11-16 25:17",
            id="impossible hour",
        ),
        pytest.param(
            GOOD + "\nyesterday,12,3\n", "t.csv row 5: TIMESTAMP: expected a date-time", id="not a date-time"
        ),
        pytest.param(
            GOOD + "\n2023-11-16 18:17:07.0,12\n", "t.csv row 5: expected 3 fields, got 2", id="short row"
        ),
        pytest.param(
            "TIMESTAMP,ContextTokens\n2023-11-16 18:17:07.0,12\n",
            "t.csv row 1: missing column 'GeneratedTokens' (found 'TIMESTAMP', 'ContextTokens')",
            id="missing column",
        ),
        pytest.param("", "t.csv: empty file, expected a header row", id="empty file"),
        pytest.param(HEADER, "t.csv: no data rows after the header", id="header only"),
        pytest.param(
            GOOD.encode() + b"\n2023-11-16 18:17:07.0,1\xff2,3\n",
            "t.csv row 5: not valid UTF-8: byte 0xff at column 24",
            id="non-UTF-8 byte",
        ),
        pytest.param(
            HEADER + '2023-11-16 18:17:07.0,"12,3\n',
            "t.csv row 2: expected 3 fields, got 2",  # the quote swallows the rest of the file
            id="unterminated quote",
        ),
    ],
)
def test_malformed_files_name_file_row_and_field(tmp_path: Path, content: str | bytes, expected: str) -> None:
    with pytest.raises(TraceError) as caught:
        azure.load(write(tmp_path, content, FILE))
    assert str(caught.value).startswith(expected), str(caught.value)


def test_the_documented_message_shape(tmp_path: Path) -> None:
    rows = [f"2023-11-16 18:17:{i:02d}.0000000,{100 + i},{5 + i}" for i in range(15)]
    rows.append("2023-11-16 18:17:30.0000000,abc,3")  # the 16th data row is row 17 counting the header
    path = write(tmp_path, HEADER + "\n".join(rows), "azure_llm_2023_code.csv")
    with pytest.raises(
        TraceError,
        match=r"^azure_llm_2023_code\.csv row 17: ContextTokens: expected a non-negative integer, got 'abc'$",
    ):
        azure.load(path)


UNSORTED = HEADER + "2023-11-16 18:17:05.0,1,1\n2023-11-16 18:17:03.0,2,2\n2023-11-16 18:17:05.0,3,3\n"


def test_unsorted_rows_are_sorted_stably_by_default(tmp_path: Path) -> None:
    trace = azure.load(write(tmp_path, UNSORTED, FILE))
    assert trace.arrival_s.tolist() == [0.0, 2.0, 2.0]
    assert trace.input_tokens.tolist() == [2, 1, 3]  # equal timestamps keep file order


def test_unsorted_rows_are_rejected_on_request(tmp_path: Path) -> None:
    with pytest.raises(
        TraceError,
        match=r"^t.csv row 3: TIMESTAMP: 2023-11-16 18:17:03.0 is earlier than row 2's 2023-11-16 18:17:05.0",
    ):
        azure.load(write(tmp_path, UNSORTED, FILE), on_unsorted="reject")


def test_zero_tokens_are_raised_to_one(tmp_path: Path) -> None:
    trace = azure.load(write(tmp_path, HEADER + "2023-11-16 18:17:05.0,0,0\n", FILE))
    assert (trace.input_tokens.tolist(), trace.output_tokens.tolist()) == ([1], [1])


@pytest.mark.parametrize(
    ("stamps", "expected"),
    [
        pytest.param(
            ("2024-05-10 00:00:00.009930+00:00", "2024-05-10 00:00:01.509930+00:00"),
            [0.0, 1.5],
            id="2024 UTC",
        ),
        pytest.param(("2024-05-10T00:00:00Z", "2024-05-10T00:01:00Z"), [0.0, 60.0], id="ISO Z"),
        pytest.param(("2023-12-31 23:59:59.5", "2024-01-01 00:00:00.5"), [0.0, 1.0], id="across midnight"),
    ],
)
def test_timestamp_styles(tmp_path: Path, stamps: tuple[str, str], expected: list[float]) -> None:
    content = HEADER + "".join(f"{s},10,10\n" for s in stamps)
    np.testing.assert_allclose(azure.load(write(tmp_path, content, FILE)).arrival_s, expected, atol=1e-9)


def test_a_row_without_the_first_rows_utc_suffix_is_refused(tmp_path: Path) -> None:
    content = HEADER + "2024-05-10 00:00:00+00:00,10,10\n2024-05-10 00:00:01+02:00,10,10\n"
    with pytest.raises(
        TraceError, match=r"^t.csv row 3: TIMESTAMP: .* with a \+00:00 suffix like the first row"
    ):
        azure.load(write(tmp_path, content, FILE))


def test_bom_blank_lines_and_extra_columns_are_tolerated(tmp_path: Path) -> None:
    content = "\ufeffTIMESTAMP,NumImages,ContextTokens,GeneratedTokens\n\n2023-11-16 18:17:05.0,2,7,8\n\n"
    trace = azure.load(write(tmp_path, content, FILE))
    assert (len(trace), trace.input_tokens.tolist(), trace.output_tokens.tolist()) == (1, [7], [8])


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        azure.load(tmp_path / "absent.csv")


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(GOOD.replace("\n", "\r\n"), id="CRLF line ends"),
        pytest.param(
            HEADER + '"2023-11-16 18:17:03.9799600","4808",10\n2023-11-16 18:17:04.0319600,3180,8\n'
            '2023-11-16 18:17:06.4799600,110,"27"\n',
            id="quoted fields (the csv module path)",
        ),
        pytest.param(GOOD + "\n\n\n", id="trailing blank lines"),
    ],
)
def test_csv_dialects_read_the_same(tmp_path: Path, content: str) -> None:
    plain, other = azure.load(write(tmp_path, GOOD, "a.csv")), azure.load(write(tmp_path, content, "b.csv"))
    for column in ("arrival_s", "input_tokens", "output_tokens"):
        assert np.array_equal(getattr(plain, column), getattr(other, column))


def test_whitespace_inside_a_number_is_not_split_into_two(tmp_path: Path) -> None:
    content = HEADER + "2023-11-16 18:17:05.0,1 2,3\n2023-11-16 18:17:06.0,,3\n"
    with pytest.raises(
        TraceError, match=r"^t.csv row 2: ContextTokens: expected a non-negative integer, got '1 2'$"
    ):
        azure.load(write(tmp_path, content, FILE))
