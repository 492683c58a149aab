"""`infscale explain` on HPA objects as kubectl prints them: autoscaling/v2 and v1 (converted as
the apiserver does), JSON and YAML, one object or a List; Pods and Object metrics; Resource
metrics refused; and the seeding rules of upstream's recommendation history (issue 11 item 8).

Every object fixture is first validated against the Kubernetes 1.37 schemas (strict), so the
shapes here are the ones a cluster returns, not shapes invented to fit the reader.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from infscale.cli import main

ROOT = Path(__file__).resolve().parents[1]
V2_EXAMPLE = ROOT / "examples" / "kubectl" / "hpa-v2.yaml"
NOW = "2026-11-29T10:00:00Z"
OBJECT_KEYS = ("apiVersion", "kind", "metadata", "spec", "status")


def v2_object() -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load(V2_EXAMPLE.read_text())
    return obj


def valid(obj: dict[str, Any]) -> dict[str, Any]:
    """The object, once its Kubernetes part passed the 1.37 schema (explain's own keys aside)."""
    kubernetes_validate.validate({k: v for k, v in obj.items() if k in OBJECT_KEYS}, "1.37", strict=True)
    return obj


def explain(tmp_path: Path, capsys: pytest.CaptureFixture[str], payload: Any, *flags: str) -> tuple[int, Any]:
    path = tmp_path / "in.txt"
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    code = main(["explain", str(path), "--output", "json", *flags])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if code == 0 else captured.err


def pods_metric(name: str, average: str) -> dict[str, Any]:
    return {
        "type": "Pods",
        "pods": {"metric": {"name": name}, "target": {"type": "AverageValue", "averageValue": average}},
    }


def pods_status(name: str, average: str) -> dict[str, Any]:
    return {"type": "Pods", "pods": {"metric": {"name": name}, "current": {"averageValue": average}}}


def object_metric(name: str, target: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "Object",
        "object": {
            "describedObject": {"apiVersion": "v1", "kind": "Service", "name": "gateway"},
            "metric": {"name": name},
            "target": target,
        },
    }


def object_status(name: str, current: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "Object",
        "object": {
            "describedObject": {"apiVersion": "v1", "kind": "Service", "name": "gateway"},
            "metric": {"name": name},
            "current": current,
        },
    }


def with_metrics(
    obj: dict[str, Any], metrics: list[Any], current: list[Any], replicas: int = 4
) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["spec"]["metrics"] = metrics
    obj["status"]["currentMetrics"] = current
    obj["status"]["currentReplicas"] = replicas
    obj["now"] = NOW
    return obj


# --- autoscaling/v2 ------------------------------------------------------------------------------


def test_kubectl_yaml_is_explained_with_the_hpas_own_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    valid(v2_object())
    code, out = explain(tmp_path, capsys, V2_EXAMPLE.read_text())
    assert code == 0
    # 4 replicas at an average of 30 against 10: ceil(120 / 10) = 12, capped by scaleUp's
    # max(4 + 4 pods, 4 x 200 %) = 8 per 15 s: what the HPA itself decided
    assert out["desiredReplicas"] == 8 == out["hpa"]["desiredReplicas"]
    assert out["description"] == "HorizontalPodAutoscaler serving/llama-70b"
    assert {c["type"]: (c["status"], c["reason"]) for c in out["conditions"]} == {
        "AbleToScale": ("True", "ReadyForNewScale"),
        "ScalingActive": ("True", "ValidMetricFound"),
        "ScalingLimited": ("True", "ScaleUpLimit"),
    }
    assert [c["reason"] for c in out["hpa"]["conditions"]] == [
        "ReadyForNewScale",
        "ValidMetricFound",
        "ScaleUpLimit",
    ]


def test_kubectl_json_and_yaml_read_alike(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    obj = v2_object()
    code_json, from_json = explain(tmp_path, capsys, json.dumps(obj, indent=4))
    code_yaml, from_yaml = explain(tmp_path, capsys, yaml.safe_dump(obj))
    assert code_json == code_yaml == 0
    assert from_json == from_yaml


def test_table_and_yaml_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(V2_EXAMPLE)]) == 0
    table = capsys.readouterr().out
    assert "desired replicas: 8 (scale 4 -> 8)" in table
    assert "  ScalingLimited=True ScaleUpLimit:" in table
    assert "the HPA reported: desired replicas 8, last scaled 2026-11-29T09:59:30Z" in table
    assert main(["explain", str(V2_EXAMPLE), "-o", "yaml"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert doc["desiredReplicas"] == 8
    assert {c["status"] for c in doc["conditions"]} == {"True"}  # strings, as Kubernetes writes them


def test_a_list_gives_one_decision_per_hpa(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calm = v2_object()
    calm["metadata"]["name"] = "llama-8b"
    calm["status"]["currentMetrics"][0]["external"]["current"] = {"averageValue": "10"}
    listing = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [v2_object(), calm],
        "metadata": {"resourceVersion": ""},
    }
    code, out = explain(tmp_path, capsys, listing)
    assert code == 0
    assert [(d["description"], d["desiredReplicas"]) for d in out] == [
        ("HorizontalPodAutoscaler serving/llama-70b", 8),
        ("HorizontalPodAutoscaler serving/llama-8b", 4),  # 10 against 10: inside the tolerance
    ]


def test_a_yaml_stream_is_several_documents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = V2_EXAMPLE.read_text() + "\n---\n" + V2_EXAMPLE.read_text()
    code, out = explain(tmp_path, capsys, text)
    assert code == 0
    assert [d["desiredReplicas"] for d in out] == [8, 8]


def test_pods_metric_is_the_mean_times_the_pods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """GetMetricReplicas: ceil(mean / target x pods), inside the tolerance unchanged."""
    hpa = with_metrics(v2_object(), [pods_metric("vllm_running", "10")], [pods_status("vllm_running", "15")])
    hpa["spec"].pop("behavior")  # legacy path: scale up to 2 x current
    code, out = explain(tmp_path, capsys, valid(hpa))
    assert code == 0
    assert out["stages"][0]["after"] == 6  # ceil(1.5 x 4)
    assert out["desiredReplicas"] == 6
    hpa["status"]["currentMetrics"] = [pods_status("vllm_running", "10500m")]  # ratio 1.05: within 0.1
    code, out = explain(tmp_path, capsys, valid(hpa))
    assert out["desiredReplicas"] == 4


def test_pods_items_in_the_infscale_document_are_averaged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = {
        "spec": {"maxReplicas": 20, "metrics": [pods_metric("vllm_running", "10")]},
        "status": {"currentReplicas": 4},
        "metricValues": {"vllm_running": [10, 20, "15", "15000m"]},  # mean 15 (integer milli mean)
        "now": NOW,
    }
    code, out = explain(tmp_path, capsys, doc)
    assert code == 0
    assert out["stages"][0]["after"] == 6


@pytest.mark.parametrize(
    ("target", "current", "want"),
    [
        # GetObjectMetricReplicas: ratio value / target, times the ready pods: ceil(3 x 4)
        pytest.param({"type": "Value", "value": "100"}, {"value": "300"}, 12, id="Value"),
        # GetObjectPerPodMetricReplicas: ceil(value / target) with value = average x replicas = 120
        pytest.param(
            {"type": "AverageValue", "averageValue": "10"},
            {"value": "0", "averageValue": "30"},
            12,
            id="AverageValue",
        ),
    ],
)
def test_object_metric(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    target: dict[str, str],
    current: dict[str, str],
    want: int,
) -> None:
    hpa = with_metrics(
        v2_object(),
        [object_metric("requests_per_second", target)],
        [object_status("requests_per_second", current)],
    )
    code, out = explain(tmp_path, capsys, valid(hpa))
    assert code == 0
    assert out["stages"][0]["after"] == want


def test_resource_metrics_are_refused_one_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hpa = v2_object()
    hpa["spec"]["metrics"] += [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}},
        },
        {
            "type": "ContainerResource",
            "containerResource": {
                "name": "memory",
                "container": "vllm",
                "target": {"type": "AverageValue", "averageValue": "20Gi"},
            },
        },
    ]
    code, err = explain(tmp_path, capsys, valid(hpa))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 2
    assert "spec.metrics[1]: a Resource metric (cpu) cannot be explained" in lines[0]
    assert (
        "spec.metrics[2]: a ContainerResource metric (memory of container vllm) cannot be explained"
        in lines[1]
    )
    assert all("explain reads External, Pods and Object metrics" in line for line in lines)


