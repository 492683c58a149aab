"""The one exception every trace reader raises, with the file, row and field in its message.

Rows are 1-based and count the header the way a spreadsheet or `csv` does: in a CSV with a header,
the first request is row 2; in JSONL (no header) it is row 1.
"""

from __future__ import annotations


class TraceError(ValueError):
    """A trace file (or a trace option) is malformed; the message says where and what was expected."""


def at(file: str, row: int | None = None, field: str | None = None) -> str:
    """The location prefix of an error message: `name.csv row 17: ContextTokens: `."""
    where = file
    if row is not None:
        where += f" row {row}"
    return f"{where}: {field}: " if field is not None else f"{where}: "
