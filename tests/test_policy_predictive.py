"""The predictive stages: lead time from the cold-start model, forecast over it, capacity arriving."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoscaler.policy.decide import Decision, decide, record_rescale
from autoscaler.policy.observation import Observation
from autoscaler.policy.spec import (
    Behavior,
    ColdStartSpec,
    ForecasterKind,
    PredictionSpec,
    RatePolicy,
    RatePolicyType,
    default_scale_up,
)
from autoscaler.policy.state import PolicyState
from tests.policy_helpers import avg_spec, observe, value_spec

NOW = 1_764_410_400.0
SEED = ColdStartSpec(weights_gb=140, storage_gbps=10)
FAST_UP = Behavior(scale_up=default_scale_up(policies=(RatePolicy(RatePolicyType.PERCENT, 1000, 15),)))


def stage_names(decision: Decision) -> list[str]:
    return [s.name for s in decision.stages]


def ramp(
    spec_kwargs: dict[str, object], values: list[float], replicas: int = 4
) -> tuple[Decision, PolicyState]:
    """Feed a per-replica queue series every 15 s without acting on it; return the last decision."""
    spec = avg_spec(10, **spec_kwargs)
    state = PolicyState()
    decision = None
    for i, v in enumerate(values):
        decision, state = decide(spec, state, observe(replicas, *[v] * replicas), NOW + 15 * i)
    assert decision is not None
    return decision, state


def test_lead_time_is_the_cold_start_model_time_to_ready() -> None:
    spec_kwargs = {"cold_start": SEED, "prediction": PredictionSpec(ForecasterKind.LAST), "behavior": FAST_UP}
    decision, _ = ramp(spec_kwargs, [10])
    assert decision.lead_time_s == pytest.approx(14.0)  # 140 GB alone at 10 GB/s


def test_lead_time_grows_with_loaders_in_progress() -> None:
    spec = avg_spec(10, cold_start=SEED, prediction=PredictionSpec(ForecasterKind.LAST))
    obs = replace(observe(4, 10, 10, 10, 10), loading_remaining_gb=(140.0,) * 7)
    decision, _ = decide(spec, PolicyState(), obs, NOW)
    assert decision.lead_time_s == pytest.approx(112.0)  # the seed: 8 loaders at a shared 10 GB/s


def test_observation_lead_time_overrides_the_model() -> None:
    spec = avg_spec(10, cold_start=SEED, prediction=PredictionSpec(ForecasterKind.LAST))
    obs = replace(observe(4, 10, 10, 10, 10), lead_time_s=300.0)
    decision, _ = decide(spec, PolicyState(), obs, NOW)
    assert decision.lead_time_s == 300.0


def test_rising_load_scales_before_the_current_value_asks() -> None:
    """Queue per replica 6, 7, 8, 9, 10: reactive says hold (within tolerance), the trend says 13."""
    prediction = PredictionSpec(ForecasterKind.LINEAR, window_s=120, lead_time_s=60)
    decision, _ = ramp({"prediction": prediction, "behavior": FAST_UP}, [6, 7, 8, 9, 10])
    metrics = next(s for s in decision.stages if s.name == "metrics")
    forecast = next(s for s in decision.stages if s.name == "forecast")
    assert metrics.after == 4
    # slope 1/replica per 15 s -> +4 in 60 s: 14 per replica × 4 = 56 -> ceil(56 / 10) = 6
    assert (forecast.before, forecast.after, forecast.reason) == (4, 6, "ForecastAboveCurrent")
    assert decision.desired_replicas == 6
    assert decision.forecasts[0].predicted == pytest.approx(56.0)


def test_falling_forecast_never_lowers_the_reactive_recommendation() -> None:
    prediction = PredictionSpec(ForecasterKind.LINEAR, window_s=120, lead_time_s=60)
    decision, _ = ramp({"prediction": prediction, "behavior": FAST_UP}, [30, 25, 20, 15])
    forecast = next(s for s in decision.stages if s.name == "forecast")
    assert forecast.reason == "ForecastNotAbove"
    assert forecast.after == forecast.before == 6  # ceil(15 × 4 / 10)


def test_without_prediction_the_decision_is_the_hpa() -> None:
    spec = avg_spec(10)
    predictive = replace(spec, prediction=PredictionSpec(ForecasterKind.LAST, lead_time_s=60))
    for values in ([5] * 4, [30] * 4, [10.5] * 4):
        plain, _ = decide(spec, PolicyState(), observe(4, *values), NOW)
        last, _ = decide(predictive, PolicyState(), observe(4, *values), NOW)
        assert plain.desired_replicas == last.desired_replicas  # LAST forecasts the current value
        assert "forecast" not in stage_names(plain)


def test_no_double_scale_up_while_replicas_load() -> None:
    """4 ready + 8 starting (spec 12) and the queue grew to 135 while they load. On a Value target of
    30 the HPA asks ceil(135 / 30 × 4 ready) = 18 on top of the 8 already coming; infscale waits."""
    spec = value_spec(
        30, cold_start=SEED, prediction=PredictionSpec(ForecasterKind.LAST), behavior=FAST_UP
    )  # total queue target 30
    loading = Observation(12, 12, 4, metrics=observe(12, 135).metrics, starting_ready_at=(NOW + 10,) * 8)
    hpa, _ = decide(replace(spec, prediction=None), PolicyState(), loading, NOW)
    assert hpa.desired_replicas == 18  # the double scale-up
    decision, _ = decide(spec, PolicyState(), loading, NOW)
    capacity = next(s for s in decision.stages if s.name == "capacity")
    assert (capacity.before, capacity.after, capacity.reason) == (18, 12, "CapacityArriving")
    assert decision.desired_replicas == 12  # a flat forecast adds nothing either


def test_predicted_growth_still_scales_up_while_replicas_load() -> None:
    prediction = PredictionSpec(ForecasterKind.LINEAR, window_s=120, lead_time_s=60)
    spec = value_spec(30, prediction=prediction, behavior=FAST_UP)
    state = PolicyState()
    for i, queue in enumerate((75, 90, 105, 120)):  # +15 per 15 s: 180 expected in 60 s
        obs = Observation(12, 12, 4, metrics=observe(12, queue).metrics, starting_ready_at=(NOW + 100,) * 8)
        decision, state = decide(spec, state, obs, NOW + 15 * i)
    assert [s.name for s in decision.stages][:3] == ["metrics", "capacity", "forecast"]
    assert decision.desired_replicas == 24  # ceil(180 / 30 × 4 ready)


def test_predicted_ready_times_for_the_replicas_added() -> None:
    spec = avg_spec(10, cold_start=SEED, behavior=FAST_UP)
    decision, _ = decide(spec, PolicyState(), observe(4, *[20] * 4), NOW)
    assert decision.desired_replicas == 8
    assert decision.predicted_ready_s == pytest.approx((56.0,) * 4)  # 4 × 140 GB / 10 GB/s


def test_max_replicas_holds_under_any_forecast() -> None:
    prediction = PredictionSpec(ForecasterKind.LINEAR, window_s=60, lead_time_s=3600)
    decision, _ = ramp({"prediction": prediction, "behavior": FAST_UP, "max_replicas": 10}, [1, 100, 10_000])
    assert decision.desired_replicas == 10
    assert decision.condition("ScalingLimited").reason == "TooManyReplicas"  # type: ignore[union-attr]


def test_forecaster_state_is_kept_per_metric_and_survives_a_restart() -> None:
    prediction = PredictionSpec(ForecasterKind.HOLT, lead_time_s=60)
    _, state = ramp({"prediction": prediction}, [5, 6, 7])
    assert set(state.forecasters) == {"infscale_queue_size"}
    spec = avg_spec(10, prediction=prediction)
    restored = replace(state)  # what a controller persisting the value gets back
    a, _ = decide(spec, state, observe(4, 8, 8, 8, 8), NOW + 45)
    b, _ = decide(spec, restored, observe(4, 8, 8, 8, 8), NOW + 45)
    assert a == b


def test_missing_data_is_not_forecast_and_holds() -> None:
    prediction = PredictionSpec(ForecasterKind.HOLT, lead_time_s=60)
    spec = avg_spec(10, prediction=prediction)
    _, state = ramp({"prediction": prediction}, [5, 6, 7])
    decision, after = decide(spec, state, Observation(4, 4, 4, metrics={}), NOW + 45)
    assert decision.desired_replicas == 4
    assert after.forecasters == state.forecasters


def test_record_rescale_then_decide_round_trip() -> None:
    spec = avg_spec(10, behavior=Behavior(), prediction=PredictionSpec(ForecasterKind.LAST, lead_time_s=30))
    state = PolicyState()
    replicas = 2
    for i in range(10):
        decision, state = decide(spec, state, observe(replicas, *[80 / replicas] * replicas), NOW + 15 * i)
        if decision.scale:
            state = record_rescale(spec, state, NOW + 15 * i, replicas, decision.desired_replicas)
            replicas = decision.desired_replicas
    assert replicas == 8  # ceil(80 / 10) once the rate limits have let it get there


def test_lead_time_uses_the_cluster_facts() -> None:
    cold = ColdStartSpec(
        weights_gb=140,
        storage_gbps=10,
        local_cache_gbps=20,
        image_pull_s=30,
        node_provision_s=90,
        gpus_per_replica=4,
    )
    spec = avg_spec(10, cold_start=cold, prediction=PredictionSpec(ForecasterKind.LAST))
    base = observe(4, 10, 10, 10, 10)
    cases = {
        "cold cluster: provision + pull + load": (replace(base), 90 + 30 + 14),
        "a node has room: pull + load": (replace(base, free_gpus_per_node=(4,)), 30 + 14),
        "room and image cached: load": (replace(base, free_gpus_per_node=(4,), image_cached_nodes=(0,)), 14),
        "weights in the node cache: 140 GB at 20 GB/s": (
            replace(base, free_gpus_per_node=(4,), image_cached_nodes=(0,), weights_cached_nodes=(0,)),
            7,
        ),
    }
    for name, (obs, expected) in cases.items():
        decision, _ = decide(spec, PolicyState(), obs, NOW)
        assert decision.lead_time_s == pytest.approx(expected), name
