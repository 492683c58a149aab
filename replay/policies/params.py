"""The knobs a sweep varies, one value per field, applied to the policies that have them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from autoscaler.policy.spec import ForecasterKind
from replay.policies.base import DEFAULT_CLAIRVOYANT_GOAL, DEFAULT_TARGET_INFLIGHT, PolicyError
from replay.policies.planner.predictors import PredictorKind


@dataclass(frozen=True, slots=True)
class PolicyParams:
    target: float = DEFAULT_TARGET_INFLIGHT
    tolerance: float = 0.1
    downscale_window_s: int = 300
    warm_floor: int = 0
    forecaster: ForecasterKind = ForecasterKind.HOLT
    lead_time_s: float | None = None  # None: the cold-start model, from the cluster's state
    lead_quantile: float | None = None  # set: that quantile of observed start-ups (after 3)
    static_replicas: int | None = None  # None: the trace's peak need at `target` (provision for peak)
    keda_poll_interval_s: float = 30.0  # KEDA's pollingInterval
    # keda and kpa: their upstream default minimum of 0 (KEDA's minReplicaCount, Knative's
    # min-scale: scale to zero) instead of the scenario's min_replicas
    scale_to_zero: bool = True
    planner_predictor: PredictorKind = PredictorKind.ARIMA  # Dynamo's default load predictor
    clairvoyant_goal: float = DEFAULT_CLAIRVOYANT_GOAL  # the attainment its cheapest schedule meets
    # predictive reads the engines' TTFT histograms (its late stage, latefeedback.py): slow first
    # tokens past their hour's share ask for a replica more (docs/policy.md, the late stage's row)
    late_stage: bool = True

    def __post_init__(self) -> None:
        # every policy reads the target (warm start, static's peak, the clairvoyant's needs), not
        # only those that build an HPA metric from it
        if not (math.isfinite(self.target) and self.target > 0):
            raise PolicyError(f"target must be a finite number > 0, got {self.target!r}")
        if not 0.0 < self.clairvoyant_goal <= 1.0:
            raise PolicyError(f"clairvoyant_goal must be within (0, 1], got {self.clairvoyant_goal}")
        if self.lead_quantile is not None and not 0.5 <= self.lead_quantile <= 0.99:
            raise PolicyError(f"lead_quantile must be within [0.5, 0.99], got {self.lead_quantile}")
