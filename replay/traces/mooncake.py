"""Mooncake traces (FAST'25 release): JSON Lines with `timestamp` (ms from the trace start),
`input_length`, `output_length` and `hash_ids`.

`hash_ids` (512-token prefix blocks) must be a list when present, but is not carried: the replay's
engine model has no prefix cache, so shared prefixes do not change its work. It may be absent (the
same reader then serves Mooncake-shaped traces without block ids).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from replay.trace import Trace
from replay.traces import tabular
from replay.traces.errors import TraceError, at

TIME, INPUT, OUTPUT, BLOCKS = "timestamp", "input_length", "output_length", "hash_ids"


def load(path: Path, *, on_unsorted: tabular.Unsorted = "sort") -> Trace:
    file = path.name
    objects, rows = tabular.read_jsonl(tabular.decode(tabular.read_bytes(path), file), file)
    for obj, row in zip(objects, rows, strict=True):
        blocks = obj.get(BLOCKS)
        if blocks is not None and not isinstance(blocks, list):
            raise TraceError(f"{at(file, int(row), BLOCKS)}expected a list of block ids, got {blocks!r}")
    stamps = tabular.json_values(objects, rows, file, TIME)
    timestamp_ms = tabular.float_column(stamps, rows, file, TIME, text=False)
    return tabular.finish(
        tabular.trace_name(path),
        file,
        np.asarray(timestamp_ms / 1000.0, dtype=np.float64),
        tabular.int_column(tabular.json_values(objects, rows, file, INPUT), rows, file, INPUT, text=False),
        tabular.int_column(tabular.json_values(objects, rows, file, OUTPUT), rows, file, OUTPUT, text=False),
        rows,
        time_field=TIME,
        time_values=stamps,
        on_unsorted=on_unsorted,
    )
