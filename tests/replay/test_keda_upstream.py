"""KEDA's scaling parts against upstream's own cases (kedacore/keda, each named after its source):
pkg/scalers/prometheus_scaler_test.go (testPromQueryResult), pkg/fallback/fallback_test.go and
pkg/scaling/executor/scale_scaledobjects_test.go."""

from __future__ import annotations

import pytest

from replay.policies.keda.executor import KedaStatus, request_scale
from replay.policies.keda.fallback import FallbackResult, with_fallback
from replay.policies.keda.prometheus import ScalerError, is_active, metric_milli, query_value
from replay.policies.keda.scaledobject import (
    Fallback,
    FallbackBehavior,
    PrometheusTrigger,
    ScaledObject,
    ScaledObjectError,
)

# --- prometheus_scaler_test.go testPromQueryResult ----------------------------------------------


@pytest.mark.parametrize(
    ("name", "body", "status", "expected", "is_error", "ignore_null_values"),
    [
        ("no results", "{}", 200, 0.0, False, True),
        ("no values", '{"data":{"result":[]}}', 200, 0.0, False, True),
        ("no values but shouldn't ignore", '{"data":{"result":[]}}', 200, -1, True, False),
        ("value is empty list", '{"data":{"result":[{"value": []}]}}', 200, 0.0, False, True),
        (
            "value is empty list but shouldn't ignore",
            '{"data":{"result":[{"value": []}]}}',
            200,
            -1,
            True,
            False,
        ),
        ("valid value", '{"data":{"result":[{"value": ["1", "2"]}]}}', 200, 2.0, False, True),
        ("not enough values", '{"data":{"result":[{"value": ["1"]}]}}', 200, -1, True, True),
        ("multiple results", '{"data":{"result":[{},{}]}}', 200, -1, True, True),
        ("error status response", "{}", 400, -1, True, True),
        ("+Inf", '{"data":{"result":[{"value": ["1", "+Inf"]}]}}', 200, 0.0, False, True),
        (
            "+Inf but shouldn't ignore ",
            '{"data":{"result":[{"value": ["1", "+Inf"]}]}}',
            200,
            -1,
            True,
            False,
        ),
        ("-Inf", '{"data":{"result":[{"value": ["1", "-Inf"]}]}}', 200, 0.0, False, True),
        (
            "-Inf but shouldn't ignore ",
            '{"data":{"result":[{"value": ["1", "-Inf"]}]}}',
            200,
            -1,
            True,
            False,
        ),
        ("NaN", '{"data":{"result":[{"value": ["1", "NaN"]}]}}', 200, 0.0, False, True),
        ("NaN but shouldn't ignore ", '{"data":{"result":[{"value": ["1", "NaN"]}]}}', 200, -1, True, False),
    ],
    ids=lambda v: v if isinstance(v, str) and not v.startswith("{") else None,
)
def test_execute_prom_query(
    name: str, body: str, status: int, expected: float, is_error: bool, ignore_null_values: bool
) -> None:  # TestPrometheusScalerExecutePromQuery
    if is_error:
        with pytest.raises(ScalerError):
            query_value(status, body, ignore_null_values=ignore_null_values)
    else:
        assert query_value(status, body, ignore_null_values=ignore_null_values) == expected


def test_activity_is_strictly_above_the_activation_threshold() -> None:
    # GetMetricsAndActivity: `val > s.metadata.ActivationThreshold`
    assert not is_active(0.0, 0.0)
    assert is_active(0.001, 0.0)
    assert not is_active(5.0, 5.0)
    assert metric_milli(2.0009) == 2000  # GenerateMetricInMili truncates


# --- fallback_test.go ----------------------------------------------------------------------------

TARGET = 10.0  # createMetricSpec(10): an AverageValue target


def fb(
    value: float | None, error: str, failures: int, fallback: Fallback | None, current: int = 5
) -> FallbackResult:
    return with_fallback(
        fallback,
        failures,
        None if value is None else metric_milli(value),
        error,
        target_average_value=TARGET,
        current_replicas=current,
    )


def test_should_return_the_expected_metric_when_fallback_is_disabled() -> None:
    got = fb(5, "", 0, None)
    assert got.value_milli == 5000 and not got.error


def test_should_initialise_the_health_status_on_success_when_fallback_is_enabled() -> None:
    got = fb(6, "", 0, Fallback(3, 10))
    assert got.value_milli == 6000 and got.failures == 0


def test_should_reset_the_health_status_when_scaler_metrics_are_available() -> None:
    got = fb(6, "", 5, Fallback(3, 10))
    assert got.value_milli == 6000 and got.failures == 0


def test_should_not_reset_the_health_status_when_fallback_is_not_enabled() -> None:
    got = fb(6, "", 5, None)
    assert got.value_milli == 6000 and got.failures == 5


def test_should_propagate_the_error_when_fallback_is_disabled() -> None:
    got = fb(None, "some error", 0, None)
    assert got.value_milli is None and got.error == "some error"


def test_should_bump_the_number_of_failures_when_metrics_call_fails() -> None:
    got = fb(None, "some error", 0, Fallback(3, 10))
    assert got.error == "some error" and got.failures == 1 and not got.fallback_active


def test_should_return_a_normalised_metric_when_number_of_failures_are_beyond_threshold() -> None:
    got = fb(None, "some error", 3, Fallback(3, 10))
    assert got.value_milli == 100_000  # 10 replicas x the target 10
    assert got.fallback_active and got.failures == 4 and not got.error


