"""report.json's `decisions` and `infscale replay explain REPORT --policy P --at T`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from replay import report
from replay.decisions import ExplainError, load_decision, nearest
from tests.replay.test_simulate import ramp_trace, run


@pytest.fixture(scope="module")
def report_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    doc = report.build_report(
        ramp_trace(), [run("hpa"), run("predictive"), run("static-3"), run("keda"), run("kpa")], seed=5
    )
    path = tmp_path_factory.mktemp("explain") / "report.json"
    path.write_text(report.to_json(doc), encoding="utf-8")
    return path


def test_every_predictive_decision_carries_its_stages_and_plan(report_path: Path) -> None:
    doc = json.loads(report_path.read_text())
    decisions = doc["policies"]["predictive"]["decisions"]
    timeline = doc["policies"]["predictive"]["timeline"]
    assert [d["t_s"] for d in decisions] == [p["t_s"] for p in timeline]
    assert [d["desired"] for d in decisions] == [p["desired"] for p in timeline]
    planned = [d for d in decisions if "plan" in d]
    assert len(planned) > len(decisions) // 2  # once the demand counters have two scrapes
    for d in planned:
        names = [s["name"] for s in d["stages"]]
        assert {"demand", "capacity", "horizon"} <= set(names)
        assert d["stages"][-1]["after"] == d["desired"]
        plan = d["plan"]
        f = plan["forecast"]
        assert f["upper"]["requests_per_s"] >= f["requests_per_s"] - 1e-9 and f["band"] >= 1.0 - 1e-9
        assert plan["horizon_s"] > 0
        assert plan["capacity_per_replica"]["prefill_tokens_per_s"] > 0
    # the ramp's 4x step shows in the demand the policy saw
    rates = [d["plan"]["demand_now"]["requests_per_s"] for d in planned]
    assert max(rates) > 8 and min(rates) < 5


def test_hpa_decisions_without_plan_and_static_without_decisions(report_path: Path) -> None:
    doc = json.loads(report_path.read_text())
    hpa = doc["policies"]["hpa"]["decisions"]
    assert hpa and all("plan" not in d for d in hpa)
    assert doc["policies"]["static-3"]["decisions"] == [] and doc["policies"]["kpa"]["decisions"] == []
    keda = doc["policies"]["keda"]["decisions"]  # the HPA inside KEDA, with KEDA's final count
    assert keda and all(d["stages"] for d in keda)
    with pytest.raises(ExplainError, match="'static-3' recorded no decisions"):
        load_decision(report_path, "static-3", 0.0)
    with pytest.raises(
        ExplainError, match="no policy 'planner'; the report has hpa, keda, kpa, predictive, static-3"
    ):
        load_decision(report_path, "planner", 0.0)


def test_nearest_picks_the_closest_time_and_the_earlier_on_a_tie() -> None:
    ds = [{"t_s": 0.0}, {"t_s": 15.0}, {"t_s": 30.0}]
    assert nearest(ds, -5)["t_s"] == 0.0
    assert nearest(ds, 22)["t_s"] == 15.0
    assert nearest(ds, 22.5)["t_s"] == 15.0
    assert nearest(ds, 23)["t_s"] == 30.0
    assert nearest(ds, 1e9)["t_s"] == 30.0


def test_replay_explain_prints_the_table_nearest_t(report_path: Path, tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("infscale")
    out = subprocess.run(
        [exe, "replay", "explain", str(report_path), "--policy", "predictive", "--at", "452"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.startswith("decision at t = 450 s:")
    assert "stage" in out and "capacity" in out and "horizon" in out
    assert "one replica at the SLO:" in out and "forecast in" in out
    doc = json.loads(
        subprocess.run(
            [
                exe,
                "replay",
                "explain",
                str(report_path),
                "--policy",
                "predictive",
                "--at",
                "452",
                "--output",
                "json",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert doc["t_s"] == 450.0
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    err = subprocess.run(
        [exe, "replay", "explain", str(bad), "--policy", "hpa", "--at", "0"], capture_output=True, text=True
    )
    assert err.returncode == 2 and "not a JSON report" in err.stderr
