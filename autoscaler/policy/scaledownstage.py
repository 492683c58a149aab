"""The scale-down stage (planner.py): rent or buy (scaledown.py) on the tick's needs, and its message.

A tick that starts no replica decides here what is kept: nothing within a panic's window, the
loading ones while demand has not fallen since they were asked for, all of them while the need
at a demand RELEASE_MARGIN above the count's is still as many, else one replica at a time while
keeping it is cheaper than re-creating it (scaledown.keep), the fleet found at first sight
held one re-creation (scaledown.hold_found). The re-creation times and the break-evens priced
from them are worked out here for the whole tick: the needs' history is cut at the deepest one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from autoscaler.policy import burstsize, horizon, lengths, memo, scaledown
from autoscaler.policy.capacity import Demand, Sizing
from autoscaler.policy.capacityspec import ReplicaProfile, SloTarget
from autoscaler.policy.lookahead import Lookahead
from autoscaler.policy.planstate import PlannerState
from autoscaler.policy.scaledown import Found
from autoscaler.policy.spec import ColdStartSpec
from autoscaler.policy.stage import Stage

FALL_TOLERANCE: Final = (
    0.1  # demand counts as fallen 10 % below its level at the last scale-up (the HPA's tolerance)
)
# A replica is released only for a fall of demand, not for the band's narrowing: the need is a step
# function of the band, which keeps narrowing slowly as the prior's weight fades (band.py; 1.2 %
# of the upper band between the 160th and 1,000th scored forecast on a constant demand), so a fleet
# whose need sits on a step would give up a replica hours after it settled. 2 % is above that
# drift and far below a real fall (FALL_TOLERANCE, the HPA's 10 %). The margin is over the demand
# the count is sized at (Lookahead.planned_at), the need's own, not the band's upper (session 43).
RELEASE_MARGIN: Final = 0.02

# horizon.recreate_s(cold, m, period_s) by period_s, then m, per cold-start spec: its lru_cache
# hashes the spec at every call (~3 µs a hash here, several calls a tick); the period looked up once
# a tick, m at each call (a (float, int) key costs ~300 instructions a lookup, compiled; an int ~70)
_recreated: Final[memo.Table] = {}


def _new_memo(cold: ColdStartSpec) -> dict[float, dict[int, float]]:
    return {}


def recreation(cold: ColdStartSpec | None, period: float, horizon_s: float) -> Callable[[int], float]:
    """The time to bring back the m-th replica of those released (m -> seconds).

    A replica released is back a decision after its need returns at best: the need is read at the
    first decision after the burst begins, and only then is its replacement started. Without a
    cold-start model, the horizon's ready time stands for every one."""
    if cold is not None:
        got = _recreated.get(id(cold))  # memo.by_identity's hit inline: once a tick
        by_period: dict[float, dict[int, float]] = (  # typed: a dict's get is compiled, Any's a call by name
            got[1] if got is not None and got[0] is cold else memo.by_identity(_recreated, cold, _new_memo)
        )
        recreated = by_period.get(period)
        if recreated is None:
            recreated = by_period[period] = {}

        def recreate(m: int) -> float:
            got = recreated.get(m)
            if got is None:
                got = recreated[m] = horizon.recreate_s(cold, m, period) + period
            return got

    else:

        def recreate(m: int) -> float:
            return horizon_s + period

    return recreate


def terms(
    state: PlannerState,
    have: int,
    upper: Demand,
    upper_load: float,
    at_horizon: Sizing,
    typical_load: float,
    typical_peak: float,
    prior_at: float | None,
    now: float,
    recreate: Callable[[int], float],
    drain: float = 0.0,
) -> tuple[float, float, float, Found | None]:
    """(typical capacity, SLO weight, one replica's break-even, the found fleet) after this tick;
    `drain`: the seconds a released replica holds its GPUs (scaledown.drain_s).

    The fleet's capacity at the SLO in load units, averaged: with the typical load, its utilization."""
    typical_capacity = state.typical_capacity
    if upper.requests > 0.0 and at_horizon.requests_per_s > 0.0:
        capacity_now = have * at_horizon.requests_per_s * upper_load / upper.requests
        typical_capacity = scaledown.averaged(typical_capacity, capacity_now, prior_at, now)
    weight = scaledown.slo_weight(typical_load, typical_peak, typical_capacity)
    breakeven = scaledown.breakeven_s(recreate(1), scaledown.SLO_WEIGHT, drain)
    found = scaledown.found_at_first_sight(state.found, not state.needs, have, now, breakeven)
    return typical_capacity, weight, breakeven, found


