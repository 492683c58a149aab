"""The values a reconcile's plan reads and returns (autoscaler/controller/plan.py).

In: `Settings` (what a plan reads of the controller's settings), `Snapshot` (one object's world,
read from the caches) and `Memory` (what the leader keeps per object between reconciles, restored
from the status by `restore` after a restart or a failover). Out: a `Plan`, the `Outcome` for
telemetry and tests and the `Effect`s the shell performs in order: `WriteScale`, `Emit`,
`PatchStatus`. All frozen, so a plan is a function of values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from autoscaler.controller import crd
from autoscaler.controller.capacity import GpuNodes
from autoscaler.controller.coldstarts import ColdStartHistory
from autoscaler.controller.crd import Autoscaler
from autoscaler.controller.kube import Scale
from autoscaler.controller.podfacts import PodFacts
from autoscaler.controller.report import NOTE_LIMIT_BYTES, ConditionStatus, cut_utf8
from autoscaler.policy.decide import Decision
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.observe import ClusterFacts, Horizon, HorizonView
from autoscaler.policy.spec import AutoscalerSpec
from autoscaler.policy.state import PolicyState


@dataclass(frozen=True, slots=True)
class Settings:
    """The controller settings a plan reads (ControllerSettings has them all)."""

    cold_start_samples: int = 32
    max_startup_s: float = 3600.0
    status_interval_s: float = 15.0
    publish_max_age_s: float = 60.0


@dataclass(frozen=True, slots=True)
class Memory:
    """What the leader keeps per object between reconciles (also in the status, for the next leader)."""

    state: PolicyState
    cold: ColdStartHistory
    last_spec_replicas: int | None = None
    last_scale_time: str | None = None
    written: Mapping[str, Any] | None = None  # the significant part of the last status written
    written_state: tuple[Any, ...] | None = None  # state_digest() of the policy state written
    written_at: float = -float("inf")
    status: Mapping[str, Any] | None = None  # the last status written (the next patch's base)
    metric_failures: Mapping[str, tuple[str, float]] = field(
        default_factory=dict
    )  # metric -> (error, warned at)
    derived: Derived | None = None  # the last plan's work on its slow inputs, for the next
    # why the state stored in the status could not be used (restore): "" when it was read
    restore_problem: str = ""


@dataclass(frozen=True, slots=True)
class Derived:
    """What a plan works out from its slow inputs: the spec (parsed again only for a new
    generation), the pods' facts and the GPU nodes (derived again only when an object changed) and
    the cold-start history. The next plan reuses it while they are the same objects: the cluster
    facts but the readings, the horizon, the cold-start figures."""

    spec: AutoscalerSpec
    horizon: Horizon
    pods: PodFacts | None
    gpu: GpuNodes | None
    cold: ColdStartHistory  # after this plan's startups: adding the same again returns it unchanged
    facts: ClusterFacts  # the readings left out (the plan puts this reconcile's in)
    view: HorizonView
    figures: Mapping[str, float | None]  # Capacity.cold_start_figures()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One object's world, read from the caches (or, for kinds that have none, the API)."""

    scale: Scale | None
    scale_error: str = ""  # why there is no scale
    pods: PodFacts | None = None  # None: the target publishes no selector
    readings: Mapping[str, MetricReading] = field(default_factory=dict)
    gpu: GpuNodes | None = None  # None: not read (no coldStart), or not known
    gpu_error: str = ""
    foreign_hpas: tuple[str, ...] = ()  # HPAs targeting the same object
    hpa_error: str = ""  # the HPAs are not known: direct mode must not write blind
    siblings: tuple[str, ...] = ()  # other direct-mode autoscalers on the same target
    write_error: str = ""  # set when planning again after a failed /scale write


class WriteScale(NamedTuple):
    replicas: int
    resource_version: str
    current: int


class Emit(NamedTuple):
    """An events.k8s.io/v1 Event regarding the autoscaler (note already within 1,024 bytes)."""

    type: str  # Normal | Warning
    reason: str
    note: str
    action: str = "Scale"


class PatchStatus(NamedTuple):
    patch: dict[str, Any]  # a JSON merge patch of .status


Effect = WriteScale | Emit | PatchStatus


@dataclass(frozen=True, slots=True)
class Outcome:
    """One object's reconcile, for the shell's telemetry, tests and the benchmark."""

    key: str
    decision: Decision | None = None
    scaled_to: int | None = None  # the count to write to /scale (written, once the shell succeeded)
    refused: str = ""  # why a wanted scale was not written
    error: str = ""
    conditions: tuple[ConditionStatus, ...] = ()
    observation: Observation | None = None  # what decide() was given
    spec_replicas: int = 0
    ready: int = 0
    predicted_ready: tuple[float, ...] = ()
    cold_start: Mapping[str, float | None] = field(default_factory=dict)
    readings: Mapping[str, MetricReading] = field(default_factory=dict)

    def condition(self, type_: str) -> ConditionStatus | None:
        return next((c for c in self.conditions if c.type == type_), None)


class Plan(NamedTuple):
    outcome: Outcome
    effects: tuple[Effect, ...]
    memory: Memory


def restore(a: Autoscaler) -> tuple[Memory, str]:
    """A restarted or new leader resumes from the status the previous one wrote; the second value
    says why the stored state was unusable ("" when it was fine). A malformed planner state costs
    only the predictive stages' memory: the windows, events and forecasters are kept."""
    state, cold, problems = PolicyState(), ColdStartHistory(), []
    stored = a.status.get("policyState")
    if stored is not None:
        try:
            if not isinstance(stored, Mapping):
                raise ValueError(f"status.policyState: expected an object, got {type(stored).__name__}")
            state = crd.state_from_status(stored, planner=False)
            state = replace(state, planner=crd.planner_from_status(stored))
        except ValueError as exc:
            problems.append(str(exc))
    try:
        if "coldStarts" in a.status:
            cold = ColdStartHistory.from_dict((a.status["coldStarts"] or {}).get("samples", []))
    except ValueError as exc:
        cold = ColdStartHistory()
        problems.append(str(exc))
    problem = "; ".join(problems)
    last = a.status.get("lastScaleTime")
    seen = a.status.get("currentReplicas")  # mode hpa books the HPA's changes against it
    memory = Memory(
        state,
        cold,
        last_spec_replicas=seen if isinstance(seen, int) and not isinstance(seen, bool) else None,
        last_scale_time=str(last) if last else None,
        status=a.status,
        restore_problem=problem,
    )
    return memory, problem


def restore_report(mem: Memory) -> tuple[ConditionStatus, Emit] | tuple[ConditionStatus] | tuple[()]:
    """While this leader runs on the fresh start it made of an unusable stored state: the
    condition, and the Warning Event with the first status written after the restore."""
    if not mem.restore_problem:
        return ()
    why = f"the stored policy state was unusable, this controller started afresh: {mem.restore_problem}"
    cond = ConditionStatus("PolicyStateRestored", "False", "MalformedPolicyState", why)
    if mem.written is None:
        return cond, Emit("Warning", "MalformedPolicyState", cut_utf8(why, NOTE_LIMIT_BYTES), "Restore")
    return (cond,)