def test_resource_metric_refused_in_the_infscale_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = {
        "spec": {
            "maxReplicas": 5,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
                }
            ],
        },
        "status": {"currentReplicas": 2},
    }
    code, err = explain(tmp_path, capsys, doc)
    assert code == 2
    assert "spec.metrics[0]: a Resource metric (cpu) cannot be explained" in err
    assert "Input should be" not in err and "expected tags" not in err


def test_a_metric_missing_from_the_status_is_unreadable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hpa = v2_object()
    hpa["status"]["currentMetrics"] = [{"type": ""}]  # what the HPA writes for a metric it could not read
    hpa["now"] = NOW
    code, out = explain(tmp_path, capsys, valid(hpa))
    assert code == 0
    assert out["desiredReplicas"] == 4  # held
    active = next(c for c in out["conditions"] if c["type"] == "ScalingActive")
    assert (active["status"], active["reason"]) == ("False", "FailedGetExternalMetric")
    assert out["hpa"]["notes"] == [
        "External metric infscale_queue_size: no current value in status.currentMetrics (taken as unreadable)"
    ]


def test_explain_fields_beside_the_object_override_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hpa = v2_object()
    hpa["metricValues"] = {"infscale_queue_size": [10, 10, 10, 10]}  # what-if: the queue drained
    hpa["recommendations"] = []
    hpa["now"] = NOW
    code, out = explain(tmp_path, capsys, hpa)
    assert code == 0
    assert out["desiredReplicas"] == 4  # sum 40 against 10 x 4 replicas: ratio 1, held (the status said 8)
    assert out["stages"][0]["message"] == "infscale_queue_size: ratio 1 -> 4"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(
            lambda o: o.update(apiVersion="autoscaling/v2beta1"),
            "apiVersion: expected one of",
            id="old version",
        ),
        pytest.param(
            lambda o: o.update(kind="Deployment"), "kind: expected HorizontalPodAutoscaler", id="not an HPA"
        ),
        pytest.param(
            lambda o: o.pop("status"), "status: the HPA controller has not reported", id="no status"
        ),
        pytest.param(
            lambda o: o["spec"].pop("maxReplicas"), "spec.maxReplicas: Field required", id="spec field"
        ),
        pytest.param(
            lambda o: o.update(recommendation=[]), "recommendation: Extra inputs", id="typo beside the object"
        ),
    ],
)
def test_bad_objects_name_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mutate: Any, message: str
) -> None:
    hpa = v2_object()
    mutate(hpa)
    code, err = explain(tmp_path, capsys, hpa)
    assert code == 2
    assert message in err


