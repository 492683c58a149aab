"""`keda`: the HPA behind KEDA's metrics cache (the value refreshed every pollingInterval)."""

from __future__ import annotations

from replay.policies.base import PolicyContext
from replay.policies.hpa import DecidePolicy, hpa_spec
from replay.policies.sizing import warm_start_replicas


def build(ctx: PolicyContext) -> DecidePolicy:
    return DecidePolicy(
        "keda",
        hpa_spec(ctx.scenario, ctx.params),
        period_s=ctx.scenario.sync_period_s,
        poll_interval_s=ctx.params.keda_poll_interval_s,
        initial_replicas=warm_start_replicas(ctx.trace, ctx.scenario, ctx.params.target),
    )
