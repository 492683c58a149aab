"""A replay's decisions as report.json carries them (`decisions` per policy) and as
`infscale replay explain REPORT --policy P --at T` prints them.

Every decision of a policy that runs decide() (hpa, keda, predictive): its time, the current and
desired counts, the stages with their reasons, and, when the predictive stages ran, their figures
(demand now, the forecast at the horizon with its band, the horizon, one replica's capacity at the
SLO, the counts decided) as autoscaler/planview.py writes them for `infscale explain` too.

    infscale replay explain out/report.json --policy predictive --at 3600
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autoscaler import planview
from autoscaler.policy.decide import Decision
from autoscaler.policy.stage import Stage


def decision_json(t_s: float, d: Decision) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "t_s": t_s,
        "current": d.current_replicas,
        "desired": d.desired_replicas,
        "stages": [s.to_dict() for s in d.stages],
        "lead_time_s": d.lead_time_s,
    }
    if d.plan is not None:
        doc["plan"] = planview.plan_json(d.plan)
    return doc


def decisions_json(records: Sequence[Any]) -> list[dict[str, Any]]:
    """A policy's decision records, in time order, as far as they are decide()'s: a DecidePolicy's
    (now, observation, decision), KEDA's syncs by the HPA decision inside (its final count as
    desired); other records (Knative's decider ticks) have no stage table and give none."""
    out = []
    for r in records:
        if isinstance(r, tuple) and len(r) == 3 and isinstance(r[2], Decision):
            out.append(decision_json(r[0], r[2]))
        elif isinstance(getattr(r, "hpa", None), Decision):
            out.append({**decision_json(r.t_s, r.hpa), "desired": r.replicas})
    return out


def nearest(decisions: Sequence[Mapping[str, Any]], at_s: float) -> Mapping[str, Any]:
    """The decision whose time is nearest `at_s` (the earlier one on a tie)."""
    times = [d["t_s"] for d in decisions]
    i = bisect.bisect_left(times, at_s)
    candidates = [j for j in (i - 1, i) if 0 <= j < len(times)]
    return decisions[min(candidates, key=lambda j: (abs(times[j] - at_s), j))]


def render(decision: Mapping[str, Any]) -> str:
    stages = [Stage.from_dict(s) for s in decision["stages"]]
    lines = [
        f"decision at t = {decision['t_s']:.0f} s: {decision['current']} -> {decision['desired']} replicas",
        *planview.stage_table(stages),
    ]
    if "plan" in decision:
        lines += planview.plan_lines(decision["plan"])
    return "\n".join(lines)


# --- `infscale replay explain` ---------------------------------------------------------------------


class ExplainError(Exception):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("report", type=Path, help="a report.json written by replay run/compare")
    parser.add_argument("--policy", required=True, help="the policy whose decision to show")
    parser.add_argument("--at", type=float, required=True, metavar="T", help="replay time in seconds")


def load_decision(path: Path, policy: str, at_s: float) -> Mapping[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ExplainError(f"{path}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ExplainError(f"{path}: not a JSON report ({e})") from None
    policies = doc.get("policies") if isinstance(doc, dict) else None
    if not isinstance(policies, dict):
        raise ExplainError(f"{path}: no 'policies' object (is it a replay report.json?)")
    if policy not in policies:
        raise ExplainError(f"{path}: no policy {policy!r}; the report has {', '.join(sorted(policies))}")
    decisions = policies[policy].get("decisions") if isinstance(policies[policy], dict) else None
    if not decisions:
        raise ExplainError(
            f"{path}: policy {policy!r} recorded no decisions (only policies that run decide() do:"
            " hpa, keda, predictive)"
        )
    return nearest(decisions, at_s)


def run(args: argparse.Namespace) -> int:
    try:
        decision = load_decision(args.report, args.policy, args.at)
    except ExplainError as e:
        print(f"infscale replay explain: error: {e}", file=sys.stderr)
        return 2
    if getattr(args, "output", "text") == "json":
        print(json.dumps(decision, indent=2))
    else:
        print(render(decision))
    return 0
