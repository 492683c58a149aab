"""The decision pipeline: the seed's worked examples, holds, guards, floors, and the state it returns."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoscaler.policy.decide import Decision, decide, record_rescale
from autoscaler.policy.floors import schedule_active
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.spec import (
    AutoscalerSpec,
    Behavior,
    FloorSpec,
    MetricSpec,
    RatePolicy,
    RatePolicyType,
    Schedule,
    TargetType,
    default_scale_down,
    default_scale_up,
)
from autoscaler.policy.state import PolicyState, Recommendation, ScaleEvent
from tests.policy_helpers import QUEUE, avg_spec, observe, value_spec

NOW = 1_764_410_400.0  # 2025-11-29 10:00:00 UTC, a Saturday


def stage(decision: Decision, name: str) -> tuple[int, int, str]:
    found = [s for s in decision.stages if s.name == name]
    assert found, f"no stage {name!r} in {[s.name for s in decision.stages]}"
    return found[0].before, found[0].after, found[0].reason


def reason(decision: Decision, condition: str) -> str:
    cond = decision.condition(condition)
    assert cond is not None, f"no {condition} condition in {decision.conditions}"
    return cond.reason


# --- the seed's worked examples ----------------------------------------------------------------


def test_seed_four_replicas_queue_30_target_10_recommends_12() -> None:
    """desired = ceil(4 × 30 / 10) = 12; upstream's default rate limits then allow 8 in one step."""
    decision, _ = decide(avg_spec(10), PolicyState(), observe(4, 30, 30, 30, 30), NOW)
    assert stage(decision, "metrics") == (4, 12, "ValidMetricFound")
    assert decision.desired_replicas == 8
    assert stage(decision, "limits") == (12, 8, "ScaleUpLimit")


def test_seed_four_replicas_reach_12_when_behavior_allows_it() -> None:
    fast_up = Behavior(scale_up=default_scale_up(policies=(RatePolicy(RatePolicyType.PERCENT, 200, 15),)))
    decision, _ = decide(avg_spec(10, behavior=fast_up), PolicyState(), observe(4, 30, 30, 30, 30), NOW)
    assert decision.desired_replicas == 12
    assert reason(decision, "ScalingLimited") == "DesiredWithinRange"


@pytest.mark.parametrize(
    ("queue_per_replica", "desired"),
    [
        pytest.param(10.99, 4, id="ratio 1.099 inside the band"),
        pytest.param(11.0, 4, id="ratio 1.1 on the upper end (inclusive)"),
        pytest.param(9.0, 4, id="ratio 0.9 on the lower end (inclusive)"),
        pytest.param(11.2, 5, id="ratio 1.12 outside the band"),
    ],
)
def test_seed_tolerance_band(queue_per_replica: float, desired: int) -> None:
    fast = Behavior(scale_down=default_scale_down(stabilization_window_s=0))
    decision, _ = decide(
        avg_spec(10, behavior=fast), PolicyState(), observe(4, *[queue_per_replica] * 4), NOW
    )
    assert decision.desired_replicas == desired


def test_seed_scale_down_held_by_300_s_window() -> None:
    spec = avg_spec(10)  # legacy path: 300 s downscale stabilization
    state = PolicyState()
    decision, state = decide(spec, state, observe(8, *[10] * 8), NOW)  # seeds history with 8
    assert decision.desired_replicas == 8
    for t in (15, 150, 299, 300):
        decision, state = decide(spec, state, observe(8, *[2] * 8), NOW + t)
        assert decision.desired_replicas == 8, f"scaled down after {t} s"
        assert stage(decision, "stabilization")[2] == "ScaleDownStabilized"
    decision, state = decide(spec, state, observe(8, *[2] * 8), NOW + 301)
    assert decision.desired_replicas == 2


# --- holds and guards -----------------------------------------------------------------------------


def test_missing_metric_holds_with_reason() -> None:
    obs = Observation(6, 6, 6, metrics={})
    decision, _ = decide(avg_spec(10), PolicyState(), obs, NOW)
    assert decision.desired_replicas == 6
    assert not decision.scale
    assert reason(decision, "ScalingActive") == "FailedGetExternalMetric"


def test_empty_metric_list_is_an_error_not_zero() -> None:
    obs = Observation(6, 6, 6, metrics={QUEUE: MetricReading(())})
    decision, _ = decide(avg_spec(10), PolicyState(), obs, NOW)
    assert decision.desired_replicas == 6
    assert "no metrics returned" in decision.stages[-1].message


def test_stale_metric_never_scales_down() -> None:
    spec = replace(avg_spec(10), max_metric_age_s=30)
    obs = Observation(6, 6, 6, metrics={QUEUE: MetricReading.of(0)._replace(age_s=45)})
    decision, _ = decide(spec, PolicyState(), obs, NOW)
    assert decision.desired_replicas == 6
    assert reason(decision, "ScalingActive") == "FailedGetExternalMetric"
    assert "45 s old" in decision.stages[-1].message


