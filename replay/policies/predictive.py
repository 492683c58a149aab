"""`predictive`: infscale's policy in the replay — decide() with demand x capacity sizing, the
scenario's engine as the capacity profile and its SLO as the target (the policy itself lives in
autoscaler/policy; docs/policy.md).

The reactive floor is upstream's formula on the queue (waiting requests) with an AverageValue
target of the requests one replica prefills within the TTFT target, at chat-sized prompts: a
standing queue longer than that means requests already wait past their target. Scale-up is not
rate-limited (the planner staggers starts itself) and scale-down has no stabilization window
(rent-or-buy is its window); min/max replicas come from the scenario.
"""

from __future__ import annotations

import math
from dataclasses import replace

from autoscaler.policy import replicarates
from autoscaler.policy.capacityspec import CapacitySpec, DemandSpec, ReplicaProfile, Router, SloTarget
from autoscaler.policy.spec import (
    AutoscalerSpec,
    Behavior,
    FloorSpec,
    MetricSpec,
    PredictionSpec,
    RatePolicy,
    RatePolicyType,
    TargetType,
    default_scale_down,
    default_scale_up,
)
from replay.policies.base import PolicyContext
from replay.policies.holdkernel import install as install_compiled_hold
from replay.policies.hpa import DecidePolicy
from replay.policies.params import PolicyParams
from replay.policies.sizing import warm_start_replicas
from replay.policies.tailkernel import install as install_compiled_tail
from replay.profiles import EngineProfile, Scenario

QUEUE_METRIC = "infscale_queue_size"  # as the adapter serves it: waiting requests
# Σ prompt tokens² per second, as the adapter serves it from the engines' prompt-length histograms
PROMPT_SQUARE_METRIC = "infscale_prompt_token_square_rate"
# Σ generated tokens² and Σ generated tokens per second of the requests finished, as the adapter
# serves them from the engines' output-length histograms (buckets and _sum)
OUTPUT_SQUARE_METRIC = "infscale_output_token_square_rate"
OUTPUT_SUM_METRIC = "infscale_finished_output_token_rate"
ARRIVAL_METRIC = "infscale_arrival_rate"  # the gateway's arrivals counter, as a rate
KV_USAGE_METRIC = "infscale_kv_cache_usage"  # the engines' KV cache usage, the mean over the pods
# the engines' prefill-time histograms, one bucket rate per `le` bound (prefilltail.py)
PREFILL_TIME_METRIC = "infscale_prefill_time_bucket_rate"
# the engines' output-length histograms, one bucket rate per `le` bound (outputsteps.py)
OUTPUT_LENGTH_METRIC = "infscale_output_length_bucket_rate"
# the engines' TTFT histograms, one bucket rate per `le` bound: the late stage's evidence
# (latefeedback.py), read unless PolicyParams.late_stage is off (`--no-late-stage`)
TTFT_METRIC = "infscale_ttft_bucket_rate"
TYPICAL_PROMPT_TOKENS = 1000.0  # sizes the queue floor's target: chat-like prompts (Azure conv ~1,150)


def replica_profile(engine: EngineProfile) -> ReplicaProfile:
    """The capacity model's view of the scenario's engine: the same step-time coefficients."""
    return ReplicaProfile(
        step_base_s=engine.step_base_s,
        prefill_s_per_token=engine.prefill_token_s,
        prefill_s_per_attention_pair=engine.prefill_attention_s,
        decode_s_per_request=engine.decode_request_s,
        decode_s_per_context_token=engine.decode_context_s,
        max_batched_tokens=engine.max_num_batched_tokens,
        max_num_seqs=engine.max_num_seqs,
        kv_cache_tokens=engine.kv_budget_tokens,
        prefill_first=engine.kind != "vllm",
    )


def slo_target(scenario: Scenario) -> SloTarget:
    slo = scenario.slo
    return SloTarget(ttft_s=slo.ttft_s, tpot_s=slo.tpot_s, ttft_tokens_per_s=slo.ttft_tokens_per_s)


def queue_target(scenario: Scenario, prompt_tokens: float = TYPICAL_PROMPT_TOKENS) -> float:
    """Waiting requests per replica that one replica prefills within the TTFT target (>= 1)."""
    per_token = replicarates.prefill_token_s(replica_profile(scenario.engine), prompt_tokens)
    per_s = 1.0 / (per_token * prompt_tokens)
    return max(1.0, math.floor(per_s * scenario.slo.ttft_s))


def predictive_spec(scenario: Scenario, params: PolicyParams) -> AutoscalerSpec:
    unlimited_up = default_scale_up(policies=(RatePolicy(RatePolicyType.PERCENT, 10_000, 15),))
    immediate_down = default_scale_down(stabilization_window_s=0)
    spec = AutoscalerSpec(
        max_replicas=scenario.max_replicas,
        min_replicas=scenario.min_replicas,
        metrics=(MetricSpec(QUEUE_METRIC, TargetType.AVERAGE_VALUE, round(queue_target(scenario) * 1000)),),
        behavior=Behavior(scale_up=unlimited_up, scale_down=immediate_down),
        tolerance=params.tolerance,
        cold_start=scenario.cold_start,
        floors=FloorSpec(warm_min_replicas=params.warm_floor),
        capacity=CapacitySpec(
            profile=replica_profile(scenario.engine),
            slo=slo_target(scenario),
            demand=DemandSpec(
                prompt_square_metric=PROMPT_SQUARE_METRIC,
                output_square_metric=OUTPUT_SQUARE_METRIC,
                output_sum_metric=OUTPUT_SUM_METRIC,
                arrival_rate_metric=ARRIVAL_METRIC,
                kv_usage_metric=KV_USAGE_METRIC,
                prefill_time_metric=PREFILL_TIME_METRIC,
                output_length_metric=OUTPUT_LENGTH_METRIC,
                ttft_metric=TTFT_METRIC if params.late_stage else None,
            ),
            decision_period_s=scenario.sync_period_s,
            router=Router.LEAST_REQUESTS,  # the replay's router (replay/kernel/events.py)
        ),
    )
    if params.lead_time_s is not None:  # a fixed time to ready instead of the cluster's
        spec = replace(spec, prediction=PredictionSpec(lead_time_s=params.lead_time_s))
    return spec


def build(ctx: PolicyContext) -> DecidePolicy:
    install_compiled_tail()  # the TPOT tail's misses compiled: the same bits, ~50x faster
    install_compiled_hold()  # the bursts' hold's bisections compiled: the same bits
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
