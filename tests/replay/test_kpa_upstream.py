"""Knative's KPA against upstream's own cases (knative/serving, each test named after its source):
pkg/autoscaler/aggregation/bucketing_test.go, pkg/autoscaler/scaling/autoscaler_test.go,
pkg/autoscaler/config/config_test.go and pkg/reconciler/autoscaling/kpa/scaler_test.go."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from replay.policies.kpa.aggregation import (
    MIN_EXPONENT,
    MaxTimeWindow,
    TimedBuckets,
    WeightedBuckets,
    go_round,
    round_to_n_digits,
    smoothing_coeff,
)
from replay.policies.kpa.config import KpaConfig, KpaConfigError, config_from_map, parse_go_duration
from replay.policies.kpa.decider import (
    INVALID,
    DeciderSpec,
    DeciderState,
    ScaleResult,
    new_state,
    scale,
)
from replay.policies.kpa.reconciler import SCALE_UNKNOWN, Active, PaState, scale_target

NOW = 1_700_000_000.0  # time.Now() in upstream's tests: any whole second

# --- bucketing_test.go ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("buckets", "want"), [(100, MIN_EXPONENT), (60, MIN_EXPONENT), (40, 0.20567), (6, 0.78456)]
)
def test_compute_decay_multiplier(buckets: int, want: float) -> None:  # TestComputeDecayMultiplier
    assert smoothing_coeff(buckets) == pytest.approx(want, abs=1e-5)


def test_timed_float64_buckets_window_average() -> None:  # TestTimedFloat64BucketsWindowAverage
    now = NOW
    b = TimedBuckets(5, 1)
    b.record(now, 1)  # firstWrite is used: without it the average would be 0.2
    assert b.window_average(now) == 1.0
    for i in range(1, 5):
        b.record(now + i, i + 1)
    assert b.window_average(now + 4) == 15 / 5
    assert b.window_average(now + 3.6) == 15 / 5  # `now` lags behind
    assert b.window_average(now + 6) == (15 - 1 - 2) / (5 - 2)  # a short hole
    assert b.window_average(now + 10) == 0.0  # a long hole
    b.record(now + 6, 91)  # a write with holes
    assert b.window_average(now + 6) == (15 - 1 - 2 + 91) / 5
    now += 60  # much farther
    b.record(now, 1984)
    assert b.window_average(now) == 1984.0
    b.record(now - 3, 4)  # an earlier time
    assert b.window_average(now) == (4 + 1984) / 4
    now += 1
    b.record(now, 5)
    assert b.window_average(now) == (4 + 1984 + 5) / 5
    b.record(now - 3, 10)  # an earlier time again
    assert b.window_average(now) == (4 + 10 + 1984 + 5) / 5
    b.record(now - 6, 10)  # too early: ignored
    assert b.window_average(now) == (4 + 10 + 1984 + 5) / 5
    b.record(now - 5, 10)  # on the bound: ignored
    assert b.window_average(now) == (4 + 10 + 1984 + 5) / 5
    b.record(now + 5, 10)  # exactly a window without data clears it
    assert b.window_average(now + 5) == 10.0


def test_descending_record() -> None:  # TestDescendingRecord
    b = TimedBuckets(5, 1)
    for i in range(8, -1, -1):
        b.record(NOW + i, 5)
    assert b.window_average(NOW + 5) == 5.0


def test_timed_float64_buckets_holes() -> None:  # TestTimedFloat64BucketsHoles
    b = TimedBuckets(5, 1)
    for i in range(5):
        b.record(NOW + i, i + 1)
    assert b.window_total == 15.0
    assert b.window_average(NOW + 4) == 15 / 5
    b.record(NOW + 8, 2.0)  # seconds 5, 6, 7 become 0: [3] = 2 and [4] = 5 remain
    assert b.window_total == 7.0


def test_timed_float64_buckets_many_reps() -> None:  # TestTimedFloat64BucketsManyReps
    b = TimedBuckets(60, 1)
    t = NOW
    for p in range(5):
        t += 1
        for k in range(5):
            b.record(t, p + k)
    assert b.window_total == 100.0


def test_timed_float64_buckets_many_reps_non_monotonic() -> None:
    # TestTimedFloat64BucketsManyRepsWithNonMonotonicalOrder
    b = TimedBuckets(60, 1)
    for p, d in enumerate([0, 3, 2, 1, 4]):
        for k in range(5):
            b.record(NOW + d, p + k)
    assert b.window_total == 100.0


def test_timed_float64_buckets_weighted_average() -> None:  # TestTimedFloat64BucketsWeightedAverage
    b = WeightedBuckets(5, 1)
    b.record(NOW, 2)
    want = 2 * b.coeff
    assert b.window_average(NOW) == want
    want *= 1 - b.coeff  # one second later, no writes
    assert b.window_average(NOW + 1) == want
    b.record(NOW + 1, 2)
    want += 2 * b.coeff
    assert b.window_average(NOW + 1) == want
    for i in range(5):  # fill the window with [2, 3, 4, 5, 6]
        b.record(NOW + 2 + i, i + 2)
    m = b.coeff
    want = 6 * m + 5 * m * (1 - m) + 4 * m * (1 - m) ** 2 + 3 * m * (1 - m) ** 3 + 2 * m * (1 - m) ** 4
    assert b.window_average(NOW + 6) == pytest.approx(want, rel=1e-15)
    assert b.window_average(NOW + 16) == 0.0  # an empty window


def test_weighted_buckets_initial_data_set() -> None:  # TestWeightedFloat64BucketsResizeWindow, first part
    b = WeightedBuckets(5, 1)
    for i in range(6):
        b.record(NOW + i, i + 1)
    assert b.window_total == 2 + 3 + 4 + 5 + 6
    assert round_to_n_digits(3, b.window_average(NOW + 5)) == 5.812  # computed a mano upstream


@pytest.mark.parametrize(("x", "want"), [(0.5, 1.0), (1.5, 2.0), (2.5, 3.0), (-0.5, -1.0), (0.49, 0.0)])
def test_go_round_is_half_away_from_zero(x: float, want: float) -> None:
    assert go_round(x) == want


def test_max_time_window_keeps_the_largest_of_the_window() -> None:  # max/timewindow_test.go style
    w = MaxTimeWindow(10, 2)  # 5 buckets of 2 s
    for t, v, want in [(0, 5, 5), (2, 3, 5), (4, 7, 7), (6, 1, 7), (12, 2, 7), (14, 2, 2), (15, 9, 9)]:
        w.record(t, v)
        assert w.current() == want, (t, v)


# --- autoscaler_test.go --------------------------------------------------------------------------

STABLE_WINDOW = 60.0
TARGET_UTILIZATION = 0.75


def expected_ebc(tot_cap: float, target_bc: float, recorded: float, pods: float) -> int:
    return math.floor(tot_cap / TARGET_UTILIZATION * pods - target_bc - recorded)


def spec_for(target: float, tbc: float, **changes: object) -> DeciderSpec:
    """newTestAutoscalerWithScalingMetric's spec."""
    spec = DeciderSpec(
        target_value=target,
        total_value=target / TARGET_UTILIZATION,
        target_burst_capacity=tbc,
        panic_threshold=2,
        max_scale_up_rate=10,
        max_scale_down_rate=10,
        stable_window_s=STABLE_WINDOW,
    )
    return replace(spec, **changes)  # type: ignore[arg-type]