def test_one_invalid_metric_blocks_scale_down_but_not_scale_up() -> None:
    spec = AutoscalerSpec(
        max_replicas=50,
        metrics=(
            MetricSpec("a", TargetType.AVERAGE_VALUE, 10_000),
            MetricSpec("b", TargetType.AVERAGE_VALUE, 10_000),
        ),
        behavior=Behavior(scale_down=default_scale_down(stabilization_window_s=0)),
    )
    down = Observation(6, 6, 6, metrics={"a": MetricReading.of(10), "b": MetricReading.failed("timeout")})
    decision, _ = decide(spec, PolicyState(), down, NOW)
    assert decision.desired_replicas == 6
    assert reason(decision, "ScalingActive") == "FailedGetExternalMetric"
    up = Observation(6, 6, 6, metrics={"a": MetricReading.of(100), "b": MetricReading.failed("timeout")})
    decision, _ = decide(spec, PolicyState(), up, NOW)
    assert decision.desired_replicas == 10
    assert reason(decision, "ScalingActive") == "ValidMetricFound"


@pytest.mark.parametrize(
    ("current", "desired", "why"),
    [
        pytest.param(120, 100, "above Spec.MaxReplicas", id="above max jumps to max"),
        pytest.param(1, 2, "below Spec.MinReplicas", id="below min jumps to min"),
    ],
)
def test_guards_bypass_metrics(current: int, desired: int, why: str) -> None:
    spec = replace(avg_spec(10), min_replicas=2)
    decision, _ = decide(spec, PolicyState(), Observation(current, current, current), NOW)
    assert decision.desired_replicas == desired
    assert why in decision.rescale_reason
    assert [s.name for s in decision.stages] == ["guard"]


def test_zero_replicas_with_min_above_zero_is_paused() -> None:
    decision, _ = decide(avg_spec(10), PolicyState(), observe(0, 100, ready=0), NOW)
    assert decision.desired_replicas == 0
    assert reason(decision, "ScalingActive") == "ScalingDisabled"


def test_scale_from_zero_after_the_autoscaler_scaled_to_zero() -> None:
    spec = replace(value_spec(10), min_replicas=0)
    state = record_rescale(spec, PolicyState(), NOW, 1, 0)
    assert state.scaled_to_zero
    decision, _ = decide(spec, state, observe(0, 25, ready=0), NOW + 15)
    assert decision.desired_replicas == 3  # ceil(25 / 10), no tolerance from zero
    paused, _ = decide(spec, PolicyState(), observe(0, 25, ready=0), NOW)  # put at 0 by hand
    assert paused.desired_replicas == 0


def test_first_sight_seeds_history_so_no_immediate_scale_down() -> None:
    decision, state = decide(avg_spec(10), PolicyState(), observe(10, 1), NOW)
    assert decision.desired_replicas == 10
    assert [r.replicas for r in state.recommendations] == [10, 1]


def test_record_rescale_keeps_events_for_their_longest_period() -> None:
    legacy = avg_spec(10)  # no behavior: kept one sync period, for the legacy cap's period start
    state = record_rescale(legacy, PolicyState(), NOW, 4, 8)
    assert state.scale_up_events == (ScaleEvent(NOW, 4),)
    # an event older than the period is outdated: the next one takes its place
    assert record_rescale(legacy, state, NOW + 16, 8, 16).scale_up_events == (ScaleEvent(NOW + 16, 8),)
    spec = avg_spec(10, behavior=Behavior())
    state = record_rescale(spec, PolicyState(), NOW, 4, 8)
    state = record_rescale(spec, state, NOW + 5, 8, 6)
    assert state.scale_up_events == (ScaleEvent(NOW, 4),)
    assert state.scale_down_events == (ScaleEvent(NOW + 5, 2),)
    # an event older than the longest period (15 s) is dropped when the next one is stored
    state = record_rescale(spec, state, NOW + 20, 6, 7)
    assert state.scale_up_events == (ScaleEvent(NOW + 20, 1),)


def test_events_limit_the_next_scale_up() -> None:
    spec = avg_spec(10, behavior=Behavior())
    state = PolicyState(
        recommendations=(Recommendation(NOW - 30, 8),),
        scale_up_events=(ScaleEvent(NOW - 5, 4),),
    )
    # periodStart = 8 - 4 = 4; Pods 4 -> 8, Percent 100 -> 8: no room to grow within 15 s
    decision, _ = decide(spec, state, observe(8, *[100] * 8), NOW)
    assert decision.desired_replicas == 8
    assert reason(decision, "ScalingLimited") == "ScaleUpLimit"


def run_legacy(
    period_s: float, seconds: float, spec: AutoscalerSpec | None = None
) -> list[tuple[float, int]]:
    """A queue that wants 100 replicas, decided every `period_s` from 1 replica, as the controller
    and the replay do it (decide, then record_rescale after the write)."""
    spec = spec or avg_spec(1, max_replicas=200)
    state, replicas, seen = PolicyState(), 1, []
    for i in range(round(seconds / period_s) + 1):
        now = NOW + i * period_s
        decision, state = decide(spec, state, observe(replicas, *[100 / replicas] * replicas), now)
        if decision.scale:
            state = record_rescale(spec, state, now, replicas, decision.desired_replicas)
            replicas = decision.desired_replicas
        seen.append((now - NOW, replicas))
    return seen


