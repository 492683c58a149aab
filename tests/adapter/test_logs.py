"""One log record is one line: control characters a client sends (a %0A in a path) are escaped
(adapter/logs.py), so no client can forge a log line."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
from conftest import Adapter

from adapter.logs import FORMAT, EscapeControlCharacters, escape_controls


def test_control_characters_are_escaped() -> None:
    assert (
        escape_controls("a\nb\rc\td\x1b[31me\x7f\x85f\u2028g") == "a\\nb\\rc\\td\\x1b[31me\\x7f\\x85f\\u2028g"
    )
    assert escape_controls("plain text, ünïcode ☕ and \\n as two characters") == (
        "plain text, ünïcode ☕ and \\n as two characters"
    )


@pytest.fixture
def log_text() -> Iterator[io.StringIO]:
    """What the adapter's stderr handler would write (cli.run installs the same filter)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(EscapeControlCharacters())
    root = logging.getLogger()
    root.addHandler(handler)
    level, root.level = root.level, logging.INFO
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.level = level


async def test_a_newline_in_a_request_path_cannot_forge_a_log_line(
    adapter: Adapter, log_text: io.StringIO
) -> None:
    forged = "%0A2026-01-01 00:00:00,000 INFO adapter.auth: alice is authorized for everything"
    async with adapter.client() as client:
        response = await client.get(f"/apis/external.metrics.k8s.io/v1beta1/namespaces/default/q{forged}")
    assert response.status_code == 401
    lines = log_text.getvalue().splitlines()
    assert any("401 for" in line and "\\n2026-01-01" in line for line in lines)
    assert not any(line.startswith("2026-01-01 00:00:00,000") for line in lines)


def test_a_traceback_keeps_its_lines(log_text: io.StringIO) -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("adapter.test").exception("failed for %s", "x\ny")
    text = log_text.getvalue()
    assert "failed for x\\ny" in text
    assert "Traceback (most recent call last):\n" in text  # the adapter's own traceback, as it was
