"""Azure LLM inference traces (Splitwise 2023, DynamoLLM 2024): `TIMESTAMP,ContextTokens,GeneratedTokens`.

`TIMESTAMP` is a wall-clock date-time (2023: naive, 7 fractional digits; 2024: UTC with 6); it is
re-based so the first request is at 0. Extra columns (the 2025 multimodal trace's `NumImages`) are
ignored.
"""

from __future__ import annotations

from pathlib import Path

from replay.trace import Trace
from replay.traces import bounds, columns, tabular

TIME, INPUT, OUTPUT = "TIMESTAMP", "ContextTokens", "GeneratedTokens"


def load(
    path: Path, *, on_unsorted: tabular.Unsorted = "sort", max_span_s: float | None = bounds.MAX_SPAN_S
) -> Trace:
    file = path.name
    table = tabular.read_csv(
        tabular.decode(tabular.read_bytes(path), file), file, required=(TIME, INPUT, OUTPUT)
    )
    rows = table.rows
    return tabular.finish(
        tabular.trace_name(path),
        file,
        columns.datetime_column(table.columns[TIME], rows, file, TIME),
        columns.int_column(table.columns[INPUT], rows, file, INPUT, text=True),
        columns.int_column(table.columns[OUTPUT], rows, file, OUTPUT, text=True),
        rows,
        time_field=TIME,
        time_values=table.columns[TIME],
        on_unsorted=on_unsorted,
        input_field=INPUT,
        output_field=OUTPUT,
        max_span_s=max_span_s,
    )
