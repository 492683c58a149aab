"""KEDA's fallback, transcribed from kedacore/keda pkg/fallback/fallback.go (AverageValue
targets, no scaling modifiers): after more than `failureThreshold` consecutive scaler errors the
metric is replaced by one that makes the HPA ask for the fallback replicas."""

from __future__ import annotations

from typing import NamedTuple

from replay.policies.keda.scaledobject import Fallback, FallbackBehavior


class FallbackResult(NamedTuple):
    value_milli: int | None  # the metric the HPA gets; None: the error goes through
    error: str  # empty when value_milli is set
    fallback_active: bool
    failures: int  # the trigger's health: consecutive failures so far


def with_fallback(
    fallback: Fallback | None,
    failures: int,
    value_milli: int | None,
    error: str,
    *,
    target_average_value: float,
    current_replicas: int,
) -> FallbackResult:
    """GetMetricsWithFallback: `value_milli`/`error` are what the scaler returned."""
    configured = fallback is not None and fallback.valid
    if not error:
        return FallbackResult(value_milli, "", False, 0 if configured else failures)
    if fallback is None or not fallback.valid:
        return FallbackResult(None, error, False, failures)
    failures += 1
    if failures <= fallback.failure_threshold:
        return FallbackResult(None, error, False, failures)
    replicas = _fallback_replicas(fallback, current_replicas)
    return FallbackResult(int(target_average_value * 1000 * replicas), "", True, failures)


def _fallback_replicas(fallback: Fallback, current: int) -> int:
    """doFallback's replica count by behavior."""
    if fallback.behavior == FallbackBehavior.CURRENT_REPLICAS:
        return current
    if fallback.behavior == FallbackBehavior.CURRENT_REPLICAS_IF_HIGHER:
        return max(current, fallback.replicas)
    if fallback.behavior == FallbackBehavior.CURRENT_REPLICAS_IF_LOWER:
        return min(current, fallback.replicas)
    return fallback.replicas
