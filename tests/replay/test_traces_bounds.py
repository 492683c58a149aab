"""Trace input at the extremes (replay/traces/bounds.py and the readers): every value out of bounds
is a TraceError naming file, row and field, before the replay could hang or exhaust memory; and a
sample of random mutations of valid files only ever loads or raises TraceError."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from trace_files import write

from replay.traces import MAX_SPAN_S, MAX_TOKENS, TraceError, load_trace

CSV_HEAD = "timestamp,input_tokens,output_tokens\n"
GOOD_CSV = CSV_HEAD + "".join(f"{i * 0.5},{100 + i},{20 + i}\n" for i in range(20))
AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
GOOD_AZURE = AZURE_HEAD + "".join(f"2023-11-16 18:15:{i:02d}.5000000,{100 + i},{20 + i}\n" for i in range(20))
GOOD_MOONCAKE = "".join(
    f'{{"timestamp": {i * 500}, "input_length": {100 + i}, "output_length": {20 + i}, "hash_ids": [1, 2]}}\n'
    for i in range(20)
)


MOONCAKE_ROW = '{{"timestamp": {}, "input_length": {}, "output_length": {}}}\n'
DIGITS_5000 = "7" * 5000
NESTED = '{"timestamp": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
YEAR_0001 = AZURE_HEAD + "0001-01-01 00:00:00.0000000,10,10\n" + GOOD_AZURE.split("\n", 1)[1]
TWICE = "TIMESTAMP,ContextTokens,ContextTokens,GeneratedTokens\n2023-11-16 18:15:00.0,1,2,3\n"
STRAY_FIRST = CSV_HEAD + "-99999999999,1,1\n" + GOOD_CSV.split("\n", 1)[1]
INT = "expected a non-negative integer, got"


@pytest.mark.parametrize(
    ("fmt", "name", "content", "message"),
    [
        pytest.param(
            "csv", "t.csv", GOOD_CSV + "11,100,1000000000000\n",
            f"t.csv row 22: output_tokens: 1,000,000,000,000 tokens, more than the {MAX_TOKENS:,}",
            id="1e12 output tokens (was a 319 GiB allocation)",
        ),
        pytest.param(
            "csv", "t.csv", GOOD_CSV + "11,1000000000000,5\n",
            "t.csv row 22: input_tokens: 1,000,000,000,000 tokens",
            id="1e12 input tokens (inflated the fleet to 64)",
        ),
        pytest.param(
            "mooncake", "m.jsonl", GOOD_MOONCAKE + MOONCAKE_ROW.format(1, 5, 3_000_000),
            "m.jsonl row 21: output_length: 3,000,000 tokens",
            id="mooncake output",
        ),
        pytest.param(
            "azure", "a.csv", GOOD_AZURE + "9999-12-31 23:59:59.0000000,10,10\n",
            "a.csv row 22: TIMESTAMP: '9999-12-31 23:59:59.0000000' is outside 1970-01-01 .. 2199-12-31",
            id="year 9999 (numpy read it as 1816)",
        ),
        pytest.param(
            "azure", "a.csv", YEAR_0001,
            "a.csv row 2: TIMESTAMP: '0001-01-01 00:00:00.0000000' is outside 1970-01-01",
            id="year 0001 (numpy read it as 1754)",
        ),
        pytest.param(
            "mooncake", "m.jsonl", GOOD_MOONCAKE + MOONCAKE_ROW.format("1e13", 5, 3),
            "m.jsonl row 21: timestamp: 10000000000000.0 is 317 years after row 20's 9500: the trace would "
            "span 317 years, more than the 31.0 days max_span_s allows",
            id="1e13 ms (never finished, grew ~26 MB/s)",
        ),
        pytest.param(
            "csv", "t.csv", STRAY_FIRST,
            "t.csv row 2: timestamp: -99999999999 is 3,169 years before row 3's 0.0",
            id="a stray first row is named, not the row after it",
        ),
        pytest.param(
            "csv", "t.csv", GOOD_CSV + "１２,100,10\n",
            "t.csv row 22: timestamp: expected a finite number, got '１２'",
            id="fullwidth digits in a time",
        ),
        pytest.param(
            "csv", "t.csv", GOOD_CSV + "12,１２,10\n", f"t.csv row 22: input_tokens: {INT} '１２'",
            id="fullwidth digits in a count",
        ),
        pytest.param(
            "csv", "t.csv", GOOD_CSV + "12,1_000,10\n", f"t.csv row 22: input_tokens: {INT} '1_000'",
            id="1_000",
        ),
        pytest.param(
            "csv", "t.csv", GOOD_CSV + "12,10,1_0\n", f"t.csv row 22: output_tokens: {INT} '1_0'",
            id="1_0 in the last column",
        ),
        pytest.param(
            "csv", "t.csv", GOOD_CSV + f"12,{DIGITS_5000},10\n",
            f"t.csv row 22: input_tokens: {INT} '7777777777777777777777",
            id="a 5,000-digit integer in a CSV",
        ),
        pytest.param(
            "csv", "t.csv", GOOD_CSV + f"12,{DIGITS_5000},10\n", "… (5,000 characters)",
            id="a 5,000-digit integer is shown by its length",
        ),
        pytest.param(
            "mooncake", "m.jsonl", GOOD_MOONCAKE + MOONCAKE_ROW.format(1, DIGITS_5000, 3),
            "m.jsonl row 21: input_length: an integer of more than 4,300 digits",
            id="a 5,000-digit integer in JSON",
        ),
        pytest.param(
            "mooncake", "m.jsonl", GOOD_MOONCAKE + NESTED,
            "m.jsonl row 21: JSON nested deeper than the parser allows",
            id="JSON nested 100,000 deep (was a RecursionError traceback)",
        ),
        pytest.param(
            "azure", "a.csv", TWICE, "a.csv row 1: column 'ContextTokens' appears twice (columns 2 and 3)",
            id="duplicate header columns (the first was taken silently)",
        ),
        pytest.param(
            "mooncake", "m.jsonl", GOOD_MOONCAKE + MOONCAKE_ROW.format('1, "timestamp": 2', 5, 3),
            "m.jsonl row 21: timestamp: the key appears twice in the row",
            id="a JSON key twice (JSON keeps the last silently)",
        ),
        pytest.param(
            "jsonl", "l.jsonl", '{"timestamp": 1, "input_tokens": 5, "output_tokens": 3}\n'
            '{"timestamp": 2, "input_tokens": 5, "input_tokens": 6, "output_tokens": 3}\n',
            "l.jsonl row 2: input_tokens: the key appears twice in the row",
            id="a JSON key twice in a later row",
        ),
        pytest.param(
            "jsonl", "l.jsonl", '{"timestamp": 1, "input_tokens": 5, "output_tokens": 3}\n'
            '{"timestamp": 2, "input_tok\\u0065ns": 6, "input_tokens": 5, "output_tokens": 3}\n',
            "l.jsonl row 2: input_tokens: the key appears twice in the row",
            id="a JSON key twice, once spelled with an escape",
        ),
    ],
)  # fmt: skip
def test_out_of_bounds_input_names_file_row_and_field(
    tmp_path: Path, fmt: str, name: str, content: str, message: str
) -> None:
    with pytest.raises(TraceError) as caught:
        load_trace(write(tmp_path, content, name), fmt)
    assert message in str(caught.value)


def test_a_key_name_inside_a_value_is_no_duplicate(tmp_path: Path) -> None:
    # the quick count sees "timestamp" twice a row; the exact check finds each key once
    rows = "".join(
        f'{{"timestamp": {i}, "input_tokens": 5, "output_tokens": 3, "kind": "timestamp"}}\n'
        for i in range(3)
    )
    assert len(load_trace(write(tmp_path, rows, "l.jsonl"), "jsonl")) == 3


def test_a_window_replays_the_part_before_a_stray_timestamp(tmp_path: Path) -> None:
    path = write(
        tmp_path, GOOD_MOONCAKE + '{"timestamp": 1e13, "input_length": 5, "output_length": 3}\n', "m.jsonl"
    )
    trace = load_trace(path, "mooncake", end_s=60)
    assert len(trace) == 20 and trace.duration_s == 9.5


def test_the_span_bound_can_be_lifted_or_moved_per_file(tmp_path: Path) -> None:
    days = 40
    path = write(tmp_path, GOOD_CSV + f"{days * 86_400},1,1\n", "t.csv")
    with pytest.raises(TraceError, match="max_span_s allows"):
        load_trace(path, "csv")
    assert load_trace(path, "csv", max_span_s="none").duration_s == days * 86_400
    assert load_trace(path, "csv", max_span_s=f"{60 * 86_400}").duration_s == days * 86_400
    with pytest.raises(TraceError, match=r"from start_s=5 the trace spans 40.0 days, .* give --end-s too"):
        load_trace(path, "csv", start_s=5)
    assert MAX_SPAN_S == 31 * 86_400


def test_bounds_are_inclusive(tmp_path: Path) -> None:
    content = CSV_HEAD + f"0,{MAX_TOKENS},{MAX_TOKENS}\n{MAX_SPAN_S},1,1\n"
    trace = load_trace(write(tmp_path, content, "t.csv"), "csv")
    assert int(trace.input_tokens[0]) == MAX_TOKENS and trace.duration_s == MAX_SPAN_S


# --- random mutations: a TraceError or a trace, nothing else ---------------------------------------

_JUNK = [
    "",
    "-1",
    "1e999",
    "NaN",
    "１２",
    "1_000",
    "9" * 30,
    "0x1f",
    '"',
    "\x00",
    "\xff",
    "[[[",
    "{",
    "2023-13-45",
]


def _mutate(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    kind = rng.randrange(4)
    if kind == 0:  # replace a field
        cells = lines[i].split(",")
        cells[rng.randrange(len(cells))] = rng.choice(_JUNK)
        lines[i] = ",".join(cells)
    elif kind == 1:  # cut a line short
        lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
    elif kind == 2:  # duplicate or drop a line
        if rng.random() < 0.5:
            lines.insert(i, lines[i])
        else:
            del lines[i]
    else:  # a byte in the middle
        j = rng.randrange(len(text))
        return text[:j] + rng.choice(_JUNK) + text[j:]
    return "\n".join(lines)


@pytest.mark.parametrize(("fmt", "name", "content"), [
    ("csv", "t.csv", GOOD_CSV), ("azure", "a.csv", GOOD_AZURE), ("mooncake", "m.jsonl", GOOD_MOONCAKE),
])  # fmt: skip
def test_random_mutations_load_or_raise_a_trace_error(
    tmp_path: Path, fmt: str, name: str, content: str
) -> None:
    rng = random.Random(13)
    outcomes = {"loaded": 0, "refused": 0}
    for k in range(40):
        mutated = _mutate(_mutate(content, rng), rng)
        path = tmp_path / f"{k}-{name}"
        path.write_bytes(mutated.encode("utf-8", errors="surrogatepass"))
        try:
            trace = load_trace(path, fmt)
        except TraceError as exc:
            assert str(exc).startswith(path.name), str(exc)  # names the file
            outcomes["refused"] += 1
        else:
            assert len(trace) and (trace.input_tokens >= 1).all() and trace.duration_s <= MAX_SPAN_S
            outcomes["loaded"] += 1
    assert outcomes["refused"] >= 10  # the mutations do break files
