"""The facts a tick reads in place of its specs' fields (specfacts.py; a capacity spec's,
capacityfacts.py, in test_capacityfacts.py): each the field it stands for, on specs whose fields all
differ from their defaults."""

from __future__ import annotations

from dataclasses import replace

from autoscaler.policy import capacityfacts, specfacts
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
    kv_usage_metric="k",
    prefill_time_metric="h",
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
    assert cap == replace(capacityfacts.facts(CAP), load=cap.load)  # (load: a closure made each time)
    assert got.cold_start is cold and got.rules == (up, down)

    plain = specfacts.of(AutoscalerSpec(max_replicas=3, metrics=(QUEUE,)))
    assert not plain.floors and not plain.predicting
    assert plain.capacity is None and plain.cold_start is None and plain.rules is None
