"""`infscale explain` end to end through the console entry point: tables, JSON, what-ifs, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infscale.cli import main

ROOT = Path(__file__).resolve().parents[1]


def document(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "spec": {
            "minReplicas": 1,
            "maxReplicas": 20,
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": "infscale_queue_size"},
                        "target": {"type": "AverageValue", "averageValue": "10"},
                    },
                }
            ],
        },
        "status": {"currentReplicas": 4, "readyReplicas": 4},
        "metricValues": {"infscale_queue_size": [30, "30", "30000m", 30]},
        "now": "2026-11-29T10:00:00Z",
    }
    doc.update(overrides)
    return doc


def run_explain(tmp_path: Path, payload: Any, *flags: str) -> int:
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(payload) if not isinstance(payload, str) else payload)
    return main(["explain", str(path), *flags])


def test_table_shows_stages_and_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_explain(tmp_path, document()) == 0
    out = capsys.readouterr().out
    assert "metrics        4       12     ValidMetricFound" in out
    assert "limits         12      8      ScaleUpLimit" in out  # legacy cap max(2 × 4, 4)
    assert "desired replicas: 8 (scale 4 -> 8)" in out


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_explain(tmp_path, document(), "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["desiredReplicas"] == 8
    assert [s["name"] for s in out["stages"]] == ["metrics", "stabilization", "limits"]
    assert {c["type"]: (c["status"], c["reason"]) for c in out["conditions"]} == {
        "AbleToScale": ("True", "ReadyForNewScale"),
        "ScalingActive": ("True", "ValidMetricFound"),
        "ScalingLimited": ("True", "ScaleUpLimit"),
    }


def test_array_gives_what_if_decisions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calm = document(metricValues={"infscale_queue_size": [10, 10, 10, 10]})
    assert run_explain(tmp_path, [document(), calm], "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert [d["desiredReplicas"] for d in out] == [8, 4]


def test_history_and_events_are_ages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = document(
        metricValues={"infscale_queue_size": [5, 5, 5, 5]},
        recommendations=[{"ageSeconds": 120, "replicas": 4}],
    )
    doc["spec"]["behavior"] = {"scaleDown": {"stabilizationWindowSeconds": 60}}
    assert run_explain(tmp_path, doc, "--json") == 0
    assert json.loads(capsys.readouterr().out)["desiredReplicas"] == 2  # the 120 s old 4 is outside 60 s

    doc["recommendations"] = [{"ageSeconds": 30, "replicas": 4}]
    assert run_explain(tmp_path, doc, "--json") == 0
    assert json.loads(capsys.readouterr().out)["desiredReplicas"] == 4


def test_bundled_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(ROOT / "examples" / "explain.json"), "--json"]) == 0
    stock, predictive = json.loads(capsys.readouterr().out)
    assert stock["desiredReplicas"] == 12
    assert predictive["desiredReplicas"] > stock["desiredReplicas"]
    assert predictive["leadTimeSeconds"] == pytest.approx(74.0)  # pull 30 + load 140/10 + warm-up 30


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(
            lambda d: d["spec"].pop("maxReplicas"), "spec.maxReplicas: Field required", id="missing field"
        ),
        pytest.param(
            lambda d: d["spec"]["metrics"][0]["external"]["target"].update(averageValue="ten"),
            "spec.metrics[0].external.target.averageValue",
            id="bad quantity names the field",
        ),
        pytest.param(
            lambda d: d["status"].update(currentReplicas=-1), "status.currentReplicas", id="negative"
        ),
        pytest.param(lambda d: d["spec"].update(minReplica=2), "spec.minReplica: Extra inputs", id="typo"),
        pytest.param(
            lambda d: d["metricValues"].update(other=[1]),
            "metricValues: no metric in spec named",
            id="unknown",
        ),
        pytest.param(
            lambda d: d["metricValues"].update(infscale_queue_size=["1.2.3"]),
            "metricValues.infscale_queue_size[0]: expected a quantity",
            id="bad metric value",
        ),
        pytest.param(
            lambda d: d["spec"].update(
                behavior={"scaleUp": {"policies": [{"type": "Pods", "value": 4, "periodSeconds": 0}]}}
            ),
            "spec.behavior.scaleUp.policies[0].periodSeconds",
            id="period out of range",
        ),
        pytest.param(
            lambda d: d["spec"].update(
                floors={"schedules": [{"minReplicas": 2, "timezone": "Mars/Olympus"}]}
            ),
            "unknown time zone 'Mars/Olympus'",
            id="bad time zone",
        ),
        pytest.param(
            lambda d: d["spec"].update(prediction={"forecaster": "seasonal", "seasonSeconds": 1000}),
            "spec.prediction: prediction.season_s must be 1 to 100000 times season_bucket_s",
            id="season not a multiple of its bucket",
        ),
        pytest.param(
            lambda d: d["spec"].update(coldStart={"weightsGB": 140, "storageGBps": 10, "gpusPerReplica": 16}),
            "gpusPerReplica (16) exceeds gpusPerNode (8)",
            id="replica larger than a node",
        ),
        pytest.param(
            lambda d: d["spec"].update(minReplicas=30),
            "maxReplicas (20) must be >= minReplicas",
            id="min above max",
        ),
    ],
)
def test_malformed_document_names_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mutate: Any, message: str
) -> None:
    doc = document()
    mutate(doc)
    assert run_explain(tmp_path, doc) == 2
    assert message in capsys.readouterr().err


def test_invalid_json_and_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_explain(tmp_path, "{not json") == 2
    assert "invalid JSON" in capsys.readouterr().err
    assert main(["explain", str(tmp_path / "absent.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_array_error_names_the_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = document()
    bad["status"] = {}
    assert run_explain(tmp_path, [document(), bad]) == 2
    assert "[1].status.currentReplicas: Field required" in capsys.readouterr().err


def test_selector_becomes_the_label_selector_string() -> None:
    from autoscaler.hpaspec import MetricSpecModel

    metric = MetricSpecModel.model_validate(
        {
            "type": "External",
            "external": {
                "metric": {
                    "name": "q",
                    "selector": {
                        "matchLabels": {"model": "llama", "deployment": "llama-70b"},
                        "matchExpressions": [
                            {"key": "tier", "operator": "In", "values": ["gold", "silver"]},
                            {"key": "canary", "operator": "DoesNotExist"},
                        ],
                    },
                },
                "target": {"type": "Value", "value": "5"},
            },
        }
    )
    assert metric.to_spec().selector == "deployment=llama-70b,model=llama,tier in (gold,silver),!canary"


def test_bad_match_expression_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = document()
    doc["spec"]["metrics"][0]["external"]["metric"]["selector"] = {
        "matchExpressions": [{"key": "tier", "operator": "In"}]
    }
    assert run_explain(tmp_path, doc) == 2
    assert (
        "spec.metrics[0].external.metric.selector.matchExpressions[0]: operator In needs at least one value"
        in (capsys.readouterr().err)
    )
