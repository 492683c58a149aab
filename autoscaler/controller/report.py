"""What a reconcile reports: conditions, the status document, Event notes, the capacity verdict.

Pure helpers of plan.py. Kubernetes limits honoured here: an events.k8s.io/v1 note is at most 1,024
*bytes* (a note cut at 1,024 characters of non-ASCII text is refused, and the Event lost); condition
messages are cut the same way (32 KiB is the API's limit, 1,024 keeps `kubectl describe` readable);
times are RFC 3339 (`kubectl get -o yaml` shows `2026-11-29T10:00:05Z`, not `1.79615e+09`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from autoscaler.controller import crd
from autoscaler.controller.coldstarts import ColdStartHistory
from autoscaler.controller.crd import Autoscaler
from autoscaler.controller.kubetime import rfc3339
from autoscaler.controller.podfacts import PodFacts
from autoscaler.policy import coldstart
from autoscaler.policy.decide import Decision
from autoscaler.policy.observe import ClusterFacts, HorizonView
from autoscaler.policy.spec import ColdStartSpec
from autoscaler.policy.state import PolicyState

NOTE_LIMIT_BYTES = 1024  # events.k8s.io/v1: note "must be no more than 1kB" (validation, in bytes)
MESSAGE_LIMIT_BYTES = 1024


def cut_utf8(text: str, limit: int) -> str:
    """`text` in at most `limit` UTF-8 bytes, cut on a character boundary."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")  # drops a character split by the cut


@dataclass(frozen=True, slots=True)
class ConditionStatus:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str


def replace_condition(conditions: Sequence[ConditionStatus], new: ConditionStatus) -> list[ConditionStatus]:
    """`new` first, in place of the condition of its type (the actuator's verdict leads)."""
    return [new, *(c for c in conditions if c.type != new.type)]


def stage_chain(decision: Decision) -> str:
    return "; ".join(f"{s.name} {s.before}->{s.after} {s.reason}" for s in decision.stages)


def conditions_json(
    previous: Sequence[Mapping[str, Any]], conditions: Sequence[ConditionStatus], now: float
) -> list[dict[str, Any]]:
    """lastTransitionTime moves only when a condition's status changes."""
    before = {c.get("type"): c for c in previous if isinstance(c, Mapping)}
    out = []
    for c in conditions:
        old = before.get(c.type)
        since = old.get("lastTransitionTime") if old and old.get("status") == c.status else None
        out.append(
            {
                "type": c.type,
                "status": c.status,
                "reason": c.reason,
                "message": cut_utf8(c.message, MESSAGE_LIMIT_BYTES),
                "lastTransitionTime": since or rfc3339(now),
            }
        )
    return out


def _num(x: float) -> float | int:
    return round(x, 6)


def state_digest(state: PolicyState) -> tuple[Any, ...]:
    """The policy state as far as a restart cares: which counts the windows hold (not when each was
    seen), the scale events, the forecasters to four decimals. Writing the status for
    anything less would be a write per object per interval in a steady state. The planner's state
    (the predictive stages) whole: its demand sample moves every tick, and a restart from a state
    one tick old decides as the controller that ran on only if it has that tick's state (the
    policy state is then written every status_interval_s, docs/controller.md)."""
    forecasters = tuple(sorted((name, f.digest()) for name, f in state.forecasters.items()))
    return (
        tuple(sorted({r.replicas for r in state.recommendations})),
        state.scale_up_events,
        state.scale_down_events,
        forecasters,
        state.scaled_to_zero,
        state.planner,
    )


# --- the horizon and capacity, as the status and gauges show them ------------------------------


