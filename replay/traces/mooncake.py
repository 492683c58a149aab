"""Mooncake traces (FAST'25 release): JSON Lines with `timestamp` (ms from the trace start),
`input_length`, `output_length` and `hash_ids`.

`hash_ids` (512-token prefix blocks: equal ids, equal prompt prefixes) must be a list of integers
when present; they become the trace's prefix blocks, which an engine with prefix caching reuses
(replay/scheduler.py). It may be absent (the same reader then serves Mooncake-shaped traces
without block ids).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from replay.trace import PrefixBlocks, Trace
from replay.traces import bounds, columns, tabular
from replay.traces.errors import TraceError, at

TIME, INPUT, OUTPUT, BLOCKS = "timestamp", "input_length", "output_length", "hash_ids"


def load(
    path: Path, *, on_unsorted: tabular.Unsorted = "sort", max_span_s: float | None = bounds.MAX_SPAN_S
) -> Trace:
    file = path.name
    objects, rows = tabular.read_jsonl(tabular.decode(tabular.read_bytes(path), file), file)
    counts: list[int] = []
    ids: list[int] = []
    for obj, row in zip(objects, rows, strict=True):
        blocks = obj.get(BLOCKS)
        if blocks is None:
            counts.append(0)
            continue
        if not isinstance(blocks, list) or not all(
            isinstance(b, int) and not isinstance(b, bool) and 0 <= b < 1 << 40 for b in blocks
        ):
            raise TraceError(f"{at(file, int(row), BLOCKS)}expected a list of block ids, got {blocks!r}")
        counts.append(len(blocks))
        ids.extend(blocks)
    stamps = tabular.json_values(objects, rows, file, TIME)
    timestamp_ms = columns.float_column(stamps, rows, file, TIME, text=False)
    trace = tabular.finish(
        tabular.trace_name(path),
        file,
        np.asarray(timestamp_ms / 1000.0, dtype=np.float64),
        columns.int_column(tabular.json_values(objects, rows, file, INPUT), rows, file, INPUT, text=False),
        columns.int_column(tabular.json_values(objects, rows, file, OUTPUT), rows, file, OUTPUT, text=False),
        rows,
        time_field=TIME,
        time_values=stamps,
        on_unsorted=on_unsorted,
        input_field=INPUT,
        output_field=OUTPUT,
        max_span_s=max_span_s,
    )
    if not ids:
        return trace
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    prefix = PrefixBlocks(offsets, np.array(ids, dtype=np.int64), block_tokens=512)
    order = np.argsort(timestamp_ms, kind="stable")  # the order tabular.finish put the rows in
    return replace(trace, prefix=prefix.take(order))
