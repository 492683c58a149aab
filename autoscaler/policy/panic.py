"""Panic: a burst far above the forecast's band scales on this tick's demand, at once.

As Knative's panic mode (pkg/autoscaler/scaling/autoscaler.go: panic when the short window wants
200 % of the ready pods, no scale-down until a stable window passes without panic), but judged
against the forecast: the demand seen this tick (not smoothed) must exceed `panic_threshold` times
the forecast's upper band. In panic the sizing uses that demand, and only as many replicas start as
can be ready while the burst still matters: within the burst's expected remaining life, taken as
the larger of the panic window and the time it has lasted (a burst that has lasted t is, on
heavy-tailed traffic, as likely as not to last t more). Replicas that would come later are left
to the forecast, which by then has seen the burst.
"""

from __future__ import annotations

from typing import NamedTuple

from autoscaler.policy.clusterview import Cluster, marginal_ready_s
from autoscaler.policy.spec import ColdStartSpec


class PanicState(NamedTuple):
    since: float | None  # when the current panic began; None: not in panic
    last: float  # the last tick that triggered it


def update(state: PanicState, now: float, triggered: bool, window_s: float) -> PanicState:
    """Enter, extend or leave panic: it ends a window after the last trigger."""
    if triggered:
        return PanicState(now if state.since is None else state.since, now)
    if state.since is not None and now - state.last >= window_s:
        return PanicState(None, state.last)
    return state


def relevance_s(state: PanicState, now: float, window_s: float) -> float:
    """How long the burst is expected to still matter."""
    lasted = 0.0 if state.since is None else now - state.since
    return max(window_s, lasted)


def in_time(cold: ColdStartSpec | None, extra: int, cluster: Cluster, within_s: float) -> int:
    """The most of `extra` replicas that, started together now, are all ready within within_s
    (fewer load faster: they share the storage). Bisection: the last one's ready time grows with k."""
    if extra <= 0 or cold is None:
        return max(extra, 0)
    low, high = 0, extra
    while low < high:
        mid = (low + high + 1) // 2
        if marginal_ready_s(cold, mid, cluster) <= within_s:
            low = mid
        else:
            high = mid - 1
    return low
