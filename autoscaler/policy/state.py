"""The policy's memory between ticks, as an explicit value the caller keeps (and may persist).

Upstream HPA keeps the same things in controller memory and loses them on restart; keeping them
in a value lets a restarted controller (or the replay) carry on exactly where it stopped.

The small values made every tick (here, in hpa.py, replicacalc.py and decide.py) are NamedTuples, or
record.Records where compiled code builds them, rather than frozen dataclasses: a frozen
dataclass costs ~1 µs to build against ~0.3 µs, and a tick builds dozens of them
(bench/bench_policy.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, final

from autoscaler.policy.record import Record

if TYPE_CHECKING:
    from autoscaler.policy.planstate import PlannerState


@final
class Recommendation(Record):
    """A Record (record.py), not a NamedTuple: a decision stores one."""

    FIELDS = ("at", "replicas")

    at: float  # seconds
    replicas: int

    def __init__(self, at: float, replicas: int) -> None:
        self.at = at
        self.replicas = replicas


class ScaleEvent(NamedTuple):
    at: float
    change: int  # absolute number of replicas added or removed


@dataclass(frozen=True, slots=True, init=False)
class PolicyState:
    recommendations: tuple[Recommendation, ...] = ()
    scale_up_events: tuple[ScaleEvent, ...] = ()
    scale_down_events: tuple[ScaleEvent, ...] = ()
    # per metric name: the forecaster's own state (see forecast.py)
    forecasters: Mapping[str, Any] = field(default_factory=dict)
    # upstream's ScaledToZero condition: the autoscaler itself took the target to 0 (minReplicas 0)
    scaled_to_zero: bool = False
    # the predictive stages' memory (planner.py): demand forecaster, learned speed, needs, panic
    planner: PlannerState | None = None

    def __init__(
        self,
        recommendations: tuple[Recommendation, ...] = (),
        scale_up_events: tuple[ScaleEvent, ...] = (),
        scale_down_events: tuple[ScaleEvent, ...] = (),
        forecasters: Mapping[str, Any] | None = None,  # None: a new empty dict, as the field's factory
        scaled_to_zero: bool = False,
        planner: PlannerState | None = None,
    ) -> None:
        # dataclass's own __init__, the same, is made at import and so runs interpreted in the
        # core's compiled build too (~9,000 instructions, 5 % of a decision, which builds one
        # state). Frozen: each field set as dataclass's sets it, by object.__setattr__, which mypyc
        # compiles to a store into the field when written out so (not through a local name).
        object.__setattr__(self, "recommendations", recommendations)
        object.__setattr__(self, "scale_up_events", scale_up_events)
        object.__setattr__(self, "scale_down_events", scale_down_events)
        object.__setattr__(self, "forecasters", {} if forecasters is None else forecasters)
        object.__setattr__(self, "scaled_to_zero", scaled_to_zero)
        object.__setattr__(self, "planner", planner)