class Scaler:
    """The upstream test harness: a decider, its fake metric client and pod counter."""

    def __init__(self, spec: DeciderSpec, *, ready: int = 1, stable: float = 0.0, panic: float = 0.0) -> None:
        self.spec = spec
        self.ready: int | None = ready
        self.stable: float | None = stable
        self.panic: float | None = panic
        self.state = new_state(spec, ready)

    def set(self, stable: float, panic: float) -> None:
        self.stable, self.panic = stable, panic

    def expect(self, now: float, desired: int, ebc: int | None = None, valid: bool = True) -> None:
        got, self.state = scale(self.spec, self.state, self.stable, self.panic, self.ready, now)
        assert got.scale_valid == valid
        assert got.desired_pod_count == desired
        if ebc is not None:  # upstream compares the excess burst capacity within +-1
            assert abs(got.excess_burst_capacity - ebc) <= 1, got


def test_autoscaler_scale_down_delay() -> None:  # TestAutoscalerScaleDownDelay
    spec = DeciderSpec(
        target_value=10,
        max_scale_down_rate=10,
        max_scale_up_rate=10,
        panic_threshold=100,
        scale_down_delay_s=300,
    )
    a = Scaler(spec, ready=0)
    now = 0.0
    # simple
    a.set(40, 40)
    a.expect(now + 2, 4)
    a.set(0, 0)
    a.expect(now + 300, 4)  # five minutes at reduced concurrency: less than the delay
    a.expect(now + 302, 0)
    # gradual
    a.set(40, 40)
    a.expect(now + 540, 4)
    a.set(30, 30)
    a.expect(now + 600, 4)  # 4 still dominates
    a.set(0, 0)
    a.expect(now + 660, 4)
    a.expect(now + 840, 3)  # 4 scrolls out
    a.expect(now + 900, 0)  # everything scrolled out


