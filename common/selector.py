"""Kubernetes label selectors: parse, match, print (an external-metric read's `labelSelector`, pods).

The server parses the parameter once per request and the backend filters series with
`Selector.matches(labels)`. The grammar, validation and matching mirror apimachinery
`pkg/labels/selector.go` (`labels.Parse`), so a selector the kube-apiserver would accept is accepted
here and one it would reject is a 400 naming the offending part:

    selector    := "" | requirement ("," requirement)*
    requirement := ["!"] KEY [ ("in" | "notin") "(" VALUE ("," VALUE)* ")"
                             | ("=" | "==" | "!=" | ">" | "<") VALUE ]

Pure: no I/O, nothing imported from outside common/ (the key and value rules are in
labelvalidation.py). Shared: the adapter filters series with it, the controller matches pods and
serves mode hpa's metric with it, the tests' fake kube-apiserver applies it to lists and watches.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from common.labelvalidation import key_problems, parse_int64, value_problems

__all__ = [
    "EVERYTHING",
    "Operator",
    "Requirement",
    "Selector",
    "SelectorError",
    "from_label_selector",
    "parse_selector",
]


class SelectorError(ValueError):
    """A `labelSelector` that does not parse; the message names the offending token or value."""


class Operator(enum.Enum):
    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    GREATER_THAN = ">"
    LESS_THAN = "<"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: tuple[str, ...] = ()  # sorted and de-duplicated, like Go's sets.String.List()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        value = labels.get(self.key)
        if op in (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS):
            return value is not None and value in self.values
        if op in (Operator.NOT_IN, Operator.NOT_EQUALS):
            # an absent label matches a negative requirement (Go `Requirement.Matches`)
            return value is None or value not in self.values
        if op is Operator.EXISTS:
            return value is not None
        if op is Operator.DOES_NOT_EXIST:
            return value is None
        # > and <: integer comparison; a label that is absent or not an int64 never matches
        if value is None:
            return False
        label_int = parse_int64(value)
        bound = parse_int64(self.values[0])
        if label_int is None or bound is None:
            return False
        return label_int > bound if op is Operator.GREATER_THAN else label_int < bound

    def __str__(self) -> str:
        op = self.operator
        if op is Operator.EXISTS:
            return self.key
        if op is Operator.DOES_NOT_EXIST:
            return "!" + self.key
        if op in (Operator.IN, Operator.NOT_IN):
            return f"{self.key} {op.value} ({','.join(self.values)})"
        return f"{self.key}{op.value}{self.values[0]}"


@dataclass(frozen=True, slots=True)
class Selector:
    """Requirements ANDed together, sorted by key (stable) as Go does; empty matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def __str__(self) -> str:
        """The canonical form, identical to Go's `Selector.String()`."""
        return ",".join(str(r) for r in self.requirements)


EVERYTHING = Selector()


# --- lexer ----------------------------------------------------------------------------------------


class _Tok(enum.Enum):
    END = "end of string"
    IDENT = "identifier"
    IN = "in"
    NOT_IN = "notin"
    OPEN = "("
    CLOSE = ")"
    COMMA = ","
    BANG = "!"
    EQ = "="
    EQEQ = "=="
    NEQ = "!="
    GT = ">"
    LT = "<"


_WHITESPACE = frozenset(" \t\r\n")
_SPECIAL = frozenset("=!(),><")
_SYMBOLS = {
    "(": _Tok.OPEN,
    ")": _Tok.CLOSE,
    ",": _Tok.COMMA,
    "!": _Tok.BANG,
    "=": _Tok.EQ,
    "==": _Tok.EQEQ,
    "!=": _Tok.NEQ,
    ">": _Tok.GT,
    "<": _Tok.LT,
}
_KEYWORDS = {"in": _Tok.IN, "notin": _Tok.NOT_IN}


