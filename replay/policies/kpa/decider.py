"""Knative's KPA decider, transcribed from knative/serving pkg/autoscaler/scaling/autoscaler.go:
pure, (spec, state, stable and panic values, ready pods, now) -> (result, new state).

Upstream's `autoscaler.Scale`, line for line: the desired counts from the stable and panic
averages over the target, bounded to [ready / max-scale-down-rate, ready x max-scale-up-rate]
(the down bound only while the revision is reachable); activation scale; panic mode entered when
the panic-window want reaches panic-threshold x ready pods, extended while it holds and left once
a stable window has passed since (strictly after: `panicTime.Add(StableWindow).Before(now)`);
in panic the count never drops (max panic pods); the scale-down delay window; the excess burst
capacity. A new decider starts in panic when more than one pod is ready, holding the current scale
until the windows have data (`newAutoscaler`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from replay.policies.kpa.aggregation import MaxTimeWindow

TICK_INTERVAL_S = 2  # multiscaler.go tickInterval: how often the decider runs


@dataclass(frozen=True, slots=True)
class DeciderSpec:
    """scaling.DeciderSpec (concurrency metric). Zero-valued fields are upstream's zero values."""

    target_value: float  # per pod: total_value x target utilization
    total_value: float = 0.0  # per pod at 100 %
    target_burst_capacity: float = 0.0  # -1: unlimited (activator always in the path)
    panic_threshold: float = 0.0  # a factor (200 % -> 2.0)
    stable_window_s: float = 0.0
    max_scale_up_rate: float = 0.0
    max_scale_down_rate: float = 0.0
    scale_down_delay_s: float = 0.0
    activation_scale: int = 0
    reachable: bool = True


class ScaleResult(NamedTuple):
    desired_pod_count: int
    excess_burst_capacity: int
    scale_valid: bool


INVALID = ScaleResult(0, 0, False)  # invalidSR


@dataclass(frozen=True, slots=True)
class DeciderState:
    panic_time: float | None  # None: not in panic (upstream's zero time)
    max_panic_pods: int
    delay_window: MaxTimeWindow | None  # set when the spec has a scale-down delay


def new_state(spec: DeciderSpec, ready_count: int | None) -> DeciderState:
    """newAutoscaler at `now` = 0: in panic when more than one pod is ready (a restarted decider
    has no history and must not scale down before it has some). `ready_count` None: the count
    failed (as when the endpoints do not exist yet), taken as 0."""
    cur = ready_count or 0
    delay = MaxTimeWindow(spec.scale_down_delay_s, TICK_INTERVAL_S) if spec.scale_down_delay_s > 0 else None
    return DeciderState(0.0 if cur > 1 else None, cur, delay)


def scale(
    spec: DeciderSpec,
    state: DeciderState,
    stable: float | None,
    panic: float | None,
    ready_count: int | None,
    now: float,
) -> tuple[ScaleResult, DeciderState]:
    """One decision. `stable`/`panic` None: no data (ErrNoData); `ready_count` None: the pod count
    failed. Both give an invalid result and leave the state as it was."""
    if ready_count is None or stable is None or panic is None:
        return INVALID, state
    ready = max(1.0, float(ready_count))  # use 1 if there are zero current pods

    max_scale_up = math.ceil(spec.max_scale_up_rate * ready)
    max_scale_down = math.floor(ready / spec.max_scale_down_rate) if spec.reachable else 0.0

    dspc = math.ceil(stable / spec.target_value)
    dppc = math.ceil(panic / spec.target_value)
    desired_stable = int(min(max(dspc, max_scale_down), max_scale_up))
    desired_panic = int(min(max(dppc, max_scale_down), max_scale_up))

    if spec.activation_scale > 1:
        if dspc > 0 and spec.activation_scale > desired_stable:
            desired_stable = spec.activation_scale
        if dppc > 0 and spec.activation_scale > desired_panic:
            desired_panic = spec.activation_scale

    over_threshold = dppc / ready >= spec.panic_threshold
    panic_time, max_panic_pods = state.panic_time, state.max_panic_pods
    if over_threshold:  # begin panicking, or extend the panic window
        panic_time = now
    elif panic_time is not None and panic_time + spec.stable_window_s < now:
        panic_time, max_panic_pods = None, 0  # the surge has made its way into the stable metric

    desired = desired_stable
    if panic_time is not None:
        # provision for the larger of the two; never scale down while panicking
        desired = max(desired, desired_panic)
        max_panic_pods = max(max_panic_pods, desired)
        desired = max_panic_pods

    delay_window = state.delay_window
    if spec.reachable and delay_window is not None:
        delay_window = delay_window.copy()
        delay_window.record(now, desired)
        desired = delay_window.current()

    if spec.target_burst_capacity == 0:
        excess = 0.0
    elif spec.target_burst_capacity > 0:
        excess = math.floor(ready_count * spec.total_value - spec.target_burst_capacity - panic)
    else:
        excess = -1.0
    return ScaleResult(desired, int(excess), True), DeciderState(panic_time, max_panic_pods, delay_window)