def test_should_return_error_when_fallback_is_enabled_but_scaledobject_has_invalid_parameter() -> None:
    got = fb(None, "some error", 3, Fallback(-3, 10))
    assert got.error == "some error" and got.value_milli is None


@pytest.mark.parametrize(
    ("behavior", "current", "want_milli"),
    [
        # should use fallback replicas when current replicas is lower when behavior is
        # 'currentReplicasIfHigher'
        (FallbackBehavior.CURRENT_REPLICAS_IF_HIGHER, 4, 100_000),
        # should use current replicas when behavior is 'currentReplicas'
        (FallbackBehavior.CURRENT_REPLICAS, 6, 60_000),
        # should ignore current replicas when behavior is 'static'
        (FallbackBehavior.STATIC, 15, 100_000),
        # (not upstream) currentReplicasIfLower picks the lower
        (FallbackBehavior.CURRENT_REPLICAS_IF_LOWER, 4, 40_000),
    ],
)
def test_fallback_behaviors(behavior: FallbackBehavior, current: int, want_milli: int) -> None:
    got = fb(None, "some error", 3, Fallback(3, 10, behavior), current=current)
    assert got.value_milli == want_milli


# --- scale_scaledobjects_test.go -----------------------------------------------------------------

TRIGGER = PrometheusTrigger(threshold=10)
NOW = 1_000.0
NEVER_ACTIVE = KedaStatus(last_active_time=None, created_at=0.0)


def test_scale_to_min_replicas_when_not_active() -> None:  # TestScaleToMinReplicasWhenNotActive
    out = request_scale(ScaledObject(TRIGGER, min_replica_count=0), NEVER_ACTIVE, 10, False, False, NOW)
    assert out.write == 0 and not out.active


def test_scale_to_min_replicas_from_lower_initial_replica_count() -> None:
    # TestScaleToMinReplicasFromLowerInitialReplicaCount
    out = request_scale(ScaledObject(TRIGGER, min_replica_count=5), NEVER_ACTIVE, 1, False, False, NOW)
    assert out.write == 5 and not out.active


def test_scale_from_min_replicas_when_active() -> None:  # TestScaleFromMinReplicasWhenActive
    out = request_scale(ScaledObject(TRIGGER, min_replica_count=0), NEVER_ACTIVE, 0, True, False, NOW)
    assert out.write == 1
    assert out.active and out.reason == "ScalerActive"
    assert out.status.last_active_time == NOW


def test_scale_to_idle_replicas_when_not_active() -> None:  # TestScaleToIdleReplicasWhenNotActive
    so = ScaledObject(TRIGGER, min_replica_count=5, idle_replica_count=0)
    out = request_scale(so, NEVER_ACTIVE, 10, False, False, NOW)
    assert out.write == 0 and not out.active


def test_scale_from_idle_to_min_replicas_when_active() -> None:  # TestScaleFromIdleToMinReplicasWhenActive
    so = ScaledObject(TRIGGER, min_replica_count=5, idle_replica_count=0)
    out = request_scale(so, NEVER_ACTIVE, 0, True, False, NOW)
    assert out.write == 5 and out.active and out.status.last_active_time == NOW


@pytest.mark.parametrize(
    ("last_active", "write", "reason"),
    [
        (NOW - 300.0, None, "ScalerCooldown"),  # exactly the cooldown: `Add(cooldown).Before(now)` is strict
        (NOW - 300.5, 0, "ScalerNotActive"),
        (NOW - 10.0, None, "ScalerCooldown"),
    ],
)
def test_scale_to_zero_waits_for_the_cooldown(last_active: float, write: int | None, reason: str) -> None:
    status = KedaStatus(last_active_time=last_active, created_at=0.0)
    out = request_scale(ScaledObject(TRIGGER), status, 3, False, False, NOW)
    assert (out.write, out.reason) == (write, reason)


def test_active_above_zero_only_records_the_activity() -> None:
    status = KedaStatus(last_active_time=NOW - 100, created_at=0.0)
    out = request_scale(ScaledObject(TRIGGER), status, 4, True, False, NOW)
    assert out.write is None and out.status.last_active_time == NOW  # the HPA scales above 1


def test_a_scaler_error_without_fallback_never_scales_to_zero() -> None:
    out = request_scale(ScaledObject(TRIGGER), NEVER_ACTIVE, 4, False, True, NOW)
    assert out.write is None and out.reason == "TriggerError"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"min_replica_count": 5, "max_replica_count": 3},
            "MinReplicaCount=5 must be less than MaxReplicaCount=3",
        ),
        (
            {"min_replica_count": 2, "idle_replica_count": 2},
            "IdleReplicaCount=2 must be less than MinReplicaCount=2",
        ),
        ({"polling_interval_s": 0}, "pollingInterval must be > 0"),
    ],
)
def test_invalid_scaled_objects_are_refused(changes: dict[str, float], message: str) -> None:
    with pytest.raises(ScaledObjectError, match=message):
        ScaledObject(TRIGGER, **changes)  # type: ignore[arg-type]


def test_the_hpa_keda_owns_never_goes_below_one() -> None:  # GetHPAMinReplicas
    assert ScaledObject(TRIGGER, min_replica_count=0).hpa_min_replicas == 1
    assert ScaledObject(TRIGGER, min_replica_count=3).hpa_min_replicas == 3