def _lex(text: str) -> list[tuple[_Tok, str]]:
    """Tokens plus a final END. Any run of non-special, non-blank characters is one identifier
    (validated later), so `queue=a/b` lexes fine and fails as a bad value, as in Go."""
    tokens: list[tuple[_Tok, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            tokens.append((_Tok.END, ""))
            return tokens
        ch = text[i]
        if ch in _SPECIAL:
            # longest match: only "!=" and "==" have two characters
            pair = text[i : i + 2]
            if pair in ("!=", "=="):
                tokens.append((_SYMBOLS[pair], pair))
                i += 2
            else:
                tokens.append((_SYMBOLS[ch], ch))
                i += 1
            continue
        start = i
        while i < n and text[i] not in _SPECIAL and text[i] not in _WHITESPACE:
            i += 1
        word = text[start:i]
        tokens.append((_KEYWORDS.get(word, _Tok.IDENT), word))


# --- parser ---------------------------------------------------------------------------------------

_EXACT_OPERATORS = {
    _Tok.EQ: Operator.EQUALS,
    _Tok.EQEQ: Operator.DOUBLE_EQUALS,
    _Tok.NEQ: Operator.NOT_EQUALS,
    _Tok.GT: Operator.GREATER_THAN,
    _Tok.LT: Operator.LESS_THAN,
}
_SET_OPERATORS = {_Tok.IN: Operator.IN, _Tok.NOT_IN: Operator.NOT_IN}
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"


class _Parser:
    """Recursive descent over a token list, one lookahead; mirrors Go's `Parser`.

    `in` and `notin` are keywords only where an operator is expected: `in in (in)` is valid.
    """

    def __init__(self, text: str) -> None:
        self._tokens = _lex(text)
        self._pos = 0

    def _peek(self, values: bool = True) -> tuple[_Tok, str]:
        tok, lit = self._tokens[self._pos]
        if values and tok in (_Tok.IN, _Tok.NOT_IN):
            tok = _Tok.IDENT
        return tok, lit

    def _next(self, values: bool = True) -> tuple[_Tok, str]:
        item = self._peek(values)
        self._pos += 1
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self._peek()
            if tok is _Tok.END:
                return requirements
            if tok not in (_Tok.IDENT, _Tok.BANG):
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self._requirement())
            except SelectorError as exc:
                raise SelectorError(f"unable to parse requirement: {exc}") from None
            tok, lit = self._next()
            if tok is _Tok.END:
                return requirements
            if tok is not _Tok.COMMA:
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            tok, lit = self._peek()
            if tok not in (_Tok.IDENT, _Tok.BANG):
                raise SelectorError(f"found '{lit}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        negated = False
        tok, key = self._next()
        if tok is _Tok.BANG:
            negated = True
            tok, key = self._next()
        if tok is not _Tok.IDENT:
            raise SelectorError(f"found '{key}', expected: identifier")
        if problems := key_problems(key):
            raise SelectorError(f'invalid label key "{key}": {"; ".join(problems)}')
        if negated:
            # `!k` takes no operator; whatever follows fails in parse() (`!a=b` is an error)
            return Requirement(key, Operator.DOES_NOT_EXIST)
        if self._peek()[0] in (_Tok.END, _Tok.COMMA):
            return Requirement(key, Operator.EXISTS)
        tok, lit = self._next(values=False)
        if tok in _SET_OPERATORS:
            values = self._value_set()
            operator = _SET_OPERATORS[tok]
        elif tok in _EXACT_OPERATORS:
            values = {self._exact_value()}
            operator = _EXACT_OPERATORS[tok]
        else:
            raise SelectorError(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        ordered = tuple(sorted(values))
        if operator in (Operator.GREATER_THAN, Operator.LESS_THAN) and parse_int64(ordered[0]) is None:
            raise SelectorError(
                f"for 'gt', 'lt' operators, the value must be an integer: "
                f'key "{key}", value "{ordered[0]}"'
            )
        for value in ordered:
            if problems := value_problems(value):
                raise SelectorError(f'invalid label value "{value}" at key "{key}": {"; ".join(problems)}')
        return Requirement(key, operator, ordered)

    def _value_set(self) -> set[str]:
        tok, lit = self._next()
        if tok is not _Tok.OPEN:
            raise SelectorError(f"found '{lit}', expected: '('")
        tok, lit = self._peek()
        if tok is _Tok.CLOSE:  # `k in ()` is the set {""}, as in Go
            self._next()
            return {""}
        if tok not in (_Tok.IDENT, _Tok.COMMA):
            raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self._identifier_list()
        tok, lit = self._next()
        if tok is not _Tok.CLOSE:
            raise SelectorError(f"found '{lit}', expected: ')'")
        return values

    def _identifier_list(self) -> set[str]:
        """Comma-separated, possibly empty identifiers: `(a,,b)` and `(,a)` contain ""."""
        values: set[str] = set()
        while True:
            tok, lit = self._next()
            if tok is _Tok.IDENT:
                values.add(lit)
                tok2, lit2 = self._peek()
                if tok2 is _Tok.COMMA:
                    continue
                if tok2 is _Tok.CLOSE:
                    return values
                raise SelectorError(f"found '{lit2}', expected: ',' or ')'")
            if tok is _Tok.COMMA:
                if not values:
                    values.add("")  # "(,"
                tok2, _ = self._peek()
                if tok2 is _Tok.CLOSE:
                    values.add("")  # ",)"
                    return values
                if tok2 is _Tok.COMMA:
                    self._next()
                    values.add("")  # ",,"
                continue
            raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def _exact_value(self) -> str:
        tok, lit = self._peek()
        if tok in (_Tok.END, _Tok.COMMA):  # `k=` means the empty value
            return ""
        tok, lit = self._next()
        if tok is _Tok.IDENT:
            return lit
        raise SelectorError(f"found '{lit}', expected: identifier")


@functools.lru_cache(maxsize=16384)  # every HPA and autoscaler repeats its selectors; results are immutable
def parse_selector(text: str) -> Selector:
    """Parse a `labelSelector` (already URL-decoded once). Empty or blank text selects everything."""
    requirements = _Parser(text).parse()
    # Go sorts by key with sort.Sort (not stable); a stable sort gives the same String() for
    # everything the HPA sends, since it never repeats a key.
    requirements.sort(key=lambda r: r.key)
    return Selector(tuple(requirements))


# --- from a LabelSelector object ------------------------------------------------------------------

_EXPRESSION_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def from_label_selector(
    match_labels: Mapping[str, str], match_expressions: Iterable[Mapping[str, Any]] = ()
) -> Selector:
    """metav1.LabelSelectorAsSelector: matchLabels as `key=value`, matchExpressions by their operator,
    values sorted, requirements sorted by key; `str()` of the result is what /scale's
    status.selector holds for a Deployment. A malformed expression raises SelectorError naming it."""
    requirements = [Requirement(str(k), Operator.EQUALS, (str(v),)) for k, v in match_labels.items()]
    for i, expr in enumerate(match_expressions):
        operator = _EXPRESSION_OPERATORS.get(str(expr.get("operator")))
        if operator is None:
            raise SelectorError(
                f"matchExpressions[{i}]: {expr.get('operator')!r} is not a valid label selector operator"
            )
        values = tuple(sorted({str(v) for v in expr.get("values") or ()}))
        if operator in (Operator.IN, Operator.NOT_IN) and not values:
            raise SelectorError(
                f"matchExpressions[{i}]: for 'in', 'notin' operators, values set can't be empty"
            )
        if operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and values:
            raise SelectorError(
                f"matchExpressions[{i}]: values set must be empty for exists and does not exist"
            )
        requirements.append(Requirement(str(expr.get("key", "")), operator, values))
    requirements.sort(key=lambda r: r.key)
    return Selector(tuple(requirements))
