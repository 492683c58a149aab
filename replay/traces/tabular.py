"""Shared by the request-level formats: bytes → records → validated columns (columns.py) → `Trace`.

Speed matters (the replay runs at millions of requests per second, so loading must not dominate):
every converter first converts a whole column in one numpy call and only walks the values one by one
when that fails, to name the first bad row. A clean file pays one C-level pass per column.

Two conventions every format shares, documented in docs/traces.md:
- Out-of-order timestamps are sorted (stable, so equal timestamps keep file order) unless the caller
  asks for `on_unsorted="reject"`. Logs merged from several front ends are routinely a little out of
  order, and the replay only needs arrival order.
- Token counts must be non-negative integers; a 0 is raised to 1, because the simulated engine spends
  at least one prefill token and one step on any request it admits.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from replay.trace import Trace
from replay.traces import bounds
from replay.traces.errors import TraceError, at

Unsorted = Literal["sort", "reject"]
UNSORTED_CHOICES: tuple[Unsorted, ...] = ("sort", "reject")

Rows = npt.NDArray[np.int64]  # the 1-based row number of each record, for messages


def trace_name(path: Path) -> str:
    """`azure_llm_2023_code.csv` → `azure_llm_2023_code`; `x.tar.gz` → `x`."""
    name = path.name
    for suffix in (".tar.gz", ".tgz", ".jsonl", ".json", ".csv"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{path}: is a directory, expected a file") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror}") from exc


# compressed or archived files, by their magic bytes: a hint beats "not valid UTF-8: byte 0x8b"
_PACKED = (
    (b"\x1f\x8b", "gzip-compressed", "gunzip -k"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed", "unzstd"),
    (b"\xfd7zXZ\x00", "xz-compressed", "unxz -k"),
    (b"BZh", "bzip2-compressed", "bunzip2 -k"),
    (b"PK\x03\x04", "a zip archive", "unzip"),
)


def decode(data: bytes, file: str) -> str:
    """UTF-8 (a leading BOM is dropped); a bad byte is reported with its row and column."""
    for magic, what, tool in _PACKED:
        if data.startswith(magic):
            raise TraceError(
                f"{file}: is {what} (magic bytes {magic.hex(' ')}); unpack it first: {tool} {file}"
            )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        row = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        bad = data[exc.start : exc.start + 1]
        raise TraceError(f"{at(file, row)}not valid UTF-8: byte 0x{bad.hex()} at column {column}") from None


@dataclass(frozen=True, slots=True)
class Table:
    """A CSV's data records by column name, blank lines dropped; `rows` numbers them like the file."""

    file: str
    columns: dict[str, Sequence[str]]
    rows: Rows

    def __len__(self) -> int:
        return len(self.rows)