def test_autoscaler_scale_down_delay_not_reachable() -> None:  # TestAutoscalerScaleDownDelayNotReachable
    spec = DeciderSpec(
        target_value=10,
        max_scale_down_rate=10,
        max_scale_up_rate=10,
        panic_threshold=100,
        scale_down_delay_s=300,
    )
    a = Scaler(spec, ready=0)
    a.set(40, 40)
    a.expect(2, 4)
    a.set(0, 0)
    a.expect(60, 4)
    a.spec = replace(spec, reachable=False)  # another revision comes up
    a.expect(2, 0)


def test_autoscaler_scale_down_delay_zero() -> None:  # TestAutoscalerScaleDownDelayZero
    spec = DeciderSpec(target_value=10, max_scale_down_rate=10, max_scale_up_rate=10, panic_threshold=100)
    a = Scaler(spec, ready=0)
    a.set(40, 40)
    a.expect(0, 4)
    a.set(20, 20)
    a.expect(0.5, 2)  # no delay: at once


def test_autoscaler_no_data_no_autoscale() -> None:  # TestAutoscalerNoDataNoAutoscale
    a = Scaler(spec_for(10, 100))
    a.stable = a.panic = None
    got, state = scale(a.spec, a.state, None, None, 1, NOW)
    assert got == INVALID == ScaleResult(0, 0, False)
    assert state == a.state


def test_autoscaler_metrics() -> None:  # TestAutoscalerMetrics (the scale result part)
    a = Scaler(spec_for(10, 100), stable=50, panic=50)
    a.expect(NOW, 5, expected_ebc(10, 100, 50, 1))


def test_autoscaler_stable_mode_increase_with_concurrency_default() -> None:
    # TestAutoscalerStableModeIncreaseWithConcurrencyDefault
    a = Scaler(spec_for(10, 101), stable=50, panic=10)
    a.expect(NOW, 5, expected_ebc(10, 101, 10, 1))
    a.stable = 100
    a.expect(NOW, 10, expected_ebc(10, 101, 10, 1))


def test_autoscaler_unpanic_after_slow_increase() -> None:  # TestAutoscalerUnpanicAfterSlowIncrease
    a = Scaler(spec_for(1, 98), stable=11, panic=25)
    a.ready = 10
    start = tm = NOW
    a.expect(tm, 25, expected_ebc(1, 98, 25, 10))
    assert a.state.panic_time == tm
    a.ready = 25 + 15  # half a stable window later, +1 pod a cycle
    a.set(30, 41)
    tm += STABLE_WINDOW / 2
    a.expect(tm, 41, expected_ebc(1, 98, 41, 40))
    assert a.state.panic_time == start  # not moved
    a.ready = 25 + 30
    a.set(50, 56)
    tm += STABLE_WINDOW / 2 + 2  # + tickInterval: panic ends
    a.expect(tm, 50, expected_ebc(1, 98, 56, 55))
    assert a.state.panic_time is None


