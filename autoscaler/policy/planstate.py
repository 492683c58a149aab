"""The predictive stages' values (planner.py): the state a decision threads into the next one,
with its JSON form, and what a decision saw and decided (Plan), for explain and the replay."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from autoscaler.policy import demand, panic, speedlearn
from autoscaler.policy.capacity import Demand, Sizing
from autoscaler.policy.scaledown import Gaps, NeedHistory
from autoscaler.policy.speedlearn import SpeedState
from autoscaler.policy.stage import Stage

STATE_VERSION = 1


class PlannerState(NamedTuple):
    demand: demand.DemandState | None = None
    speed: SpeedState = speedlearn.NO_SPEED
    needs: NeedHistory = ()
    panic: panic.PanicState = panic.PanicState(None, 0.0)
    started_for: float = 0.0  # the mean demand's load when replicas were last started
    gaps: Gaps = ()  # each level's last idle gap between needs (scaledown.recur)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "demand": None if self.demand is None else self.demand.to_dict(),
            "speed": list(self.speed),
            "needs": [list(n) for n in self.needs],
            "panic": list(self.panic),
            "started_for": self.started_for,
            "gaps": list(self.gaps),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlannerState:
        """Parse to_dict output; a malformed field raises ValueError naming it."""
        if not isinstance(data, Mapping) or data.get("version") != STATE_VERSION:
            raise ValueError(f"planner state: version must be {STATE_VERSION}")
        try:
            raw_demand = data["demand"]
            log_ratio, samples, ticks, *run = data["speed"]  # an older state has no run
            run_ready, run_queue = run if run else (0, 0.0)
            needs = tuple((float(t), int(n)) for t, n in data["needs"])
            since, last = data["panic"]
            started_for = float(data["started_for"])
            gaps = tuple(float(g) for g in data.get("gaps", ()))  # an older state has none
            if not all(math.isfinite(g) and g >= 0.0 for g in gaps):
                raise ValueError(f"gaps must be finite and >= 0, got {list(gaps)}")
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"planner state: malformed ({exc})") from None
        return cls(
            None if raw_demand is None else demand.DemandState.from_dict(raw_demand),
            SpeedState(float(log_ratio), float(samples), int(ticks), int(run_ready), float(run_queue)),
            needs,
            panic.PanicState(None if since is None else float(since), float(last)),
            started_for,
            gaps,
        )


class Plan(NamedTuple):
    """What the predictive stages saw and decided, for explain and the replay's decisions."""

    demand_now: Demand  # this tick's estimate from the counters and the in-flight growth
    forecast: Demand  # the mean forecast at the horizon
    upper: Demand  # its upper band (the quantile planned on)
    band: float  # upper / mean
    horizon_s: float  # the marginal replica's ready time
    sizing: Sizing  # for `upper`: replicas, binding constraint, capacity per replica
    speed: float  # learned, relative to the profile
    needed: int  # replicas needed at the horizon (before the reactive floor and panic)
    keep: int  # what rent-or-buy keeps (= current when not scaling down)
    start_now: int  # replicas this decision starts
    panic: bool


class Outcome(NamedTuple):
    stages: tuple[Stage, ...]
    replicas: int | None  # the recommendation; None: no demand data, the reactive path decides
    plan: Plan | None
    state: PlannerState
