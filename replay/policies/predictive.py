"""`predictive`: infscale's policy in the replay — decide() with a forecast at the lead time, the
cold-start model and a warm floor (the policy itself lives in autoscaler/policy)."""

from __future__ import annotations

from dataclasses import replace

from autoscaler.policy.spec import AutoscalerSpec, FloorSpec, PredictionSpec
from replay.policies.base import PolicyContext
from replay.policies.hpa import DecidePolicy, hpa_spec
from replay.policies.params import PolicyParams
from replay.policies.sizing import warm_start_replicas
from replay.profiles import Scenario


def predictive_spec(scenario: Scenario, params: PolicyParams) -> AutoscalerSpec:
    """infscale predictive: the HPA plus a forecast at the lead time (the params' fixed one, else
    the cold-start model's) and a warm floor."""
    return replace(
        hpa_spec(scenario, params),
        cold_start=scenario.cold_start,
        prediction=PredictionSpec(forecaster=params.forecaster, lead_time_s=params.lead_time_s),
        floors=FloorSpec(warm_min_replicas=params.warm_floor),
    )


def build(ctx: PolicyContext) -> DecidePolicy:
    params = ctx.params
    initial = warm_start_replicas(ctx.trace, ctx.scenario, params.target)
    return DecidePolicy(
        "predictive",
        predictive_spec(ctx.scenario, params),
        period_s=ctx.scenario.sync_period_s,
        cluster_lead_time=params.lead_time_s is None,
        initial_replicas=max(initial, params.warm_floor),
        lead_quantile=params.lead_quantile,
    )
