"""BurstGPT (Azure OpenAI GPT usage, HPMLL/BurstGPT): CSV with `Timestamp` (seconds), `Model`,
`Request tokens`, `Response tokens`, `Total tokens`, `Log Type`; v3 adds `Session ID` and
`Elapsed time`, which are ignored. Columns are found by name, so every release reads the same way.

Failed requests appear with 0 response tokens (vLLM's benchmark and the upstream `*_without_fails`
files drop them); they are dropped here too unless `keep_failed=True`, since a failed request never
occupied an engine the way a served one does. `model` and `log_type` keep only matching rows
(e.g. `model="GPT-4"`, `log_type="Conversation log"`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from replay.trace import Trace
from replay.traces import bounds, columns, tabular
from replay.traces.errors import TraceError

TIME, MODEL, INPUT, OUTPUT, LOG_TYPE = "Timestamp", "Model", "Request tokens", "Response tokens", "Log Type"


def load(
    path: Path,
    *,
    model: str | None = None,
    log_type: str | None = None,
    keep_failed: bool = False,
    on_unsorted: tabular.Unsorted = "sort",
    max_span_s: float | None = bounds.MAX_SPAN_S,
) -> Trace:
    file = path.name
    required = (
        (TIME, INPUT, OUTPUT)
        + ((MODEL,) if model is not None else ())
        + ((LOG_TYPE,) if log_type is not None else ())
    )
    table = tabular.read_csv(tabular.decode(tabular.read_bytes(path), file), file, required=required)
    rows = table.rows
    arrival_s = columns.float_column(table.columns[TIME], rows, file, TIME, text=True)
    input_tokens = columns.int_column(table.columns[INPUT], rows, file, INPUT, text=True)
    output_tokens = columns.int_column(table.columns[OUTPUT], rows, file, OUTPUT, text=True)
    keep = np.ones(len(rows), dtype=bool)
    if not keep_failed:
        keep &= output_tokens > 0
    for column, wanted in ((MODEL, model), (LOG_TYPE, log_type)):
        if wanted is not None:
            values = np.array(table.columns[column], dtype=np.str_)
            matches = np.char.strip(values) == wanted
            if not matches.any():
                found = ", ".join(repr(str(v)) for v in np.unique(np.char.strip(values))[:10])
                raise TraceError(f"{file}: {column}: no row has {wanted!r} (found {found})")
            keep &= matches
    if not keep.any():
        failed = int((output_tokens == 0).sum())
        raise TraceError(
            f"{file}: no request left after the filters (model={model!r}, log_type={log_type!r}; "
            f"{failed} of {len(rows)} rows are failed requests with 0 {OUTPUT}, "
            "kept only with keep_failed=True)"
        )
    return tabular.finish(
        tabular.trace_name(path),
        file,
        arrival_s[keep],
        input_tokens[keep],
        output_tokens[keep],
        rows[keep],
        time_field=TIME,
        time_values=np.asarray(table.columns[TIME], dtype=np.str_)[keep],
        on_unsorted=on_unsorted,
        input_field=INPUT,
        output_field=OUTPUT,
        max_span_s=max_span_s,
    )