def test_invalid_yaml_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = explain(tmp_path, capsys, "spec:\n  maxReplicas: 3\n bad: [\n")
    assert code == 2
    assert "invalid YAML" in err and "line" in err


# --- autoscaling/v1, converted as the apiserver converts it ---------------------------------------


def v1_object() -> dict[str, Any]:
    """The v2 example as `kubectl get hpa.v1.autoscaling` prints it: what v1 cannot express is in
    annotations (the behavior with Go field names, as the apiserver marshals its internal type)."""
    v2 = v2_object()
    metrics = [
        {
            "type": "External",
            "external": {
                "metricName": "infscale_queue_size",
                "metricSelector": {"matchLabels": {"deployment": "llama-70b"}},
                "targetAverageValue": "10",
            },
        }
    ]
    current = [
        {
            "type": "External",
            "external": {
                "metricName": "infscale_queue_size",
                "metricSelector": {"matchLabels": {"deployment": "llama-70b"}},
                "currentValue": "0",
                "currentAverageValue": "30",
            },
        }
    ]
    behavior = {
        "ScaleUp": {
            "StabilizationWindowSeconds": 0,
            "SelectPolicy": "Max",
            "Policies": [
                {"Type": "Pods", "Value": 4, "PeriodSeconds": 15},
                {"Type": "Percent", "Value": 100, "PeriodSeconds": 15},
            ],
            "Tolerance": None,
        },
        "ScaleDown": {
            "StabilizationWindowSeconds": 300,
            "SelectPolicy": "Max",
            "Policies": [{"Type": "Percent", "Value": 100, "PeriodSeconds": 15}],
            "Tolerance": None,
        },
    }
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            **v2["metadata"],
            "annotations": {
                "autoscaling.alpha.kubernetes.io/metrics": json.dumps(metrics),
                "autoscaling.alpha.kubernetes.io/current-metrics": json.dumps(current),
                "autoscaling.alpha.kubernetes.io/behavior": json.dumps(behavior),
                "autoscaling.alpha.kubernetes.io/conditions": json.dumps(v2["status"]["conditions"]),
            },
        },
        "spec": {"scaleTargetRef": v2["spec"]["scaleTargetRef"], "minReplicas": 1, "maxReplicas": 32},
        "status": {k: v2["status"][k] for k in ("currentReplicas", "desiredReplicas", "lastScaleTime")},
    }