@dataclass(frozen=True, slots=True)
class Capacity:
    """One reconcile's horizon and capacity facts, for the status, the gauges and a condition."""

    autoscaler: Autoscaler
    cold: ColdStartHistory
    facts: ClusterFacts
    view: HorizonView
    gpu_error: str

    def predicted_ready(self, decision: Decision) -> tuple[float, ...]:
        """Seconds until each replica the decision adds is ready: the model's, else the observed
        quantile plus node provisioning for the replicas that do not fit on existing nodes."""
        if decision.predicted_ready_s:
            return decision.predicted_ready_s
        k = decision.desired_replicas - decision.current_replicas
        observed = self.view.observed_load_s
        if k <= 0 or observed is None:
            return ()
        fitting = self.view.fit(self.facts, k).fitting if self.facts.free_gpus_per_node is not None else k
        return tuple(observed + (0.0 if i < fitting else self.view.provision_s) for i in range(k))

    def condition(self, decision: Decision) -> ConditionStatus:
        g = self.facts.gpus_per_replica
        if g <= 0:
            return ConditionStatus("CapacityAvailable", "True", "NoGPUsRequested", "replicas request no GPUs")
        free_gpus = self.facts.free_gpus_per_node
        if free_gpus is None:
            why = (
                self.gpu_error
                or "GPU capacity is read only with spec.coldStart (gpusPerReplica, nodeProvisionSeconds)"
            )
            return ConditionStatus("CapacityAvailable", "Unknown", "CapacityUnknown", why)
        k = max(1, decision.desired_replicas - decision.current_replicas)
        f = self.view.fit(self.facts, k)
        free, nodes, most = _free_summary(free_gpus)
        if f.short == 0:
            return ConditionStatus(
                "CapacityAvailable",
                "True",
                "GPUsAvailable",
                f"{k} new replica(s) of {g} GPU(s) fit on existing nodes ({free} GPU(s) free)",
            )
        return ConditionStatus(
            "CapacityAvailable",
            "False",
            "InsufficientGPUs",
            f"{f.short} of {k} new replica(s) need {g} GPU(s) on one node and do not fit on existing nodes"
            f" ({free} GPU(s) free on {nodes} node(s), at most {most} on one); their predicted ready time"
            f" includes {self.view.provision_s:.0f} s of node provisioning",
        )

    def cold_start_figures(self) -> dict[str, float | None]:
        """The model's time to ready of one more replica on this cluster now, beside the observed
        median and p90 (creation -> Ready)."""
        spec = self.autoscaler.spec.cold_start
        model = None
        if spec is not None:
            model = model_s(spec, self.facts.free_gpus_per_node or (), self.facts.image_cached_nodes)
        return {
            "model": model,
            "observed_p50": self.cold.startup_quantile(0.5),
            "observed_p90": self.cold.startup_quantile(0.9),
        }

    def cold_start_status(self) -> dict[str, Any]:
        figures = self.cold_start_figures()
        out: dict[str, Any] = {"samples": self.cold.to_dict()}
        for name, value in (
            ("modelSeconds", figures["model"]),
            ("observedMedianSeconds", figures["observed_p50"]),
            ("observedP90Seconds", figures["observed_p90"]),
        ):
            if value is not None:
                out[name] = round(value, 3)
        return out


@lru_cache(maxsize=64)
def _free_summary(free_gpus: tuple[int, ...]) -> tuple[int, int, int]:
    """(free GPUs, nodes, the most on one node): asked every reconcile, over every node."""
    return sum(free_gpus), len(free_gpus), max(free_gpus, default=0)


@lru_cache(maxsize=1024)
def model_s(spec: ColdStartSpec, free: tuple[int, ...], cached: tuple[int, ...]) -> float:
    """Pure and asked several times a reconcile (status, gauges); a cluster looks the same most times."""
    return coldstart.lead_time_s(spec, free_gpus_per_node=free, image_cached_nodes=cached)


def status_document(
    a: Autoscaler,
    decision: Decision,
    capacity: Capacity,
    pods: PodFacts | None,
    spec_replicas: int,
    conditions: Sequence[ConditionStatus],
    state: PolicyState,
    last_scale_time: str | None,
    now: float,
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "observedGeneration": a.generation,
        "mode": str(a.mode),
        "currentReplicas": spec_replicas,
        "desiredReplicas": decision.desired_replicas,
        "readyReplicas": pods.ready if pods else 0,
        "conditions": list(conditions),
        "lastDecision": {
            "time": rfc3339(now),
            "leadTimeSeconds": round(decision.lead_time_s, 3),
            "rescaleReason": decision.rescale_reason,
            "stages": [
                {
                    "name": s.name,
                    "before": s.before,
                    "after": s.after,
                    "reason": s.reason,
                    "message": cut_utf8(s.message, MESSAGE_LIMIT_BYTES),
                }
                for s in decision.stages
            ],
            "forecasts": [
                {
                    "metric": f.metric,
                    "current": _num(f.current),
                    "predicted": _num(f.predicted),
                    "method": f.method,
                }
                for f in decision.forecasts
            ],
            "predictedReadySeconds": [round(t, 3) for t in capacity.predicted_ready(decision)],
        },
        "coldStarts": capacity.cold_start_status(),
        "policyState": crd.state_to_status(state),
    }
    if last_scale_time:
        status["lastScaleTime"] = last_scale_time
    return status


def with_deletions(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch that turns `old` into `new`: keys gone from `new` are set to null."""
    out: dict[str, Any] = {}
    for k, v in new.items():
        before = old.get(k)
        out[k] = with_deletions(before, v) if isinstance(v, Mapping) and isinstance(before, Mapping) else v
    for k in old:
        if k not in new:
            out[k] = None
    return out