def read_csv(
    text: str,
    file: str,
    *,
    required: Sequence[str],
    header: Sequence[str] | None = None,
    delimiter: str = ",",
) -> Table:
    """Parse CSV text in bulk. With `header=None` the first record is the header (row 1);
    otherwise the file has no header and `header` names its columns (the first record is row 1).

    Files without quotes (every trace seen so far) are split with two `str.split` calls, about 10×
    faster than `csv.reader`; a quote anywhere sends the whole file through `csv.reader`.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    needs_csv_module = '"' in text or "\r" in text  # quoting, or old Mac line ends
    if needs_csv_module:
        records = _csv_records(text, file, delimiter)
    else:  # only the header is needed as records
        records = [line.split(delimiter) if line else [] for line in text.split("\n", 1)[:1]]
    if header is None:
        if not records or not any(records[0]):
            raise TraceError(f"{file}: empty file, expected a header row naming {', '.join(required)}")
        names = [name.strip() for name in records[0]]
        first_row = 2
    else:
        names, first_row = list(header), 1
    seen: dict[str, int] = {}
    for column, name in enumerate(names, 1):
        if name and name in seen:
            raise TraceError(
                f"{at(file, first_row - 1 if header is None else 1)}column {name!r} appears twice "
                f"(columns {seen[name]} and {column}): which one holds the data is ambiguous"
            )
        seen[name] = column
    missing = [name for name in required if name not in names]
    if missing:
        raise TraceError(
            f"{at(file, 1)}missing column {', '.join(repr(m) for m in missing)} "
            f"(found {', '.join(repr(n) for n in names)})"
        )
    wanted = {name: names.index(name) for name in required}
    if needs_csv_module:
        body = records[first_row - 1 :]
        widths = np.fromiter(map(len, body), dtype=np.int64, count=len(body))
    else:
        widths = _field_counts(text, delimiter)[first_row - 1 :]
    rows = np.arange(first_row, first_row + len(widths), dtype=np.int64)
    keep = widths > 0  # csv yields [] for an empty line (often the trailing newline): skip those
    if not keep.all():
        rows, widths = rows[keep], widths[keep]
    wrong = np.flatnonzero(widths != len(names))
    if len(wrong):
        i = int(wrong[0])
        raise TraceError(f"{at(file, int(rows[i]))}expected {len(names)} fields, got {int(widths[i])}")
    if not len(rows):
        raise TraceError(f"{file}: no data rows after the header")
    columns: dict[str, Sequence[str]]
    if needs_csv_module:
        transposed = list(zip(*(r for r in body if r), strict=True))
        columns = {name: transposed[i] for name, i in wanted.items()}
    else:
        body_text = text.split("\n", first_row - 1)[-1] if first_row > 1 else text
        if keep[: int(np.flatnonzero(keep)[-1])].all():  # blank lines only at the end: one split
            flat = body_text.rstrip("\n").replace("\n", delimiter).split(delimiter)
        else:
            flat = delimiter.join(line for line in body_text.split("\n") if line).split(delimiter)
        columns = {name: flat[i :: len(names)] for name, i in wanted.items()}
    return Table(file, columns, rows)


def _field_counts(text: str, delimiter: str) -> npt.NDArray[np.int64]:
    """Fields on each `\\n`-separated line (0 for an empty line), counted on the UTF-8 bytes.

    ASCII bytes never occur inside a multi-byte UTF-8 sequence, so counting bytes is exact for an
    ASCII delimiter; any other delimiter is counted line by line.
    """
    if not delimiter.isascii():
        lines = text.split("\n")
        return np.fromiter(
            (ln.count(delimiter) + 1 if ln else 0 for ln in lines), dtype=np.int64, count=len(lines)
        )
    data = np.frombuffer(text.encode(), dtype=np.uint8)
    newlines = np.flatnonzero(data == ord("\n"))
    starts = np.concatenate(([0], newlines + 1))
    ends = np.append(newlines, len(data))
    delimiters = np.flatnonzero(data == ord(delimiter))
    counts = np.searchsorted(delimiters, ends) - np.searchsorted(delimiters, starts)
    return np.where(ends > starts, counts + 1, 0).astype(np.int64)


def _csv_records(text: str, file: str, delimiter: str) -> list[list[str]]:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        return list(reader)
    except csv.Error as exc:
        raise TraceError(f"{at(file, reader.line_num)}malformed CSV: {exc}") from None


def read_jsonl(text: str, file: str) -> tuple[list[dict[str, object]], Rows]:
    """Parse JSON Lines in bulk (one `json.loads` over the whole file); blank lines are skipped."""
    lines = text.split("\n")
    numbered = [(i + 1, line) for i, line in enumerate(lines) if line.strip()]
    if not numbered:
        raise TraceError(f"{file}: empty file, expected one JSON object per line")
    rows = np.fromiter((n for n, _ in numbered), dtype=np.int64, count=len(numbered))
    joined = "[" + ",".join(line for _, line in numbered) + "]"
    try:
        objects = json.loads(joined)
    except (ValueError, RecursionError):  # malformed, an integer past 4,300 digits, nested too deep
        objects = [_json_line(line, file, n) for n, line in numbered]  # slow path names the row
    if len(objects) != len(numbered):  # a line like `1, 2` parses as two values in the joined form
        objects = [_json_line(line, file, n) for n, line in numbered]
    for obj, row in zip(objects, rows, strict=True):
        if not isinstance(obj, dict):
            raise TraceError(f"{at(file, int(row))}expected a JSON object, got {type(obj).__name__}")
    _check_unique_keys(joined, objects, numbered, file)
    return objects, rows


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        keys = [k for k, _ in pairs]
        raise _DuplicateKey(next(k for i, k in enumerate(keys) if k in keys[:i]))
    return obj


def _check_unique_keys(
    joined: str, objects: Sequence[dict[str, object]], numbered: Sequence[tuple[int, str]], file: str
) -> None:
    """A key given twice in one row is refused, as a CSV header naming a column twice is: JSON keeps
    the last silently, so which one holds the data is ambiguous. Counting the first row's keys in
    the text (C speed; a key the reader needs is in every row) clears a clean file; only one where
    a key occurs more often than there are rows, or with \\u escapes (a key spelled two ways), is
    parsed again row by row with a hook that names the row (a hook on the bulk parse costs +35 %)."""
    suspicious = "\\u" in joined or any(
        joined.count(json.dumps(key, ensure_ascii=False)) > len(objects) for key in objects[0]
    )
    if not suspicious:
        return
    for n, line in numbered:
        try:
            json.loads(line, object_pairs_hook=_unique_keys)
        except _DuplicateKey as dup:
            raise TraceError(
                f"{at(file, n, dup.key)}the key appears twice in the row: which one holds the data is "
                "ambiguous"
            ) from None


_LONG_INTEGER = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:\s*-?[0-9]{4300}')


def _json_line(line: str, file: str, row: int) -> object:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{at(file, row)}not valid JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise TraceError(
            f"{at(file, row)}JSON nested deeper than the parser allows (~{sys.getrecursionlimit():,} "
            "levels); a trace row is one flat object"
        ) from None
    except ValueError:  # Python refuses to convert an integer of more than 4,300 digits
        key = _LONG_INTEGER.search(line)
        where = at(file, row, key.group(1)) if key else at(file, row)
        raise TraceError(f"{where}an integer of more than 4,300 digits: not a count or a timestamp") from None


def json_values(objects: Sequence[dict[str, object]], rows: Rows, file: str, key: str) -> list[object]:
    values = [obj.get(key, _MISSING) for obj in objects]
    if _MISSING in values:
        i = values.index(_MISSING)
        raise TraceError(f"{at(file, int(rows[i]))}missing key {key!r}")
    return values


_MISSING = object()


def finish(
    name: str,
    file: str,
    arrival_s: npt.NDArray[np.float64],
    input_tokens: npt.NDArray[np.int64],
    output_tokens: npt.NDArray[np.int64],
    rows: Rows,
    *,
    time_field: str,
    time_values: Sequence[object] | npt.NDArray[np.str_],
    on_unsorted: Unsorted,
    input_field: str,
    output_field: str,
    max_span_s: float | None = bounds.MAX_SPAN_S,
) -> Trace:
    """Sort (or reject) out-of-order rows, check the bounds (replay/traces/bounds.py), re-base so the
    first request is at 0, raise zero tokens to 1.

    `time_values` are the timestamps as the file wrote them (parallel to `rows`), for the messages.
    """
    if on_unsorted not in UNSORTED_CHOICES:
        raise TraceError(f"on_unsorted: expected one of {', '.join(UNSORTED_CHOICES)}, got {on_unsorted!r}")
    if len(arrival_s) == 0:
        raise TraceError(f"{file}: no requests")
    backwards = np.flatnonzero(np.diff(arrival_s) < 0)
    if len(backwards):
        if on_unsorted == "reject":
            i = int(backwards[0]) + 1
            raise TraceError(
                f"{at(file, int(rows[i]), time_field)}{time_values[i]} is earlier than row "
                f"{int(rows[i - 1])}'s {time_values[i - 1]}; the file must be sorted by time "
                "(on_unsorted='sort' sorts it)"
            )
        order = np.argsort(arrival_s, kind="stable")
        arrival_s, input_tokens, output_tokens = arrival_s[order], input_tokens[order], output_tokens[order]
        rows = rows[order]
        time_values = [time_values[int(i)] for i in order]
    bounds.check_span(arrival_s, rows, file, time_field, time_values, max_span_s)
    bounds.check_tokens(input_tokens, rows, file, input_field)
    bounds.check_tokens(output_tokens, rows, file, output_field)
    return Trace(
        name=name,
        arrival_s=np.ascontiguousarray(arrival_s - arrival_s[0], dtype=np.float64),
        input_tokens=np.maximum(input_tokens, 1).astype(np.int64, copy=False),
        output_tokens=np.maximum(output_tokens, 1).astype(np.int64, copy=False),
    )
