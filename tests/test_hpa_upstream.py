"""Upstream Kubernetes HPA test cases, transcribed into tables for our HPA core.

Sources, all in kubernetes/kubernetes `pkg/controller/podautoscaler/`:

- `horizontal_test.go` at 003e86297d18 (kubernetes/kubernetes): the standalone reconcile tests
  (TestScaleUpCMExternal, TestMinReplicas, ...) and the unit tests of the normalisation helpers
  (TestConvertDesiredReplicasWithRules, TestScalingWithRules, TestNormalizeDesiredReplicas*,
  TestStoreScaleEvents, TestCalculateScale{Up,Down}Limit*).
- master as of 2026, read through the omerap12/kubernetes fork: `replica_calculator_test.go` at
  a769d588 (TestReplicaCalcExternalMetric, TestReplicaCalcExternalPerPodMetric,
  TestReplicaCalcResourceTolerance) and `horizontal_test.go` at 060da168 (TestConfigurableTolerance,
  the ScaledToZero tests).

Only External-metric and normalisation cases are transcribed. A few CPU cases that test plain
arithmetic (tolerance bands, min/max clamps, the upscale cap) are rewritten as an External
AverageValue metric with the same usage ratio; their comments say "External analogue".

Conventions:
- Upstream's clock is `time.Now()`; here NOW is fixed and every history entry or scale event is
  placed at `NOW - age`.
- Upstream's tests set `scaleUpLimitFactor = 8` (init() in horizontal_test.go), so the legacy
  path here runs with `legacy_scale_up_factor=8` unless a case says "production factor 2".
- Upstream tells an absent history (seeded with the current count on first sight) from one that
  exists but is empty (`recommendations: []timestampedRecommendation{}`). Our empty state means
  absent; PRESENT_BUT_EMPTY, one entry older than every window, stands for the other.
- Upstream asserts AbleToScale=SucceededRescale after the scale update succeeded. decide() runs
  before that update, so the tables assert the reason normalisation left, which upstream then
  overwrites (ReadyForNewScale, ScaleDownStabilized, ScaleUpStabilized), or SucceededGetScale
  where the reconcile stops early.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from autoscaler.policy.decide import Decision, decide, record_rescale
from autoscaler.policy.hpa import (
    limit_legacy,
    limit_with_behavior,
    scale_down_limit,
    scale_up_limit,
    stabilize_behavior,
    stabilize_legacy,
)
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.replicacalc import (
    MAX_INT32,
    MAX_INT64,
    MetricError,
    MetricProposal,
    external_metric_replicas,
)
from autoscaler.policy.spec import (
    AutoscalerSpec,
    Behavior,
    MetricSpec,
    RatePolicy,
    RatePolicyType,
    ScalingRules,
    SelectPolicy,
    TargetType,
    default_scale_down,
    default_scale_up,
)
from autoscaler.policy.state import PolicyState, Recommendation, ScaleEvent

NOW = 1_000_000.0  # any epoch; upstream's ages become NOW - age
UPSTREAM_FACTOR = 8.0  # scaleUpLimitFactor in horizontal_test.go's init()
PRODUCTION_FACTOR = 2.0  # the constant in horizontal.go
DEFAULT_TOL = (0.1, 0.1)  # (down, up): --horizontal-pod-autoscaler-tolerance, defaultTestingTolerance
VALUE = TargetType.VALUE
AVERAGE = TargetType.AVERAGE_VALUE
PODS = RatePolicyType.PODS
PERCENT = RatePolicyType.PERCENT

# A history that exists but holds nothing inside any window: upstream's empty-but-present slice.
PRESENT_BUT_EMPTY = (Recommendation(NOW - 86_400, 0),)


def _id(test: str, case: str) -> str:
    slug = case.replace(" ", "-").replace("'", "")
    return f"{test}/{slug}"


def _rules(
    pods: int = 0, pods_period: int = 0, percent: int = 0, percent_period: int = 0, window: int = 0
) -> ScalingRules:
    """generateScalingRules: a Pods policy if pods != 0, then a Percent one, selectPolicy Max."""
    policies: list[RatePolicy] = []
    if pods:
        policies.append(RatePolicy(PODS, pods, pods_period))
    if percent:
        policies.append(RatePolicy(PERCENT, percent, percent_period))
    return ScalingRules(window, SelectPolicy.MAX, tuple(policies))


def _uniform(changes: list[int], period_s: int) -> tuple[ScaleEvent, ...]:
    """generateEventsUniformDistribution: event i sits mid-way in the i-th of len(changes) equal
    segments of the last period_s seconds, oldest first; Go truncates the age to whole seconds.
    [1, 5, 9] over 120 s -> ages 100, 60, 20; [8, 12, 9, 11] over 120 s -> 105, 75, 45, 15."""
    segment = period_s / len(changes)
    return tuple(
        ScaleEvent(NOW - int(period_s - segment * (i + 1) + segment / 2), change)
        for i, change in enumerate(changes)
    )


def _recs(*entries: tuple[int, float]) -> tuple[Recommendation, ...]:
    """(replicas, age in seconds) pairs, as upstream's {replicas, time.Now().Add(-age)}."""
    return tuple(Recommendation(NOW - age, replicas) for replicas, age in entries)


def _ext(name: str, target: TargetType, target_milli: int) -> MetricSpec:
    return MetricSpec(name, target, target_milli)


# =============================================================================================
# 1. One metric: GetExternalMetricReplicas / GetExternalPerPodMetricReplicas
# =============================================================================================


@dataclass(frozen=True)
class Calc:
    values_milli: tuple[int, ...] | None  # None: the read failed
    target: TargetType
    target_milli: int
    replicas: int  # upstream's currentReplicas: spec and status replicas and the pods listed
    want: int | str  # replicas, or the MetricError reason
    want_current_milli: int | None = None
    ready: int | Literal["all"] | None = "all"  # Running+Ready pods; None: no pod matched
    status: int | None = None  # status replicas when they differ from `replicas`
    tolerances: tuple[float, float] = DEFAULT_TOL


