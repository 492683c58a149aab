"""The facts a tick reads in place of its specs' fields (specfacts.py, lookahead.CapacityFacts):
each the field it stands for, on specs whose fields all differ from their defaults."""

from __future__ import annotations

from dataclasses import replace

from autoscaler.policy import latecurve, lookahead, replicarates, specfacts
from autoscaler.policy.capacityspec import CapacitySpec, DemandSpec, ReplicaProfile, Router, SloTarget
from autoscaler.policy.spec import (
    AutoscalerSpec,
    Behavior,
    ColdStartSpec,
    FloorSpec,
    MetricSpec,
    PredictionSpec,
    TargetType,
    default_scale_down,
    default_scale_up,
)

PROFILE = ReplicaProfile(step_base_s=0.02, prefill_s_per_token=5e-5, decode_s_per_request=4e-5)
DEMAND = DemandSpec(
    request_rate_metric="r",
    prompt_token_rate_metric="p",
    generation_token_rate_metric="g",
    inflight_metric="i",
    queue_metric="q",
    prompt_square_metric="s",
    arrival_rate_metric="a",
    damping_s=90.0,
    prior_weight=4.0,
    prior_error=0.2,
)
CAP = CapacitySpec(
    profile=PROFILE,
    slo=SloTarget(ttft_s=3.0, attainment=0.95),
    demand=DEMAND,
    learn=False,
    learn_prior_weight=3.0,
    panic_threshold=2.5,
    panic_window_s=30.0,
    decision_period_s=10.0,
    plan_ttft_share=0.5,
    router=Router.LEAST_REQUESTS,
)
QUEUE = MetricSpec("q", TargetType.AVERAGE_VALUE, 10_000)
BATCH = MetricSpec("b", TargetType.VALUE, 5_000)


def test_a_capacity_specs_facts_are_its_fields() -> None:
    got = lookahead.facts(CAP)
    assert got.demand is DEMAND and got.profile is PROFILE
    assert got.slo == CAP.planning_slo and got.ttft_s == 1.5  # the planning targets' (ttft share 0.5)
    assert got.tail == 1.0 - 0.95 and got.least_loaded
    assert got.terms == lookahead.load_terms(PROFILE) and got.band == (90.0, 4.0, 0.2)
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
    )
    assert names == ("r", "p", "g", "i", "q", "s", "a")
    assert not lookahead.facts(CapacitySpec(profile=PROFILE)).least_loaded


def test_a_specs_facts_are_its_fields() -> None:
    cold = ColdStartSpec(weights_gb=10.0, storage_gbps=1.0)
    up, down = default_scale_up(stabilization_window_s=30), default_scale_down(tolerance=0.2)
    spec = AutoscalerSpec(
        max_replicas=9,
        metrics=(QUEUE, BATCH),
        min_replicas=2,
        behavior=Behavior(scale_up=up, scale_down=down),
        tolerance=0.05,
        max_metric_age_s=60.0,
        cold_start=cold,
        prediction=PredictionSpec(),
        floors=FloorSpec(headroom_replicas=1),
        capacity=CAP,
    )
    got = specfacts.of(spec)
    assert got.tolerances == spec.tolerances == (0.2, 0.05)
    assert got.floors and (got.min_replicas, got.max_replicas) == (2, 9)
    assert got.metrics == ((QUEUE, "q"), (BATCH, "b")) and got.max_metric_age_s == 60.0
    cap = got.capacity
    assert got.predicting and cap is not None
    assert cap == replace(lookahead.facts(CAP), load=cap.load)  # (load: a closure made each time)
    assert got.cold_start is cold and got.rules == (up, down)

    plain = specfacts.of(AutoscalerSpec(max_replicas=3, metrics=(QUEUE,)))
    assert not plain.floors and not plain.predicting
    assert plain.capacity is None and plain.cold_start is None and plain.rules is None
