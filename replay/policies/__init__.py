"""Policies in the replay loop: one module per policy, the protocol they share, and the name table.

Sits under replay/simulate.py, which calls `desired(now, obs)` every `period_s` with an Observation
built from the simulated cluster (metrics as scraped, with delay). The HPA, KEDA and infscale
predictive policies go through autoscaler.policy.decide — the controller's own decision code —
so what the replay shows is what the controller would do. Static, Knative's KPA and the
clairvoyant reference are replay-only comparisons.

    base.py         ReplayPolicy (the protocol), PolicyContext, METRIC, PolicyError
    params.py       PolicyParams: the knobs a sweep varies
    sizing.py       needed_replicas: the trace's need per second (static's peak, warm starts)
    static.py       static, static-N
    hpa.py          hpa, and DecidePolicy: any AutoscalerSpec through decide()
    keda.py         keda
    kpa.py          kpa
    predictive.py   predictive (the policy itself lives in autoscaler/policy)
    clairvoyant.py  clairvoyant
    table.py        POLICY_NAMES, build_policy

The metric every reactive policy scales on is `inflight`: running + waiting requests per replica
(vLLM's num_requests_running + num_requests_waiting), an External metric with an AverageValue
target (requests per replica).
"""

from replay.policies.base import (
    DEFAULT_TARGET_INFLIGHT,
    GATEWAY_METRIC,
    METRIC,
    PolicyContext,
    PolicyError,
    ReplayPolicy,
)
from replay.policies.clairvoyant import ClairvoyantPolicy
from replay.policies.hpa import DecidePolicy, hpa_spec
from replay.policies.kpa import KpaPolicy
from replay.policies.params import PolicyParams
from replay.policies.predictive import predictive_spec
from replay.policies.sizing import needed_replicas, peak_replicas, warm_start_replicas
from replay.policies.static import StaticPolicy
from replay.policies.table import POLICY_NAMES, build_policy

__all__ = [
    "DEFAULT_TARGET_INFLIGHT",
    "GATEWAY_METRIC",
    "METRIC",
    "POLICY_NAMES",
    "ClairvoyantPolicy",
    "DecidePolicy",
    "KpaPolicy",
    "PolicyContext",
    "PolicyError",
    "PolicyParams",
    "ReplayPolicy",
    "StaticPolicy",
    "build_policy",
    "hpa_spec",
    "needed_replicas",
    "peak_replicas",
    "predictive_spec",
    "warm_start_replicas",
]
