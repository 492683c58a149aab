"""deploy/: every kustomization builds with `kubectl kustomize`, every object validates against the
Kubernetes 1.37 schemas, and the objects say what the adapter needs (skipped without kubectl)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from adapter.catalogconfig import CatalogSettings

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZATIONS = [
    "deploy/adapter",
    "deploy/overlays/cert-manager",
    "deploy/overlays/dev-insecure",
    "deploy/overlays/network-policy",
    "deploy/examples/hpa",
]
KUBECTL = shutil.which("kubectl")
CRD_GROUPS = ("cert-manager.io/",)  # custom resources: no schema in kubernetes-validate


@cache
def build(path: str) -> tuple[dict[str, Any], ...]:
    if KUBECTL is None:
        pytest.skip("kubectl not installed")
    result = subprocess.run(
        [KUBECTL, "kustomize", str(ROOT / path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, f"kubectl kustomize {path} failed:\n{result.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def find(objects: tuple[dict[str, Any], ...], kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(matches) == 1, f"expected one {kind} {name or ''}, found {len(matches)}"
    return matches[0]


@pytest.mark.parametrize("path", [pytest.param(p, id=p) for p in KUSTOMIZATIONS])
def test_every_object_validates_against_kubernetes_1_37(path: str) -> None:
    objects = build(path)
    assert objects
    checked = 0
    for obj in objects:
        if obj["apiVersion"].startswith(CRD_GROUPS):
            continue
        try:
            kubernetes_validate.validate(obj, "1.37", strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{path}: {obj['kind']}/{obj['metadata']['name']}: {exc.message} at {list(exc.path)}")
        checked += 1
    assert checked >= 1


def test_the_validator_rejects_a_broken_object() -> None:
    broken = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {"replicas": "2"},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.37", strict=True)


def test_base_has_every_required_object() -> None:
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in build("deploy/adapter"))
    names = {k for k, _ in kinds}
    assert {
        "Namespace",
        "ServiceAccount",
        "Deployment",
        "Service",
        "APIService",
        "ClusterRole",
        "ClusterRoleBinding",
        "RoleBinding",
        "PodDisruptionBudget",
        "ConfigMap",
    } <= names, kinds


def test_deployment_is_hardened_and_probed() -> None:
    deployment = find(build("deploy/adapter"), "Deployment", "infscale-adapter")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert spec["replicas"] == 2
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    probes = {p: container[p]["httpGet"] for p in ("readinessProbe", "livenessProbe")}
    assert probes == {
        "readinessProbe": {"scheme": "HTTPS", "path": "/readyz", "port": "https"},
        "livenessProbe": {"scheme": "HTTPS", "path": "/livez", "port": "https"},
    }
    assert container["ports"] == [{"name": "https", "containerPort": 6443}]
    service = find(build("deploy/adapter"), "Service", "infscale-adapter")
    assert service["spec"]["ports"][0]["targetPort"] == "https"
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]
    pdb = find(build("deploy/adapter"), "PodDisruptionBudget")
    assert pdb["spec"]["selector"] == spec["selector"] and pdb["spec"]["minAvailable"] == 1


def test_image_is_the_dockerfiles_and_runs_as_its_user() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    deployment = find(build("deploy/adapter"), "Deployment", "infscale-adapter")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"ghcr.io/infscale/infscale:{version}"
    assert f"ghcr.io/infscale/infscale:{version}" in dockerfile
    assert re.search(r"^FROM python:3\.11-slim$", dockerfile, re.MULTILINE)
    user = re.findall(r"^USER (\d+):(\d+)$", dockerfile, re.MULTILINE)
    pod_security = deployment["spec"]["template"]["spec"]["securityContext"]
    assert user == [(str(pod_security["runAsUser"]), str(pod_security["runAsGroup"]))]
    assert container["args"][0] == "adapter" and 'ENTRYPOINT ["infscale"]' in dockerfile


def test_rbac_for_delegation_and_discovery() -> None:
    objects = build("deploy/adapter")
    adapter = {"kind": "ServiceAccount", "name": "infscale-adapter", "namespace": "infscale-system"}
    reader = find(objects, "RoleBinding", "infscale-adapter:auth-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    assert reader["subjects"] == [adapter]
    delegator = find(objects, "ClusterRoleBinding", "infscale-adapter:system:auth-delegator")
    assert delegator["roleRef"]["name"] == "system:auth-delegator" and delegator["subjects"] == [adapter]
    pods = find(objects, "ClusterRole", "infscale-adapter:pod-reader")
    assert pods["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    binding = find(objects, "ClusterRoleBinding", "infscale-adapter:pod-reader")
    assert binding["subjects"] == [adapter]
    hpa_reader = find(
        objects, "ClusterRoleBinding", "infscale-external-metrics-reader:horizontal-pod-autoscaler"
    )
    assert hpa_reader["subjects"][0]["name"] == "horizontal-pod-autoscaler"


@pytest.mark.parametrize(
    ("path", "annotation", "insecure"),
    [
        pytest.param(
            "deploy/overlays/cert-manager", "infscale-system/infscale-adapter-tls", None, id="cert-manager"
        ),
        pytest.param("deploy/overlays/dev-insecure", None, True, id="dev-insecure"),
    ],
)
def test_apiservice_trust_per_overlay(path: str, annotation: str | None, insecure: bool | None) -> None:
    objects = build(path)
    api = find(objects, "APIService", "v1beta1.external.metrics.k8s.io")
    annotations = api["metadata"].get("annotations", {})
    assert annotations.get("cert-manager.io/inject-ca-from") == annotation
    assert api["spec"].get("insecureSkipTLSVerify") is insecure
    assert "caBundle" not in api["spec"]  # never together with insecureSkipTLSVerify; cert-manager injects it
    assert api["spec"]["service"] == {"name": "infscale-adapter", "namespace": "infscale-system", "port": 443}
    if insecure:
        assert "DEV ONLY" in annotations["infscale.io/warning"]
        assert all(o["metadata"].get("labels", {}).get("infscale.io/dev-only") == "true" for o in objects)


def test_cert_manager_certificate_covers_the_service_name() -> None:
    objects = build("deploy/overlays/cert-manager")
    cert = find(objects, "Certificate", "infscale-adapter-tls")
    assert "infscale-adapter.infscale-system.svc" in cert["spec"]["dnsNames"]
    deployment = find(objects, "Deployment", "infscale-adapter")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == cert["spec"]["secretName"]


def test_catalog_configmap_is_a_valid_catalog_mounted_where_the_args_point() -> None:
    objects = build("deploy/adapter")
    configmap = find(objects, "ConfigMap")
    settings = CatalogSettings.model_validate(yaml.safe_load(configmap["data"]["catalog.yaml"]))
    deployment = find(objects, "Deployment", "infscale-adapter")
    pod = deployment["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["catalog"]["configMap"]["name"] == configmap["metadata"]["name"]  # hash suffix followed
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "catalog")
    assert f"--catalog={mount['mountPath']}/catalog.yaml" in pod["containers"][0]["args"]
    hpa = find(build("deploy/examples/hpa"), "HorizontalPodAutoscaler")
    served = {m.name for m in settings.metric_specs()}
    assert {m["external"]["metric"]["name"] for m in hpa["spec"]["metrics"]} <= served
    assert hpa["spec"]["metrics"][0]["external"]["metric"]["selector"]["matchLabels"].keys() <= set(
        settings.labels
    )


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(p, id=p)
        for p in ("deploy/adapter", "deploy/overlays/cert-manager", "deploy/overlays/dev-insecure")
    ],
)
def test_container_args_are_valid_adapter_settings(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Deployment's args go through the real `infscale adapter` parser and settings."""
    from adapter.cli import overrides
    from adapter.settings import AdapterSettings
    from infscale.cli import build_parser

    for name in [n for n in os.environ if n.startswith("INFSCALE_")]:
        monkeypatch.delenv(name)
    deployment = find(build(path), "Deployment", "infscale-adapter")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    settings = AdapterSettings(**overrides(build_parser(args).parse_args(args)))
    assert settings.listen_address() == ("0.0.0.0", 6443)
    assert settings.tls_enabled and not settings.insecure_dev
    assert settings.catalog_file == Path("/etc/infscale/catalog.yaml")


