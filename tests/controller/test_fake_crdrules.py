"""The fake apiserver applies the CRD's rules that JSON Schema cannot say (fake_crdrules.py): its CEL
rule on spec, transition rules, ratcheting, and list-type map keys, in the apiserver's words."""

from __future__ import annotations

from typing import Any

import celpy
import pytest
from controller_harness import NAME, NS, autoscaler
from fake_apiserver import ApiStatus, FakeKube
from fake_crdrules import check_rules_compile, violations
from fake_validation import apply_defaults, crd_schema, validate_custom


def stored(**spec: Any) -> dict[str, Any]:
    obj = apply_defaults(crd_schema(), autoscaler())
    obj["spec"].update(spec)
    return obj


def test_the_crds_cel_rule_refuses_min_above_max_naming_spec() -> None:
    with pytest.raises(ApiStatus) as info:
        validate_custom(stored(minReplicas=30, maxReplicas=20))
    assert info.value.code == 422
    assert info.value.causes == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "object": maxReplicas must be >= minReplicas',
            "field": "spec",
        }
    ]
    validate_custom(stored(minReplicas=20, maxReplicas=20))  # equal is allowed
    no_min = stored()
    del no_min["spec"]["minReplicas"]
    validate_custom(no_min)  # !has(self.minReplicas): the rule holds


def test_a_user_edit_is_checked_and_an_unchanged_corrupt_spec_ratchets() -> None:
    fake = FakeKube()
    fake.add_autoscaler(autoscaler())
    with pytest.raises(ApiStatus):
        fake.update_autoscaler(NS, NAME, lambda o: o["spec"].update(minReplicas=21))
    fake.corrupt_autoscaler(NS, NAME, lambda o: o["spec"].update(minReplicas=21))
    corrupt = fake.autoscalers[(NS, NAME)]
    with_status = {**corrupt, "status": {"desiredReplicas": 3}}
    validate_custom(with_status, corrupt)  # spec unchanged: not re-checked
    edited = {**corrupt, "spec": {**corrupt["spec"], "maxReplicas": 19}}
    with pytest.raises(ApiStatus):
        validate_custom(edited, corrupt)  # spec changed: its rule runs again


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "size": {
            "type": "integer",
            "x-kubernetes-validations": [
                {"rule": "self >= oldSelf", "message": "may not shrink", "reason": "FieldValueForbidden"}
            ],
        },
        "items": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name", "port"],
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
            },
        },
        "limits": {
            "type": "object",
            "x-kubernetes-validations": [{"rule": "self.low <= self.high", "fieldPath": ".low"}],
        },
    },
}


def test_transition_rules_run_on_update_only() -> None:
    assert violations(SCHEMA, {"size": 1}) == []  # create: no oldSelf
    assert violations(SCHEMA, {"size": 3}, {"size": 2}) == []
    assert violations(SCHEMA, {"size": 1}, {"size": 2}) == [
        {"reason": "FieldValueForbidden", "message": "Invalid value: 1: may not shrink", "field": "size"}
    ]


def test_list_map_keys_are_unique_on_every_key_together() -> None:
    ok = {"items": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]}
    assert violations(SCHEMA, ok) == []
    twice = {"items": [{"name": "a", "port": 1}, {"name": "b", "port": 1}, {"name": "a", "port": 1}]}
    assert violations(SCHEMA, twice) == [
        {
            "reason": "FieldValueDuplicate",
            "message": 'Duplicate value: map[string]interface {}{"name":"a","port":1}',
            "field": "items[2]",
        }
    ]


def test_a_rule_without_a_message_names_itself_and_an_evaluation_error_is_a_failure() -> None:
    assert violations(SCHEMA, {"limits": {"low": 2, "high": 1}}) == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "object": failed rule: self.low <= self.high',
            "field": "limits.low",
        }
    ]
    (missing,) = violations(SCHEMA, {"limits": {"low": 2}})  # no such key: an error, never a pass
    assert missing["field"] == "limits.low" and "self.low <= self.high" in missing["message"]


def test_rules_the_fake_cannot_apply_or_compile_are_refused_at_load() -> None:
    check_rules_compile(crd_schema())  # the CRD's own
    with pytest.raises(ValueError, match="messageExpression"):
        check_rules_compile({"x-kubernetes-validations": [{"rule": "true", "messageExpression": "'x'"}]})
    with pytest.raises(celpy.CELParseError):
        check_rules_compile({"x-kubernetes-validations": [{"rule": "self.a >= "}]})
