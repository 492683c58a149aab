r"""The Prometheus text exposition format, parsed as strictly as Prometheus' own scraper does.

Pipeline position: adapter/sources/scrape.py hands each engine's body to `ExpositionParser.parse`
(in a worker thread) and reads the preset's signals from the returned `Samples`.

Reference: Prometheus' scrape parser, `model/textparse/promparse.go` and its lexer `promlex.l`
(what a Prometheus server ingests), so the direct scrape and the Prometheus source agree on which
pods have data and what it is; tests/adapter/test_exposition_prometheus.py checks 70 cases against
a real Prometheus (2.42, Debian's). A target whose exposition Prometheus would refuse is an error
here too, for that target only, whether or not the bad line is one the preset reads. The rules:

- sample: `name[{labels}] value [timestamp]`, separated by spaces or tabs (`\r` is not
  whitespace), nothing before the name (Prometheus keeps leading whitespace in the name and then
  refuses it) and nothing after the timestamp; name `[a-zA-Z_:][a-zA-Z0-9_:]*`, label name
  `[a-zA-Z_][a-zA-Z0-9_]*`, label value a double-quoted string; label pairs separated by commas
  (a trailing comma is fine, and, as promparse allows, so is a space instead of a comma);
- value: Go's `strconv.ParseFloat` without hex, `p` or `_` (`1_000`, `0x1p3` refused), ASCII
  digits only (`１２` refused), `Inf`/`Infinity` with or without a sign, `NaN` without one;
  out of range (`1e400`) is an error;
- timestamp: ASCII digits within int64 (no sign, no fraction);
- label values: `\"`, `\\` and `\n` are unescaped, any other `\q` is kept as the two
  characters it is (promparse does not refuse it); invalid UTF-8 is an error (in a plain comment
  it is not); a label name twice in one series, or `__name__` beside the name, is an error; an
  empty value is no label (`a=""` is dropped);
- `# HELP name text` and `# TYPE name counter|gauge|histogram|summary|untyped` are checked; any
  other `#` line is a comment, also after whitespace; blank lines are fine;
- the same series twice: the first sample counts (Prometheus drops the duplicate).

Two deliberate differences, both stricter: a label value may not span lines (promlex lets a raw
newline into one) and a NUL byte outside a label value or comment is an error (promlex reads it as
the end of the body). Prometheus 3's quoted UTF-8 names (`{"my.metric"}`) are refused, as
Prometheus 2 refuses them.

Per-target bounds (the scrape source's settings): at most `max_lines` lines (counted in the bytes,
before anything is decoded or split) and `max_series` sample lines; beyond either the target
fails with reason `too_many_lines` / `too_many_series`.

Speed: every line is checked, so this costs ~3x the old lenient parse of only the lines a preset
reads (docs/adapter-sources.md has the figures). Series keys (`name{labels}`) repeat from scrape to
scrape and across the pods of a deployment, so each distinct key is checked and parsed once and
remembered, as is each distinct value text; a known line costs a split, two dictionary lookups
and a few comparisons.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

MAX_LINES: Final = 20_000  # a vLLM pod exposes ~300-2,000 lines; 10x the largest seen, and more
MAX_SERIES: Final = 10_000
CACHE_SIZE: Final = 50_000  # distinct series keys remembered across all targets


class ExpositionError(ValueError):
    """An exposition Prometheus would refuse, or one past a bound; `reason` is the telemetry label."""

    def __init__(self, message: str, reason: str = "parse") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Sample:
    labels: Mapping[str, str]
    value: float


# sample name -> its samples, in exposition order
Samples = Mapping[str, Sequence[Sample]]

_WS = r"[ \t]*"
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
_LABEL_VALUE = r'"(?:[^"\\\n]|\\[^\n])*"'
_PAIR = rf"({_LABEL_NAME}){_WS}={_WS}({_LABEL_VALUE}){_WS}(?:,{_WS})?"
_LABELS = rf"\{{{_WS}(?:{_LABEL_NAME}{_WS}={_WS}{_LABEL_VALUE}{_WS}(?:,{_WS})?)*\}}"
_KEY = re.compile(rf"({_NAME}){_WS}({_LABELS})?")
_PAIRS = re.compile(_PAIR)
# Go's ParseFloat minus hex and underscores
_FLOAT = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?i:inf(?:inity)?)|(?i:nan)"
_REST = re.compile(rf"{_WS}({_FLOAT})(?:[ \t]+([0-9]+))?{_WS}")
_NAME_END = re.compile(r"[{ \t]")
_META = re.compile(r"#[ \t]+(HELP|TYPE)[ \t]+")
_META_NAME = re.compile(_NAME)
_TYPES = frozenset({"counter", "gauge", "histogram", "summary", "untyped"})
_ESCAPE = re.compile(r'\\(["\\n])')
_INT64_MAX = 2**63 - 1


def _unescape(quoted: str) -> str:
    inner = quoted[1:-1]
    if "\\" not in inner:
        return inner
    return _ESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), inner)


Series = tuple[str, Mapping[str, str]]  # name, labels (empty values dropped)


def _parse_key(key: str) -> Series:
    """The name and labels of a series key (`name{a="b"}`); ValueError saying what is wrong."""
    match = _KEY.fullmatch(key)
    if match is None:
        raise ValueError("not a metric name with optional {labels}")
    name, braces = match.group(1), match.group(2)
    labels: dict[str, str] = {}
    if braces:
        seen = set()
        for pair in _PAIRS.finditer(braces, 1, len(braces) - 1):
            label = pair.group(1)
            if label in seen or label == "__name__":
                raise ValueError(f"label name {label!r} is not unique")
            seen.add(label)
            value = _unescape(pair.group(2))
            if value:
                labels[label] = value
    return name, labels


class ExpositionParser:
    """Strict parsing of one exposition at a time, remembering series keys between calls (one
    instance per scrape source; `parse` runs in one worker thread at a time)."""

    def __init__(
        self,
        wanted: frozenset[str] | None,
        *,
        max_lines: int = MAX_LINES,
        max_series: int = MAX_SERIES,
        cache_size: int = CACHE_SIZE,
    ) -> None:
        self._wanted = wanted
        self._max_lines = max_lines
        self._max_series = max_series
        self._cache_size = cache_size
        # series key -> (name, labels), and value text -> value, checked once; each emptied when
        # full (pods churn; relearning costs a few ms)
        self._known: dict[str, Series] = {}
        self._values: dict[str, float] = {}

    def parse(self, body: bytes | str) -> dict[str, list[Sample]]:
        """Samples of the wanted names (every name when `wanted` is None); ExpositionError naming the
        first line Prometheus would refuse, or the bound exceeded."""
        newlines = body.count(b"\n") if isinstance(body, bytes) else body.count("\n")
        if newlines + 1 > self._max_lines:
            raise ExpositionError(
                f"{newlines + 1} lines, more than max_lines_per_target {self._max_lines}", "too_many_lines"
            )
        lines = (_decode(body) if isinstance(body, bytes) else body).split("\n")
        try:
            return self._parse(lines)
        except _BadLine as bad:
            raise _line_error(lines.index(bad.line) + 1, bad.line, bad.problem) from None

    def _parse(self, lines: list[str]) -> dict[str, list[Sample]]:
        wanted, known, values = self._wanted, self._known, self._values
        index: dict[str, list[Sample]] = {}
        seen: set[tuple[str, frozenset[tuple[str, str]]]] = set()
        series = 0
        for line in lines:  # the hot loop: ~300 lines a pod, every few seconds, for every pod
            if not line:
                continue
            first = line[0]
            if first == "#":
                if line[1:2] in (" ", "\t"):
                    _check_comment(line)
                continue
            if first == " " or first == "\t":
                stripped = line.lstrip(" \t")
                if stripped and stripped[0] != "#":
                    # promparse keeps the whitespace in the name, which Prometheus then refuses
                    raise _BadLine(line, "whitespace before a sample's metric name")
                if stripped[1:2] in (" ", "\t"):
                    _check_comment(stripped)
                continue  # blank, or a comment
            series += 1
            # the quick split, `name{labels} value [ts]` or `name value [ts]` with single spaces;
            # anything else (tabs, spaces around "{", a bad value) takes the slow path
            close = line.rfind("}")  # a value or timestamp never holds "}": it closes the labels
            if close == -1:
                space = line.find(" ")
                key, rest = line[:space], line[space + 1 :]
            else:
                key, rest = line[: close + 1], line[close + 2 :]
            found = known.get(key)
            if found is None:
                found = self._learn(key)
            if found is None or not rest or line[len(key)] != " " or "\t" in rest:
                name, labels, value = _sample_slowly(line)
            else:
                name, labels = found
                space = rest.find(" ")
                text = rest if space == -1 else rest[:space]
                cached = values.get(text)  # values repeat (0.0, bucket counts): checked once
                value = self._check_value(text, line) if cached is None else cached
                if space != -1 and not _is_timestamp(rest[space + 1 :]):
                    name, labels, value = _sample_slowly(line)  # more spaces, or a bad timestamp
            if wanted is not None and name not in wanted:
                continue
            identity = (name, frozenset(labels.items()))
            if identity in seen:
                continue  # Prometheus keeps the first sample of a series and drops the duplicate
            seen.add(identity)
            index.setdefault(name, []).append(Sample(labels, value))
        if series > self._max_series:  # counted to the end: max_lines bounds the work
            raise ExpositionError(
                f"{series} series, more than max_series_per_target {self._max_series}", "too_many_series"
            )
        return index

    def _check_value(self, text: str, line: str) -> float:
        """`text` as Go's ParseFloat (without hex and `_`) reads it, remembered."""
        try:
            value = float(text)
        except ValueError:
            return _sample_slowly(line)[2]  # raises, naming the problem
        if value - value != 0 or "_" in text or text[0] <= " " or text[-1] <= " " or not text.isascii():
            # NaN or infinity (a sign or an overflow to check), or what float() takes and Go does
            # not: underscores, surrounding \r, \v or \f, fullwidth digits
            value = _value(text, line)
        if len(self._values) >= self._cache_size:
            self._values.clear()
        self._values[text] = value
        return value

    def _learn(self, key: str) -> Series | None:
        """The parsed key, remembered; None when the quick split cut the line elsewhere than
        promparse would (the slow path decides)."""
        try:
            found = _parse_key(key)
        except ValueError:
            return None
        if len(self._known) >= self._cache_size:
            self._known.clear()
        self._known[key] = found
        return found


