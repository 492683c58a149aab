"""`infscale explain` with a capacity section: the predictive stages and their figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from autoscaler.explain import evaluate
from tests.policy_helpers import PROFILE_70B

DOC = {
    "spec": {
        "maxReplicas": 64,
        "metrics": [
            {
                "type": "External",
                "external": {
                    "metric": {"name": "infscale_queue_size"},
                    "target": {"type": "AverageValue", "averageValue": "32"},
                },
            }
        ],
        "coldStart": {"weightsGB": 140, "storageGBps": 10, "gpusPerReplica": 4},
        "capacity": {"profile": PROFILE_70B, "slo": {"ttftSeconds": 2, "tpotSeconds": 0.2}},
    },
    "status": {"currentReplicas": 2},
    "now": "2026-11-29T10:00:00Z",
    "metricValues": {
        "infscale_queue_size": ["40"],
        "infscale_request_rate": ["30"],
        "infscale_prompt_token_rate": ["30000"],
        "infscale_generation_token_rate": ["6000"],
        "infscale_inflight": ["300"],
    },
}


def test_the_predictive_stages_show_in_order_with_their_figures() -> None:
    _, decision = evaluate(DOC, wall_now=0.0)
    names = [s.name for s in decision.stages]
    assert names[:5] == ["metrics", "demand", "capacity", "horizon", "scale-up"]
    assert decision.plan is not None
    # 30 req/s of 1,000 + 200 tokens: more than the 2 replicas there are; one starts now (14 s loads)
    assert decision.plan.needed > 2
    assert decision.desired_replicas == 3


def test_table_and_json_carry_the_plan(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(DOC))
    exe = Path(sys.executable).with_name("infscale")
    table = subprocess.run([exe, "explain", str(path)], capture_output=True, text=True, check=True).stdout
    assert "capacity" in table and "horizon" in table and "scale-up" in table
    assert "one replica at the SLO:" in table and "prefill tok/s" in table
    out = json.loads(
        subprocess.run(
            [exe, "explain", str(path), "--output", "json"], capture_output=True, text=True, check=True
        ).stdout
    )
    plan = out["decision"]["plan"] if "decision" in out else out["plan"]
    assert plan["capacity_per_replica"]["prefill_tokens_per_s"] > 1000
    assert plan["forecast"]["upper"]["requests_per_s"] >= plan["forecast"]["requests_per_s"]


def test_a_bad_profile_is_named() -> None:
    bad = json.loads(json.dumps(DOC))
    bad["spec"]["capacity"]["profile"]["stepBaseSeconds"] = 0
    import pytest

    from autoscaler.explain import DocumentError

    with pytest.raises(DocumentError, match="stepBaseSeconds"):
        evaluate(bad, wall_now=0.0)


def test_plan_lines_show_a_figure_written_as_null() -> None:
    """report.json writes a non-finite band (upper over a mean forecast of 0) as null; the stage
    table's lines said TypeError on it (`infscale replay explain` crashed)."""
    from autoscaler.planview import plan_lines

    demand = {"requests_per_s": 0.0, "prompt_tokens_per_s": 0.0, "output_tokens_per_s": 0.0}
    plan = {
        "demand_now": demand,
        "forecast": {**demand, "upper": {**demand, "requests_per_s": 3.0}, "band": None},
        "horizon_s": 120.0,
        "capacity_per_replica": {
            "prefill_tokens_per_s": 9000.0,
            "decode_tokens_per_s": 800.0,
            "requests_per_s": 2.5,
            "binding": "ttft",
            "utilization": 0.5,
            "speed": 1.0,
        },
        "needed": 2,
        "keep": 2,
        "start_now": 0,
        "panic": False,
    }
    assert "(band xnot finite)" in plan_lines(plan)[1]
