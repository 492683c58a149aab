"""adapter/exposition.py: errors name the line and the problem; the bounds fail a target with their
own reason; remembered series keys change nothing; generated expositions read back as written.
(Which expositions are accepted at all is checked against a real Prometheus in
test_exposition_prometheus.py.)"""

from __future__ import annotations

import math

import pytest
from engine_fixtures import JETSTREAM, LLAMACPP, SGLANG, TGI, TRITON, TRTLLM, VLLM, VLLM_V0
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter.exposition import ExpositionError, ExpositionParser, parse_exposition
from adapter.presetread import wanted_names
from adapter.presets import PRESETS

M = "vllm:num_requests_waiting"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            f"{M} 1\n{M} 1 2 3 4\n", f"line 2 '{M} 1 2 3 4': expected a value, then", id="extra tokens"
        ),
        pytest.param(f"{M} 1_000\n", "value '1_000' is not a number", id="underscore"),
        pytest.param(f"{M} １２\n", "value '１２' is not a number", id="fullwidth digits"),
        pytest.param(f"{M} 1e400\n", "value '1e400' is out of range", id="overflow"),
        pytest.param(f"{M} -NaN\n", "NaN takes no sign", id="signed NaN"),
        pytest.param(f"{M} 4\r\n", "value '4\\r' is not a number", id="CRLF"),
        pytest.param(f"{M} 4 99999999999999999999\n", "within int64", id="timestamp overflow"),
        pytest.param(f'{M}{{a="x",a="y"}} 4\n', "label name 'a' is not unique", id="duplicate label"),
        pytest.param(f'{M}{{__name__="y"}} 4\n', "label name '__name__' is not unique", id="__name__"),
        pytest.param(f"{M}{{a=x}} 4\n", "not a metric name with optional {labels}", id="unquoted value"),
        pytest.param(f" {M} 4\n", "whitespace before a sample's metric name", id="leading space"),
        pytest.param(f"# TYPE {M} gauges\n", "invalid metric type 'gauges'", id="bad TYPE"),
        pytest.param("# HELP \n", "expected a metric name after HELP", id="HELP without a name"),
        pytest.param(f"{M}\n", "expected a value after the metric name", id="no value"),
        pytest.param(f'{M}{{a="'.encode() + b"\xff" + b'"} 4\n', "line 1", id="invalid UTF-8"),
        pytest.param(f"{M} 4\n{M}\x00 5\n", "line 2", id="NUL outside a label value"),
    ],
)
def test_a_refused_exposition_names_the_line_and_the_problem(text: str | bytes, message: str) -> None:
    with pytest.raises(ExpositionError) as caught:
        parse_exposition(text)
    assert message in str(caught.value)
    assert caught.value.reason == "parse"


def test_a_refused_line_among_unread_series_still_fails_the_target() -> None:
    text = f"{M} 4\nvllm:time_to_first_token_seconds_bucket{{le=0.1}} 3\n"
    with pytest.raises(ExpositionError, match="line 2"):
        ExpositionParser(wanted_names(PRESETS["vllm"])).parse(text)


def test_what_promparse_accepts_reads_as_promparse_reads_it() -> None:
    text = (
        f'{M}{{a="x\\"y\\\\z\\nw",b="\\q",c="",d="}} {{"}} 4\n'  # escapes; \q kept; empty value dropped
        f"{M}{{}}5 1700000000000\n"  # empty braces, no space before the value: the same series as `M`
        f"{M}\t6\n"
        f'{M} {{ e = "f" g="h", }}  7  1700000000000 \n'
        "# a comment with anything in it: { } 1 2 3\n"
        "  \t\n"
    )
    index = parse_exposition(text)
    assert [(dict(s.labels), s.value) for s in index[M]] == [
        ({"a": 'x"y\\z\nw', "b": "\\q", "d": "} {"}, 4.0),
        ({}, 5.0),  # the later `M 6` is the same series: the first sample counts
        ({"e": "f", "g": "h"}, 7.0),
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("+Inf", math.inf),
        ("-inf", -math.inf),
        ("Infinity", math.inf),
        (".5", 0.5),
        ("5.", 5.0),
        ("+5e-3", 0.005),
    ],
)
def test_go_float_forms(value: str, expected: float) -> None:
    assert parse_exposition(f"{M} {value}\n")[M][0].value == expected


