"""deploy/controller: built with `kubectl kustomize`, every built-in object valid against the Kubernetes
1.37 schemas, the example InferenceAutoscalers valid against the CRD and the controller's parser,
the CRD and the pydantic model describing the same fields with the same defaults, and RBAC granting
every request the controller makes (as recorded by the fake kube-apiserver)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from controller_harness import FAST, QUEUE, autoscaler, environment, only
from fake_validation import apply_defaults, crd_schema, validate_builtin, validate_custom
from pydantic import BaseModel

from autoscaler.controller import crd
from autoscaler.controller.crd import InferenceAutoscalerSpecModel

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "controller"
KUSTOMIZATIONS = (
    "",
    "examples/direct",
    "examples/hpa-mode",
    "examples/hpa-mode-before-1.33",
    "examples/loadgate",
)
needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


def build(path: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        ["kubectl", "kustomize", str(DEPLOY / path)], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


@pytest.fixture(scope="module")
def built() -> dict[str, list[dict[str, Any]]]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    return {path: build(path) for path in KUSTOMIZATIONS}


@needs_kubectl
@pytest.mark.parametrize("path", [pytest.param(p, id=p or "deploy/controller") for p in KUSTOMIZATIONS])
def test_builtin_objects_validate_against_kubernetes_1_37(
    built: dict[str, list[dict[str, Any]]], path: str
) -> None:
    for obj in built[path]:
        if obj["apiVersion"] == crd.API_VERSION:
            continue
        validate_builtin(obj)  # raises with the field path on the first error


@needs_kubectl
@pytest.mark.parametrize(
    "path", ["examples/direct", "examples/hpa-mode", "examples/hpa-mode-before-1.33", "examples/loadgate"]
)
def test_example_autoscalers_validate_against_the_crd_and_the_parser(
    built: dict[str, list[dict[str, Any]]], path: str
) -> None:
    examples = [o for o in built[path] if o["kind"] == crd.KIND]
    assert examples
    for obj in examples:
        stored = apply_defaults(crd_schema(), dict(obj))
        validate_custom(stored)
        parsed = crd.parse_autoscaler(
            stored, tolerance=0.1, downscale_stabilization_s=300, max_metric_age_s=60
        )
        assert parsed.mode.value == obj["spec"]["mode"]


@needs_kubectl
def test_controller_deployment_is_ha_probed_and_non_root(built: dict[str, list[dict[str, Any]]]) -> None:
    (deployment,) = [o for o in built[""] if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert container["args"][0] == "controller"
    assert container["image"] == "ghcr.io/infscale/infscale:0.1.0"  # the adapter's image
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


@needs_kubectl
def test_hpa_mode_example_reads_the_published_recommendation(built: dict[str, list[dict[str, Any]]]) -> None:
    (hpa,) = [o for o in built["examples/hpa-mode"] if o["kind"] == "HorizontalPodAutoscaler"]
    (metric,) = hpa["spec"]["metrics"]
    assert metric["external"]["metric"]["name"] == "infscale_desired_replicas"
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "1"}
    assert metric["external"]["metric"]["selector"]["matchLabels"] == {"autoscaler": "llama"}
    assert hpa["spec"]["behavior"]["scaleUp"]["tolerance"] == "0"


@needs_kubectl
def test_hpa_mode_for_older_clusters_is_the_same_without_tolerance(
    built: dict[str, list[dict[str, Any]]],
) -> None:
    """Before 1.33 (or without its feature gate) an apiserver refuses behavior.*.tolerance."""
    newer, older = built["examples/hpa-mode"], built["examples/hpa-mode-before-1.33"]
    assert [o["kind"] for o in older] == [o["kind"] for o in newer]
    for a, b in zip(newer, older, strict=True):
        if a["kind"] == "HorizontalPodAutoscaler":
            for direction in ("scaleUp", "scaleDown"):
                assert "tolerance" not in b["spec"]["behavior"][direction]
                a["spec"]["behavior"][direction].pop("tolerance")
        assert a == b


@needs_kubectl
def test_loadgate_example_runs_the_gate_as_a_native_sidecar(built: dict[str, list[dict[str, Any]]]) -> None:
    """deploy/components/loadgate on the direct example: the sidecar's flags parse, its probe reaches
    the port it listens on, its label names the InferenceAutoscaler that sets N, and it may read it."""
    from autoscaler.loadgate_cli import LoadGateSettings

    objects = built["examples/loadgate"]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]
    (gate,) = pod["spec"]["initContainers"]
    assert gate["restartPolicy"] == "Always"
    assert pod["spec"]["serviceAccountName"] == "infscale-loadgate"
    assert gate["args"][0] == "loadgate"
    flags = dict(a.removeprefix("--").split("=", 1) for a in gate["args"][1:])
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in gate["env"]}
    label = env["INFSCALE_LOADGATE_AUTOSCALER"].removeprefix("metadata.labels['").removesuffix("']")
    name = pod["metadata"]["labels"][label]
    settings = LoadGateSettings(
        storage=flags["storage"],
        engine_ready_url=flags["engine-ready-url"],
        listen=flags["listen"],
        autoscaler=name,
        namespace="serving",
        identity="llama-0",
    )
    port = int(settings.listen.rpartition(":")[2])
    (probe_port,) = [
        p["containerPort"] for p in gate["ports"] if p["name"] == gate["startupProbe"]["httpGet"]["port"]
    ]
    assert probe_port == port and gate["startupProbe"]["httpGet"]["path"] == "/acquired"
    (engine,) = pod["spec"]["containers"]
    assert settings.engine_ready_url == f"http://127.0.0.1:{engine['ports'][0]['containerPort']}/health"
    (ia,) = [o for o in objects if o["kind"] == crd.KIND and o["metadata"]["name"] == name]
    assert ia["spec"]["coldStart"]["maxConcurrentLoads"] == 1
    (role,) = [o for o in objects if o["kind"] == "Role"]
    rules = {(r["apiGroups"][0], r["resources"][0]): set(r["verbs"]) for r in role["rules"]}
    assert rules[("coordination.k8s.io", "leases")] >= {"get", "create", "update"}
    assert rules[(crd.GROUP, crd.PLURAL)] >= {"get"}


# --- the CRD and the model agree --------------------------------------------------------------


def _model_fields(model: type[BaseModel]) -> dict[str, Any]:
    return {(f.alias or name): f for name, f in model.model_fields.items()}


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside X, X | None or list[X]."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


def _pairs(
    model: type[BaseModel], schema: Mapping[str, Any], path: str
) -> Iterator[tuple[str, type[BaseModel], Mapping[str, Any]]]:
    yield path, model, schema
    fields = _model_fields(model)
    for name, sub in schema.get("properties", {}).items():
        if name not in fields:
            continue
        nested = _nested_model(fields[name].annotation)
        sub_schema = sub.get("items", sub) if sub.get("type") == "array" else sub
        if nested is not None and "properties" in sub_schema:
            yield from _pairs(nested, sub_schema, f"{path}.{name}")


def test_crd_schema_and_model_have_the_same_fields() -> None:
    spec_schema = crd_schema()["properties"]["spec"]
    mismatches = []
    for path, model, schema in _pairs(InferenceAutoscalerSpecModel, spec_schema, "spec"):
        in_model = set(_model_fields(model))
        in_schema = set(schema.get("properties", {}))
        if path == "spec":
            in_schema.discard("scaleTargetRef")  # the model keeps it as a checked dict
            in_model.discard("scaleTargetRef")
        if in_model != in_schema:
            mismatches.append(
                f"{path}: only in model {sorted(in_model - in_schema)},"
                f" only in CRD {sorted(in_schema - in_model)}"
            )
    assert not mismatches, "\n".join(mismatches)


def test_crd_defaults_equal_the_models() -> None:
    differences = []
    for path, model, schema in _pairs(
        InferenceAutoscalerSpecModel, crd_schema()["properties"]["spec"], "spec"
    ):
        fields = _model_fields(model)
        for name, sub in schema.get("properties", {}).items():
            if "default" in sub:
                model_default = fields[name].get_default(call_default_factory=True)
                value = getattr(model_default, "value", model_default)
                if value != sub["default"]:
                    differences.append(f"{path}.{name}: CRD {sub['default']!r}, model {value!r}")
    assert not differences, "\n".join(differences)


def test_crd_rejects_what_the_api_server_would() -> None:
    bad = autoscaler()
    bad["spec"]["mode"] = "yolo"
    bad["spec"]["metrics"][0]["external"]["target"]["value"] = "eight"
    bad["spec"]["typo"] = 1
    with pytest.raises(Exception) as info:
        validate_custom(apply_defaults(crd_schema(), bad))
    fields = {c["field"] for c in info.value.causes}  # type: ignore[attr-defined]
    assert {"spec", "spec.mode", "spec.metrics.0.external.target.value"} <= fields


# --- RBAC covers every request the controller makes -------------------------------------------

_RESOURCE = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)
_VERB = {
    "GET": "get",
    "PUT": "update",
    "PATCH": "patch",
    "POST": "create",
    "DELETE": "delete",
    "WATCH": "watch",
}


def _allowed(rules: list[dict[str, Any]], group: str, resource: str, verb: str, name: str | None) -> bool:
    for rule in rules:
        if group not in rule.get("apiGroups", []):
            continue
        if resource not in rule.get("resources", []) and "*" not in rule.get("resources", []):
            continue
        if verb not in rule.get("verbs", []):
            continue
        if rule.get("resourceNames") and name not in rule["resourceNames"]:
            continue
        return True
    return False


def requests_needing(log: list[tuple[str, str]]) -> list[tuple[str, str, str, str | None]]:
    """(group, resource, verb, name) of each request; discovery paths need no grant."""
    needs = []
    for method, path in log:
        if path == "/api/v1" or re.fullmatch(r"/apis/[^/]+/[^/]+", path):
            continue  # discovery: granted to every authenticated user (system:discovery)
        match = _RESOURCE.match(path)
        assert match is not None, path
        group = "" if match["core"] else match["group"]
        resource = match["resource"] if not match["sub"] else f"{match['resource']}/{match['sub']}"
        verb = _VERB[method] if match["name"] or method != "GET" else "list"
        if group == "external.metrics.k8s.io":  # /namespaces/{ns}/{metric}: a get of the metric
            verb = "get"
        needs.append((group, resource, verb, match["name"]))
    return needs


def denied(roles: Mapping[str, Any], needs: list[tuple[str, str, str, str | None]]) -> list[str]:
    out = []
    for group, resource, verb, name in needs:
        namespaced = group == "coordination.k8s.io" or (group, resource) == ("", "pods/status")
        role = roles["Role"] if namespaced else roles["ClusterRole"]
        if not _allowed(role["rules"], group, resource, verb, name):
            out.append(f"{verb} {group or 'core'}/{resource} {name or ''}")
    return out


@needs_kubectl
async def test_rbac_grants_every_request_the_controller_makes(built: dict[str, list[dict[str, Any]]]) -> None:
    cluster_role = next(o for o in built[""] if o["kind"] == "ClusterRole")
    role_rules = [r for o in built[""] if o["kind"] == "Role" for r in o["rules"]]  # in infscale-system
    roles = {"ClusterRole": cluster_role, "Role": {"rules": role_rules}}
    async with environment() as env:
        env.fake.add_node("gpu-a", gpus=8)
        env.start(
            2,
            autoscaler(
                behavior=FAST,
                cold_start={"weightsGB": 10, "storageGBps": 10, "gpusPerReplica": 1},
                prediction={"forecaster": "holt"},
            ),
        )
        env.queue(24)
        elector = env.elector("a")
        controller = env.controller(elector=elector)
        await elector.tick(env.clock())
        assert only(await controller.step()).scaled_to == 6
        env.clock.advance(3)
        await elector.tick(env.clock())
        await elector.release(env.clock())
    needs = requests_needing(env.fake.log)
    kinds = {(g, r, v) for g, r, v, _ in needs}
    assert {
        ("infscale.io", "inferenceautoscalers", "list"),
        ("infscale.io", "inferenceautoscalers", "watch"),
        ("infscale.io", "inferenceautoscalers/status", "patch"),
        ("apps", "deployments", "list"),
        ("apps", "deployments", "watch"),
        ("apps", "deployments/scale", "update"),
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("", "nodes", "list"),
        ("", "nodes", "watch"),
        ("autoscaling", "horizontalpodautoscalers", "list"),
        ("autoscaling", "horizontalpodautoscalers", "watch"),
        ("events.k8s.io", "events", "create"),
        ("coordination.k8s.io", "leases", "create"),
        ("coordination.k8s.io", "leases", "update"),
        ("external.metrics.k8s.io", QUEUE, "get"),
    } <= kinds
    assert denied(roles, needs) == []
    # the check can fail: without the pods rule, the pod lists are denied
    pruned = {
        **roles,
        "ClusterRole": {"rules": [r for r in roles["ClusterRole"]["rules"] if "pods" not in r["resources"]]},
    }
    assert any("core/pods" in d for d in denied(pruned, needs))