def test_autoscaler_extend_panic_window() -> None:  # TestAutoscalerExtendPanicWindow
    a = Scaler(spec_for(1, 98), stable=11, panic=25)
    a.ready = 10
    tm = NOW
    a.expect(tm, 25, expected_ebc(1, 98, 25, 10))
    assert a.state.panic_time == tm
    a.ready = 25 + 15
    a.set(30, 80)
    tm += STABLE_WINDOW / 2
    a.expect(tm, 80, expected_ebc(1, 98, 80, 40))
    assert a.state.panic_time == tm


def test_autoscaler_stable_mode_decrease() -> None:  # TestAutoscalerStableModeDecrease
    a = Scaler(spec_for(10, 98), stable=100, panic=100)
    a.ready = 8
    a.expect(NOW, 10, expected_ebc(10, 98, 100, 8))
    a.set(50, 50)
    a.expect(NOW, 5, expected_ebc(10, 98, 50, 8))


def test_autoscaler_stable_mode_no_traffic_scale_to_zero() -> None:
    # TestAutoscalerStableModeNoTrafficScaleToZero
    a = Scaler(spec_for(10, 75), stable=1, panic=0)
    a.expect(NOW, 1, expected_ebc(10, 75, 0, 1))
    a.stable = 0.0
    a.expect(NOW, 0, expected_ebc(10, 75, 0, 1))


def test_autoscaler_activation_scale() -> None:  # TestAutoscalerActivationScale
    a = Scaler(spec_for(10, 75, activation_scale=2), stable=0, panic=0)
    a.expect(NOW, 0, expected_ebc(10, 75, 0, 1))
    a.stable = 1.0
    a.expect(NOW, 2, expected_ebc(10, 75, 0, 1))


def test_autoscaler_panic_mode_exponential_track_and_stabilize() -> None:
    # TestAutoscalerPanicModeExponentialTrackAndStabilize
    a = Scaler(spec_for(1, 101), stable=6, panic=6)
    a.expect(NOW, 6, expected_ebc(1, 101, 6, 1))
    tm = NOW
    a.ready = 6
    a.set(36, 36)
    a.expect(tm, 36, expected_ebc(1, 101, 36, 6))
    assert a.state.panic_time == tm
    a.ready = 36
    a.set(216, 216)
    tm += 1
    a.expect(tm, 216, expected_ebc(1, 101, 216, 36))
    assert a.state.panic_time == tm
    a.ready = 216
    a.set(1296, 1296)
    a.expect(tm, 1296, expected_ebc(1, 101, 1296, 216))
    assert a.state.panic_time == tm
    a.ready = 1296
    tm += 1
    a.expect(tm, 1296, expected_ebc(1, 101, 1296, 1296))


def _panicking(since: float, pods: int) -> DeciderState:
    return DeciderState(since, pods, None)