def test_nan_is_read_as_nan() -> None:
    assert math.isnan(parse_exposition(f"{M} NaN\n")[M][0].value)


def test_too_many_lines_fails_before_anything_is_split() -> None:
    parser = ExpositionParser(None, max_lines=100)
    parser.parse(f"{M} 1\n" * 99)
    with pytest.raises(ExpositionError) as caught:
        parser.parse(b"#\n" * 100)
    assert caught.value.reason == "too_many_lines"
    assert "101 lines, more than max_lines_per_target 100" in str(caught.value)


def test_too_many_series_counts_every_sample_line_read_or_not() -> None:
    parser = ExpositionParser(frozenset({M}), max_series=10)
    text = f"{M} 1\n" + "".join(f'other{{i="{i}"}} 1\n' for i in range(10))
    with pytest.raises(ExpositionError) as caught:
        parser.parse(text)
    assert caught.value.reason == "too_many_series"
    assert "11 series, more than max_series_per_target 10" in str(caught.value)


def test_the_key_cache_is_bounded_and_changes_no_result() -> None:
    wanted = wanted_names(PRESETS["vllm"])
    small = ExpositionParser(wanted, cache_size=3)
    for text in (VLLM, VLLM_V0, VLLM):
        assert small.parse(text) == ExpositionParser(wanted).parse(text)
        assert len(small._known) <= 3


@pytest.mark.parametrize(
    "text", [VLLM, VLLM_V0, TGI, SGLANG, TRITON, TRTLLM, JETSTREAM, LLAMACPP], ids=str.split
)
def test_every_engine_fixture_is_a_valid_exposition(text: str) -> None:
    assert parse_exposition(text)


# --- generated expositions read back as written ----------------------------------------------------

_LABEL_VALUE = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r"), max_size=12)
_NUMBER = st.one_of(
    st.floats(allow_nan=False, width=64).map(repr),
    st.integers(-(10**12), 10**12).map(str),
    st.sampled_from(["+Inf", "-Inf", "1e3", "0.5", ".25"]),
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@st.composite
def _written(draw: st.DrawFn) -> tuple[str, dict[tuple[str, frozenset[tuple[str, str]]], float]]:
    """An exposition and the series it holds (first sample of each series wins)."""
    lines, expected = [], {}
    for _ in range(draw(st.integers(0, 12))):
        name = draw(st.sampled_from([M, "vllm:num_requests_running", "vllm:kv_cache_usage_perc", "other"]))
        labels = draw(
            st.dictionaries(st.sampled_from(["engine", "model_name", "le", "x"]), _LABEL_VALUE, max_size=3)
        )
        number = draw(_NUMBER)
        separator = draw(st.sampled_from([" ", "\t", "  "]))
        timestamp = draw(st.sampled_from(["", " 1700000000000"]))
        rendered = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        lines.append(
            f"{name}{{{rendered}}}{separator}{number}{timestamp}" if labels else f"{name}{separator}{number}"
        )
        if draw(st.booleans()):
            lines.append(f"# HELP {name} some help")
        expected.setdefault((name, frozenset((k, v) for k, v in labels.items() if v)), float(number))
    return "\n".join(lines) + "\n", expected


@settings(max_examples=60, deadline=None)
@given(_written())
def test_generated_expositions_read_back_as_written(
    case: tuple[str, dict[tuple[str, frozenset[tuple[str, str]]], float]],
) -> None:
    text, expected = case
    parser = ExpositionParser(None)
    for _ in range(2):  # the second time from remembered keys
        got = {(n, frozenset(s.labels.items())): s.value for n, ss in parser.parse(text).items() for s in ss}
        assert got == expected
