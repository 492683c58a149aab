"""What a trace may hold, whatever its format: token counts, the time it spans, date-times.

Each bound turns input that used to hang the replay or exhaust memory into a `TraceError` naming
the file, row and field:

- `MAX_TOKENS` = 2,000,000 per request, input and output alike: the longest context window served
  in production (Gemini 1.5 Pro's 2M tokens). A prompt or a generation longer than that is no
  request any engine runs; 10¹² output tokens used to end in a 319 GiB allocation.
- `MAX_SPAN_S` = 31 days from the first request to the last: longer than Azure's traces (one
  week), ServeGen's (14 days) and Mooncake's (hours); BurstGPT's 121 days are replayed in windows
  or with the bound moved. One stray timestamp (year 9999, epoch milliseconds read as seconds: an
  hour of traffic becomes 42 days) used to make a replay of centuries that never finished, and the
  replay's cost grows with simulated time (~20 s of wall time per idle simulated day under load).
  Loaders take `max_span_s` (`--trace-option max_span_s=none` lifts it); with `--start-s/--end-s`
  the window bounds the replay instead.
- Date-times from 1970-01-01 to 2199-12-31: numpy's nanosecond date-times silently wrap outside
  1677–2262 (year 0001 read as 1754), so the range is checked before converting.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from replay.traces.errors import TraceError, at

MAX_TOKENS = 2_000_000
MAX_SPAN_S = 31 * 86_400.0
EARLIEST_DATETIME = np.datetime64("1970-01-01", "us")
LATEST_DATETIME = np.datetime64("2200-01-01", "us")  # exclusive


def check_tokens(tokens: npt.NDArray[np.int64], rows: npt.NDArray[np.int64], file: str, field: str) -> None:
    """Every count at most MAX_TOKENS."""
    over = np.flatnonzero(tokens > MAX_TOKENS)
    if len(over):
        i = int(over[0])
        raise TraceError(
            f"{at(file, int(rows[i]), field)}{int(tokens[i]):,} tokens, more than the {MAX_TOKENS:,} "
            "a request may have (the longest context window served)"
        )


def check_span(
    arrival_s: npt.NDArray[np.float64],
    rows: npt.NDArray[np.int64],
    file: str,
    field: str,
    written: Sequence[object] | npt.NDArray[np.str_],
    max_span_s: float | None,
) -> None:
    """Sorted arrivals span at most `max_span_s`; the error names the row on the far side of the
    widest gap (a stray timestamp is almost always alone there) and both times as written."""
    if max_span_s is None or len(arrival_s) < 2:
        return
    span = float(arrival_s[-1] - arrival_s[0])
    if span <= max_span_s:
        return
    gaps = np.diff(arrival_s)
    k = int(np.argmax(gaps))
    if k == 0 and len(arrival_s) > 2:  # the first row stands apart: it is the stray one
        stray, other, relation = 0, 1, "before"
    else:
        stray, other, relation = k + 1, k, "after"
    raise TraceError(
        f"{at(file, int(rows[stray]), field)}{written[stray]} is {_duration(float(gaps[k]))} {relation} row "
        f"{int(rows[other])}'s {written[other]}: the trace would span {_duration(span)}, more than the "
        f"{_duration(max_span_s)} max_span_s allows; fix or drop that row, replay a window of the trace "
        "(--start-s/--end-s, on its own clock), or lift the bound (--trace-option max_span_s=none)"
    )


def check_datetimes(
    stamps: npt.NDArray[np.datetime64],
    rows: npt.NDArray[np.int64],
    file: str,
    field: str,
    written: Sequence[object],
) -> None:
    """Date-times (microsecond precision) from 1970 to 2199."""
    outside = np.flatnonzero((stamps < EARLIEST_DATETIME) | (stamps >= LATEST_DATETIME))
    if len(outside):
        i = int(outside[0])
        raise TraceError(
            f"{at(file, int(rows[i]), field)}{written[i]!r} is outside 1970-01-01 .. 2199-12-31, "
            "the dates a request log can have"
        )


def _duration(seconds: float) -> str:
    if seconds >= 2 * 365 * 86_400:
        return f"{seconds / (365.25 * 86_400):,.0f} years"
    if seconds >= 2 * 86_400:
        return f"{seconds / 86_400:,.1f} days"
    return f"{seconds:,.0f} s"
