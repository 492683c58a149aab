"""The labelSelector parser and matcher against apimachinery `labels.Parse` behaviour."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.selector import (
    EVERYTHING,
    Operator,
    Requirement,
    Selector,
    SelectorError,
    from_label_selector,
    parse_selector,
)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        pytest.param("", "", id="empty selects everything"),
        pytest.param("  \t\n", "", id="blank selects everything"),
        pytest.param("a=b", "a=b", id="equality"),
        pytest.param("a==b", "a==b", id="double equals"),
        pytest.param("a!=b", "a!=b", id="not equals"),
        pytest.param("a", "a", id="exists"),
        pytest.param("!a", "!a", id="does not exist"),
        pytest.param("a=", "a=", id="equals the empty value"),
        pytest.param("x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()", id="upstream example"),
        pytest.param("env in (staging, prod)", "env in (prod,staging)", id="values sorted"),
        pytest.param("b=1,a=2", "a=2,b=1", id="requirements sorted by key"),
        pytest.param("env+in+(a)".replace("+", " "), "env in (a)", id="plus decoded to space upstream"),
        pytest.param("in in (in, notin)", "in in (in,notin)", id="keywords as key and values"),
        pytest.param("n>5,m<10", "m<10,n>5", id="integer comparisons"),
        pytest.param(
            "scaledobject.keda.sh/name=my-so", "scaledobject.keda.sh/name=my-so", id="prefixed key (KEDA)"
        ),
        pytest.param(
            "!canary,app.kubernetes.io/name in (vllm)", "app.kubernetes.io/name in (vllm),!canary", id="mixed"
        ),
        pytest.param("k in (a,a)", "k in (a)", id="duplicate values collapse"),
        pytest.param("k in (,a)", "k in (,a)", id="leading empty value"),
        pytest.param("a=b ,  c  !=  d", "a=b,c!=d", id="whitespace between tokens"),
        pytest.param("A_b.C-9=Z.z_1", "A_b.C-9=Z.z_1", id="case and inner punctuation"),
        pytest.param("k=" + "v" * 63, "k=" + "v" * 63, id="63-char value"),
        pytest.param("k" * 63, "k" * 63, id="63-char key name"),
    ],
)
def test_parse_accepts(text: str, canonical: str) -> None:
    selector = parse_selector(text)
    assert str(selector) == canonical
    assert parse_selector(str(selector)) == selector  # the canonical form round-trips


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(",", "found ',', expected: !, identifier, or 'end of string'", id="lone comma"),
        pytest.param("a=b,", "found '', expected: identifier after ','", id="trailing comma"),
        pytest.param("a=b,,c", "found ',', expected: identifier after ','", id="double comma"),
        pytest.param("!a=b", "found '=', expected: ',' or 'end of string'", id="!k takes no operator"),
        pytest.param("!!a", "found '!', expected: identifier", id="double bang"),
        pytest.param("a in (b", "found '', expected: ',' or ')'", id="unclosed paren"),
        pytest.param("a in b", "found 'b', expected: '('", id="in without paren"),
        pytest.param("a in (b,", "found '', expected: ',', or identifier", id="unclosed list after comma"),
        pytest.param("a in (=)", "found '=', expected: ',', ')' or identifier", id="operator in list"),
        pytest.param("a b", "found 'b', expected: in, notin, =, ==, !=, gt, lt", id="missing operator"),
        pytest.param("a=(b)", "found '(', expected: identifier", id="paren after equals"),
        pytest.param("a=b=c", "found '=', expected: ',' or 'end of string'", id="two operators"),
        pytest.param("a>b", "the value must be an integer", id="gt needs an integer"),
        pytest.param("a<1.5", "the value must be an integer", id="lt rejects a decimal"),
        pytest.param("a>99999999999999999999", "the value must be an integer", id="gt beyond int64"),
        pytest.param("a>", "the value must be an integer", id="gt without value"),
        pytest.param("a<-3", 'invalid label value "-3"', id="negative bound is not a label value"),
        pytest.param("queue=a/b", 'invalid label value "a/b" at key "queue"', id="slash in value"),
        pytest.param("k=%2C", 'invalid label value "%2C"', id="double-encoded comma stays literal"),
        pytest.param("k=" + "v" * 64, "must be no more than 63 characters", id="64-char value"),
        pytest.param("k=-a", 'invalid label value "-a"', id="value starts with dash"),
        pytest.param("k" * 64, "name part must be no more than 63 characters", id="64-char key"),
        pytest.param("a/b/c", "at most one '/'", id="two slashes in key"),
        pytest.param("/a", "prefix part must be non-empty", id="empty prefix"),
        pytest.param("a/", "name part must be non-empty", id="empty name"),
        pytest.param("Example.com/a", "prefix part must be a lowercase DNS subdomain", id="upper prefix"),
        pytest.param("x" * 254 + "/a", "no more than 253 characters", id="long prefix"),
        pytest.param("-a", 'invalid label key "-a"', id="key starts with dash"),
        pytest.param("é=1", 'invalid label key "é"', id="non-ascii key"),
        pytest.param("k=\x00", 'invalid label value "\x00"', id="NUL in value"),
        pytest.param("(", "found '(', expected: !, identifier, or 'end of string'", id="lone paren"),
    ],
)
def test_parse_rejects(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_selector(text)
    assert message in str(info.value)


def test_selector_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unable to parse requirement"):
        parse_selector("a=b/c")


LABELS = {"env": "prod", "queue": "a", "gpu": "8", "empty": ""}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", True, id="empty matches"),
        pytest.param("env=prod", True, id="equal"),
        pytest.param("env==dev", False, id="double equal differs"),
        pytest.param("env!=dev", True, id="not equal differs"),
        pytest.param("missing!=x", True, id="not equal matches an absent label"),
        pytest.param("missing notin (x)", True, id="notin matches an absent label"),
        pytest.param("missing in (x)", False, id="in needs the label"),
        pytest.param("env in (dev,prod)", True, id="in set"),
        pytest.param("env notin (dev,prod)", False, id="notin set"),
        pytest.param("env", True, id="exists"),
        pytest.param("!env", False, id="does not exist fails"),
        pytest.param("!missing", True, id="does not exist holds"),
        pytest.param("empty=", True, id="empty value equals"),
        pytest.param("empty in ()", True, id="in () is the empty value"),
        pytest.param("missing=", False, id="empty value needs the label"),
        pytest.param("gpu>7", True, id="greater"),
        pytest.param("gpu>8", False, id="not strictly greater"),
        pytest.param("gpu<9", True, id="less"),
        pytest.param("env>1", False, id="non-integer label never compares"),
        pytest.param("missing<1", False, id="absent label never compares"),
        pytest.param("env=prod,queue=b", False, id="requirements are ANDed"),
        pytest.param("env=prod,queue in (a,b),!canary", True, id="all hold"),
    ],
)
def test_matches(text: str, expected: bool) -> None:
    assert parse_selector(text).matches(LABELS) is expected


def test_everything_is_the_empty_selector() -> None:
    assert parse_selector("") == EVERYTHING
    assert EVERYTHING.empty and EVERYTHING.matches({})


def test_requirements_are_values() -> None:
    assert parse_selector("a in (y,x)") == Selector((Requirement("a", Operator.IN, ("x", "y")),))


# Fuzzing: any text either parses or raises SelectorError, and what parses round-trips.
_ALPHABET = st.sampled_from([*"ab=!(),<> \t/.-_9%", "in", "notin", "é", "\x00"])


@given(st.lists(_ALPHABET, max_size=30).map("".join))
def test_fuzz_grammar_tokens(text: str) -> None:
    _parse_or_reject(text)


@given(st.text(max_size=80))
def test_fuzz_any_text(text: str) -> None:
    _parse_or_reject(text)


def _parse_or_reject(text: str) -> None:
    try:
        selector = parse_selector(text)
    except SelectorError:
        return
    assert parse_selector(str(selector)) == selector
    selector.matches({"a": "b", "9": "1"})


@pytest.mark.parametrize(
    ("labels", "expressions", "text"),
    [
        pytest.param({"app": "llama"}, (), "app=llama", id="matchLabels"),
        pytest.param({"z": "1", "a": "2"}, (), "a=2,z=1", id="sorted by key as Go"),
        pytest.param(
            {"app": "llama"},
            ({"key": "tier", "operator": "In", "values": ["b", "a"]},),
            "app=llama,tier in (a,b)",
            id="In, values sorted",
        ),
        pytest.param({}, ({"key": "gpu", "operator": "Exists"},), "gpu", id="Exists"),
        pytest.param({}, ({"key": "gpu", "operator": "DoesNotExist"},), "!gpu", id="DoesNotExist"),
        pytest.param({}, ({"key": "x", "operator": "NotIn", "values": ["a"]},), "x notin (a)", id="NotIn"),
        pytest.param({}, (), "", id="empty selects everything"),
    ],
)
def test_from_label_selector_prints_what_scale_shows(
    labels: dict[str, str], expressions: tuple[dict[str, object], ...], text: str
) -> None:
    selector = from_label_selector(labels, expressions)
    assert str(selector) == text
    assert parse_selector(text) == selector or text == ""  # the round trip the controller relies on


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        pytest.param({"key": "a", "operator": "Bogus"}, "not a valid label selector operator", id="operator"),
        pytest.param(
            {"key": "a", "operator": "In", "values": []}, "values set can't be empty", id="In empty"
        ),
        pytest.param(
            {"key": "a", "operator": "Exists", "values": ["x"]}, "must be empty", id="Exists values"
        ),
    ],
)
def test_from_label_selector_refuses_malformed_expressions(expression: dict[str, object], error: str) -> None:
    with pytest.raises(SelectorError, match=error):
        from_label_selector({}, (expression,))