@pytest.mark.parametrize(
    ("label", "spec", "stable", "panic", "base", "state", "want", "ebc"),
    [
        (
            "AutoscalerNoDataAtZeroNoAutoscale",
            spec_for(10, 100),
            0,
            0,
            1,
            None,
            0,
            expected_ebc(10, 100, 0, 1),
        ),
        ("AutoscalerStableModeUnlimitedTBC", spec_for(181, -1), 21, 26, 1, None, 1, -1),
        ("Autoscaler0TBC", spec_for(10, 0), 50, 49, 1, None, 5, 0),
        ("AutoscalerStableModeNoChange", spec_for(10, 100), 50, 50, 1, None, 5, expected_ebc(10, 100, 50, 1)),
        (
            "AutoscalerPanicStableLargerThanPanic",
            spec_for(1, 100),
            50,
            30,
            5,
            _panicking(NOW - 5, 5),
            50,  # the stable value sets the scale
            expected_ebc(1, 100, 30, 5),
        ),
        (
            "AutoscalerPanicStableLessThanPanic",
            spec_for(1, 100),
            20,
            30,
            5,
            _panicking(NOW - 5, 5),
            30,  # the panic value, the larger
            expected_ebc(1, 100, 30, 5),
        ),
        (
            "AutoscalerStableModeNoChangeAlreadyScaled",
            spec_for(10, 100),
            50,
            50,
            5,
            None,
            5,
            expected_ebc(10, 100, 50, 5),
        ),
        (
            "AutoscalerStableModeIncreaseWithSmallScaleUpRate",
            spec_for(1, 1982, max_scale_up_rate=1.1),
            3,
            3.1,
            2,
            None,
            3,
            expected_ebc(1, 1982, 3.1, 2),
        ),
        (
            "AutoscalerStableModeDecreaseWithSmallScaleDownRate",
            spec_for(10, 1982, max_scale_down_rate=1.1),
            1,
            1,
            100,
            None,
            90,
            expected_ebc(10, 1982, 1, 100),
        ),
        (
            "AutoscalerStableModeDecreaseNonReachable",
            spec_for(10, 1982, max_scale_down_rate=1.1, reachable=False),
            1,
            1,
            100,
            None,
            1,
            expected_ebc(10, 1982, 1, 100),
        ),
        (
            "AutoscalerPanicModeDoublePodCount",
            spec_for(10, 84),
            50,
            100,
            1,
            None,
            10,  # the panic concurrency takes precedence
            expected_ebc(10, 84, 100, 1),
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_autoscaler_scale(
    label: str,
    spec: DeciderSpec,
    stable: float,
    panic: float,
    base: int,
    state: DeciderState | None,
    want: int,
    ebc: int,
) -> None:  # TestAutoscalerScale
    start = state if state is not None else new_state(spec, 1)  # created at one ready pod
    got, _ = scale(spec, start, stable, panic, base, NOW)
    assert got.scale_valid
    assert got.desired_pod_count == want
    assert abs(got.excess_burst_capacity - ebc) <= 1


def test_autoscaler_panic_then_unpanic_scale_down() -> None:  # TestAutoscalerPanicThenUnPanicScaleDown
    a = Scaler(spec_for(10, 93), stable=100, panic=100)
    a.expect(NOW, 10, expected_ebc(10, 93, 100, 1))
    a.ready = 10
    panic_time = NOW + 1
    a.panic = 1000
    a.expect(panic_time, 100, expected_ebc(10, 93, 1000, 10))
    a.set(1, 1)  # traffic dropped off: the scale holds in panic
    a.expect(panic_time + 30, 100, expected_ebc(10, 93, 1, 10))
    a.expect(panic_time + 61, 1, expected_ebc(10, 93, 1, 10))  # after the stable window


def test_autoscaler_rate_limit_scale_up() -> None:  # TestAutoscalerRateLimitScaleUp
    a = Scaler(spec_for(10, 61), stable=1000, panic=1001)
    a.expect(NOW, 10, expected_ebc(10, 61, 1001, 1))  # needs 100, scales x10
    a.ready = 10
    a.expect(NOW, 100, expected_ebc(10, 61, 1001, 10))


def test_autoscaler_rate_limit_scale_down() -> None:  # TestAutoscalerRateLimitScaleDown
    a = Scaler(spec_for(10, 61), stable=1, panic=1)
    a.ready = 100
    a.expect(NOW, 10, expected_ebc(10, 61, 1, 100))  # needs 1, divides by 10
    a.ready = 10
    a.expect(NOW, 1, expected_ebc(10, 61, 1, 10))


def test_cant_count_pods() -> None:  # TestCantCountPods
    spec = spec_for(10, 81)
    got, _ = scale(spec, new_state(spec, 1), 1000, 888, None, NOW)
    assert got == INVALID


def test_autoscaler_use_one_pod_as_minimum_if_endpoints_not_found() -> None:
    # TestAutoscalerUseOnePodAsMinimumIfEndpointsNotFound
    a = Scaler(spec_for(10, 81), stable=1000, panic=888)
    a.ready = 0
    a.expect(NOW, 10, expected_ebc(10, 81, 888, 0))  # x10 of one pod


def test_autoscaler_update_target() -> None:  # TestAutoscalerUpdateTarget
    a = Scaler(spec_for(10, 77), stable=100, panic=101)
    a.expect(NOW, 10, expected_ebc(10, 77, 101, 1))
    a.ready = 10
    a.spec = DeciderSpec(
        target_value=1,
        total_value=1 / TARGET_UTILIZATION,
        target_burst_capacity=71,
        panic_threshold=2,
        max_scale_down_rate=10,
        max_scale_up_rate=10,
        stable_window_s=STABLE_WINDOW,
    )
    a.expect(NOW, 100, expected_ebc(1, 71, 101, 10))


def test_start_in_panic_mode() -> None:  # TestStartInPanicMode
    spec = DeciderSpec(
        target_value=100,
        total_value=120,
        target_burst_capacity=11,
        panic_threshold=220,
        max_scale_up_rate=10,
        max_scale_down_rate=10,
        stable_window_s=STABLE_WINDOW,
    )
    for ready in range(2):
        s = new_state(spec, ready)
        assert s.panic_time is None, f"created at scale {ready} in panic"
        assert s.max_panic_pods == ready
    s = new_state(spec, 2)
    assert s.panic_time is not None
    assert s.max_panic_pods == 2


def test_new_fail() -> None:  # TestNewFail: the pod count fails at creation
    spec = DeciderSpec(target_value=100, total_value=120, panic_threshold=220, max_scale_up_rate=10)
    assert new_state(spec, None).max_panic_pods == 0


# --- config_test.go ------------------------------------------------------------------------------


def test_config_defaults() -> None:  # TestNewConfig "default"
    c = config_from_map({})
    assert c == KpaConfig()
    assert (c.stable_window_s, c.panic_window_s) == (60.0, 6.0)
    assert c.container_concurrency_target_percentage == 0.7
    assert (c.max_scale_up_rate, c.max_scale_down_rate) == (1000.0, 2.0)
    assert (c.panic_threshold_percentage, c.target_burst_capacity) == (200.0, 211.0)
    assert (c.scale_to_zero_grace_period_s, c.initial_scale, c.enable_scale_to_zero) == (30.0, 1, True)


def test_config_percentage_as_percent() -> None:  # "concurrency target percentage as percent"
    assert config_from_map(
        {"container-concurrency-target-percentage": "55"}
    ).container_concurrency_target_percentage == (pytest.approx(0.55))


def test_config_with_minus_one_tbc() -> None:  # "with -1 tbc"
    assert config_from_map({"target-burst-capacity": "-1"}).target_burst_capacity == -1.0


def test_config_toggles_in_strange_casing() -> None:  # "with toggles on strange casing"
    c = config_from_map({"enable-scale-to-zero": "TRUE", "allow-zero-initial-scale": "False"})
    assert c.enable_scale_to_zero and not c.allow_zero_initial_scale


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("malformed float", {"max-scale-up-rate": "not a float"}),
        ("invalid scale-down-delay", {"scale-down-delay": "-1m23s"}),
        ("invalid pod retention period", {"scale-to-zero-pod-retention-period": "-4m11s"}),
        ("malformed duration", {"stable-window": "not a duration"}),
        ("invalid target burst capacity", {"target-burst-capacity": "-11"}),
        ("invalid target %, too small", {"container-concurrency-target-percentage": "-42"}),
        ("invalid target %, too big", {"container-concurrency-target-percentage": "142.4"}),
        ("max scale up rate 1.0", {"max-scale-up-rate": "1"}),
        ("max down down rate negative", {"max-scale-down-rate": "-55"}),
        ("max down down rate 1.0", {"max-scale-down-rate": "1"}),
        ("stable window too big", {"stable-window": "1h1s"}),
        ("stable window too small", {"stable-window": "1s"}),
        ("stable not seconds", {"stable-window": "61984ms"}),
        ("scale-down-delay not seconds", {"scale-down-delay": "61984ms"}),
        ("activator-capacity invalid", {"activator-capacity": "0.95"}),
        ("panic window percentage too small", {"panic-window-percentage": "0.1"}),
        ("panic window percentage too big", {"stable-window": "12s", "panic-window-percentage": "110"}),
        (
            "TU*CC < 0.01",
            {"container-concurrency-target-percentage": "1", "container-concurrency-target-default": "0.001"},
        ),
        ("grace window too small", {"stable-window": "12s", "scale-to-zero-grace-period": "0s"}),
        (
            "with prohibited default initial scale",
            {"allow-zero-initial-scale": "false", "initial-scale": "0"},
        ),
        ("with negative default initial scale", {"allow-zero-initial-scale": "false", "initial-scale": "-1"}),
        ("with non-parseable default initial scale", {"initial-scale": "invalid"}),
        ("with negative default max scale", {"max-scale": "-1"}),
        ("with max scale less than min-scale", {"min-scale": "3", "max-scale": "2"}),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_config_refuses_what_upstream_refuses(
    name: str, data: dict[str, str]
) -> None:  # TestNewConfig errors
    with pytest.raises(KpaConfigError):
        config_from_map(data)


@pytest.mark.parametrize(
    ("text", "seconds"), [("1h1s", 3601.0), ("61984ms", 61.984), ("-1m23s", -83.0), ("0", 0.0)]
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


# --- kpa/scaler_test.go TestScaler ---------------------------------------------------------------

GRACE = 60.0
SCALER_CONFIG = KpaConfig(stable_window_s=300, scale_to_zero_grace_period_s=GRACE, progress_deadline_s=121)
ACTIVATION_TIMEOUT = 121 + 30


def pa(active: Active, since: float, *, initialized: bool = True, proxy_for: float | None = None) -> PaState:
    return PaState(active, NOW + since, initialized, None if proxy_for is None else NOW - proxy_for)


@pytest.mark.parametrize(
    ("label", "start", "scale_to", "cfg", "state", "want", "scaling"),
    [
        ("waits to scale to zero (just before idle period)", 1, 0, {}, pa(Active.TRUE, -300 + 1), 1, False),
        (
            "waits to scale to zero (just before idle period), custom PA window",
            1,
            0,
            {"stable_window_s": 45},
            pa(Active.TRUE, -45 + 1),
            1,
            False,
        ),
        (
            "custom PA window, check for standard window, no probe",
            1,
            0,
            {"stable_window_s": 45},
            pa(Active.TRUE, -300),
            0,
            False,
        ),
        ("scale to 1 waiting for idle expires", 10, 0, {}, pa(Active.TRUE, -300 + 1), 1, True),
        ("waits to scale to zero after idle period", 1, 0, {}, pa(Active.TRUE, -300), 0, False),
        (
            "waits to scale to zero after idle period; sks in proxy mode",
            1,
            0,
            {},
            pa(Active.TRUE, -300, proxy_for=0),
            0,
            False,
        ),
        (
            "can scale to zero after grace period, but 0 PA retention",
            1,
            0,
            {"scale_to_zero_pod_retention_period_s": 0},
            pa(Active.FALSE, -GRACE),
            0,
            True,
        ),
        (
            "can't scale to zero after grace period, but before last pod retention",
            1,
            0,
            {"scale_to_zero_pod_retention_period_s": 2 * GRACE},
            pa(Active.FALSE, -GRACE),
            0,
            False,
        ),
        (
            "scale to zero after grace period, and after last pod retention",
            1,
            0,
            {"scale_to_zero_pod_retention_period_s": GRACE},
            pa(Active.FALSE, -GRACE),
            0,
            True,
        ),
        ("scale to zero after grace period", 1, 0, {}, pa(Active.FALSE, -GRACE), 0, True),
        (
            "waits to scale to zero (just before grace period)",
            1,
            0,
            {},
            pa(Active.FALSE, -GRACE + 1),
            0,
            False,
        ),
        (
            "waits to scale to zero (just before grace period, sks short)",
            1,
            0,
            {},
            pa(Active.FALSE, -GRACE + 1, proxy_for=GRACE - 1),
            0,
            False,
        ),
        (
            "waits to scale to zero (just before grace period, sks in proxy long) "
            "and last pod timeout positive",
            1,
            0,
            {"scale_to_zero_pod_retention_period_s": 42},
            pa(Active.FALSE, -GRACE + 1, proxy_for=GRACE),
            0,
            True,
        ),
        (
            "waits to scale to zero (just before grace period, sks in proxy long)",
            1,
            0,
            {},
            pa(Active.FALSE, -GRACE + 1, proxy_for=GRACE),
            0,
            True,
        ),
        (
            "waits to scale to zero while activating until after deadline exceeded",
            1,
            0,
            {},
            pa(Active.UNKNOWN, -ACTIVATION_TIMEOUT / 2),
            SCALE_UNKNOWN,
            False,
        ),
        (
            "scale to zero while activating after deadline exceeded",
            1,
            0,
            {},
            pa(Active.UNKNOWN, -(ACTIVATION_TIMEOUT + 1)),
            0,
            True,
        ),
        (
            "scale to zero while activating after revision deadline exceeded",
            1,
            0,
            {"progress_deadline_s": 5},
            pa(Active.UNKNOWN, -(5 + 30 + 1)),
            0,
            True,
        ),
        (
            "scale down to minScale before grace period",
            10,
            0,
            {"min_scale": 2},
            pa(Active.FALSE, -GRACE + 1),
            2,
            True,
        ),
        (
            "scale down to minScale after grace period",
            10,
            0,
            {"min_scale": 2},
            pa(Active.FALSE, -GRACE),
            2,
            True,
        ),
        ("scales up", 1, 10, {}, pa(Active.TRUE, -1e6), 10, True),
        ("scales up to maxScale", 1, 10, {"max_scale": 8}, pa(Active.TRUE, -1e6), 8, True),
        ("scale up inactive revision", 1, 10, {}, pa(Active.FALSE, -GRACE / 2), 10, True),
        ("does not scale up from zero with no metrics", 0, -1, {}, pa(Active.FALSE, 0), -1, False),
        ("scales up from zero to desired one", 0, 1, {}, pa(Active.TRUE, -1e6), 1, True),
        ("scales up from zero to desired high scale", 0, 10, {}, pa(Active.TRUE, -1e6), 10, True),
        ("negative scale does not scale", 12, -1, {}, pa(Active.TRUE, 0), -1, False),
        (
            "initial scale attained, but now time to scale down",
            2,
            0,
            {"initial_scale": 2},
            pa(Active.TRUE, -120),
            1,
            True,
        ),
        (
            "haven't scaled to initial scale, override desired scale with initial scale",
            0,
            1,
            {"initial_scale": 2},
            pa(Active.UNKNOWN, 0, initialized=False),
            2,
            True,
        ),
        (
            "initial scale reached for the first time",
            5,
            1,
            {"initial_scale": 5},
            pa(Active.UNKNOWN, 0, initialized=False),
            5,
            False,
        ),
        (
            "reaching initial scale zero",
            0,
            0,
            {"initial_scale": 0, "allow_zero_initial_scale": True},
            pa(Active.FALSE, 0, initialized=False),
            0,
            False,
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_scaler(
    label: str, start: int, scale_to: int, cfg: dict[str, object], state: PaState, want: int, scaling: bool
) -> None:  # TestScaler
    config = replace(SCALER_CONFIG, **cfg)  # type: ignore[arg-type]
    got, apply = scale_target(config, state, scale_to, NOW)
    assert got == want
    assert (apply and got != start) == scaling


def test_panic_is_left_only_strictly_after_a_stable_window() -> None:
    """Not an upstream case: `panicTime.Add(StableWindow).Before(now)` is strict, so at exactly one
    stable window after the last over-threshold tick the decider is still panicking."""
    a = Scaler(spec_for(10, 0), stable=100, panic=100)
    a.ready = 4
    a.expect(NOW, 10)  # 10 / 4 pods >= 2: panic
    a.set(10, 10)
    a.expect(NOW + STABLE_WINDOW, 10)  # still holding the panic maximum
    assert a.state.panic_time == NOW
    a.expect(NOW + STABLE_WINDOW + 2, 1)  # out of panic: ceil(10 / 10), the down bound floor(4 / 10) = 0