def _needed_now_message(
    template: str,
    profile: ReplicaProfile,
    slo: SloTarget,
    upper_now: Demand,
    speed: float,
    limit: int,
    floor: int,
    spread: float,
    shape: lengths.Shape,
    hold: float = 0.0,
    lifetime_hold: float | None = None,
    hold_per_replica: float = 0.0,
) -> str:
    """The stage's message when as many replicas are needed now as there are: keep()'s NeededNow
    template, whose one argument is the need now, which plan() did not size (need_at(0.0), at
    least the floor)."""
    sized = burstsize.size(
        profile, slo, upper_now, speed, limit, spread, shape, hold, lifetime_hold, hold_per_replica
    )
    need_now = max(sized.replicas, floor)
    return template.format(need_now)


def _need_within_margin(ahead: Lookahead, have: int) -> int:
    """The need now at a demand RELEASE_MARGIN above the count's (the demand need_at sizes, at most
    the band's upper); sized only when the need itself is below `have` (need_at's sizing is the
    tick's, shared)."""
    need = ahead.need_at(0.0)
    if need >= have:
        return need
    return ahead.sized(ahead.planned_at(0.0).scaled(1.0 + RELEASE_MARGIN)).replicas


def stage(
    ahead: Lookahead,
    state: PlannerState,
    have: int,
    target: int,
    floor: int,
    in_panic: bool,
    panic_window_s: float,
    starting_ready_at: tuple[float, ...],
    level: float,
    now: float,
    recreate: Callable[[int], float],
    weight: float,
    breakeven: float,
    found: Found | None,
    drain: float = 0.0,
) -> Stage:
    """The scale-down stage, target (the need, at most `have`) to what is kept; `drain`: the seconds
    a released replica holds its GPUs (scaledown.drain_s)."""
    needed_now: tuple[Any, ...] | None = None  # the message's inputs when it is made lazily
    if in_panic:
        kept = scaledown.Keep(
            have, "PanicHold", "no scale-down within {:.0f} s of a panic", (panic_window_s,)
        )
    elif starting_ready_at and level >= (1.0 - FALL_TOLERANCE) * state.started_for:
        kept = scaledown.Keep(
            have,
            "LoadingKept",
            "{} replica(s) still starting and demand has not fallen since they were asked for",
            (len(starting_ready_at),),
        )
    elif (floor if floor > target else target) >= have:  # max(floor, target), no builtin call
        # as many are needed now as there are: keep() keeps them all whatever the sizing now
        # says, which only its message shows, so that sizing is made when the message is read
        kept = scaledown.keep(have, have, have, state.needs, now, recreate, state.gaps, weight, drain)
        needed_now = (
            kept.template,
            ahead.profile,
            ahead.slo,
            ahead.planned_at(0.0),
            ahead.speed,
            ahead.limit,
            max(floor, target),
            ahead.spread,
            ahead.shape,
            ahead.hold,
            ahead.lifetime_hold,
            ahead.hold_per_replica,
        )
    elif (margin_count := _need_within_margin(ahead, have)) >= have:
        kept = scaledown.Keep(
            have,
            "WithinReleaseMargin",
            "{} needed at a demand {:.0f} % above the count's: a replica is released for a fall of"
            " demand, not for the band's narrowing",
            (margin_count, 100.0 * RELEASE_MARGIN),
        )
    else:
        # sized as need_at: the horizon's fixed point may have sized these already
        now_count = max(ahead.need_at(0.0), floor, target)
        # keep() reads the need ahead only when fewer than `have` are needed now (a sizing saved)
        later = ahead.need_at(breakeven) if now_count < have else now_count
        kept = scaledown.keep(have, now_count, later, state.needs, now, recreate, state.gaps, weight, drain)
        kept = scaledown.hold_found(kept, have, found, now, breakeven)
    if needed_now is None:
        return Stage("scale-down", target, kept.replicas, kept.reason, kept.template, kept.args)
    return Stage("scale-down", target, kept.replicas, kept.reason, _needed_now_message, needed_now)