CALC_CASES = [
    # --- TestReplicaCalcExternalMetric (master) ---
    pytest.param(
        # currentReplicas 3, readiness [F, T, F], level 8600, targetUsage 4400 -> 2 ("would be 6")
        Calc((8600,), VALUE, 4400, 3, 2, 8600, ready=1),
        id=_id(
            "TestReplicaCalcExternalMetric", "scale down: ignores unready pods (would otherwise scale up)"
        ),
    ),
    pytest.param(
        # currentReplicas 5, level 8600, targetUsage 14334 -> 3
        Calc((8600,), VALUE, 14334, 5, 3, 8600),
        id=_id("TestReplicaCalcExternalMetric", "scale down"),
    ),
    pytest.param(
        # currentReplicas 3, level 8600, targetUsage 8888 -> 3 (ratio 0.968)
        Calc((8600,), VALUE, 8888, 3, 3, 8600),
        id=_id("TestReplicaCalcExternalMetric", "within default tolerance"),
    ),
    pytest.param(
        # Tolerances{default, .01}, currentReplicas 3, level 8900, targetUsage 8800 -> 4 (ratio 1.011)
        Calc((8900,), VALUE, 8800, 3, 4, 8900, tolerances=(0.1, 0.01)),
        id=_id("TestReplicaCalcExternalMetric", "outside configurable 1% tolerance"),
    ),
    pytest.param(
        # levels MaxInt64/2+1 twice, targetUsage MaxInt64, currentReplicas 3 -> 3, usage capped at MaxInt64
        Calc((MAX_INT64 // 2 + 1, MAX_INT64 // 2 + 1), VALUE, MAX_INT64, 3, 3, MAX_INT64),
        id=_id("TestReplicaCalcExternalMetric", "usage overflow caps at MaxInt64"),
    ),
    pytest.param(
        # older revision: currentReplicas 1, level 8600, targetUsage 4400 -> 2
        Calc((8600,), VALUE, 4400, 1, 2, 8600),
        id=_id("TestReplicaCalcScaleUpCMExternal", "single replica"),
    ),
    # --- TestReplicaCalcExternalPerPodMetric (master) ---
    pytest.param(
        # currentReplicas 1, level MaxInt64, perPodTargetUsage 1 -> MaxInt32, usage MaxInt64
        Calc((MAX_INT64,), AVERAGE, 1, 1, MAX_INT32, MAX_INT64),
        id=_id("TestReplicaCalcExternalPerPodMetric", "replica count overflow saturates to MaxInt32"),
    ),
    pytest.param(
        # currentReplicas 1, level MaxInt64, perPodTargetUsage MaxInt64 -> 1, usage MaxInt64
        Calc((MAX_INT64,), AVERAGE, MAX_INT64, 1, 1, MAX_INT64),
        id=_id(
            "TestReplicaCalcExternalPerPodMetric", "usage overflow with huge target leaves replicas unchanged"
        ),
    ),
    pytest.param(
        # currentReplicas 0, level 20000, perPodTargetUsage 5000 -> 4, usage 0
        Calc((20000,), AVERAGE, 5000, 0, 4, 0),
        id=_id("TestReplicaCalcExternalPerPodMetric", "statusReplicas zero does not overflow usage"),
    ),
    pytest.param(
        # currentReplicas 0, level 0, perPodTargetUsage 5000 -> 0, usage 0
        Calc((0,), AVERAGE, 5000, 0, 0, 0),
        id=_id(
            "TestReplicaCalcExternalPerPodMetric", "statusReplicas zero and metric zero does not underflow"
        ),
    ),
    pytest.param(
        # currentReplicas 3, level 8600, perPodTargetUsage 2150 -> 4, usage 2867
        Calc((8600,), AVERAGE, 2150, 3, 4, 2867),
        id=_id("TestReplicaCalcExternalPerPodMetric", "scale up"),
    ),
    pytest.param(
        # currentReplicas 5, level 8600, perPodTargetUsage 2867 -> 3, usage 1720
        Calc((8600,), AVERAGE, 2867, 5, 3, 1720),
        id=_id("TestReplicaCalcExternalPerPodMetric", "scale down"),
    ),
    pytest.param(
        # currentReplicas 3, level 8600, perPodTargetUsage 2900 -> 3, usage 2867
        Calc((8600,), AVERAGE, 2900, 3, 3, 2867),
        id=_id("TestReplicaCalcExternalPerPodMetric", "within default tolerance"),
    ),
    pytest.param(
        # Tolerances{default, .01}, currentReplicas 3, level 8600, perPodTargetUsage 2800 -> 4
        Calc((8600,), AVERAGE, 2800, 3, 4, 2867, tolerances=(0.1, 0.01)),
        id=_id("TestReplicaCalcExternalPerPodMetric", "outside configurable 1% tolerance"),
    ),
    # --- TestReplicaCalcResourceTolerance (master), External analogue: same ratio on 3 replicas ---
    pytest.param(
        # Tolerances{0, 0}: usage 101% of target (909+1010+1111 over 3 x 1000) -> 4
        Calc((3030,), AVERAGE, 1000, 3, 4, 1010, tolerances=(0.0, 0.0)),
        id=_id("TestReplicaCalcResourceTolerance", "outside 0% tolerance"),
    ),
    pytest.param(
        # Tolerances{default, 2}: usage 190% -> 3
        Calc((5700,), AVERAGE, 1000, 3, 3, 1900, tolerances=(0.1, 2.0)),
        id=_id("TestReplicaCalcResourceTolerance", "within 200% scale-up tolerance"),
    ),
    pytest.param(
        # Tolerances{2, .08}: usage 109% -> 4
        Calc((3270,), AVERAGE, 1000, 3, 4, 1090, tolerances=(2.0, 0.08)),
        id=_id(
            "TestReplicaCalcResourceTolerance",
            "outside 8% scale-up tolerance (superfluous scale-down tolerance)",
        ),
    ),
    pytest.param(
        # Tolerances{.36, default}: usage 65% -> 3
        Calc((1950,), AVERAGE, 1000, 3, 3, 650, tolerances=(0.36, 0.1)),
        id=_id("TestReplicaCalcResourceTolerance", "within 36% scale-down tolerance"),
    ),
    pytest.param(
        # Tolerances{.34, default}: usage 65% -> 2
        Calc((1950,), AVERAGE, 1000, 3, 2, 650, tolerances=(0.34, 0.1)),
        id=_id("TestReplicaCalcResourceTolerance", "outside 34% scale-down tolerance"),
    ),
    # --- Tolerances.isWithin: both ends of the band are inside (1 - down <= ratio <= 1 + up) ---
    pytest.param(
        # 3300 / (1000 x 3) == 1.1 == 1 + 0.1 in float64 -> held at 3
        Calc((3300,), AVERAGE, 1000, 3, 3, 1100),
        id=_id("Tolerances.isWithin", "upper end included"),
    ),
    pytest.param(
        # 9000 / (1000 x 10) == 0.9 == 1 - 0.1 -> held at 10 (outside it would be 9)
        Calc((9000,), AVERAGE, 1000, 10, 10, 900),
        id=_id("Tolerances.isWithin", "lower end included"),
    ),
    # --- which replica count each target type reads (horizontal.go computeStatusForExternalMetric) ---
    pytest.param(
        # AverageValue reads status replicas: 95000 / (1000 x 100) = 0.95 is inside -> 100; with the
        # spec's 80 it would be 1.19 -> 95. The reported per-replica value divides by status too.
        Calc((95_000,), AVERAGE, 1000, 80, 100, 950, status=100),
        id=_id("GetExternalPerPodMetricReplicas", "status replicas, not spec replicas"),
    ),
    pytest.param(
        # Value reads spec replicas: 8600 / 8666 is inside -> spec's 4, although 5 pods exist (surge)
        Calc((8600,), VALUE, 8666, 4, 4, 8600, status=5, ready=5),
        id=_id("GetExternalMetricReplicas", "spec replicas, not status replicas"),
    ),
    # --- scale from zero (getUsageRatioReplicaCount with currentReplicas 0) ---
    pytest.param(
        # Object Value target 15 (same zero-aware path as External Value), level 20 -> ceil(1.33) = 2
        Calc((20000,), VALUE, 15000, 0, 2, 20000, ready=None),
        id=_id("TestScaleUpFromZeroCMObject", "external analogue"),
    ),
    pytest.param(
        # target 1, level 1: ratio exactly 1.0 is not held by tolerance at 0 replicas -> 1
        Calc((1000,), VALUE, 1000, 0, 1, 1000, ready=None),
        id=_id("TestScaleUpFromZeroIgnoresToleranceCMObject", "external analogue"),
    ),
    # --- error paths of the same functions (no upstream table case; from the code and its comments) ---
    pytest.param(
        # GetExternalMetric returned an error -> FailedGetExternalMetric
        Calc(None, VALUE, 300, 3, "FailedGetExternalMetric"),
        id=_id("TestConditionFailedGetMetrics", "FailedGetExternalMetric"),
    ),
    pytest.param(
        # an empty item list is an error, never 0 (rest_metrics_client.go)
        Calc((), AVERAGE, 300, 3, "FailedGetExternalMetric"),
        id=_id("GetExternalMetric", "empty item list is an error"),
    ),
    pytest.param(
        # out of tolerance and no pod matches the selector: getReadyPodsCount fails
        Calc((8600,), VALUE, 4400, 3, "FailedGetExternalMetric", ready=None),
        id=_id("getUsageRatioReplicaCount", "no pods returned by selector"),
    ),
    pytest.param(
        # pods exist but none is Ready: ceil(ratio x 0) = 0, clamped later by minReplicas
        Calc((8600,), VALUE, 4400, 3, 0, 8600, ready=0),
        id=_id("getUsageRatioReplicaCount", "no ready pods"),
    ),
    pytest.param(
        # inside tolerance the pods are never listed, so a missing selector match does not matter
        Calc((8600,), VALUE, 8888, 3, 3, 8600, ready=None),
        id=_id("getUsageRatioReplicaCount", "within tolerance lists no pods"),
    ),
    # --- the seed's worked example ---
    pytest.param(
        # 4 replicas, average queue 30 (sum 120), target 10 per replica -> ceil(120 / 10) = 12
        Calc((120_000,), AVERAGE, 10_000, 4, 12, 30_000),
        id="seed/4-replicas-average-queue-30-target-10",
    ),
    pytest.param(
        # average 10.5 against 10 is inside the 0.1 band -> unchanged
        Calc((42_000,), AVERAGE, 10_000, 4, 4, 10_500),
        id="seed/inside-the-0.1-band",
    ),
]


@pytest.mark.parametrize("case", CALC_CASES)
def test_external_metric_replicas(case: Calc) -> None:
    ready = case.replicas if case.ready == "all" else case.ready
    got = external_metric_replicas(
        MetricReading(case.values_milli, "" if case.values_milli is not None else "something went wrong"),
        _ext("qps", case.target, case.target_milli),
        spec_replicas=case.replicas,
        status_replicas=case.replicas if case.status is None else case.status,
        ready_pods=ready,
        tolerances=case.tolerances,
    )
    if isinstance(case.want, str):
        assert isinstance(got, MetricError), got
        assert got.reason == case.want
        assert "qps" in got.message  # the error names the metric it is about
        return
    assert isinstance(got, MetricProposal), got
    assert got.replicas == case.want
    if case.want_current_milli is not None:
        assert got.current_milli == case.want_current_milli


# =============================================================================================
# 2. Whole reconciles through decide()
# =============================================================================================


def _able(reason: str) -> tuple[str, bool, str]:
    return ("AbleToScale", True, reason)


def _limited(reason: str) -> tuple[str, bool, str]:
    return ("ScalingLimited", reason != "DesiredWithinRange", reason)


ACTIVE = ("ScalingActive", True, "ValidMetricFound")
WITHIN = _limited("DesiredWithinRange")
GOT_SCALE = _able("SucceededGetScale")
READY = _able("ReadyForNewScale")


@dataclass(frozen=True)
class Reconcile:
    min_replicas: int
    max_replicas: int
    spec_replicas: int
    metrics: tuple[tuple[MetricSpec, MetricReading], ...]
    want: int
    conditions: tuple[tuple[str, bool, str], ...]  # (type, status, reason), in upstream's order
    status_replicas: int | None = None  # defaults to spec_replicas
    ready_pods: int | Literal["all"] | None = "all"
    history: tuple[Recommendation, ...] = ()  # () = absent: decide() seeds it, as upstream
    behavior: Behavior | None = None
    factor: float = UPSTREAM_FACTOR
    scaled_to_zero: bool = False


def _value(target_milli: int, *levels: int, name: str = "qps") -> tuple[MetricSpec, MetricReading]:
    return _ext(name, VALUE, target_milli), MetricReading(levels)


def _average(target_milli: int, *levels: int, name: str = "qps") -> tuple[MetricSpec, MetricReading]:
    return _ext(name, AVERAGE, target_milli), MetricReading(levels)


def _failing(target: TargetType, target_milli: int, name: str = "qps") -> tuple[MetricSpec, MetricReading]:
    return _ext(name, target, target_milli), MetricReading.failed("something went wrong")


RECONCILE_CASES = [
    # --- External scale up/down, legacy path ---
    pytest.param(
        # min 2 max 6, 3 replicas, Value target 6666m, level 8600m -> 4
        Reconcile(2, 6, 3, (_value(6666, 8600),), 4, (READY, ACTIVE, WITHIN)),
        id=_id("TestScaleUpCMExternal", "value target"),
    ),
    pytest.param(
        # min 2 max 6, 3 replicas, AverageValue target 2222m, level 8600m -> 4
        Reconcile(2, 6, 3, (_average(2222, 8600),), 4, (READY, ACTIVE, WITHIN)),
        id=_id("TestScaleUpPerPodCMExternal", "average value target"),
    ),
    pytest.param(
        # min 2 max 6, 5 replicas, Value target 14400m, level 8600m, recommendations {} -> 3
        Reconcile(2, 6, 5, (_value(14400, 8600),), 3, (READY, ACTIVE, WITHIN), history=PRESENT_BUT_EMPTY),
        id=_id("TestScaleDownCMExternal", "value target"),
    ),
    pytest.param(
        # min 0 max 6, 5 replicas, Value target 14400m, level 0 -> 0
        Reconcile(0, 6, 5, (_value(14400, 0),), 0, (READY, ACTIVE, WITHIN), history=PRESENT_BUT_EMPTY),
        id=_id("TestScaleDownToZeroCMExternal", "value target"),
    ),
    pytest.param(
        # min 2 max 6, 5 replicas, AverageValue target 3000m, level 8600m -> 3
        Reconcile(2, 6, 5, (_average(3000, 8600),), 3, (READY, ACTIVE, WITHIN), history=PRESENT_BUT_EMPTY),
        id=_id("TestScaleDownPerPodCMExternal", "average value target"),
    ),
    pytest.param(
        # min 2 max 6, 4 replicas, Value target 8666m, level 8600m -> 4, ReadyForNewScale
        Reconcile(2, 6, 4, (_value(8666, 8600),), 4, (READY, ACTIVE, WITHIN)),
        id=_id("TestToleranceCMExternal", "value target"),
    ),
    pytest.param(
        # min 2 max 6, 4 replicas, AverageValue target 2200m, level 8600m -> 4, ReadyForNewScale
        Reconcile(2, 6, 4, (_average(2200, 8600),), 4, (READY, ACTIVE, WITHIN)),
        id=_id("TestTolerancePerPodCMExternal", "average value target"),
    ),
    # --- several metrics, some invalid ---
    pytest.param(
        # CPU 30% target at 40% on 3 pods (-> 4) plus an External metric whose read fails -> 4,
        # ScalingActive stays ValidMetricFound. External analogue of the CPU metric: 1200m / 300m.
        Reconcile(
            2, 6, 3, (_average(300, 1200, name="load"), _failing(VALUE, 100)), 4, (READY, ACTIVE, WITHIN)
        ),
        id=_id("TestScaleUpOneMetricEmpty", "external read fails, other metric scales up"),
    ),
    pytest.param(
        # CPU 50% target at 28% on 5 pods (-> 3) plus a failing External metric: no scale-down,
        # conditions [SucceededGetScale, ScalingActive=False FailedGetExternalMetric]
        Reconcile(
            2,
            6,
            5,
            (_average(500, 1400, name="load"), _failing(VALUE, 1000)),
            5,
            (GOT_SCALE, ("ScalingActive", False, "FailedGetExternalMetric")),
            history=PRESENT_BUT_EMPTY,
        ),
        id=_id("TestNoScaleDownOneMetricEmpty", "external read fails, other metric scales down"),
    ),
    pytest.param(
        # the same with an empty item list instead of a read error: still no scale-down
        Reconcile(
            2,
            6,
            5,
            (_average(500, 1400, name="load"), (_ext("qps", VALUE, 1000), MetricReading(()))),
            5,
            (GOT_SCALE, ("ScalingActive", False, "FailedGetExternalMetric")),
            history=PRESENT_BUT_EMPTY,
        ),
        id=_id("TestNoScaleDownOneMetricEmpty", "empty item list"),
    ),
    pytest.param(
        # min 1 max 100, 3 replicas, the only metric (External Value 300m) fails -> 3
        Reconcile(
            1,
            100,
            3,
            (_failing(VALUE, 300),),
            3,
            (GOT_SCALE, ("ScalingActive", False, "FailedGetExternalMetric")),
        ),
        id=_id("TestConditionFailedGetMetrics", "FailedGetExternalMetric"),
    ),
    # --- guards: current outside [min, max] or at 0; no metric is read (the reading fails on purpose) ---
    pytest.param(
        # min 3 max 5, 2 replicas -> 3, conditions [AbleToScale] only
        Reconcile(3, 5, 2, (_failing(AVERAGE, 900),), 3, (GOT_SCALE,)),
        id=_id("TestTooFewReplicas", "guard"),
    ),
    pytest.param(
        # min 3 max 5, 10 replicas -> 5
        Reconcile(3, 5, 10, (_failing(AVERAGE, 900),), 5, (GOT_SCALE,)),
        id=_id("TestTooManyReplicas", "guard"),
    ),
    pytest.param(
        # min 2 max 6, 1 replica, recent lastScaleTime -> 2 at once
        Reconcile(2, 6, 1, (_failing(AVERAGE, 900),), 2, (GOT_SCALE,)),
        id=_id("TestScaleUpRCImmediately", "guard"),
    ),
    pytest.param(
        # min 2 max 5, 6 replicas -> 5 at once
        Reconcile(2, 5, 6, (_failing(AVERAGE, 500),), 5, (GOT_SCALE,)),
        id=_id("TestScaleDownRCImmediately", "guard"),
    ),
    pytest.param(
        # min 3 max 5, 0 replicas -> paused: [SucceededGetScale, ScalingActive=False ScalingDisabled]
        Reconcile(
            3, 5, 0, (_failing(AVERAGE, 900),), 0, (GOT_SCALE, ("ScalingActive", False, "ScalingDisabled"))
        ),
        id=_id("TestZeroReplicas", "scaling disabled"),
    ),
    pytest.param(
        # min 1, workload manually at 0 (no ScaledToZero condition) -> paused
        Reconcile(
            1, 6, 0, (_failing(AVERAGE, 500),), 0, (GOT_SCALE, ("ScalingActive", False, "ScalingDisabled"))
        ),
        id=_id("TestManualScaleToZeroDisablesHPA", "min 1"),
    ),
    pytest.param(
        # min 0, at 0 without the ScaledToZero condition: paused even though metrics would scale up
        Reconcile(
            0,
            6,
            0,
            (_value(15000, 20000),),
            0,
            (GOT_SCALE, ("ScalingActive", False, "ScalingDisabled")),
            ready_pods=None,
        ),
        id=_id("TestScaleUpFromZeroWithoutCondition", "external analogue"),
    ),
    # --- scale from zero, after the HPA itself took the target to 0 (ScaledToZero=True) ---
    pytest.param(
        # min 0 max 6, 0 replicas, Value target 15, level 20 -> 2
        Reconcile(
            0, 6, 0, (_value(15000, 20000),), 2, (READY, ACTIVE, WITHIN), ready_pods=None, scaled_to_zero=True
        ),
        id=_id("TestScaleUpFromZeroCMObject", "external analogue"),
    ),
    pytest.param(
        # min 0 max 6, 0 replicas, Value target 1, level 1 -> 1 (tolerance ignored from zero)
        Reconcile(
            0, 6, 0, (_value(1000, 1000),), 1, (READY, ACTIVE, WITHIN), ready_pods=None, scaled_to_zero=True
        ),
        id=_id("TestScaleUpFromZeroIgnoresToleranceCMObject", "external analogue"),
    ),
    pytest.param(
        # HPAScaleToZero=true: scaled to 0 by the HPA, then minReplicas raised to 2; Value target 15,
        # level 10 (-> 1) -> 2 with [.., ValidMetricFound, ScalingLimited=True TooFewReplicas]
        Reconcile(
            2,
            6,
            0,
            (_value(15000, 10000),),
            2,
            (READY, ACTIVE, _limited("TooFewReplicas")),
            ready_pods=None,
            scaled_to_zero=True,
        ),
        id=_id("TestScaleUpFromZeroWhenMinReplicasIncreased", "HPAScaleToZero=true"),
    ),
    # --- min/max clamps, External analogues of the CPU tests ---
    pytest.param(
        # min 2 max 5, 3 replicas, usage 4.3% of a 90% target (-> 1) -> 2 TooFewReplicas
        Reconcile(
            2,
            5,
            3,
            (_average(900, 115),),
            2,
            (READY, ACTIVE, _limited("TooFewReplicas")),
            history=PRESENT_BUT_EMPTY,
        ),
        id=_id("TestMinReplicas", "external analogue"),
    ),
    pytest.param(
        # min 0 max 5, 3 replicas, usage 0 -> 0 DesiredWithinRange
        Reconcile(0, 5, 3, (_average(900, 0),), 0, (READY, ACTIVE, WITHIN), history=PRESENT_BUT_EMPTY),
        id=_id("TestZeroMinReplicasDesiredZero", "external analogue"),
    ),
    pytest.param(
        # min 2 max 5, 3 replicas, usage 0 -> 2 TooFewReplicas
        Reconcile(
            2,
            5,
            3,
            (_average(900, 0),),
            2,
            (READY, ACTIVE, _limited("TooFewReplicas")),
            history=PRESENT_BUT_EMPTY,
        ),
        id=_id("TestMinReplicasDesiredZero", "external analogue"),
    ),
    pytest.param(
        # min 2 max 5, 3 replicas, usage 616% of a 90% target (-> 21) -> 5 TooManyReplicas
        Reconcile(2, 5, 3, (_average(900, 18500),), 5, (READY, ACTIVE, _limited("TooManyReplicas"))),
        id=_id("TestMaxReplicas", "external analogue"),
    ),
    pytest.param(
        # behavior scaleUp Percent 700/60 s, min 1 max 100, 3 replicas, ratio 20 (-> 60) -> 24 ScaleUpLimit
        Reconcile(
            1,
            100,
            3,
            (_average(100, 6000),),
            24,
            (READY, ACTIVE, _limited("ScaleUpLimit")),
            behavior=Behavior(scale_up=_rules(percent=700, percent_period=60)),
        ),
        id=_id("TestUpscaleCap", "external analogue"),
    ),
    pytest.param(
        # the same with max 20: "would be 24 without maxReplicas" -> 20 TooManyReplicas
        Reconcile(
            1,
            20,
            3,
            (_average(100, 6000),),
            20,
            (READY, ACTIVE, _limited("TooManyReplicas")),
            behavior=Behavior(scale_up=_rules(percent=700, percent_period=60)),
        ),
        id=_id("TestUpscaleCapGreaterThanMaxReplicas", "external analogue"),
    ),
    # --- legacy downscale stabilization ---
    pytest.param(
        # min 1 max 5, 4 replicas, usage 50% (-> 2), recommendations {10 @ -10 min, 4 @ -1 min}
        # -> 4 ScaleDownStabilized
        Reconcile(
            1,
            5,
            4,
            (_average(100, 150),),
            4,
            (_able("ScaleDownStabilized"), ACTIVE, WITHIN),
            history=_recs((10, 600), (4, 60)),
        ),
        id=_id("TestStabilizeDownscale", "external analogue"),
    ),
    pytest.param(
        # min 2 max 6, 5 replicas, metrics say 3, no history yet (seeded with 5) -> 5
        Reconcile(2, 6, 5, (_average(500, 1400),), 5, (_able("ScaleDownStabilized"), ACTIVE, WITHIN)),
        id=_id("TestScaleDownStabilizeInitialSize", "external analogue"),
    ),
    # --- TestConfigurableTolerance (master), External analogue of the CPU usage ratio ---
    pytest.param(
        # scaleUp tolerance 1%, usage 102% on 3 replicas -> 4
        Reconcile(
            1,
            5,
            3,
            (_average(1000, 3060),),
            4,
            (READY, ACTIVE, WITHIN),
            behavior=Behavior(scale_up=default_scale_up(tolerance=0.01)),
        ),
        id=_id("TestConfigurableTolerance", "Scaling up because of a 1% configurable tolerance"),
    ),
    pytest.param(
        # scaleDown tolerance 90%, usage 30% -> 3
        Reconcile(
            1,
            5,
            3,
            (_average(1000, 900),),
            3,
            (READY, ACTIVE, WITHIN),
            behavior=Behavior(scale_down=default_scale_down(tolerance=0.9)),
        ),
        id=_id("TestConfigurableTolerance", "No scale-down because of a 90% configurable tolerance"),
    ),
    pytest.param(
        # no behavior, usage 102% -> 3 (default 10% band)
        Reconcile(1, 5, 3, (_average(1000, 3060),), 3, (READY, ACTIVE, WITHIN)),
        id=_id("TestConfigurableTolerance", "No scaling because of the large default tolerance"),
    ),
    # --- the seed's worked examples ---
    pytest.param(
        # 4 replicas, average queue 30, target 10 -> 12 (upstream test factor: cap 32)
        Reconcile(1, 20, 4, (_average(10_000, 120_000),), 12, (READY, ACTIVE, WITHIN)),
        id="seed/4-replicas-average-queue-30-target-10",
    ),
    pytest.param(
        # the same with the production factor 2: the legacy cap max(2 x 4, 4) = 8 -> 8 ScaleUpLimit
        Reconcile(
            1,
            20,
            4,
            (_average(10_000, 120_000),),
            8,
            (READY, ACTIVE, _limited("ScaleUpLimit")),
            factor=PRODUCTION_FACTOR,
        ),
        id="seed/4-replicas-average-queue-30-target-10-production-factor-2",
    ),
    pytest.param(
        # average 10.5 against 10: inside the 0.1 band -> 4
        Reconcile(1, 20, 4, (_average(10_000, 42_000),), 4, (READY, ACTIVE, WITHIN)),
        id="seed/inside-the-0.1-band",
    ),
]


def _spec(case: Reconcile) -> AutoscalerSpec:
    return AutoscalerSpec(
        max_replicas=case.max_replicas,
        metrics=tuple(metric for metric, _ in case.metrics),
        min_replicas=case.min_replicas,
        behavior=case.behavior,
        legacy_scale_up_factor=case.factor,
    )


def _observation(case: Reconcile) -> Observation:
    status = case.spec_replicas if case.status_replicas is None else case.status_replicas
    return Observation(
        spec_replicas=case.spec_replicas,
        status_replicas=status,
        ready_pods=status if case.ready_pods == "all" else case.ready_pods,
        metrics={metric.name: reading for metric, reading in case.metrics},
    )


def _conditions(decision: Decision) -> tuple[tuple[str, bool, str], ...]:
    return tuple((c.type, c.status, c.reason) for c in decision.conditions)


@pytest.mark.parametrize("case", RECONCILE_CASES)
def test_reconcile(case: Reconcile) -> None:
    state = PolicyState(recommendations=case.history, scaled_to_zero=case.scaled_to_zero)
    decision, _ = decide(_spec(case), state, _observation(case), NOW)
    assert (decision.desired_replicas, _conditions(decision)) == (case.want, case.conditions)


def test_seed_scale_down_held_by_300s_window() -> None:
    """4 replicas, average 5 against 10 (raw 2), no history yet: held at 4 by the seed through the
    300 s window, then released. The seed is recorded an instant before the first decision
    (upstream's recordInitialRecommendation runs before the time.Now() its stabilization reads), so
    300 s after that decision it is just older than the window, while a recommendation exactly
    300 s old still counts (age <= window on the legacy path)."""
    metric, reading = _average(10_000, 20_000)
    spec = AutoscalerSpec(max_replicas=20, metrics=(metric,), legacy_scale_up_factor=UPSTREAM_FACTOR)
    obs = Observation(spec_replicas=4, status_replicas=4, ready_pods=4, metrics={metric.name: reading})
    state = PolicyState()
    seen = []
    for t in (0.0, 150.0, 299.5, 300.0):
        decision, state = decide(spec, state, obs, NOW + t)
        able = decision.condition("AbleToScale")
        seen.append((t, decision.desired_replicas, able.reason if able else None))
    assert seen == [
        (0.0, 4, "ScaleDownStabilized"),
        (150.0, 4, "ScaleDownStabilized"),
        (299.5, 4, "ScaleDownStabilized"),
        (300.0, 2, "ReadyForNewScale"),
    ]
    assert stabilize_legacy((Recommendation(NOW - 300, 4),), 2, NOW, 300)[0] == 4


@pytest.mark.parametrize(
    "behavior",
    [
        pytest.param(None, id="legacy, --horizontal-pod-autoscaler-downscale-stabilization=0"),
        pytest.param(
            Behavior(scale_down=default_scale_down(stabilization_window_s=0)),
            id="behavior scaleDown window 0",
        ),
    ],
)
def test_seed_never_holds_a_0s_window(behavior: Behavior | None) -> None:
    """With a 0 s window upstream's cutoff (time.Now() - 0) falls strictly after the seed: first
    sight scales down at once, and the seed is the old sample the recommendation overwrites."""
    metric, reading = _average(10_000, 20_000)
    spec = AutoscalerSpec(
        max_replicas=20,
        metrics=(metric,),
        behavior=behavior,
        downscale_stabilization_s=0,
        legacy_scale_up_factor=UPSTREAM_FACTOR,
    )
    obs = Observation(spec_replicas=4, status_replicas=4, ready_pods=4, metrics={metric.name: reading})
    decision, state = decide(spec, PolicyState(), obs, NOW)
    assert decision.desired_replicas == 2
    assert state.recommendations == (Recommendation(NOW, 2),)


# =============================================================================================
# 3. Legacy normalisation: convertDesiredReplicasWithRules and stabilizeRecommendation
# =============================================================================================


@dataclass(frozen=True)
class Convert:
    current: int
    desired: int
    min_replicas: int
    max_replicas: int
    want: int
    reason: str
    factor: float = UPSTREAM_FACTOR


CONVERT_CASES = [
    pytest.param(
        Convert(5, 7, 3, 8, 7, "DesiredWithinRange"),
        id=_id("TestConvertDesiredReplicasWithRules", "prenormalized desired replicas within range"),
    ),
    pytest.param(
        Convert(3, 1, 2, 8, 2, "TooFewReplicas"),
        id=_id("TestConvertDesiredReplicasWithRules", "prenormalized desired replicas < minReplicas"),
    ),
    pytest.param(
        Convert(1, 0, 0, 10, 0, "DesiredWithinRange"),
        id=_id("TestConvertDesiredReplicasWithRules", "prenormalized desired zeroed replicas within range"),
    ),
    pytest.param(
        Convert(20, 1000, 1, 10, 10, "TooManyReplicas"),
        id=_id(
            "TestConvertDesiredReplicasWithRules",
            "maxReplicas is the limit because maxReplicas < scaleUpLimit",
        ),
    ),
    pytest.param(
        # calculateScaleUpLimit(3) = max(8 x 3, 4) = 24
        Convert(3, 1000, 1, 2000, 24, "ScaleUpLimit"),
        id=_id(
            "TestConvertDesiredReplicasWithRules",
            "scaleUpLimit is the limit because scaleUpLimit < maxReplicas",
        ),
    ),
    pytest.param(
        # production factor 2: max(2 x 3, 4) = 6
        Convert(3, 1000, 1, 2000, 6, "ScaleUpLimit", PRODUCTION_FACTOR),
        id=_id("TestConvertDesiredReplicasWithRules", "scaleUpLimit < maxReplicas, production factor 2"),
    ),
    pytest.param(
        # production factor 2 from 1 replica: the minimum of 4 wins over 2 x 1
        Convert(1, 1000, 1, 2000, 4, "ScaleUpLimit", PRODUCTION_FACTOR),
        id=_id("TestConvertDesiredReplicasWithRules", "scaleUpLimit minimum 4, production factor 2"),
    ),
    pytest.param(
        # production factor 2, 10 -> 20 allowed, 50 wanted
        Convert(10, 50, 1, 1000, 20, "ScaleUpLimit", PRODUCTION_FACTOR),
        id=_id("TestConvertDesiredReplicasWithRules", "scaleUpLimit doubles, production factor 2"),
    ),
]


@pytest.mark.parametrize("case", CONVERT_CASES)
def test_convert_desired_replicas_with_rules(case: Convert) -> None:
    replicas, condition = limit_legacy(
        case.desired, case.current, case.min_replicas, case.max_replicas, case.factor
    )
    assert (replicas, condition.reason, condition.status) == (
        case.want,
        case.reason,
        case.reason != "DesiredWithinRange",
    )


def _row(param: Any) -> Any:
    """The case object inside a pytest.param (ParameterSet.values is typed as a tuple of object)."""
    return param.values[0]


def _current_in_bounds(cases: list[Any]) -> list[Any]:
    """Cases whose current count is within [min, max]; outside it decide() takes the guard
    before normalisation, which upstream's unit tests of the helpers bypass."""
    return [p for p in cases if _row(p).min_replicas <= _row(p).current <= _row(p).max_replicas]


def _driving_metric(current: int, raw: int) -> tuple[MetricSpec, MetricReading]:
    """One AverageValue metric whose raw recommendation is `raw` at `current` status replicas."""
    if raw != current and current and abs(raw / current - 1) <= DEFAULT_TOL[1]:
        raise ValueError(f"raw {raw} at {current} replicas is inside the tolerance band; pick other numbers")
    return _average(1000, raw * 1000)


@pytest.mark.parametrize("case", _current_in_bounds(CONVERT_CASES))
def test_convert_desired_replicas_with_rules_through_decide(case: Convert) -> None:
    """The same table through a whole reconcile with no stabilization in play (a current outside
    [min, max] is excluded: decide() takes the guard there, before normalisation)."""
    recon = Reconcile(
        case.min_replicas,
        case.max_replicas,
        case.current,
        (_driving_metric(case.current, case.desired),),
        case.want,
        (READY, ACTIVE, _limited(case.reason)),
        history=PRESENT_BUT_EMPTY,
        factor=case.factor,
    )
    decision, _ = decide(_spec(recon), PolicyState(recommendations=recon.history), _observation(recon), NOW)
    assert (decision.desired_replicas, _conditions(decision)) == (recon.want, recon.conditions)


@dataclass(frozen=True)
class Stabilize:
    history: tuple[Recommendation, ...]
    raw: int
    want: int
    want_log: tuple[int, ...] | None  # the stored raw recommendations, in slot order
    reason: str  # AbleToScale reason horizontal.go sets for this outcome
    current: int = 0  # the behavior path only
    up_window_s: int = 0
    down_window_s: int = 0


# TestNormalizeDesiredReplicas: stabilizeRecommendation with a 5 min window. Upstream asserts the
# log length; the contents follow from "the raw value overwrites the last expired slot".
NORMALIZE_LEGACY = [
    pytest.param(
        Stabilize(PRESENT_BUT_EMPTY, 5, 5, (5,), "ReadyForNewScale"),
        id=_id("TestNormalizeDesiredReplicas", "empty log"),
    ),
    pytest.param(
        Stabilize(_recs((4, 120), (5, 60)), 3, 5, (4, 5, 3), "ScaleDownStabilized"),
        id=_id("TestNormalizeDesiredReplicas", "stabilize"),
    ),
    pytest.param(
        Stabilize(_recs((1, 120), (2, 60)), 3, 3, (1, 2, 3), "ReadyForNewScale"),
        id=_id("TestNormalizeDesiredReplicas", "no stabilize"),
    ),
    pytest.param(
        Stabilize(_recs((10, 600), (9, 540)), 3, 3, (10, 3), "ReadyForNewScale"),
        id=_id("TestNormalizeDesiredReplicas", "no stabilize - old recommendations"),
    ),
    pytest.param(
        Stabilize(_recs((10, 600), (4, 60), (5, 120), (9, 540)), 3, 5, (10, 4, 5, 3), "ScaleDownStabilized"),
        id=_id("TestNormalizeDesiredReplicas", "stabilize - old recommendations"),
    ),
]


@pytest.mark.parametrize("case", NORMALIZE_LEGACY)
def test_normalize_desired_replicas(case: Stabilize) -> None:
    stabilized, _, condition = stabilize_legacy(case.history, case.raw, NOW, 300)
    assert (stabilized, condition.reason) == (case.want, case.reason)


def _with_log(cases: list[Any]) -> list[Any]:
    """The cases whose stored log upstream checks."""
    return [p for p in cases if _row(p).want_log is not None]


@pytest.mark.parametrize("case", _with_log(NORMALIZE_LEGACY))
def test_normalize_desired_replicas_log(case: Stabilize) -> None:
    _, history, _ = stabilize_legacy(case.history, case.raw, NOW, 300)
    assert tuple(r.replicas for r in history) == case.want_log


# =============================================================================================
# 4. Behavior normalisation: stabilizeRecommendationWithBehaviors
# =============================================================================================

# TestNormalizeDesiredReplicasWithBehavior. The test's rules carry only the windows; an unset
# window is 0 there (the struct field's zero value), not the API default.
NORMALIZE_BEHAVIOR = [
    pytest.param(
        Stabilize(PRESENT_BUT_EMPTY, 5, 5, (5,), "ReadyForNewScale", current=100),
        id=_id("TestNormalizeDesiredReplicasWithBehavior", "empty recommendations for scaling down"),
    ),
    pytest.param(
        Stabilize(
            _recs((4, 120), (5, 60)), 3, 5, (4, 5, 3), "ScaleDownStabilized", current=100, down_window_s=180
        ),
        id=_id("TestNormalizeDesiredReplicasWithBehavior", "simple scale down stabilization"),
    ),
    pytest.param(
        Stabilize(_recs((4, 120), (5, 60)), 7, 4, (4, 5, 7), "ScaleUpStabilized", current=1, up_window_s=300),
        id=_id("TestNormalizeDesiredReplicasWithBehavior", "simple scale up stabilization"),
    ),
    pytest.param(
        Stabilize(
            _recs((1, 120), (2, 60)), 3, 3, (1, 2, 3), "ReadyForNewScale", current=100, up_window_s=300
        ),
        id=_id("TestNormalizeDesiredReplicasWithBehavior", "no scale down stabilization"),
    ),
    pytest.param(
        Stabilize(
            _recs((4, 120), (5, 60)), 3, 3, (4, 5, 3), "ReadyForNewScale", current=1, down_window_s=300
        ),
        id=_id("TestNormalizeDesiredReplicasWithBehavior", "no scale up stabilization"),
    ),
    pytest.param(
        Stabilize(_recs((10, 600), (9, 540)), 3, 3, (10, 3), "ReadyForNewScale", current=100),
        id=_id(
            "TestNormalizeDesiredReplicasWithBehavior",
            "no scale down stabilization, reuse recommendation element",
        ),
    ),
    pytest.param(
        Stabilize(_recs((10, 600), (9, 540)), 100, 100, (10, 100), "ReadyForNewScale", current=1),
        id=_id(
            "TestNormalizeDesiredReplicasWithBehavior",
            "no scale up stabilization, reuse recommendation element",
        ),
    ),
    pytest.param(
        Stabilize(
            _recs((10, 600), (4, 60), (5, 120), (9, 540)),
            3,
            5,
            (10, 4, 5, 3),
            "ScaleDownStabilized",
            current=100,
            down_window_s=180,
        ),
        id=_id(
            "TestNormalizeDesiredReplicasWithBehavior",
            "scale down stabilization, reuse one of obsolete recommendation element",
        ),
    ),
    pytest.param(
        # only the first entry is older than both windows (300 s up, 0 s down), so it is the slot reused
        Stabilize(
            _recs((10, 6000), (6, 60), (5, 120), (9, 180)),
            100,
            5,
            (100, 6, 5, 9),
            "ScaleUpStabilized",
            current=1,
            up_window_s=300,
        ),
        id=_id(
            "TestNormalizeDesiredReplicasWithBehavior",
            "scale up stabilization, reuse one of obsolete recommendation element",
        ),
    ),
    pytest.param(
        # upstream keeps entries After(now - window): one exactly a window old no longer holds
        Stabilize(_recs((5, 180)), 3, 3, None, "ReadyForNewScale", current=100, down_window_s=180),
        id=_id("stabilizeRecommendationWithBehaviors", "entry exactly one window old is ignored"),
    ),
    pytest.param(
        Stabilize(
            _recs((2, 6000), (3, 180)),
            1,
            2,
            None,
            "ScaleDownStabilized",
            current=2,
            up_window_s=300,
            down_window_s=300,
        ),
        id=_id(
            "TestNormalizeDesiredReplicasWithBehavior",
            "scale up and down stabilization, do not scale up when prenormalized rec goes down",
        ),
    ),
    pytest.param(
        Stabilize(
            _recs((2, 6000), (1, 180)),
            3,
            2,
            None,
            "ScaleUpStabilized",
            current=2,
            up_window_s=300,
            down_window_s=300,
        ),
        id=_id(
            "TestNormalizeDesiredReplicasWithBehavior",
            "scale up and down stabilization, do not scale down when prenormalized rec goes up",
        ),
    ),
]


def _windows_only(case: Stabilize) -> tuple[ScalingRules, ScalingRules]:
    return (
        ScalingRules(case.up_window_s, SelectPolicy.MAX, ()),
        ScalingRules(case.down_window_s, SelectPolicy.MAX, ()),
    )


@pytest.mark.parametrize("case", NORMALIZE_BEHAVIOR)
def test_normalize_desired_replicas_with_behavior(case: Stabilize) -> None:
    up, down = _windows_only(case)
    stabilized, _, condition = stabilize_behavior(case.history, case.raw, case.current, NOW, up, down)
    assert (stabilized, condition.reason) == (case.want, case.reason)


@pytest.mark.parametrize("case", _with_log(NORMALIZE_BEHAVIOR))
def test_normalize_desired_replicas_with_behavior_log(case: Stabilize) -> None:
    up, down = _windows_only(case)
    _, history, _ = stabilize_behavior(case.history, case.raw, case.current, NOW, up, down)
    assert tuple(r.replicas for r in history) == case.want_log


# =============================================================================================
# 5. Behavior rate limits: convertDesiredReplicasWithBehaviorRate (TestScalingWithRules)
# =============================================================================================


@dataclass(frozen=True)
class Rate:
    current: int
    desired: int  # prenormalizedDesiredReplicas
    min_replicas: int
    max_replicas: int
    want: int
    reason: str
    up: ScalingRules | None = None  # None: the API defaults (GenerateHPAScaleUpRules(nil))
    down: ScalingRules | None = None
    up_events: tuple[ScaleEvent, ...] = field(default=())
    down_events: tuple[ScaleEvent, ...] = field(default=())


def _swr(case: str) -> str:
    return _id("TestScalingWithRules", case)


UP_1_5_9 = _uniform([1, 5, 9], 120)  # ages 100, 60, 20 s: 15 replicas in 120 s, 9 in 60 s
MIXED_4_ROUNDS = _uniform([8, 12, 9, 11], 120)  # ages 105, 75, 45, 15 s

SCALING_WITH_RULES = [
    pytest.param(
        Rate(5, 7, 3, 8, 7, "DesiredWithinRange"), id=_swr("prenormalized desired replicas within range")
    ),
    pytest.param(
        Rate(3, 1, 2, 8, 2, "TooFewReplicas"), id=_swr("prenormalized desired replicas < minReplicas")
    ),
    pytest.param(
        Rate(1, 0, 0, 10, 0, "DesiredWithinRange"),
        id=_swr("prenormalized desired replicas within range when minReplicas is 0"),
    ),
    pytest.param(
        Rate(20, 1000, 1, 10, 10, "TooManyReplicas"),
        id=_swr("maxReplicas is the limit because maxReplicas < scaleUpLimit"),
    ),
    pytest.param(
        # default scaleUp: max(100 + 4, 100 x 2) = 200 > maxReplicas 150
        Rate(100, 1000, 100, 150, 150, "TooManyReplicas"),
        id=_swr("desired replica count is more than the maximum replica count"),
    ),
    pytest.param(
        # Percent 1 %: ceil(3 x 1.01) = 4
        Rate(3, 1000, 1, 2000, 4, "ScaleUpLimit", up=_rules(0, 0, 1, 60)),
        id=_swr("scaleUpLimit is the limit because scaleUpLimit < maxReplicas with user policies"),
    ),
    pytest.param(
        # upstream marks this case testThis and its loop returns before asserting; the arithmetic
        # (1000 - 20 pods) is what horizontal.go computes
        Rate(1000, 3, 3, 2000, 980, "ScaleDownLimit", down=_rules(20, 60)),
        id=_swr(
            "scaleDownLimit is the limit because scaleDownLimit > minReplicas with user defined policies"
        ),
    ),
    pytest.param(Rate(10, 50, 1, 1000, 20, "ScaleUpLimit"), id=_swr("scaleUp with default behavior")),
    pytest.param(
        Rate(10, 500, 1, 1000, 110, "ScaleUpLimit", up=_rules(100, 60, 100, 60)),
        id=_swr("scaleUp with pods policy larger than percent policy"),
    ),
    pytest.param(
        Rate(10, 500, 1, 1000, 20, "ScaleUpLimit", up=_rules(2, 60, 100, 60)),
        id=_swr("scaleUp with percent policy larger than pods policy"),
    ),
    pytest.param(
        Rate(10, 50, 1, 1000, 50, "DesiredWithinRange", up=_rules(100, 60)),
        id=_swr("scaleUp with spec MaxReplicas limitation with large pod policy"),
    ),
    pytest.param(
        Rate(10, 50, 1, 1000, 50, "DesiredWithinRange", up=_rules(10000, 60)),
        id=_swr("scaleUp with spec MaxReplicas limitation with large percent policy"),
    ),
    pytest.param(
        Rate(10, 50, 1, 1000, 40, "ScaleUpLimit", up=_rules(30, 60)),
        id=_swr("scaleUp with pod policy limitation"),
    ),
    pytest.param(
        Rate(10, 50, 1, 1000, 30, "ScaleUpLimit", up=_rules(0, 0, 200, 60)),
        id=_swr("scaleUp with percent policy limitation"),
    ),
    pytest.param(
        # Max on the way down picks the lowest floor: min(100 - 20, trunc(100 x 0.99)) = 80
        Rate(100, 2, 1, 1000, 80, "ScaleDownLimit", down=_rules(20, 60, 1, 60, 300)),
        id=_swr("scaleDown with percent policy larger than pod policy"),
    ),
    pytest.param(
        Rate(100, 2, 1, 1000, 98, "ScaleDownLimit", down=_rules(2, 60, 1, 60, 300)),
        id=_swr("scaleDown with pod policy larger than percent policy"),
    ),
    pytest.param(
        Rate(10, 0, 1, 1000, 1, "TooFewReplicas", down=_rules(100, 60, 0, 0, 300)),
        id=_swr("scaleDown with spec MinReplicas=nil limitation with large pod policy"),
    ),
    pytest.param(
        Rate(10, 0, 1, 1000, 1, "TooFewReplicas", down=_rules(100, 60, 0, 0, 300)),
        id=_swr("scaleDown with spec MinReplicas limitation with large pod policy"),
    ),
    pytest.param(
        Rate(10, 2, 5, 1000, 5, "TooFewReplicas", down=_rules(0, 0, 100, 60, 300)),
        id=_swr("scaleDown with spec MinReplicas limitation with large percent policy"),
    ),
    pytest.param(
        Rate(10, 2, 1, 1000, 5, "ScaleDownLimit", down=_rules(5, 60, 0, 0, 300)),
        id=_swr("scaleDown with pod policy limitation"),
    ),
    pytest.param(
        Rate(10, 5, 1, 1000, 5, "DesiredWithinRange", down=_rules(0, 0, 50, 60, 300)),
        id=_swr("scaleDown with percent policy limitation"),
    ),
    pytest.param(
        # 9 added in the last 60 s: 100 - 9 + 300 = 391 > maxReplicas 200
        Rate(100, 500, 1, 200, 200, "TooManyReplicas", up=_rules(300, 60), up_events=UP_1_5_9),
        id=_swr("scaleUp with spec MaxReplicas limitation with large pod policy and events"),
    ),
    pytest.param(
        Rate(100, 500, 1, 200, 200, "TooManyReplicas", up=_rules(0, 0, 10000, 60), up_events=UP_1_5_9),
        id=_swr("scaleUp with spec MaxReplicas limitation with large percent policy and events"),
    ),
    pytest.param(
        # 120 s ago there were 100 - 15 = 85; 85 + 5 = 90 < 100 current: stay, never go down
        Rate(100, 500, 1, 1000, 100, "ScaleUpLimit", up=_rules(5, 120), up_events=UP_1_5_9),
        id=_swr(
            "scaleUp with currentReplicas limitation with rate.PeriodSeconds "
            "with a lot of recent scale up events"
        ),
    ),
    pytest.param(
        # 100 - 15 + 150
        Rate(100, 500, 1, 1000, 235, "ScaleUpLimit", up=_rules(150, 120), up_events=UP_1_5_9),
        id=_swr("scaleUp with pod policy and previous scale up events"),
    ),
    pytest.param(
        # (100 - 15) x 3
        Rate(100, 500, 1, 1000, 255, "ScaleUpLimit", up=_rules(0, 0, 200, 120), up_events=UP_1_5_9),
        id=_swr("scaleUp with percent policy and previous scale up events"),
    ),
    pytest.param(
        # period start 6 - 4 + 2 = 4; 4 x (1 + 300 %) = 16
        Rate(
            6,
            24,
            1,
            1000,
            16,
            "ScaleUpLimit",
            up=_rules(0, 0, 300, 300),
            up_events=_uniform([4], 120),
            down_events=_uniform([2], 120),
        ),
        id=_swr("scaleUp with percent policy and previous scale up and down events"),
    ),
    pytest.param(
        # default scaleDown is Percent 100 / 15 s: none of the events is in its period
        Rate(10, 5, 1, 1000, 5, "DesiredWithinRange", down_events=UP_1_5_9),
        id=_swr("scaleDown with default policy and previous events"),
    ),
    pytest.param(
        Rate(100, 0, 1, 1000, 1, "TooFewReplicas", down=_rules(115, 120, 0, 0, 300), down_events=UP_1_5_9),
        id=_swr("scaleDown with spec MinReplicas=nil limitation with large pod policy and previous events"),
    ),
    pytest.param(
        Rate(100, 0, 5, 1000, 5, "TooFewReplicas", down=_rules(130, 120, 0, 0, 300), down_events=UP_1_5_9),
        id=_swr("scaleDown with spec MinReplicas limitation with large pod policy and previous events"),
    ),
    pytest.param(
        # 100 % removal is always to 0, so minReplicas limits
        Rate(100, 2, 5, 1000, 5, "TooFewReplicas", down=_rules(0, 0, 100, 120, 300), down_events=UP_1_5_9),
        id=_swr("scaleDown with spec MinReplicas limitation with large percent policy and previous events"),
    ),
    pytest.param(
        # 100 + 15 - 5 = 110 > 100 current: stay
        Rate(100, 2, 1, 1000, 100, "ScaleDownLimit", down=_rules(5, 120, 0, 0, 300), down_events=UP_1_5_9),
        id=_swr("scaleDown with pod policy limitation and previous events"),
    ),
    pytest.param(
        # (100 + 12) x 50 %
        Rate(
            100,
            0,
            1,
            1000,
            56,
            "ScaleDownLimit",
            down=_rules(0, 0, 50, 120, 300),
            down_events=_uniform([2, 4, 6], 120),
        ),
        id=_swr("scaleDown with percent policy limitation and previous events"),
    ),
    pytest.param(
        # period start 10 - 2 + 4 = 12; trunc(12 x 0.5) = 6
        Rate(
            10,
            1,
            1,
            1000,
            6,
            "ScaleDownLimit",
            down=_rules(0, 0, 50, 180),
            up_events=_uniform([2], 120),
            down_events=_uniform([4], 120),
        ),
        id=_swr("scaleDown with percent policy and previous scale up and down events"),
    ),
    pytest.param(
        # (100 + 30) x 0.9 = 117 > 100 current: stay
        Rate(
            100,
            0,
            1,
            1000,
            100,
            "ScaleDownLimit",
            down=_rules(0, 0, 10, 120, 300),
            down_events=_uniform([10, 10, 10], 120),
        ),
        id=_swr("scaleDown with previous events preventing further scale down"),
    ),
    pytest.param(
        # (10 + 30) x (1 - 1000 %) = -360: the metrics' 5 stands
        Rate(
            10,
            5,
            1,
            1000,
            5,
            "DesiredWithinRange",
            down=_rules(0, 0, 1000, 120, 300),
            down_events=_uniform([10, 10, 10], 120),
        ),
        id=_swr("scaleDown with with previous events still allowing more scale down"),
    ),
    pytest.param(
        Rate(100, 200, 1, 1000, 200, "DesiredWithinRange", up=_rules(1000, 60), up_events=MIXED_4_ROUNDS),
        id=_swr("check 'outdated' flag for events for one behavior for up"),
    ),
    pytest.param(
        Rate(
            100,
            200,
            1,
            1000,
            200,
            "DesiredWithinRange",
            up=_rules(1000, 120, 100, 60),
            up_events=MIXED_4_ROUNDS,
        ),
        id=_swr(
            "check that events were not marked 'outdated' for two different policies in the behavior for up"
        ),
    ),
    pytest.param(
        Rate(
            100,
            200,
            1,
            1000,
            200,
            "DesiredWithinRange",
            up=_rules(1000, 30, 100, 60),
            up_events=MIXED_4_ROUNDS,
        ),
        id=_swr("check that events were marked 'outdated' for two different policies in the behavior for up"),
    ),
    pytest.param(
        Rate(
            100,
            5,
            1,
            1000,
            5,
            "DesiredWithinRange",
            down=_rules(1000, 60, 0, 0, 300),
            down_events=MIXED_4_ROUNDS,
        ),
        id=_swr("check 'outdated' flag for events for one behavior for down"),
    ),
    pytest.param(
        Rate(
            100,
            5,
            1,
            1000,
            5,
            "DesiredWithinRange",
            down=_rules(1000, 120, 100, 60, 300),
            down_events=MIXED_4_ROUNDS,
        ),
        id=_swr(
            "check that events were not marked 'outdated' for two different policies in the behavior for down"
        ),
    ),
    pytest.param(
        Rate(
            100,
            5,
            1,
            1000,
            5,
            "DesiredWithinRange",
            down=_rules(1000, 30, 100, 60, 300),
            down_events=MIXED_4_ROUNDS,
        ),
        id=_swr(
            "check that events were marked 'outdated' for two different policies in the behavior for down"
        ),
    ),
]


def _behavior(case: Rate) -> Behavior:
    return Behavior(
        scale_up=case.up if case.up is not None else default_scale_up(),
        scale_down=case.down if case.down is not None else default_scale_down(),
    )


@pytest.mark.parametrize("case", SCALING_WITH_RULES)
def test_scaling_with_rules(case: Rate) -> None:
    behavior = _behavior(case)
    replicas, condition = limit_with_behavior(
        case.desired,
        case.current,
        case.min_replicas,
        case.max_replicas,
        behavior.scale_up,
        behavior.scale_down,
        case.up_events,
        case.down_events,
        NOW,
    )
    assert (replicas, condition.reason, condition.status) == (
        case.want,
        case.reason,
        case.reason != "DesiredWithinRange",
    )


@pytest.mark.parametrize(
    "case",
    _current_in_bounds(SCALING_WITH_RULES),
)
def test_scaling_with_rules_through_decide(case: Rate) -> None:
    """The same table through a whole reconcile: one metric whose raw recommendation is the
    prenormalized count, the events in the state and no recommendation inside any window."""
    recon = Reconcile(
        case.min_replicas,
        case.max_replicas,
        case.current,
        (_driving_metric(case.current, case.desired),),
        case.want,
        (READY, ACTIVE, _limited(case.reason)),
        behavior=_behavior(case),
    )
    state = PolicyState(
        recommendations=PRESENT_BUT_EMPTY, scale_up_events=case.up_events, scale_down_events=case.down_events
    )
    decision, _ = decide(_spec(recon), state, _observation(recon), NOW)
    assert (decision.desired_replicas, _conditions(decision)) == (recon.want, recon.conditions)


MIN_CHANGE = (RatePolicy(PODS, 2, 60), RatePolicy(PERCENT, 50, 60))


@pytest.mark.parametrize(
    ("direction", "current", "want"),
    [
        # selectPolicy Min: min(1 + 2, ceil(1 x 1.5)) = 2
        pytest.param("up", 1, 2, id="TestCalculateScaleUpLimitWithScalingRules"),
        # selectPolicy Min on the way down keeps the highest floor: max(5 - 2, trunc(5 x 0.5)) = 3
        pytest.param("down", 5, 3, id="TestCalculateScaleDownLimitWithBehaviors"),
    ],
)
def test_calculate_limit_with_min_select_policy(direction: str, current: int, want: int) -> None:
    rules = ScalingRules(300, SelectPolicy.MIN, MIN_CHANGE)
    limit = scale_up_limit if direction == "up" else scale_down_limit
    assert limit(current, (), (), rules, NOW) == want


# =============================================================================================
# 6. Scale events: storeScaleEvent and getReplicasChangePerPeriod (TestStoreScaleEvents)
# =============================================================================================


@dataclass(frozen=True)
class Store:
    previous: tuple[tuple[int, float], ...]  # (change, age in seconds)
    rules: ScalingRules | None  # None: no behavior, nothing is stored
    want: tuple[int, ...]  # the changes stored after a rescale of 5 replicas, in slot order
    want_change_60s: int  # getReplicasChangePerPeriod(60, previous)


STORE_CASES = [
    pytest.param(
        Store((), None, (), 0), id=_id("TestStoreScaleEvents", "empty entries with default behavior")
    ),
    pytest.param(
        Store((), _rules(10, 60, 100, 60), (5,), 0),
        id=_id("TestStoreScaleEvents", "empty entries with two-policy-behavior"),
    ),
    pytest.param(
        Store(((7, 61),), None, (7,), 0),
        id=_id("TestStoreScaleEvents", "one outdated entry to be kept untouched without behavior"),
    ),
    pytest.param(
        Store(((7, 61),), _rules(10, 60, 100, 60), (5,), 0),
        id=_id("TestStoreScaleEvents", "one outdated entry to be replaced with behavior"),
    ),
    pytest.param(
        Store(((7, 58),), _rules(10, 60, 100, 60), (7, 5), 7),
        id=_id("TestStoreScaleEvents", "one actual entry to be not touched with behavior"),
    ),
    pytest.param(
        Store(((7, 61), (6, 59)), _rules(10, 60), (5, 6), 6),
        id=_id("TestStoreScaleEvents", "two entries, one of them to be replaced"),
    ),
    pytest.param(
        # longest period 60 s: both 61 s old events are outdated; upstream overwrites the last one
        # and keeps the other, still counted by a policy of the other direction with a longer period
        Store(((8, 29), (6, 59), (7, 61), (9, 61)), _rules(10, 60, 100, 30), (8, 6, 7, 5), 14),
        id=_id("TestStoreScaleEvents", "replace one entry, use policies with different periods"),
    ),
    pytest.param(
        Store(((7, 58), (6, 59)), _rules(10, 120, 100, 30), (7, 6, 5), 13),
        id=_id("TestStoreScaleEvents", "two entries, both actual"),
    ),
    pytest.param(
        # counted iff After(now - period): an event exactly 60 s old is not, yet it is not outdated
        Store(((7, 60),), _rules(10, 60), (7, 5), 0),
        id=_id("getReplicasChangePerPeriod", "event exactly one period old"),
    ),
]


@pytest.mark.parametrize("direction", ["up", "down"])
@pytest.mark.parametrize("case", STORE_CASES)
def test_store_scale_events(case: Store, direction: str) -> None:
    previous = tuple(ScaleEvent(NOW - age, change) for change, age in case.previous)
    behavior = None
    if case.rules is not None:
        behavior = Behavior(scale_up=case.rules) if direction == "up" else Behavior(scale_down=case.rules)
    spec = AutoscalerSpec(max_replicas=100, metrics=(_ext("qps", AVERAGE, 1000),), behavior=behavior)
    if direction == "up":
        state = record_rescale(spec, PolicyState(scale_up_events=previous), NOW, 10, 15)
        stored, other = state.scale_up_events, state.scale_down_events
    else:
        state = record_rescale(spec, PolicyState(scale_down_events=previous), NOW, 10, 5)
        stored, other = state.scale_down_events, state.scale_up_events
    want = case.want
    if behavior is None:
        # the one divergence: upstream stores nothing without behavior (it decides once per sync
        # period); infscale keeps an event for one sync period (15 s) so the legacy cap holds per
        # period when it decides more often. Older events go as with behavior: (7, 61 s) is replaced
        want = (5,)
    assert tuple(e.change for e in stored) == want
    assert other == ()


@pytest.mark.parametrize("case", STORE_CASES)
def test_replicas_change_per_period(case: Store) -> None:
    """getReplicasChangePerPeriod(60, previous), read through a Pods 0 / 60 s scale-up policy:
    the limit is then exactly current - (replicas added in the last 60 s)."""
    previous = tuple(ScaleEvent(NOW - age, change) for change, age in case.previous)
    probe = ScalingRules(0, SelectPolicy.MAX, (RatePolicy(PODS, 0, 60),))
    assert 100 - scale_up_limit(100, previous, (), probe, NOW) == case.want_change_60s


def test_outdated_scale_up_event_still_limits_scale_down() -> None:
    """Derived from storeScaleEvent + getReplicasChangePerPeriod, not an upstream case. Scale-ups of
    +4 at -40 s, +6 at -30 s and +2 now, with a 15 s scale-up period: the third store finds both
    earlier events outdated and overwrites only the last (upstream keeps [+4, +2]). A scale-down
    with Percent 10 / 300 s then starts its period from 22 - 4 - 2 = 16: trunc(16 x 0.9) = 14."""
    up = _rules(100, 15)
    down = _rules(0, 0, 10, 300)
    spec = AutoscalerSpec(
        max_replicas=100,
        metrics=(_ext("qps", AVERAGE, 1000),),
        behavior=Behavior(scale_up=up, scale_down=down),
    )
    state = PolicyState()
    for at, old, new in ((NOW - 40, 10, 14), (NOW - 30, 14, 20), (NOW, 20, 22)):
        state = record_rescale(spec, state, at, old, new)
    assert scale_down_limit(22, state.scale_up_events, state.scale_down_events, down, NOW + 1) == 14


# =============================================================================================
# 7. The ScaledToZero condition, which record_rescale keeps in the state
# =============================================================================================


@pytest.mark.parametrize(
    ("min_replicas", "was", "old", "new", "want"),
    [
        # HPAScaleToZero on: 5 -> 0 with minReplicas 0 and an External metric sets ScaledToZero=True
        pytest.param(
            0,
            False,
            5,
            0,
            True,
            id=_id(
                "TestScaleDownToZeroCMExternal",
                "scale down to zero external metric with feature gate enabled",
            ),
        ),
        # 3 -> 5 on a target that had been scaled to zero: NotScaledToZero
        pytest.param(
            1,
            True,
            3,
            5,
            False,
            id=_id("TestScaledToZeroConditionHandledOnNormalRescale", "HPAScaleToZero=true"),
        ),
        # 0 -> 2 after minReplicas was raised: NotScaledToZero
        pytest.param(
            2, True, 0, 2, False, id=_id("TestScaleUpFromZeroWhenMinReplicasIncreased", "HPAScaleToZero=true")
        ),
    ],
)
def test_scaled_to_zero_recorded(min_replicas: int, was: bool, old: int, new: int, want: bool) -> None:
    spec = AutoscalerSpec(max_replicas=6, metrics=(_ext("qps", VALUE, 14400),), min_replicas=min_replicas)
    assert record_rescale(spec, PolicyState(scaled_to_zero=was), NOW, old, new).scaled_to_zero is want
