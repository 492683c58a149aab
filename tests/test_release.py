"""The one-file install and the monitoring bundle.

- deploy/release/infscale.yaml equals a fresh `make manifests` build (so a change to a kustomize
  base that was not rebuilt fails here), holds the adapter, the controller, the CRD, RBAC and the
  APIService, and validates against the Kubernetes 1.37 schemas;
- every PromQL expression in the PrometheusRule and the Grafana dashboard parses (`promtool check
  rules`, the real Prometheus tooling) and names only metrics the adapter and the controller
  export, read from their own registries: a metric renamed in code fails here.
Skipped without kubectl (the release) or promtool (the parsing).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT / "deploy" / "release" / "infscale.yaml"
MONITORING = ROOT / "deploy" / "monitoring"
CRD_GROUPS = ("cert-manager.io/", "monitoring.coreos.com/")  # no schema in kubernetes-validate
PROMETHEUS_OWN = {"up"}  # series Prometheus makes itself for every target


def _build_release() -> Any:
    spec = importlib.util.spec_from_file_location("build_release", ROOT / "deploy" / "build_release.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def release_objects() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(RELEASE.read_text()) if d]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_release_is_a_fresh_build() -> None:
    assert RELEASE.read_text() == _build_release().build(), "deploy/release is stale: run `make manifests`"


def test_release_holds_adapter_controller_crd_rbac_and_apiservice() -> None:
    have = {(o["kind"], o["metadata"]["name"]) for o in release_objects()}
    assert {
        ("Namespace", "infscale-system"),
        ("Deployment", "infscale-adapter"),
        ("Deployment", "infscale-controller"),
        ("CustomResourceDefinition", "inferenceautoscalers.infscale.io"),
        ("APIService", "v1beta1.external.metrics.k8s.io"),
        ("ServiceAccount", "infscale-adapter"),
        ("ServiceAccount", "infscale-controller"),
    } <= have
    assert {k for k, _ in have} >= {"ClusterRole", "ClusterRoleBinding", "RoleBinding", "Certificate"}
    keys = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in release_objects()]
    assert len(keys) == len(set(keys)), "an object appears twice"


def test_release_validates_against_kubernetes_1_37() -> None:
    checked = 0
    for obj in release_objects():
        if obj["apiVersion"].startswith(CRD_GROUPS):
            continue
        try:
            kubernetes_validate.validate(obj, "1.37", strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message} at {list(exc.path)}")
        checked += 1
    assert checked >= 15


# --- monitoring -----------------------------------------------------------------------------------


def exported_metrics() -> set[str]:
    """Every series name the adapter and the controller can expose, from their own registries."""
    from adapter.connections import connection_metrics
    from adapter.middleware import request_metrics
    from adapter.telemetry import Telemetry as AdapterTelemetry
    from autoscaler.controller.telemetry import Telemetry as ControllerTelemetry

    adapter = AdapterTelemetry()
    request_metrics(adapter)
    connection_metrics(adapter)
    names: set[str] = set()
    for registry in (adapter.registry, ControllerTelemetry().registry):
        names |= set(registry._names_to_collectors)  # every name a collector claims, suffixes included
    return names


_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions, keywords,
    label names (inside {}, by(), on() ...) or strings."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        rest = text[match.end() :].lstrip()
        if rest.startswith("(") or match.group() in _KEYWORDS:
            continue
        if match.start() > 0 and text[match.start() - 1].isdigit():  # 5m, 1e3
            continue
        names.add(match.group())
    return names


def rule_expressions() -> list[tuple[str, str]]:
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    return [(r["alert"], r["expr"]) for g in rule["spec"]["groups"] for r in g["rules"]]


def dashboard_expressions() -> list[tuple[str, str]]:
    dash = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    found = [(f"{p['title']} {t['refId']}", t["expr"]) for p in dash["panels"] for t in p["targets"]]
    for var in dash["templating"]["list"]:
        if var["type"] == "query":  # label_values(METRIC{...}, label): the selector is PromQL
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", var["definition"])
            assert inner, var["definition"]
            found.append((f"variable {var['name']}", inner.group(1)))
    return found


def _grafana_to_promql(expr: str) -> str:
    """Grafana's variables as Prometheus sees them once Grafana substituted them."""
    return expr.replace("$__rate_interval", "5m").replace("$namespace", ".*").replace("$autoscaler", ".*")


def test_the_name_finder_finds_names_and_nothing_else() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le) (rate(a_bucket{job="x", le!="+Inf"}[5m])))'
        ' > 1.25 * ignoring(source) b{source="model"} or absent(c) and on() d offset 5m'
    )
    assert metric_names(expr) == {"a_bucket", "b", "c", "d"}


@pytest.mark.parametrize(
    ("where", "expr"), [pytest.param(w, e, id=w) for w, e in rule_expressions() + dashboard_expressions()]
)
def test_every_expression_names_only_exported_metrics(where: str, expr: str) -> None:
    names = metric_names(_grafana_to_promql(expr))
    assert names, f"{where}: no metric found in {expr!r}"
    unknown = names - exported_metrics() - PROMETHEUS_OWN
    assert not unknown, f"{where}: {sorted(unknown)} not exported by the adapter or the controller"


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool (Debian package prometheus) not installed"
)
def test_every_expression_parses_with_promtool(tmp_path: Path) -> None:
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    alerts = tmp_path / "alerts.yaml"
    alerts.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    panels = tmp_path / "dashboard.yaml"
    records = [
        {"record": f"infscale:dashboard:{i}", "expr": _grafana_to_promql(expr)}
        for i, (_, expr) in enumerate(dashboard_expressions())
    ]
    panels.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}))
    done = subprocess.run(
        ["promtool", "check", "rules", str(alerts), str(panels)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "x:y", "expr": "sum(("}]}]})
    )
    assert subprocess.run(["promtool", "check", "rules", str(broken)], capture_output=True).returncode != 0


def test_monitoring_names_the_services_and_ports_the_release_has() -> None:
    monitor = yaml.safe_load((MONITORING / "servicemonitor.yaml").read_text())
    services = [o for o in release_objects() if o["kind"] == "Service"]
    wanted = monitor["spec"]["selector"]["matchLabels"]
    matched = [s for s in services if wanted.items() <= s["metadata"].get("labels", {}).items()]
    ports = {p["name"] for s in matched for p in s["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports
    assert {s["metadata"]["name"] for s in matched} == {"infscale-adapter", "infscale-controller-metrics"}


def test_the_image_carries_every_package() -> None:
    """A package added to pyproject's list but not copied into the image would fail at import in
    the cluster (common/ did)."""
    import tomllib

    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"][
        "include"
    ]
    copied = set(re.findall(r"^COPY (\w+) \./\1$", (ROOT / "Dockerfile").read_text(), flags=re.M))
    assert {pattern.rstrip("*") for pattern in include} <= copied
