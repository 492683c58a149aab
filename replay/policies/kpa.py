"""`kpa`: Knative's KPA decider, simplified (stable and panic windows over concurrency read
straight from the engines every 2 s)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from autoscaler.policy.observation import Observation
from replay.policies.base import DEFAULT_TARGET_INFLIGHT, METRIC, PolicyContext
from replay.policies.sizing import warm_start_replicas


@dataclass(slots=True)
class KpaLikePolicy:
    """Knative's KPA decider, simplified: concurrency averaged over a stable (60 s) and a panic
    (6 s) window, read every 2 s straight from the engines; panic mode starts when the panic
    window's want reaches 200 % of the ready replicas and holds scale-downs until a stable window
    passes without panic. Scale-down at most halves (max-scale-down-rate 2)."""

    target: float = DEFAULT_TARGET_INFLIGHT
    stable_window_s: float = 60.0
    panic_window_s: float = 6.0
    panic_threshold: float = 2.0
    max_scale_down_rate: float = 2.0
    min_replicas: int = 1
    max_replicas: int = 64
    name: str = "kpa"
    period_s: float = 2.0
    fresh_metrics: bool = True
    initial_replicas: int = 1
    lead_quantile: float | None = None
    _history: list[tuple[float, float]] = field(default_factory=list)
    _panic_since: float | None = None
    _max_panic: int = 0

    def desired(self, now: float, obs: Observation) -> int:
        reading = obs.metrics.get(METRIC)
        ready = max(obs.ready_pods or 0, 1)
        if reading is None or reading.values_milli is None:
            return obs.spec_replicas
        self._history.append((now, sum(reading.values_milli) / 1000.0))
        while self._history and self._history[0][0] <= now - self.stable_window_s:
            self._history.pop(0)
        stable = float(np.mean([v for _, v in self._history]))
        panic = float(np.mean([v for t, v in self._history if t > now - self.panic_window_s]))
        want_stable = math.ceil(stable / self.target)
        want_panic = math.ceil(panic / self.target)
        if want_panic / ready >= self.panic_threshold:
            if self._panic_since is None:
                self._max_panic = obs.spec_replicas
            self._panic_since = now
        elif self._panic_since is not None and now - self._panic_since >= self.stable_window_s:
            self._panic_since = None
            self._max_panic = 0
        if self._panic_since is not None:
            self._max_panic = max(self._max_panic, want_panic)
            want = self._max_panic
        else:
            want = max(want_stable, math.floor(obs.spec_replicas / self.max_scale_down_rate))
        return min(self.max_replicas, max(self.min_replicas, want))


def build(ctx: PolicyContext) -> KpaLikePolicy:
    scenario = ctx.scenario
    return KpaLikePolicy(
        target=ctx.params.target,
        min_replicas=scenario.min_replicas,
        max_replicas=scenario.max_replicas,
        initial_replicas=warm_start_replicas(ctx.trace, scenario, ctx.params.target),
    )