class _BadLine(Exception):
    def __init__(self, line: str, problem: str) -> None:
        self.line, self.problem = line, problem


def _value(text: str, line: str) -> float:
    """Go's ParseFloat without hex and underscores; Python's float() alone would also take `1_000`,
    `１２` (fullwidth digits), `-nan` and read `1e400` as infinity."""
    try:
        if not text.isascii() or "_" in text or text != text.strip():
            raise ValueError
        value = float(text)
    except ValueError:
        raise _BadLine(line, f"value {text!r} is not a number") from None
    if value != value and text[0] in "+-":
        raise _BadLine(line, f"value {text!r} is not a number (NaN takes no sign)")
    if math.isinf(value) and "n" not in text.lower():
        raise _BadLine(line, f"value {text!r} is out of range")
    return value


def _is_timestamp(text: str) -> bool:
    return (
        text.isascii()
        and text.isdigit()
        and (len(text) < 19 or (len(text) == 19 and int(text) <= _INT64_MAX))
    )


def _timestamp(text: str, line: str) -> None:
    if not _is_timestamp(text):
        raise _BadLine(line, f"timestamp {text!r} is not an integer of milliseconds within int64")


def _sample_slowly(line: str) -> tuple[str, Mapping[str, str], float]:
    """The whole grammar, for the forms the quick split misses and to name what is wrong."""
    stripped = line.rstrip(" \t")
    brace = stripped.find("{")
    end = _NAME_END.search(stripped)
    if end is None:
        raise _BadLine(line, "expected a value after the metric name")
    if brace != -1 and not stripped[end.start() : brace].strip(" \t"):  # only spaces before "{"
        close = stripped.rfind("}")
        key, rest = stripped[: close + 1], stripped[close + 1 :]
    else:
        key, rest = stripped[: end.start()], stripped[end.start() :]
    try:
        name, labels = _parse_key(key)
    except ValueError as exc:
        raise _BadLine(line, str(exc)) from None
    match = _REST.fullmatch(rest)
    if match is None:  # say which part is wrong
        tokens = rest.strip(" \t").split(" ") if "\t" not in rest else rest.split()
        if tokens and tokens[0]:
            _value(tokens[0], line)
            if len(tokens) > 1:
                _timestamp(tokens[1], line)
        raise _BadLine(line, "expected a value, then an optional timestamp, then nothing")
    value = _value(match.group(1), line)
    if match.group(2) is not None:
        _timestamp(match.group(2), line)
    return name, labels, value


