"""report.html: one self-contained page (tables and plots inline, no network, no script) built
from a report's own document, so a field added to report.json, sweep.json or a league report
appears here without this module changing.

How a document becomes a page: top-level scalars are a summary table; a mapping of mappings
(`policies`) is one table, a row per key and a column per scalar field; a list of flat mappings
(sweep `points`) is one table, nested `params` flattened; other mappings are key/value tables.
Long per-time series (timelines, replica lives) are left to the JSON and the plots. Shares
(`*_attainment`, `*_rate`) print as percentages that never round up to 100 %.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from replay.report import percent

MAX_ROWS = 200  # longer lists are series: the plots show them
_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}th{background:#f4f4f4}
tr:nth-child(even) td{background:#fafafa}img{max-width:100%;border:1px solid #eee;margin:.5em 0}
.note{color:#666;font-size:12px}
"""


def write_html(path: Path, title: str, doc: Mapping[str, Any], figures: Sequence[Path] = ()) -> Path:
    path.write_text(render(title, doc, figures), encoding="utf-8")
    return path


def render(title: str, doc: Mapping[str, Any], figures: Sequence[Path] = ()) -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title>"]
    parts.append(f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>")
    scalars = {k: v for k, v in doc.items() if _scalar(v)}
    if scalars:
        parts.append(_kv_table(scalars))
    for figure in figures:
        if figure.exists():
            data = base64.b64encode(figure.read_bytes()).decode("ascii")
            parts.append(
                f"<h2>{_e(figure.stem)}</h2><img alt='{_e(figure.stem)}' src='data:image/png;base64,{data}'>"
            )
    for key, value in doc.items():
        if _scalar(value):
            continue
        section = _section(value)
        if section:
            parts.append(f"<h2>{_e(key)}</h2>{section}")
    parts.append("<p class='note'>Every figure and table comes from the JSON report beside this page.</p>")
    parts.append("</body></html>")
    return "".join(parts)


def _section(value: Any) -> str:
    if isinstance(value, Mapping) and value and all(isinstance(v, Mapping) for v in value.values()):
        return _rows_table([{"": k, **_flat(v)} for k, v in value.items()])
    if isinstance(value, Mapping):
        return _kv_table(_flat(value)) if value else ""
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        if len(value) > MAX_ROWS:
            return f"<p class='note'>{len(value):,} rows: see the JSON report.</p>"
        return _rows_table([_flat(v) for v in value])
    return ""


def _flat(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Scalars of a mapping, nested mappings as `outer.inner`; lists are left out (series)."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if _scalar(value):
            out[name] = value
        elif isinstance(value, Mapping):
            out.update(_flat(value, f"{name}."))
    return out


def _rows_table(rows: Sequence[Mapping[str, Any]]) -> str:
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(c, row.get(c))}</td>" for c in columns) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _kv_table(values: Mapping[str, Any]) -> str:
    body = "".join(f"<tr><td>{_e(k)}</td><td>{_cell(k, v)}</td></tr>" for k, v in values.items())
    return f"<table>{body}</table>"


def _cell(column: str, value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a"
        if column.rsplit(".", 1)[-1].endswith(("_attainment", "_rate")) and 0.0 <= value <= 1.0:
            return percent(value, 2)
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return _e(str(value))


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _e(text: str) -> str:
    return html.escape(str(text), quote=True)
