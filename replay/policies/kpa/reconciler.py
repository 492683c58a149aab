"""The KPA reconciler's part of a decision, transcribed from knative/serving
pkg/reconciler/autoscaling/kpa (scaler.go `scale` and `handleScaleToZero`, kpa.go
`ReconcileKind`'s serving mode and `computeActiveCondition`): pure, (config, state, the decider's
status, pods, now) -> (the scale to apply or None, new state).

What it adds to the decider: min/max scale and initial scale bounds; scale to zero only after the
revision has been active for a stable window (it is marked inactive first) and then backed by the
activator for the grace period (the fast path: the activator has already been in the path that
long); activation timing out after the progress deadline. The activator is taken to be in the path
whenever the serverless service is in proxy mode (its probe succeeds at once).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from replay.policies.kpa.config import KpaConfig

SCALE_UNKNOWN = -1


class Active(StrEnum):
    """The PodAutoscaler's Active condition."""

    TRUE = "Active"
    UNKNOWN = "Activating"
    FALSE = "Inactive"


@dataclass(frozen=True, slots=True)
class PaState:
    active: Active
    since: float  # the Active condition's last transition
    initialized: bool  # ScaleTargetInitialized: the initial scale was reached once
    proxy_since: float | None  # the serverless service in proxy mode (activator in path) since
    desired_scale: int = SCALE_UNKNOWN  # status.desiredScale


def warm_state() -> PaState:
    """A revision that has been serving for long: active, initialized, the activator in path."""
    return PaState(Active.TRUE, -1e12, True, -1e12)


def reconcile(
    cfg: KpaConfig,
    st: PaState,
    decider_desired: int,
    excess_burst_capacity: int,
    ready: int,
    now: float,
) -> tuple[int | None, PaState]:
    """One reconcile. Returns the scale to write to the Deployment (None: leave it) and the state."""
    want, apply = scale_target(cfg, st, decider_desired, now)
    # the serverless service's mode: the activator leaves the path only with want > 0 and
    # excess burst capacity >= 0
    serve = want > 0 and excess_burst_capacity >= 0
    proxy_since = None if serve else (st.proxy_since if st.proxy_since is not None else now)
    st = _compute_status(
        cfg, PaState(st.active, st.since, st.initialized, proxy_since, st.desired_scale), want, ready, now
    )
    return (want if apply else None), st


def scale_target(cfg: KpaConfig, st: PaState, desired: int, now: float) -> tuple[int, bool]:
    """scaler.scale up to the write: the scale wanted and whether to write it."""
    if desired < 0 and st.active != Active.UNKNOWN:  # metrics are not yet being collected
        return desired, False
    lo, hi = cfg.min_scale, cfg.max_scale  # ScaleBounds (the revision is reachable)
    if cfg.initial_scale > 1 and not st.initialized:
        lo = max(cfg.initial_scale, lo)
    if desired < lo:
        desired = lo
    elif hi != 0 and desired > hi:
        desired = hi
    return _handle_scale_to_zero(cfg, st, desired, now)


def _in_status_for(st: PaState, status: Active, now: float) -> float:
    return now - st.since if st.active == status else -1.0


def _handle_scale_to_zero(cfg: KpaConfig, st: PaState, desired: int, now: float) -> tuple[int, bool]:
    if desired != 0:
        return desired, True
    if not cfg.enable_scale_to_zero:
        return 1, True
    if st.active == Active.UNKNOWN:
        if _in_status_for(st, Active.UNKNOWN, now) > cfg.activation_timeout_s:
            return desired, True  # activation timed out: give up, scale to 0
        return SCALE_UNKNOWN, False
    if st.active == Active.TRUE:
        if _in_status_for(st, Active.TRUE, now) >= cfg.stable_window_s:
            return desired, False  # mark inactive first; scale to 0 on a later reconcile
        return 1, True  # at most 1 for the rest of the idle period
    # inactive: backed by the activator for the grace period (and the pod retention) yet?
    retention = cfg.scale_to_zero_pod_retention_period_s
    inactive_for = _in_status_for(st, Active.FALSE, now)
    if inactive_for >= max(cfg.scale_to_zero_grace_period_s, retention):
        return desired, True
    if retention > 0 and inactive_for < retention:
        return desired, False
    proxy_for = now - st.proxy_since if st.proxy_since is not None else 0.0
    if cfg.scale_to_zero_grace_period_s - proxy_for <= 0:
        return desired, True  # the fast path: in proxy mode for long enough
    return desired, False


def _compute_status(cfg: KpaConfig, st: PaState, want: int, ready: int, now: float) -> PaState:
    desired_scale = st.desired_scale if want == SCALE_UNKNOWN and st.desired_scale >= 0 else want
    min_ready = max(cfg.min_scale, 1) if st.initialized else max(cfg.min_scale, cfg.initial_scale)
    initialized = st.initialized or ready >= min_ready
    active = st.active
    if want == 0 or min_ready == 0:
        active = Active.FALSE
    elif ready < min_ready:
        if want > 0 or st.active != Active.FALSE:
            active = Active.UNKNOWN
    elif want > 0 or st.active != Active.FALSE:
        active = Active.TRUE
    since = st.since if active == st.active else now
    return PaState(active, since, initialized, st.proxy_since, desired_scale)