def test_legacy_scale_up_limit_holds_per_sync_period_whatever_the_tick() -> None:
    """Upstream, deciding every 15 s: 1 -> 4 -> 8 -> 16 -> 32. Deciding every 5 s (or every second)
    must not make that 4 -> 8 -> 16 -> 32 in 15 s: the cap's base is the count 15 s ago."""
    every_15 = run_legacy(15, 45)
    assert [r for _, r in every_15] == [4, 8, 16, 32]
    every_5 = run_legacy(5, 45)
    assert [r for t, r in every_5 if t % 15 == 0] == [4, 8, 16, 32]
    assert [r for _, r in every_5[:4]] == [4, 4, 4, 8]  # 2x per period, not per decision
    every_1 = dict(run_legacy(1, 45))
    assert [every_1[t] for t in (0, 14, 15, 29, 30, 44, 45)] == [4, 4, 8, 8, 16, 16, 32]


def test_legacy_sync_period_is_the_specs_and_a_cap_never_scales_down() -> None:
    slow = avg_spec(1, max_replicas=200, legacy_sync_period_s=30)
    assert [r for _, r in run_legacy(15, 60, slow)] == [4, 4, 8, 8, 16]
    state = PolicyState(scale_up_events=(ScaleEvent(NOW - 5, 6),))  # 4 -> 10 five seconds ago
    decision, _ = decide(avg_spec(1, max_replicas=200), state, observe(10, *[100] * 10), NOW)
    assert decision.desired_replicas == 10  # base 4: cap max(8, 4) = 8, held at the current 10
    assert reason(decision, "ScalingLimited") == "ScaleUpLimit"


# --- floors -----------------------------------------------------------------------------------------


def test_warm_floor_keeps_replicas_warm() -> None:
    spec = avg_spec(
        10,
        floors=FloorSpec(warm_min_replicas=5),
        behavior=Behavior(scale_down=default_scale_down(stabilization_window_s=0)),
    )
    decision, _ = decide(spec, PolicyState(), observe(8, *[0] * 8), NOW)
    assert decision.desired_replicas == 5
    assert stage(decision, "floors") == (0, 5, "WarmFloor")


def test_headroom_adds_replicas_and_fraction() -> None:
    spec = avg_spec(
        10,
        floors=FloorSpec(headroom_replicas=1, headroom_fraction=0.25),
        behavior=Behavior(scale_up=default_scale_up(policies=(RatePolicy(RatePolicyType.PODS, 100, 15),))),
    )
    decision, _ = decide(spec, PolicyState(), observe(4, *[20] * 4), NOW)
    assert stage(decision, "floors") == (8, 11, "Headroom")  # 8 + 1 + ceil(8 × 0.25)
    assert decision.desired_replicas == 11


@pytest.mark.parametrize(
    ("schedule", "at", "active"),
    [
        pytest.param(Schedule(6, frozenset({5}), 9 * 60, 17 * 60), NOW, True, id="Saturday 10:00 in 09-17"),
        pytest.param(
            Schedule(6, frozenset({0}), 9 * 60, 17 * 60), NOW, False, id="Monday-only on a Saturday"
        ),
        pytest.param(Schedule(6, frozenset({5}), 9 * 60, 10 * 60), NOW, False, id="end is exclusive"),
        pytest.param(
            Schedule(6, frozenset({5}), 9 * 60, 17 * 60, "America/New_York"),
            NOW,
            False,
            id="05:00 in New York is before 09:00",
        ),
        pytest.param(
            Schedule(6, frozenset({4}), 22 * 60, 6 * 60),
            NOW - 6 * 3600,
            True,
            id="Saturday 04:00 belongs to Friday's 22-06 window",
        ),
    ],
)
def test_schedule_active(schedule: Schedule, at: float, active: bool) -> None:
    assert schedule_active(schedule, at) is active


def test_scheduled_floor_raises_recommendation() -> None:
    floors = FloorSpec(schedules=(Schedule(12, frozenset({5}), 9 * 60, 17 * 60),))
    spec = avg_spec(
        10,
        floors=floors,
        behavior=Behavior(scale_up=default_scale_up(policies=(RatePolicy(RatePolicyType.PODS, 100, 15),))),
    )
    decision, _ = decide(spec, PolicyState(), observe(4, *[10] * 4), NOW)
    assert stage(decision, "floors") == (4, 12, "ScheduledFloor")
    assert decision.desired_replicas == 12


def test_max_replicas_holds_over_floors() -> None:
    spec = avg_spec(10, max_replicas=6, floors=FloorSpec(warm_min_replicas=50), behavior=Behavior())
    decision, _ = decide(spec, PolicyState(), observe(4, *[10] * 4), NOW)
    assert decision.desired_replicas == 6
    assert reason(decision, "ScalingLimited") == "TooManyReplicas"
