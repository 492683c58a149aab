"""`static`, `static-N`: a fixed fleet, sized for the trace's peak need unless N is given."""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.policy.observation import Observation
from replay.policies.base import PolicyContext, PolicyError
from replay.policies.sizing import peak_replicas


@dataclass(slots=True)
class StaticPolicy:
    replicas: int
    name: str = ""
    period_s: float = 15.0
    fresh_metrics: bool = False
    metric_names: tuple[str, ...] = ()
    lead_quantile: float | None = None

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise PolicyError(f"static: replicas must be >= 1, got {self.replicas}")
        self.name = self.name or f"static-{self.replicas}"

    @property
    def initial_replicas(self) -> int:
        return self.replicas

    def desired(self, now: float, obs: Observation) -> int:
        return self.replicas


def build(ctx: PolicyContext, replicas: int | None = None) -> StaticPolicy:
    """N given (static-N), else params.static_replicas, else the trace's peak need."""
    n = replicas if replicas is not None else ctx.params.static_replicas
    if n is None:
        n = peak_replicas(ctx.trace, ctx.scenario, ctx.params.target)
    return StaticPolicy(n, name=f"static-{n}", period_s=ctx.scenario.sync_period_s)
