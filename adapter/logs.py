"""The adapter's log lines: one record, one line, whatever a client puts in a path or header.

A request path is logged after percent-decoding (`/namespaces/x%0AFORGED…` becomes a newline), so a
client could write a line of its choosing into the log (a fake "authorized" entry, say). Every
record's message has its control characters escaped (`\\n`, `\\r`, `\\x1b`, …, and the Unicode
line separators) before it is formatted; a traceback a record carries is left as it is (the
adapter's own code wrote it).
"""

from __future__ import annotations

import logging
from typing import Final

FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_ESCAPES: Final = {
    **{c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))},
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
    0x2028: "\\u2028",  # LINE SEPARATOR: a line break to some log viewers
    0x2029: "\\u2029",
}


def escape_controls(text: str) -> str:
    """`text` with every control character written as an escape: one printable line."""
    return text.translate(_ESCAPES)


class EscapeControlCharacters(logging.Filter):
    """A handler filter: renders the record's message once, escaped (so `%s` arguments from clients
    cannot break the line), and hands the handler a record without arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        escaped = escape_controls(message)
        if escaped != message or record.args:
            record.msg, record.args = escaped, None
        return True


def configure(level: str) -> None:
    """Log to stderr at `level`, every handler of the root logger escaping control characters."""
    logging.basicConfig(level=level, format=FORMAT)
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, EscapeControlCharacters) for f in handler.filters):
            handler.addFilter(EscapeControlCharacters())
