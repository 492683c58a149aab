"""Validated numpy columns from a trace's records: counts, seconds and timestamps, each converted in
one numpy call when the column is clean and walked value by value only to name the first bad row
(replay/traces/tabular.py reads the records; each format module picks its columns)."""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from typing import cast

import numpy as np
import numpy.typing as npt

from replay.traces import bounds
from replay.traces.errors import TraceError, at

Rows = npt.NDArray[np.int64]  # the 1-based row number of each record, for messages


def int_column(
    values: Sequence[object], rows: Rows, file: str, field: str, *, text: bool
) -> npt.NDArray[np.int64]:
    """Non-negative integers: CSV strings (`text`) or JSON integers (JSON floats, strings, bools refused)."""
    try:
        if text:  # CSV cells are str by construction
            column = _parse_ints(cast(Sequence[str], values))
        elif all(type(v) is int for v in values):
            column = np.array(values, dtype=np.int64)
        else:
            raise ValueError
    except (ValueError, OverflowError, TypeError):
        i = next((i for i, v in enumerate(values) if not _is_int(v, text)), 0)
        raise TraceError(
            f"{at(file, int(rows[i]), field)}expected a non-negative integer, got {_shown(values[i])}"
        ) from None
    negative = np.flatnonzero(column < 0)
    if len(negative):
        i = int(negative[0])
        raise TraceError(
            f"{at(file, int(rows[i]), field)}expected a non-negative integer, got {_shown(values[i])}"
        )
    return column


def _shown(value: object) -> str:
    """A value for a message: a 5,000-digit number is shown by its length, not in full."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:24]}… ({len(str(value)):,} characters)"


def _parse_ints(values: Sequence[str]) -> npt.NDArray[np.int64]:
    """One C-level parse of the joined column (≈ 7× faster than `astype`); any doubt → `astype`.
    ValueError unless every value is ASCII digits (numpy and Python also read `１２` and `1_000`)."""
    joined = "\n".join(values)
    if not _plain_ascii(joined):
        raise ValueError("not ASCII digits")
    # whitespace separates numbers for numpy: "1 2" next to an empty field would still count right
    if " " not in joined and "\t" not in joined and "" not in values:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # numpy warns, and stops early, on text it cannot read
                column = np.fromstring(joined, dtype=np.int64, sep="\n")
            # it saturates out-of-range numbers at the int64 bounds, where `astype` raises
            if len(column) == len(values) and not np.isin(column, _INT64_BOUNDS).any():
                return column
        except (ValueError, DeprecationWarning):
            pass
    return np.array(values, dtype=np.str_).astype(np.int64)  # raises ValueError on the bad value


_INT64_BOUNDS = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max], dtype=np.int64)


_ASCII_INT = re.compile(r"[ \t]*[0-9]+[ \t]*")


def _plain_ascii(joined: str) -> bool:
    """No character numpy or Python would read as a digit or separator though it is none: fullwidth
    or other non-ASCII digits, `_` (checked on a whole column at once)."""
    return joined.isascii() and "_" not in joined


def _is_int(value: object, text: bool) -> bool:
    if text and isinstance(value, str):
        if not _ASCII_INT.fullmatch(value):
            return False
        try:
            value = int(value)
        except ValueError:
            return False
    return type(value) is int and -(2**63) <= value < 2**63


def float_column(
    values: Sequence[object], rows: Rows, file: str, field: str, *, text: bool
) -> npt.NDArray[np.float64]:
    """Finite numbers: CSV strings (`text`) or JSON numbers (JSON strings and bools refused)."""
    try:
        if text:
            if not _plain_ascii("".join(cast(Sequence[str], values))):
                raise ValueError("not ASCII")
            column = np.array(values, dtype=np.str_).astype(np.float64)
        elif all(type(v) is int or type(v) is float for v in values):
            column = np.array(values, dtype=np.float64)
        else:
            raise ValueError
    except (ValueError, OverflowError, TypeError):
        column = np.full(len(values), np.nan)  # mark everything; the walk below finds the first culprit
    bad = np.flatnonzero(~np.isfinite(column))
    if len(bad):
        i = next((int(j) for j in bad if not _is_finite(values[int(j)], text)), int(bad[0]))
        raise TraceError(f"{at(file, int(rows[i]), field)}expected a finite number, got {_shown(values[i])}")
    return column


def _is_finite(value: object, text: bool) -> bool:
    if type(value) is bool:
        return False
    if isinstance(value, int | float):
        return math.isfinite(value)
    if text and isinstance(value, str):
        if not _plain_ascii(value):
            return False
        try:
            return math.isfinite(float(value))
        except ValueError:
            return False
    return False


_UTC_SUFFIXES = ("Z", "+00:00", "+0000", " UTC")
_SHORTEST_DATETIME = len("2024-01-01T00:00")


def datetime_column(values: Sequence[object], rows: Rows, file: str, field: str) -> npt.NDArray[np.float64]:
    """ISO-8601 date-times (space or `T`, up to 9 fractional digits) → seconds since the first row.

    Naive times are taken as they are (the Azure 2023 traces give no zone); a UTC suffix (`Z`,
    `+00:00`) is accepted; any other offset is refused rather than silently mixed.
    """
    # non-strings (JSON numbers, null) are parsed as their text, fail, and are reported as they were
    strings = cast(Sequence[str], values)
    suffix = next((s for s in _UTC_SUFFIXES if strings and str(strings[0]).endswith(s)), "")
    if suffix:
        strings = [str(s)[: -len(suffix)] if str(s).endswith(suffix) else f"{s}?" for s in strings]
    try:
        with warnings.catch_warnings():
            # numpy would convert an explicit offset with a UserWarning; make it a parse failure instead
            warnings.simplefilter("error", UserWarning)
            text = np.array(strings, dtype=np.str_)
            # microseconds first: datetime64[ns] wraps silently outside 1677-2262 (0001 -> 1754)
            stamps = text.astype("datetime64[us]")
        # numpy also reads "2023" or "17" as a year: a date-time here needs a time of day, ≥ 16 chars
        stamps[np.char.str_len(text) < _SHORTEST_DATETIME] = np.datetime64("NaT")
    except (ValueError, UserWarning):
        stamps = np.full(len(strings), np.datetime64("NaT"), dtype="datetime64[us]")
    bad = np.flatnonzero(np.isnat(stamps))
    if len(bad):
        i = next((int(j) for j in bad if not _is_datetime(str(strings[int(j)]))), int(bad[0]))
        raise TraceError(
            f"{at(file, int(rows[i]), field)}expected a date-time like 2023-11-16 18:17:03.9799600"
            f"{' with a ' + suffix.strip() + ' suffix like the first row' if suffix else ''}, "
            f"got {values[i]!r}"
        )
    bounds.check_datetimes(stamps, rows, file, field, values)
    us = stamps.astype(np.int64)
    return np.asarray((us - us.min()) / 1e6, dtype=np.float64)


def _is_datetime(value: str) -> bool:
    if len(value) < _SHORTEST_DATETIME:
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            return not np.isnat(np.datetime64(value, "us"))
    except (ValueError, UserWarning):
        return False
