"""`planner`: a baseline after NVIDIA Dynamo's SLA planner (ai-dynamo/dynamo
components/src/dynamo/planner, throughput-based scaling; docs/replay.md says what is Dynamo's and
what is approximated).

Every adjustment interval (180 s, Dynamo's default) it reads the last interval's request count
and mean input and output lengths, forecasts the next interval's with its load predictor
(predictors.py), and sizes the fleet as Dynamo sizes its pools:

    prefill = next_requests x next_isl / interval / prefill_tokens_per_s(next_isl)
    decode  = next_requests x next_osl / interval / decode_tokens_per_s(tpot, next_isl + next_osl / 2)
    replicas = max(ceil(prefill + decode), 1)

(profile.py: the throughputs at the SLO from the engine's step model). Dynamo scales separate
prefill and decode pools; a replica here serves both (vLLM's chunked prefill), so its time is
shared: the two fractions add. The decision is applied at once, with no model of how long new
replicas take to start (Dynamo has none), and nothing changes before the first interval has been
observed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from autoscaler.policy.observation import Observation
from replay.policies.base import PolicyContext
from replay.policies.planner.predictors import Predictor, PredictorKind, make
from replay.policies.planner.profile import decode_tokens_per_s, prefill_tokens_per_s
from replay.policies.sizing import warm_start_replicas
from replay.profiles import Scenario
from replay.trace import Trace

ADJUSTMENT_INTERVAL_S = 180.0  # Dynamo's throughput_adjustment_interval default
DEFAULT_PREDICTOR = PredictorKind.ARIMA  # Dynamo's default load_predictor
MIN_ENDPOINT = 1  # Dynamo's min_endpoint


@dataclass(frozen=True, slots=True)
class PlannerDecision:
    t_s: float
    observed: tuple[float, float, float]  # requests, mean isl, mean osl of the last interval
    predicted: tuple[float, float, float]
    prefill_replicas: float  # before rounding
    decode_replicas: float
    desired: int


def replicas_for(
    scenario: Scenario, requests: float, isl: float, osl: float, interval_s: float
) -> tuple[float, float]:
    """(prefill, decode) replicas the predicted interval needs, unrounded (Dynamo's formulas)."""
    e = scenario.engine
    prefill = requests * isl / interval_s / prefill_tokens_per_s(e, isl) if isl > 0 else 0.0
    decode = (
        requests * osl / interval_s / decode_tokens_per_s(e, scenario.slo.tpot_s, isl + osl / 2)
        if osl > 0
        else 0.0
    )
    return prefill, decode


@dataclass(slots=True)
class PlannerPolicy:
    trace: Trace  # its arrivals before `now` only: what the frontend's metrics have counted
    scenario: Scenario
    predictor: PredictorKind = DEFAULT_PREDICTOR
    interval_s: float = ADJUSTMENT_INTERVAL_S
    initial_replicas: int = 1
    name: str = "planner"
    fresh_metrics: bool = False
    metric_names: tuple[str, ...] = ()
    lead_quantile: float | None = None
    reads_cold_start: bool = False  # Dynamo's planner has no start-up model
    decisions: list[PlannerDecision] = field(default_factory=list)
    period_s: float = field(init=False)  # the loop asks once per adjustment interval
    _requests: Predictor = field(init=False)
    _isl: Predictor = field(init=False)
    _osl: Predictor = field(init=False)

    def __post_init__(self) -> None:
        self.period_s = self.interval_s
        self._requests, self._isl, self._osl = (make(self.predictor) for _ in range(3))

    def desired(self, now: float, obs: Observation) -> int:
        if now < self.interval_s:  # no interval observed yet
            return obs.spec_replicas
        a = self.trace.arrival_s
        lo, hi = (int(i) for i in np.searchsorted(a, (now - self.interval_s, now), side="left"))
        count = float(hi - lo)
        isl = float(self.trace.input_tokens[lo:hi].mean()) if hi > lo else 0.0
        osl = float(self.trace.output_tokens[lo:hi].mean()) if hi > lo else 0.0
        for p, v in ((self._requests, count), (self._isl, isl), (self._osl, osl)):
            p.add(v)
        nr, pi, po = (p.predict_next() for p in (self._requests, self._isl, self._osl))
        if pi <= 0 or po <= 0:  # nothing seen yet: no model input
            return obs.spec_replicas
        prefill, decode = replicas_for(self.scenario, nr, pi, po, self.interval_s)
        want = max(math.ceil(prefill + decode - 1e-9), MIN_ENDPOINT)
        want = min(self.scenario.max_replicas, max(self.scenario.min_replicas, want))
        self.decisions.append(PlannerDecision(now, (count, isl, osl), (nr, pi, po), prefill, decode, want))
        return want


def build(ctx: PolicyContext) -> PlannerPolicy:
    return PlannerPolicy(
        ctx.trace,
        ctx.scenario,
        predictor=ctx.params.planner_predictor,
        initial_replicas=warm_start_replicas(ctx.trace, ctx.scenario, ctx.params.target),
    )