def test_v1_converts_to_the_same_decision_as_v2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, from_v2 = explain(tmp_path, capsys, v2_object())
    code, from_v1 = explain(tmp_path, capsys, valid(v1_object()))
    assert code == 0
    assert from_v1["description"] == "HorizontalPodAutoscaler serving/llama-70b (autoscaling/v1, converted)"
    for key in ("desiredReplicas", "stages", "conditions"):
        assert from_v1[key] == from_v2[key]
    assert from_v1["hpa"]["conditions"] == from_v2["hpa"]["conditions"]


def test_v1_cpu_target_and_the_implicit_default_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cpu = v1_object()
    del cpu["metadata"]["annotations"]
    cpu["spec"]["targetCPUUtilizationPercentage"] = 70
    code, err = explain(tmp_path, capsys, valid(cpu))
    assert (code, err.count("\n")) == (2, 1)
    assert "spec.metrics[0]: a Resource metric (cpu) cannot be explained" in err

    both = v1_object()
    both["spec"]["targetCPUUtilizationPercentage"] = 70  # External from the annotation, CPU appended last
    code, err = explain(tmp_path, capsys, valid(both))
    assert "spec.metrics[1]: a Resource metric (cpu)" in err

    implicit = v1_object()
    del implicit["metadata"]["annotations"]  # no metric at all: v1's implicit CPU 80 %
    code, err = explain(tmp_path, capsys, valid(implicit))
    assert code == 2 and "spec.metrics[0]: a Resource metric (cpu)" in err


