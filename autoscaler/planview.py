"""How a decision reads: the stage table and the predictive stages' figures, as text and JSON.

Shared by `infscale explain` (one decision from a document), the replay's report.json (`decisions`
per policy) and `infscale replay explain` (the decision of a report nearest a time). Pure
formatting: no policy logic here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autoscaler.policy.capacity import Demand
from autoscaler.policy.planstate import Plan
from autoscaler.policy.stage import Stage

HEADER = ("stage", "before", "after", "reason", "detail")


def stage_table(stages: Sequence[Stage]) -> list[str]:
    """The stages as aligned columns; the detail column is left ragged."""
    rows = [HEADER, *((s.name, str(s.before), str(s.after), s.reason, s.message) for s in stages)]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [
        "  ".join(cell.ljust(widths[i]) if i < 4 else cell for i, cell in enumerate(r)).rstrip() for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths) + "  ------")
    return lines


def demand_json(d: Demand) -> dict[str, float]:
    return {
        "requests_per_s": d.requests,
        "prompt_tokens_per_s": d.prompt_tokens,
        "output_tokens_per_s": d.output_tokens,
    }


def plan_json(plan: Plan) -> dict[str, Any]:
    """The predictive stages' figures: demand now, the forecast at the horizon with its band, the
    horizon, the capacity of one replica and the counts decided."""
    s = plan.sizing
    return {
        "demand_now": demand_json(plan.demand_now),
        "forecast": {**demand_json(plan.forecast), "upper": demand_json(plan.upper), "band": plan.band},
        "horizon_s": plan.horizon_s,
        "capacity_per_replica": {
            "prefill_tokens_per_s": s.prefill_tokens_per_s,
            "decode_tokens_per_s": s.decode_tokens_per_s,
            "requests_per_s": s.requests_per_s,
            "binding": s.binding,
            "utilization": s.utilization,
            "speed": plan.speed,
        },
        "needed": plan.needed,
        "keep": plan.keep,
        "start_now": plan.start_now,
        "panic": plan.panic,
    }


def plan_lines(plan: Mapping[str, Any]) -> list[str]:
    """plan_json's figures in words, for the lines under a stage table. A figure that was not
    finite (a band over a mean forecast of 0) is null once written to report.json: shown as such."""
    f, now, c = plan["forecast"], plan["demand_now"], plan["capacity_per_replica"]

    def n(x: Any, spec: str) -> str:
        return "not finite" if x is None else format(x, spec)

    return [
        f"demand now: {n(now['requests_per_s'], '.3g')} req/s,"
        f" {n(now['prompt_tokens_per_s'], ',.0f')} prompt and"
        f" {n(now['output_tokens_per_s'], ',.0f')} output tok/s",
        f"forecast in {n(plan['horizon_s'], '.0f')} s (the marginal replica's ready time):"
        f" {n(f['requests_per_s'], '.3g')} req/s, planned on {n(f['upper']['requests_per_s'], '.3g')}"
        f" (band x{n(f['band'], '.3g')})",
        f"one replica at the SLO: {n(c['prefill_tokens_per_s'], ',.0f')} prefill tok/s,"
        f" {n(c['decode_tokens_per_s'], ',.0f')} decode tok/s,"
        f" {n(c['requests_per_s'], '.3g')} req/s at this mix"
        f" ({c['binding']} binds, speed x{n(c['speed'], '.2f')})",
        f"needed {plan['needed']}, kept {plan['keep']}, started now {plan['start_now']}"
        + (" (panic)" if plan["panic"] else ""),
    ]
