"""Label keys and values as apimachinery `pkg/util/validation` checks them (IsQualifiedName,
IsValidLabelValue) and `strconv.ParseInt` for the selector's `>` and `<`: the problems are listed
in the kube-apiserver's words, so a 400 names what is wrong. Pure: no I/O, no project imports."""

from __future__ import annotations

import re

__all__ = ["key_problems", "parse_int64", "value_problems"]

_QUALIFIED_NAME_MAX = 63
_LABEL_VALUE_MAX = 63
_DNS1123_SUBDOMAIN_MAX = 253
_QUALIFIED_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_DNS1123_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_INT64_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_NAME_RULE = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)


def parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): optional sign and ASCII digits only (no '_', no spaces)."""
    if _INT64_RE.fullmatch(text) is None:
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


def key_problems(key: str) -> list[str]:
    """validation.IsQualifiedName: [DNS-subdomain prefix '/'] name of ≤ 63 characters."""
    parts = key.split("/")
    if len(parts) > 2:
        return ["a qualified name may contain at most one '/' (an optional DNS subdomain prefix)"]
    problems: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            if len(prefix) > _DNS1123_SUBDOMAIN_MAX:
                problems.append(f"prefix part must be no more than {_DNS1123_SUBDOMAIN_MAX} characters")
            if _DNS1123_SUBDOMAIN_RE.fullmatch(prefix) is None:
                problems.append(
                    "prefix part must be a lowercase DNS subdomain (e.g. 'example.com': "
                    "lowercase alphanumerics, '-' and '.', alphanumeric at both ends)"
                )
    if not name:
        problems.append("name part must be non-empty")
        return problems
    if len(name) > _QUALIFIED_NAME_MAX:
        problems.append(f"name part must be no more than {_QUALIFIED_NAME_MAX} characters")
    if _QUALIFIED_NAME_RE.fullmatch(name) is None:
        problems.append("name part " + _NAME_RULE)
    return problems


def value_problems(value: str) -> list[str]:
    """validation.IsValidLabelValue: empty, or ≤ 63 characters of the qualified-name alphabet."""
    problems: list[str] = []
    if len(value) > _LABEL_VALUE_MAX:
        problems.append(f"must be no more than {_LABEL_VALUE_MAX} characters")
    if _LABEL_VALUE_RE.fullmatch(value) is None:
        problems.append("a valid label value must be an empty string or " + _NAME_RULE)
    return problems
