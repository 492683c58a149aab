"""The fake kube-apiserver's validation (fake_apiserver.py validates every write with it): built-in
kinds against the Kubernetes 1.37 strict schemas (kubernetes-validate: unknown fields are errors),
the InferenceAutoscaler against deploy/controller/crd.yaml's openAPIV3Schema as JSON Schema
(unknown fields are errors too; date-time and int32/int64 formats checked) with its CEL rules and
list-type map keys (fake_crdrules.py), the schema's defaults, and MicroTime fields. Errors are
422 Invalid with one cause per problem, as the apiserver answers."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import fake_crdrules as crdrules
import jsonschema
import yaml
from fake_machinery import ApiStatus
from kubernetes_validate import utils as kv_utils
from referencing import Registry
from referencing import Resource as SchemaResource

ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "deploy" / "controller" / "crd.yaml"
K8S_VERSION = "1.37"
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")


@cache
def _builtin_validator(kind: str, api_version: str) -> jsonschema.protocols.Validator:
    """The 1.37 strict schema of one built-in kind; the 1.8 MB definitions file is loaded once."""
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema_dir = f"v{K8S_VERSION}.0-local-strict"
    schema = kv_utils.schema_contents(
        f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{group_version}.json", K8S_VERSION
    )
    registry: Registry = SchemaResource.from_contents(schema) @ Registry()
    registry = SchemaResource.from_contents(_definitions(schema_dir)) @ registry
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


@cache
def _definitions(schema_dir: str) -> Any:
    return kv_utils.schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json", K8S_VERSION)


def _check(
    validator: jsonschema.protocols.Validator,
    obj: Mapping[str, Any],
    kind: str,
    more: list[dict[str, str]] | None = None,
) -> None:
    """422 Invalid with one cause per schema error (and per `more`: the CRD's rules), the first named
    in the message, as the apiserver."""
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
    causes = [{"field": ".".join(map(str, e.absolute_path)), "message": e.message[:300]} for e in errors]
    causes += more or []
    if causes:
        raise ApiStatus(
            422, "Invalid", f"{kind} is invalid: {causes[0]['field']}: {causes[0]['message']}", causes
        )


def validate_builtin(obj: Mapping[str, Any]) -> None:
    _check(_builtin_validator(str(obj.get("kind")), str(obj.get("apiVersion"))), obj, str(obj.get("kind")))


@cache
def _crd() -> dict[str, Any]:
    """deploy/controller/crd.yaml, parsed once (read-only: copies go out); its CEL rules compiled,
    as the apiserver does before it accepts a CRD."""
    crd = dict(yaml.safe_load(CRD_FILE.read_text(encoding="utf-8")))
    crdrules.check_rules_compile(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    return crd


def _schema() -> dict[str, Any]:
    return dict(_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def crd_document() -> dict[str, Any]:
    return copy.deepcopy(_crd())


def structural_to_jsonschema(node: Any) -> Any:
    """openAPIV3Schema -> JSON Schema (draft 4: boolean exclusiveMinimum). Objects with properties
    reject unknown fields unless x-kubernetes-preserve-unknown-fields; int-or-string is both types."""
    if not isinstance(node, dict):
        return node
    out = {k: structural_to_jsonschema(v) if isinstance(v, dict) else v for k, v in node.items()}
    if "properties" in node:
        out["properties"] = {k: structural_to_jsonschema(v) for k, v in node["properties"].items()}
        if not node.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in node:
            out["additionalProperties"] = False
    if "items" in node:
        out["items"] = structural_to_jsonschema(node["items"])
    if node.get("x-kubernetes-int-or-string"):
        out.pop("anyOf", None)
        out["type"] = ["integer", "string"]
    if node.get("nullable"):
        out["type"] = [out.get("type", "object"), "null"]
    return {k: v for k, v in out.items() if not k.startswith("x-kubernetes-")}


# The apiserver's formats (k8s.io/kube-openapi's strfmt): date-time is RFC 3339 with up to nine
# fractional digits and a zone; int32/int64 are ranges. jsonschema checks neither without extras.
_DATE_TIME = re.compile(r"^\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d{1,9})?([Zz]|[+-]\d\d:\d\d)$")
FORMATS = jsonschema.FormatChecker(())


@FORMATS.checks("date-time")
def _is_date_time(value: object) -> bool:
    return not isinstance(value, str) or bool(_DATE_TIME.match(value))


@FORMATS.checks("int32")
def _is_int32(value: object) -> bool:
    return not isinstance(value, int) or -(2**31) <= value < 2**31


@FORMATS.checks("int64")
def _is_int64(value: object) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


@cache
def crd_validator() -> jsonschema.protocols.Validator:
    return jsonschema.Draft4Validator(structural_to_jsonschema(_schema()), format_checker=FORMATS)


def crd_schema() -> dict[str, Any]:
    return copy.deepcopy(_schema())


def validate_custom(obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> None:
    """The CRD's schema and its rules (CEL, list-type map; fake_crdrules.py); `old`: the stored
    object on an update (transition rules and ratcheting)."""
    _check(crd_validator(), obj, "InferenceAutoscaler", crdrules.violations(_schema(), obj, old))


def apply_defaults(schema: Mapping[str, Any], obj: Any) -> Any:
    """The structural schema's defaults, as the API server fills them on create and read."""
    if isinstance(obj, dict) and "properties" in schema:
        for key, sub in schema["properties"].items():
            if key not in obj and "default" in sub:
                obj[key] = copy.deepcopy(sub["default"])
            if key in obj:
                apply_defaults(sub, obj[key])
    elif isinstance(obj, list) and "items" in schema:
        for item in obj:
            apply_defaults(schema["items"], item)
    return obj


def check_micro_time(obj: Mapping[str, Any], *paths: tuple[str, ...]) -> None:
    for path in paths:
        value: Any = obj
        for part in path:
            value = value.get(part) if isinstance(value, Mapping) else None
        if value is not None and not (isinstance(value, str) and MICRO_TIME.match(value)):
            field_name = ".".join(path)
            raise ApiStatus(
                400,
                "BadRequest",
                f'{field_name}: parsing time "{value}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse',
            )