def test_v1_tolerance_annotations_and_pods_metric(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hpa = v1_object()
    notes = hpa["metadata"]["annotations"]
    notes["autoscaling.alpha.kubernetes.io/metrics"] = json.dumps(
        [{"type": "Pods", "pods": {"metricName": "vllm_running", "targetAverageValue": "10"}}]
    )
    notes["autoscaling.alpha.kubernetes.io/current-metrics"] = json.dumps(
        [{"type": "Pods", "pods": {"metricName": "vllm_running", "currentAverageValue": "11500m"}}]
    )
    hpa["now"] = NOW
    code, out = explain(tmp_path, capsys, hpa)
    assert out["desiredReplicas"] == 5  # ratio 1.15, outside 0.1: ceil(1.15 x 4)
    notes["autoscaling.alpha.kubernetes.io/scale-up-tolerance"] = "0.2"  # now inside
    code, out = explain(tmp_path, capsys, hpa)
    assert code == 0
    assert out["desiredReplicas"] == 4


def test_v1_broken_annotation_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hpa = v1_object()
    hpa["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"] = "[{"
    code, err = explain(tmp_path, capsys, hpa)
    assert code == 2
    assert "metadata.annotations[autoscaling.alpha.kubernetes.io/metrics]: invalid JSON" in err


# --- issue 11 item 8: first sight against an existing, empty history --------------------------------


def scale_down_case(**extra: Any) -> dict[str, Any]:
    """TestScaleDown / TestScaleDownStabilizeInitialSize (horizontal_test.go) as an External
    analogue: min 2, max 6, 5 replicas whose usage ratio is 0.56 (levels 100, 300, 500, 250, 250 of
    1000m requests against a 50 % target; here a sum of 1400 against 500 per replica)."""
    return {
        "spec": {
            "minReplicas": 2,
            "maxReplicas": 6,
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": "load"},
                        "target": {"type": "AverageValue", "averageValue": "500m"},
                    },
                }
            ],
        },
        "status": {"currentReplicas": 5},
        "metricValues": {"load": ["1400m"]},
        "now": NOW,
        **extra,
    }


def test_existing_empty_history_scales_down(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """TestScaleDown: `recommendations: []timestampedRecommendation{}` -> 3."""
    code, out = explain(tmp_path, capsys, scale_down_case(recommendations=[]))
    assert (code, out["desiredReplicas"]) == (0, 3)
    assert out["conditions"][0]["reason"] == "ReadyForNewScale"


def test_first_sight_is_seeded_with_the_current_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """TestScaleDownStabilizeInitialSize: `recommendations: nil` -> held at 5, ScaleDownStabilized."""
    code, out = explain(tmp_path, capsys, scale_down_case())
    assert (code, out["desiredReplicas"]) == (0, 5)
    assert out["conditions"][0]["reason"] == "ScaleDownStabilized"


@pytest.mark.parametrize(
    "window",
    [
        pytest.param({"downscaleStabilizationSeconds": 0}, id="legacy flag 0"),
        pytest.param(
            {"spec": {"behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}}}, id="behavior 0"
        ),
    ],
)
def test_a_0s_window_never_holds_the_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], window: dict[str, Any]
) -> None:
    doc = scale_down_case()
    if "spec" in window:
        doc["spec"].update(window["spec"])
    else:
        doc.update(window)
    code, out = explain(tmp_path, capsys, doc)
    assert (code, out["desiredReplicas"]) == (0, 3)


def test_scale_events_are_never_seeded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Absent or empty, the scale-down limit counts from the current replicas: 5 - 1 Pod = 4."""
    behavior = {
        "scaleDown": {
            "stabilizationWindowSeconds": 0,
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
        }
    }
    results = []
    for extra in ({}, {"scaleEvents": []}):
        doc = scale_down_case(**extra)
        doc["spec"]["behavior"] = behavior
        code, out = explain(tmp_path, capsys, doc)
        results.append((code, out["desiredReplicas"], out["conditions"][2]["reason"]))
    assert results == [(0, 4, "ScaleDownLimit")] * 2
    doc = scale_down_case(scaleEvents=[{"ageSeconds": 30, "change": -1}])  # one already this minute
    doc["spec"]["behavior"] = behavior
    assert explain(tmp_path, capsys, doc)[1]["desiredReplicas"] == 5
