"""`clairvoyant`: the reference that knows every future arrival and its own cold start
(docs/replay.md says what it bounds)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from autoscaler.policy.observation import Observation
from replay.policies.base import PolicyContext
from replay.policies.sizing import needed_replicas, warm_start_replicas


@dataclass(slots=True)
class ClairvoyantPolicy:
    """needed(τ) is sizing.needed_replicas: per second, the replicas that keep `target` requests in
    flight per replica and prefill under 70 % of each replica's time. At `now` it asks for max
    needed over [now, now + lead + period]: capacity for the worst moment before a replica started
    at the next decision could be ready, and never more.
    """

    needed: npt.NDArray[np.int64]  # per second of the trace
    lead_s: Callable[[], float]
    name: str = "clairvoyant"
    period_s: float = 15.0
    fresh_metrics: bool = False
    metric_names: tuple[str, ...] = ()
    min_replicas: int = 1
    max_replicas: int = 64
    initial_replicas: int = 1
    lead_quantile: float | None = None

    def desired(self, now: float, obs: Observation) -> int:
        lo = int(now)
        hi = math.ceil(now + self.lead_s() + self.period_s) + 1
        window = self.needed[lo:hi]
        want = int(window.max()) if len(window) else self.min_replicas
        return min(self.max_replicas, max(self.min_replicas, want))


def build(ctx: PolicyContext) -> ClairvoyantPolicy:
    scenario, trace, target = ctx.scenario, ctx.trace, ctx.params.target
    return ClairvoyantPolicy(
        needed_replicas(trace, scenario, target),
        ctx.lead_s,
        period_s=scenario.sync_period_s,
        min_replicas=scenario.min_replicas,
        max_replicas=scenario.max_replicas,
        initial_replicas=warm_start_replicas(trace, scenario, target),
    )