def _check_comment(line: str) -> None:
    """`# HELP` and `# TYPE` lines are checked as promparse checks them; other comments are free.
    (Invalid UTF-8 in HELP text was refused when the body was decoded.)"""
    meta = _META.match(line)
    if meta is None:
        return
    name = _META_NAME.match(line, meta.end())
    if name is None:
        raise _BadLine(line, f"expected a metric name after {meta.group(1)}")
    text = line[name.end() :]
    if not text:
        raise _BadLine(line, f"expected text in {meta.group(1)}")
    if meta.group(1) == "TYPE" and text[1:] not in _TYPES:
        raise _BadLine(line, f"invalid metric type {text[1:]!r}")


_SURROGATE = re.compile("[\udc80-\udcff]")


def _has_surrogates(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def _decode(body: bytes) -> str:
    """UTF-8. Invalid bytes are an error where Prometheus refuses them (label values, HELP text, and
    so any line but a plain comment); NUL bytes outside label values and comments likewise."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = body.decode("utf-8", errors="surrogateescape")
        for number, line in enumerate(text.split("\n"), 1):
            comment = line.lstrip(" \t")
            if _has_surrogates(line) and not (comment.startswith("#") and _META.match(comment) is None):
                raise _line_error(number, line, "not valid UTF-8") from None
    if "\x00" in text:
        for number, line in enumerate(text.split("\n"), 1):
            if "\x00" in line and not line.startswith("#") and "\x00" in _outside_quotes(line):
                raise _line_error(number, line, "a NUL byte outside a label value")
    return text


def _outside_quotes(line: str) -> str:
    return re.sub(_LABEL_VALUE, '""', line)


def _line_error(number: int, line: str, problem: str) -> ExpositionError:
    shown = line if len(line) <= 200 else line[:200] + "…"
    return ExpositionError(f"line {number} {shown!r}: {problem}")


def parse_exposition(text: str | bytes, wanted: frozenset[str] | None = None) -> dict[str, list[Sample]]:
    """One exposition, strictly (a fresh parser: for tests and one-off use)."""
    return ExpositionParser(wanted).parse(text)