def test_the_network_policy_admits_only_the_aggregator_and_lets_out_only_what_the_adapter_needs() -> None:
    from common.selector import parse_selector

    objects = build("deploy/overlays/network-policy")
    policy = find(objects, "NetworkPolicy", "infscale-adapter")["spec"]
    deployment = find(objects, "Deployment", "infscale-adapter")
    pod = deployment["spec"]["template"]
    assert policy["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]  # both closed but for the rules

    # in: the serving port only, from ipBlocks only (the kube-apiserver is no pod), pods excluded
    (ingress,) = policy["ingress"]
    https = next(p for p in pod["spec"]["containers"][0]["ports"] if p["name"] == "https")
    assert ingress["ports"] == [{"protocol": "TCP", "port": https["containerPort"]}]
    assert all(set(peer) == {"ipBlock"} and peer["ipBlock"]["except"] for peer in ingress["from"])

    # out: the kube-apiserver (ipBlock), DNS, and the engines the catalog scrapes, on its port
    catalog = CatalogSettings.model_validate(
        yaml.safe_load(find(objects, "ConfigMap")["data"]["catalog.yaml"])
    )
    assert catalog.kubernetes is not None
    engines = [
        rule
        for rule in policy["egress"]
        if any(
            "podSelector" in peer and "namespaceSelector" in peer and peer["namespaceSelector"] == {}
            for peer in rule["to"]
        )
    ]
    assert len(engines) == 1
    (peer,) = engines[0]["to"]
    assert parse_selector(catalog.kubernetes.label_selector).matches(peer["podSelector"]["matchLabels"])
    assert engines[0]["ports"] == [{"protocol": "TCP", "port": catalog.kubernetes.port}]
    apiserver = [r for r in policy["egress"] if all("ipBlock" in peer for peer in r["to"])]
    assert {p["port"] for r in apiserver for p in r["ports"]} == {443, 6443}
    dns = [r for r in policy["egress"] if any(p["port"] == 53 for p in r["ports"])]
    assert {p["protocol"] for r in dns for p in r["ports"]} == {"UDP", "TCP"}
    assert len(policy["egress"]) == 3  # nothing else gets out


def test_the_base_ships_no_network_policy() -> None:
    """Opt-in: the pod CIDR in it is the cluster's; a wrong one in the default install would cut
    the aggregator off and take the APIService down."""
    assert not [o for o in build("deploy/adapter") if o["kind"] == "NetworkPolicy"]
