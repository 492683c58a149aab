"""The CRD's rules that JSON Schema cannot say, applied as the apiserver applies them, for the fake.

- `x-kubernetes-validations`: CEL rules (evaluated with cel-python) with `self` bound to the node
  they sit on and `oldSelf` to its stored value. A rule that reads `oldSelf` is a transition rule,
  checked only on update. Ratcheting (CRDValidationRatcheting, GA in 1.33): on update, a rule whose
  node equals the stored one is not re-checked, so a /status write never fails on a spec the
  cluster already holds. `message`, `reason` and `fieldPath` as the CRD says; a rule cel-python
  cannot compile fails at load, as the apiserver refuses such a CRD.
- `x-kubernetes-list-type: map`: no two items with the same `x-kubernetes-list-map-keys`
  (FieldValueDuplicate on the later item).

Each violation is a metav1.StatusCause (reason, message, field), in the apiserver's words.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

import celpy

SUPPORTED_RULE_KEYS = {"rule", "message", "reason", "fieldPath"}
_ENV = celpy.Environment()


@cache
def _program(rule: str) -> Any:
    return _ENV.program(_ENV.compile(rule))


def check_rules_compile(schema: Mapping[str, Any]) -> None:
    """Compile every rule of a schema (the apiserver refuses a CRD with a rule it cannot compile);
    a key the fake does not apply (messageExpression, optionalOldSelf) is an error, not ignored."""
    for rule in schema.get("x-kubernetes-validations", ()):
        unknown = set(rule) - SUPPORTED_RULE_KEYS
        if unknown:
            raise ValueError(f"the fake does not apply {sorted(unknown)} of rule {rule['rule']!r}")
        _program(rule["rule"])
    for sub in schema.get("properties", {}).values():
        check_rules_compile(sub)
    if "items" in schema:
        check_rules_compile(schema["items"])


def violations(schema: Mapping[str, Any], obj: Any, old: Any = None, path: str = "") -> list[dict[str, str]]:
    """Every rule of `schema` that `obj` breaks (`old`: the stored object on an update, else None)."""
    out: list[dict[str, str]] = []
    _walk(schema, obj, old, path, out)
    return out


def _walk(schema: Mapping[str, Any], obj: Any, old: Any, path: str, out: list[dict[str, str]]) -> None:
    for rule in schema.get("x-kubernetes-validations", ()):
        cause = _apply(rule, obj, old, path)
        if cause is not None:
            out.append(cause)
    if isinstance(obj, dict):
        for key, sub in schema.get("properties", {}).items():
            if key in obj:
                before = old.get(key) if isinstance(old, dict) else None
                _walk(sub, obj[key], before, f"{path}.{key}" if path else key, out)
    elif isinstance(obj, list) and "items" in schema:
        keys = (
            schema.get("x-kubernetes-list-map-keys")
            if schema.get("x-kubernetes-list-type") == "map"
            else None
        )
        if keys:
            out.extend(_duplicates(obj, keys, path))
        olds = _old_items(old, keys)
        for i, item in enumerate(obj):
            before = (
                olds.get(_key(item, keys))
                if keys
                else (old[i] if isinstance(old, list) and i < len(old) else None)
            )
            _walk(schema["items"], item, before, f"{path}[{i}]", out)


def _apply(rule: Mapping[str, Any], obj: Any, old: Any, path: str) -> dict[str, str] | None:
    text = rule["rule"]
    transition = "oldSelf" in text
    if old is not None and old == obj:
        return None  # ratcheting: an unchanged node is not re-checked
    if transition and old is None:
        return None  # a transition rule is checked on update only
    bindings = {"self": celpy.json_to_cel(obj)}
    if transition:
        bindings["oldSelf"] = celpy.json_to_cel(old)
    try:
        ok = _program(text).evaluate(bindings)
    except celpy.CELEvalError as err:
        ok = err
    field = path + rule.get("fieldPath", "")
    if isinstance(ok, Exception) or not isinstance(ok, celpy.celtypes.BoolType):
        return {
            "reason": "FieldValueInvalid",
            "message": f"Invalid value: {_kind(obj)}: {text}: {ok}",
            "field": field,
        }
    if ok:
        return None
    message = rule.get("message") or f"failed rule: {text}"
    reason = rule.get("reason", "FieldValueInvalid")
    return {"reason": reason, "message": f"Invalid value: {_kind(obj)}: {message}", "field": field}


def _kind(obj: Any) -> str:
    """How the apiserver names the value a rule failed on: '"object"' for an object, else the value."""
    if isinstance(obj, dict):
        return '"object"'
    if isinstance(obj, list):
        return '"array"'
    return json.dumps(obj)


def _key(item: Any, keys: list[str]) -> tuple[Any, ...] | None:
    if not isinstance(item, dict):
        return None
    return tuple(json.dumps(item.get(k), sort_keys=True) for k in keys)


def _old_items(old: Any, keys: list[str] | None) -> dict[Any, Any]:
    if not keys or not isinstance(old, list):
        return {}
    return {_key(item, keys): item for item in old}


def _duplicates(items: list[Any], keys: list[str], path: str) -> list[dict[str, str]]:
    seen: set[Any] = set()
    out = []
    for i, item in enumerate(items):
        key = _key(item, keys)
        if key in seen:
            shown = ",".join(f"{json.dumps(k)}:{json.dumps(item.get(k))}" for k in keys)
            out.append(
                {
                    "reason": "FieldValueDuplicate",
                    "message": f"Duplicate value: map[string]interface {{}}{{{shown}}}",
                    "field": f"{path}[{i}]",
                }
            )
        seen.add(key)
    return out
