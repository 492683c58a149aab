"""Any CSV or JSON Lines request log, given which column holds what.

Timestamps may be absolute (Unix epoch numbers, or ISO-8601 date-times with `time_unit="datetime"`)
or relative (numbers from any origin); either way the trace is re-based so its first request is at 0.
Numbers are read in `time_unit` (s, ms, us or ns). For JSONL the "columns" are the objects' keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from replay.trace import Trace
from replay.traces import bounds, columns, tabular
from replay.traces.errors import TraceError

TimeUnit = Literal["s", "ms", "us", "ns", "datetime"]
UNITS_PER_SECOND: dict[str, float] = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}

DEFAULT_ARRIVAL, DEFAULT_INPUT, DEFAULT_OUTPUT = "timestamp", "input_tokens", "output_tokens"


def load_csv(
    path: Path,
    *,
    arrival_column: str = DEFAULT_ARRIVAL,
    input_column: str = DEFAULT_INPUT,
    output_column: str = DEFAULT_OUTPUT,
    time_unit: TimeUnit = "s",
    delimiter: str = ",",
    on_unsorted: tabular.Unsorted = "sort",
    max_span_s: float | None = bounds.MAX_SPAN_S,
) -> Trace:
    _check_options(time_unit, delimiter)
    file = path.name
    names = (arrival_column, input_column, output_column)
    table = tabular.read_csv(
        tabular.decode(tabular.read_bytes(path), file), file, required=names, delimiter=delimiter
    )
    values = [table.columns[name] for name in names]
    return _finish(path, values, table.rows, names, time_unit, on_unsorted, max_span_s, text=True)


def load_jsonl(
    path: Path,
    *,
    arrival_column: str = DEFAULT_ARRIVAL,
    input_column: str = DEFAULT_INPUT,
    output_column: str = DEFAULT_OUTPUT,
    time_unit: TimeUnit = "s",
    on_unsorted: tabular.Unsorted = "sort",
    max_span_s: float | None = bounds.MAX_SPAN_S,
) -> Trace:
    _check_options(time_unit, ",")
    file = path.name
    objects, rows = tabular.read_jsonl(tabular.decode(tabular.read_bytes(path), file), file)
    names = (arrival_column, input_column, output_column)
    values = [tabular.json_values(objects, rows, file, name) for name in names]
    return _finish(path, values, rows, names, time_unit, on_unsorted, max_span_s, text=False)


def _check_options(time_unit: str, delimiter: str) -> None:
    if time_unit != "datetime" and time_unit not in UNITS_PER_SECOND:
        raise TraceError(f"time_unit: expected one of s, ms, us, ns, datetime, got {time_unit!r}")
    if len(delimiter) != 1:
        raise TraceError(f"delimiter: expected one character, got {delimiter!r}")


def _finish(
    path: Path,
    values: Sequence[Sequence[object]],
    rows: tabular.Rows,
    names: tuple[str, str, str],
    time_unit: str,
    on_unsorted: tabular.Unsorted,
    max_span_s: float | None,
    *,
    text: bool,
) -> Trace:
    file = path.name
    arrival_s: npt.NDArray[np.float64]
    if time_unit == "datetime":
        arrival_s = columns.datetime_column(values[0], rows, file, names[0])
    else:
        stamps = columns.float_column(values[0], rows, file, names[0], text=text)
        # re-base before converting: epoch milliseconds keep their sub-millisecond digits
        arrival_s = (stamps - stamps.min()) / UNITS_PER_SECOND[time_unit]
    return tabular.finish(
        tabular.trace_name(path),
        file,
        arrival_s,
        columns.int_column(values[1], rows, file, names[1], text=text),
        columns.int_column(values[2], rows, file, names[2], text=text),
        rows,
        time_field=names[0],
        time_values=values[0],
        on_unsorted=on_unsorted,
        input_field=names[1],
        output_field=names[2],
        max_span_s=max_span_s,
    )
