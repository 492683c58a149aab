"""The Dynamo-style planner: its profile against the step model by hand, its predictors against
hand-computed filters and fits, its sizing against Dynamo's formulas, and the loop."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from autoscaler.policy.observation import Observation
from replay.policies import build_policy
from replay.policies.planner import ADJUSTMENT_INTERVAL_S, PlannerPolicy, replicas_for
from replay.policies.planner.predictors import ArimaPredictor, ConstantPredictor, KalmanPredictor
from replay.policies.planner.profile import decode_batch, decode_tokens_per_s, prefill_tokens_per_s
from replay.profiles import REFERENCE_70B, EngineProfile
from replay.simulate import simulate
from replay.slo import SloSpec
from replay.trace import Trace
from tests.replay.test_simulate import FAST, PARAMS, ramp_trace

# round numbers: a step is 10 ms + 0.1 ms per prompt token + 1 ms per decoding request
ROUND = EngineProfile(
    max_num_seqs=1024,
    max_num_batched_tokens=8_192,
    kv_budget_tokens=1_000_000,
    step_base_s=0.01,
    prefill_token_s=1e-4,
    prefill_attention_s=0.0,
    decode_request_s=0.001,
    decode_context_s=0.0,
)


def test_profile_from_the_step_model() -> None:
    # one 1,000-token prompt: one step of 10 ms + 100 ms
    assert prefill_tokens_per_s(ROUND, 1_000) == pytest.approx(1_000 / 0.11)
    # TPOT 50 ms: 10 ms + b x 1 ms <= 50 ms -> b = 40, 40 tokens per 50 ms
    assert decode_batch(ROUND, 0.05, 1_000) == 40
    assert decode_tokens_per_s(ROUND, 0.05, 1_000) == pytest.approx(800.0)
    # a target below the step's base: the slowest profiled point, one request
    assert decode_batch(ROUND, 0.005, 1_000) == 1
    # the KV cache holds 10 requests of 1,000 tokens: 10 per 20 ms
    small_kv = replace(ROUND, kv_budget_tokens=10_000)
    assert decode_batch(small_kv, 0.05, 1_000) == 10
    assert decode_tokens_per_s(small_kv, 0.05, 1_000) == pytest.approx(500.0)


def test_sizing_is_dynamos_formulas_with_the_two_pools_sharing_a_replica() -> None:
    scenario = replace(REFERENCE_70B, engine=ROUND, slo=SloSpec(ttft_s=2.0, tpot_s=0.05))
    # 1,800 requests of 1,000 in / 101 out per 180 s: 10,000 prompt tokens/s over 9,090.9 a
    # replica; 1,010 output tokens/s at a context of 1,050 over 800 a replica
    prefill, decode = replicas_for(scenario, 1_800, 1_000, 101, 180.0)
    assert prefill == pytest.approx(10_000 / (1_000 / 0.11))
    assert decode == pytest.approx(1_010 / 800)
    trace = Trace("flat", np.arange(3_600) * 0.1, np.full(3_600, 1_000), np.full(3_600, 101))
    policy = PlannerPolicy(trace, scenario)
    obs = Observation(spec_replicas=1, status_replicas=1, ready_pods=1, metrics={})
    assert policy.desired(0.0, obs) == 1  # nothing observed yet
    assert policy.desired(180.0, obs) == math.ceil(prefill + decode)  # 1.1 + 1.2625 -> 3
    assert policy.decisions[-1].observed == (1_800, 1_000, 101)


def test_constant_predictor_is_the_last_value_after_leading_zeros() -> None:
    p = ConstantPredictor()
    for v in (0.0, 0.0, 5.0, 0.0, 7.0):
        p.add(v)
    assert p.predict_next() == 7.0
    assert p.buf.values == [5.0, 0.0, 7.0]  # the idle start skipped, later zeros kept


def test_kalman_local_linear_trend_by_hand() -> None:
    # x0 = [10, 0], P0 = 1000 I; predict: P = [[2001, 1000], [1000, 1000.1]]; S = 2011;
    # K = [2001, 1000] / 2011; x = [10 + 10 K0, 10 K1]; the forecast is level + trend
    k = KalmanPredictor()
    k.add(10.0)
    k.add(20.0)
    k0, k1 = 2001 / 2011, 1000 / 2011
    assert k.predict_next() == pytest.approx(10 + 10 * k0 + 10 * k1)
    assert k.predict_next() == pytest.approx(10 + 10 * k0 + 10 * k1)  # asked twice, advanced once


def test_arima_guards_and_a_linear_series() -> None:
    a = ArimaPredictor()
    for v in (3.0, 4.0, 5.0, 6.0):
        a.add(v)
    assert a.predict_next() == 6.0  # fewer than 5 points: the last
    for v in (7.0, 8.0, 9.0, 10.0):
        a.add(v)
    assert a.predict_next() == pytest.approx(11.0, abs=1e-6)  # a trend is continued
    flat = ArimaPredictor()
    for _ in range(6):
        flat.add(4.0)
    assert flat.predict_next() == 4.0


def test_the_loop_scales_at_adjustment_intervals_only() -> None:
    policy = build_policy("planner", FAST, ramp_trace(), PARAMS, lambda: 0.0)
    assert isinstance(policy, PlannerPolicy) and policy.period_s == ADJUSTMENT_INTERVAL_S
    result = simulate(ramp_trace(), FAST, policy)
    times = [p.t_s for p in result.timeline]
    assert times[:3] == [0.0, 180.0, 360.0]
    desired = {p.t_s: p.desired for p in result.timeline}
    # the interval before 540 s is two thirds at 12 req/s: sized up there, down after the fall
    assert desired[540.0] > desired[360.0]
    assert desired[720.0] < desired[540.0]
    # ARIMA has fewer than 5 points before 900 s: its forecast is the interval as observed
    early = [d for d in policy.decisions if d.t_s < 900.0]
    assert early and all(d.predicted == d.observed for d in early)
    trace = ramp_trace()
    first = policy.decisions[0]
    assert first.observed[0] == np.count_nonzero(trace.arrival_s < 180.0)
