"""`static`, `static-N`, `static-peak`, `static-mean`: a fixed fleet. `static` and `static-peak`
are sized for the trace's peak need (provision for peak), `static-mean` for its mean need
(sizing.needed_replicas at the target; the cheap fleet that queues at every peak)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from autoscaler.policy.observation import Observation
from replay.policies.base import PolicyContext, PolicyError
from replay.policies.sizing import needed_replicas, peak_replicas


@dataclass(slots=True)
class StaticPolicy:
    replicas: int
    name: str = ""
    period_s: float = 15.0
    fresh_metrics: bool = False
    metric_names: tuple[str, ...] = ()
    lead_quantile: float | None = None
    reads_cold_start: bool = False

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise PolicyError(f"static: replicas must be >= 1, got {self.replicas}")
        self.name = self.name or f"static-{self.replicas}"

    @property
    def initial_replicas(self) -> int:
        return self.replicas

    def desired(self, now: float, obs: Observation) -> int:
        return self.replicas


def build_peak(ctx: PolicyContext) -> StaticPolicy:
    n = peak_replicas(ctx.scored_trace, ctx.scenario, ctx.params.target)
    return StaticPolicy(n, name="static-peak", period_s=ctx.scenario.sync_period_s)


def build_mean(ctx: PolicyContext) -> StaticPolicy:
    scenario = ctx.scenario
    trace = ctx.scored_trace
    need = needed_replicas(trace, scenario, ctx.params.target)[: max(1, math.ceil(trace.duration_s))]
    n = min(scenario.max_replicas, max(scenario.min_replicas, math.ceil(float(need.mean()))))
    return StaticPolicy(n, name="static-mean", period_s=scenario.sync_period_s)


def build(ctx: PolicyContext, replicas: int | None = None) -> StaticPolicy:
    """N given (static-N), else params.static_replicas, else the trace's peak need."""
    n = replicas if replicas is not None else ctx.params.static_replicas
    if n is None:
        n = peak_replicas(ctx.scored_trace, ctx.scenario, ctx.params.target)
    return StaticPolicy(n, name=f"static-{n}", period_s=ctx.scenario.sync_period_s)
