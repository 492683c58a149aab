"""capacityfacts.py: a capacity spec's facts, each the field it stands for (on test_specfacts's
specs, whose fields all differ from their defaults), and the load function inlined to the same
floats as load_of."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from test_specfacts import CAP, DEMAND, PROFILE

from autoscaler.policy import capacityfacts, lateband, latecurve, replicarates
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityspec import CapacitySpec, ReplicaProfile

REFERENCE = ReplicaProfile(
    step_base_s=0.02,
    prefill_s_per_token=1e-4,
    decode_s_per_request=9e-4,
    prefill_s_per_attention_pair=3e-9,
    decode_s_per_context_token=2e-7,
)
rates = st.floats(min_value=0.0, max_value=1e5, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=-1.0, max_value=1e3), rates, rates)
def test_the_inlined_load_is_load_of_to_the_bit(r: float, prompt: float, output: float) -> None:
    d = Demand(r, prompt, output)
    load = capacityfacts._load_function(REFERENCE)(d)
    assert load == capacityfacts.load_of(REFERENCE, d)
    assert math.isfinite(load)


def test_a_subnormal_rate_loads_its_prompts_prefill_not_nan() -> None:
    """5e-324 requests/s with prompts (a restored state's level): the mix per request is infinite,
    and the decode part was inf × 0 = NaN, in both forms of the load."""
    d = Demand(5e-324, 1e5, 0.0)
    assert (
        capacityfacts.load_of(REFERENCE, d)
        == capacityfacts._load_function(REFERENCE)(d)
        == 1e5 * REFERENCE.prefill_s_per_token
    )


def test_a_capacity_specs_facts_are_its_fields() -> None:
    got = capacityfacts.facts(CAP)
    assert got.demand is DEMAND and got.profile is PROFILE
    assert got.slo == CAP.planning_slo and got.ttft_s == 1.5  # the planning targets' (ttft share 0.5)
    assert got.tail == 1.0 - 0.95 and got.least_loaded
    assert got.peak_z == lateband.peak_deviate(DEMAND.quantile)
    assert got.terms == capacityfacts.load_terms(PROFILE) and got.band == (90.0, 4.0, 0.2)
    assert got.engine == replicarates.engine(PROFILE)
    assert got.curve_specs == latecurve.spec_number(PROFILE, CAP.planning_slo)
    assert (got.learn, got.learn_prior_weight, got.decision_period_s) == (False, 3.0, 10.0)
    assert (got.panic_threshold, got.panic_window_s) == (2.5, 30.0)
    names = (
        got.request_rate_metric,
        got.prompt_token_rate_metric,
        got.generation_token_rate_metric,
        got.inflight_metric,
        got.queue_metric,
        got.prompt_square_metric,
        got.arrival_rate_metric,
        got.kv_usage_metric,
        got.prefill_time_metric,
    )
    assert names == ("r", "p", "g", "i", "q", "s", "a", "k", "h")
    assert not capacityfacts.facts(CapacitySpec(profile=PROFILE)).least_loaded
