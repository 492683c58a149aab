"""Shared by the trace reader tests: a small trace file written under the test's tmp_path."""

from __future__ import annotations

from pathlib import Path


def write(tmp_path: Path, content: str | bytes, name: str) -> Path:
    """`content` as the file's bytes (text encoded as UTF-8, whatever the locale); returns its path."""
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path
