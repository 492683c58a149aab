"""KEDA's scale executor for a ScaledObject, transcribed from kedacore/keda
pkg/scaling/executor/scale_scaledobjects.go (RequestScale, scaleToZeroOrIdle,
scaleFromZeroOrIdle; no pause or forced-activation annotations): pure,
(ScaledObject, status, current replicas, active?, error?, now) -> (replicas to write, status).

KEDA itself only moves a target between 0 (or idleReplicaCount) and minReplicaCount (at least 1);
the HPA it owns does everything above.
"""

from __future__ import annotations

from typing import NamedTuple

from replay.policies.keda.scaledobject import ScaledObject


class KedaStatus(NamedTuple):
    last_active_time: float | None  # None: never active (or scaled outside KEDA)
    created_at: float  # the ScaledObject's creationTimestamp


class ScaleOutcome(NamedTuple):
    write: int | None  # replicas written to the scale target; None: left alone
    status: KedaStatus
    active: bool  # the Active condition
    reason: str


def request_scale(
    so: ScaledObject, status: KedaStatus, current: int, is_active: bool, is_error: bool, now: float
) -> ScaleOutcome:
    min_replicas = so.min_replica_count
    idle = so.idle_replica_count
    if is_active:
        if (idle is not None and current < min_replicas) or current == 0:
            replicas = min_replicas if min_replicas > 0 else 1  # scaleFromZeroOrIdle
            return ScaleOutcome(replicas, status._replace(last_active_time=now), True, "ScalerActive")
        if is_error:
            return ScaleOutcome(None, status, True, "PartialTriggerError")
        return ScaleOutcome(None, status._replace(last_active_time=now), True, "ScalerActive")
    if is_error and so.fallback is not None and so.fallback.replicas != 0:
        return ScaleOutcome(None, status, False, "ScalerNotActive")  # the HPA will fall back
    if is_error and so.fallback is None:
        return ScaleOutcome(None, status, False, "TriggerError")
    if (idle is not None and current > idle) or (current > 0 and min_replicas == 0):
        return _scale_to_zero_or_idle(so, status, now)
    if idle is None and current < min_replicas:
        return ScaleOutcome(min_replicas, status, False, "ScalerNotActive")
    return ScaleOutcome(None, status, False, "ScalerNotActive")


def _scale_to_zero_or_idle(so: ScaledObject, status: KedaStatus, now: float) -> ScaleOutcome:
    """Only past the cooldown since the last activity (the initial cooldown after creation if
    never active); strictly after, as `Add(cooldown).Before(now)`."""
    last = status.last_active_time
    if (last is None and status.created_at + so.initial_cooldown_period_s < now) or (
        last is not None and last + so.cooldown_period_s < now
    ):
        to = so.idle_replica_count if so.idle_replica_count is not None else so.min_replica_count
        return ScaleOutcome(to, status, False, "ScalerNotActive")
    return ScaleOutcome(None, status, False, "ScalerCooldown")
