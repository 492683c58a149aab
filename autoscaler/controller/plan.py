"""One reconcile as a pure plan: (autoscaler, snapshot, memory, now) -> (outcome, effects, memory).

The shell (loop.py) reads a `Snapshot` of one InferenceAutoscaler's world from its caches, calls
`plan()`, and performs the effects in order. A `WriteScale` comes first and the rest assume it
succeeds; when it does not, the shell plans again from the *same* memory: after a 409 with the
scale read again (the decision may change), after any other failure with `write_error` set (the
plan then reports it: a Warning Event and the FailedUpdateScale condition, and no scale event is
recorded). So everything the controller decides and reports is a function of values, tested as
tables (tests/controller/test_plan.py), and the controller and the replay build the policy's
Observation with the same code (autoscaler/policy/observe.py).

By mode, once decide() picked a count:

  direct  write /scale on a change, with the resourceVersion read; refused while a foreign HPA, or
          another direct-mode autoscaler, targets the same object, or while the HPAs are unknown
  hpa     the HPA writes /scale from the published recommendation; its changes are booked as
          scale events so infscale's own rate limits stay true
  dryRun  decide and report only

The status is written when something in it a user would read changed (counts, conditions, samples),
when a scale was written, when the policy state changed and `status_interval_s` passed since the
last write, and in mode hpa often enough for the published recommendation to stay fresh. A steady
object costs no writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from typing import Any

from autoscaler.controller import crd
from autoscaler.controller.coldstarts import ColdStartHistory
from autoscaler.controller.crd import Autoscaler, Mode
from autoscaler.controller.kube import Scale
from autoscaler.controller.kubetime import rfc3339
from autoscaler.controller.planvalues import (
    Derived,
    Effect,
    Emit,
    Memory,
    Outcome,
    PatchStatus,
    Plan,
    Settings,
    Snapshot,
    WriteScale,
    restore_report,
)
from autoscaler.controller.report import (
    NOTE_LIMIT_BYTES,
    Capacity,
    ConditionStatus,
    conditions_json,
    cut_utf8,
    replace_condition,
    stage_chain,
    state_digest,
    status_document,
    with_deletions,
)
from autoscaler.policy.decide import decide, record_rescale
from autoscaler.policy.hpa import Condition
from autoscaler.policy.observation import MetricReading
from autoscaler.policy.observe import (
    ClusterFacts,
    StartingReplica,
    horizon_view,
    observe_with,
)

# A metric that keeps failing gets a Warning Event when it starts and then at most this often: the
# same pace as client-go's event spam filter refills (one per 5 minutes per object and reason).
METRIC_EVENT_REPEAT_S = 300.0


def cluster_facts(a: Autoscaler, snap: Snapshot, scale: Scale, cold: ColdStartHistory) -> ClusterFacts:
    """What the snapshot shows, as the policy core's facts (the replay builds the same from its fleet)."""
    pods, spec = snap.pods, a.spec.cold_start
    gpu = snap.gpu
    starting = tuple(
        StartingReplica(p.created_at, p.scheduled_at, p.unschedulable)
        for p in (pods.starting if pods else ())
    )
    return ClusterFacts(
        spec_replicas=scale.spec_replicas,
        status_replicas=scale.status_replicas,
        ready_pods=pods.ready if pods and pods.matched else None,
        metrics=snap.readings,
        starting=starting,
        load_samples_s=tuple(s.load_s for s in cold.samples),
        gpus_per_replica=spec.gpus_per_replica if spec else (pods.gpus_per_pod if pods else 0),
        free_gpus_per_node=gpu.free_gpus if gpu is not None else None,
        image_cached_nodes=gpu.image_cached_nodes(pods.image if pods else None) if gpu is not None else (),
    )


def _derive(a: Autoscaler, snap: Snapshot, before: ColdStartHistory, settings: Settings) -> Derived:
    cold = before.add(
        snap.pods.startups if snap.pods else (),
        keep=settings.cold_start_samples,
        max_startup_s=settings.max_startup_s,
    )
    scale = snap.scale or Scale(0, 0, "", "")
    facts = cluster_facts(a, replace(snap, readings={}), scale, cold)
    view = horizon_view(a.spec, a.horizon, facts)
    figures = Capacity(a, cold, facts, view, snap.gpu_error).cold_start_figures()
    return Derived(a.spec, a.horizon, snap.pods, snap.gpu, cold, facts, view, figures)


@lru_cache(maxsize=4096)
def _conditions(conditions: tuple[Condition, ...]) -> tuple[ConditionStatus, ...]:
    """The decision's conditions in the controller's words (a decision repeats its conditions)."""
    return tuple(
        ConditionStatus(c.type, "True" if c.status else "False", c.reason, plain(c.message))
        for c in conditions
    )


def plain(message: str) -> str:
    """The policy core speaks upstream's words ("the HPA was able to ..."); here the controller acts."""
    for subject in ("the HPA controller ", "the HPA "):
        if message.startswith(subject):
            return "the controller " + message[len(subject) :]
    return message


def plan(a: Autoscaler, snap: Snapshot, mem: Memory, now: float, settings: Settings) -> Plan:
    if snap.scale is None:
        return _without_scale(a, snap, mem, now, settings)
    scale = snap.scale
    derived = mem.derived
    if not (
        derived is not None
        and derived.cold is mem.cold
        and derived.pods is snap.pods
        and derived.gpu is snap.gpu
        and derived.spec is a.spec
        and derived.horizon is a.horizon
    ):
        derived = _derive(a, snap, mem.cold, settings)
    cold = derived.cold
    state = mem.state
    if (
        a.mode is Mode.HPA
        and mem.last_spec_replicas is not None
        and scale.spec_replicas != mem.last_spec_replicas
    ):
        # the HPA (the actuator) changed the count: a scale event for our rate limits too
        state = record_rescale(a.spec, state, now, mem.last_spec_replicas, scale.spec_replicas)
    known = derived.facts
    facts = ClusterFacts(  # the constructor: dataclasses.replace costs twice as much
        spec_replicas=scale.spec_replicas,
        status_replicas=scale.status_replicas,
        ready_pods=known.ready_pods,
        metrics=snap.readings,
        starting=known.starting,
        load_samples_s=known.load_samples_s,
        gpus_per_replica=known.gpus_per_replica,
        free_gpus_per_node=known.free_gpus_per_node,
        image_cached_nodes=known.image_cached_nodes,
    )
    view = derived.view
    observation = observe_with(a.spec, facts, view, now)
    decision, new_state = decide(a.spec, state, observation, now)
    capacity = Capacity(a, cold, facts, view, snap.gpu_error)

    conditions = list(_conditions(decision.conditions))
    effects: list[Effect] = []
    scaled_to: int | None = None
    refused = ""
    last_scale_time = mem.last_scale_time
    direct = a.mode is Mode.DIRECT
    if direct and snap.hpa_error:  # no blind writes
        refused = f"cannot tell whether a HorizontalPodAutoscaler also targets {a.target}: {snap.hpa_error}"
        conditions = replace_condition(
            conditions, ConditionStatus("AbleToScale", "False", "FailedListHPAs", refused)
        )
    elif direct and snap.foreign_hpas:
        refused = (
            f"HorizontalPodAutoscaler {', '.join(snap.foreign_hpas)} also targets {a.target}; two actuators"
            " fight over /scale: delete it, or set mode: hpa to keep the HPA as the actuator"
        )
        conditions = replace_condition(
            conditions, ConditionStatus("AbleToScale", "False", "ForeignHPA", refused)
        )
    elif direct and snap.siblings:  # as upstream's AmbiguousSelector: nobody acts
        refused = (
            f"InferenceAutoscaler {', '.join(snap.siblings)} also targets {a.target} in mode direct;"
            " keep one of them"
        )
        conditions = replace_condition(
            conditions, ConditionStatus("AbleToScale", "False", "AmbiguousTarget", refused)
        )
    elif direct and decision.scale and snap.write_error:
        refused = snap.write_error
        conditions = replace_condition(
            conditions,
            ConditionStatus(
                "AbleToScale",
                "False",
                "FailedUpdateScale",
                f"the controller was unable to update the target scale: {refused}",
            ),
        )
        effects.append(
            Emit(
                "Warning",
                "FailedRescale",
                _note(
                    f"New size: {decision.desired_replicas}; reason: {decision.rescale_reason};"
                    f" error: {refused}"
                ),
            )
        )
    elif direct and decision.scale:
        scaled_to = decision.desired_replicas
        effects.append(WriteScale(scaled_to, scale.resource_version, decision.current_replicas))
        new_state = record_rescale(a.spec, new_state, now, decision.current_replicas, scaled_to)
        last_scale_time = rfc3339(now)
        conditions = replace_condition(
            conditions,
            ConditionStatus(
                "AbleToScale",
                "True",
                "SucceededRescale",
                f"the controller was able to update the target scale to {scaled_to}",
            ),
        )
        effects.append(
            Emit(
                "Normal",
                "SuccessfulRescale",
                _note(f"New size: {scaled_to}; reason: {decision.rescale_reason}; {stage_chain(decision)}"),
            )
        )
    elif a.mode is Mode.DRY_RUN and decision.scale:
        refused = "mode dryRun: decided, not applied"
    conditions.append(capacity.condition(decision))
    restored = restore_report(mem)
    conditions.extend(restored[:1])
    effects.extend(restored[1:])
    failures, warnings = _metric_warnings(snap.readings, mem.metric_failures, a.spec.max_metric_age_s, now)
    effects.extend(warnings)

    # decision.current_replicas is the count read (after a 409, the count read again)
    spec_replicas = scaled_to if scaled_to is not None else decision.current_replicas
    mem = replace(
        mem,
        state=new_state,
        cold=cold,
        last_spec_replicas=spec_replicas,
        last_scale_time=last_scale_time,
        metric_failures=failures,
        derived=derived,
    )
    significant = {
        "observedGeneration": a.generation,
        "mode": str(a.mode),
        "currentReplicas": spec_replicas,
        "desiredReplicas": decision.desired_replicas,
        "readyReplicas": snap.pods.ready if snap.pods else 0,
        "conditions": [{"type": c.type, "status": c.status, "reason": c.reason} for c in conditions],
        "samples": len(cold.samples),
    }
    if last_scale_time:
        significant["lastScaleTime"] = last_scale_time
    if _due(a, mem, significant, now, settings, force=scaled_to is not None):  # built only to be written
        status = status_document(
            a, decision, capacity, snap.pods, spec_replicas, conditions, new_state, last_scale_time, now
        )
        mem, patch = _write(a, mem, status, significant, now)
        effects.append(patch)
    outcome = Outcome(
        a.key,
        decision,
        scaled_to,
        refused,
        conditions=tuple(conditions),
        observation=observation,
        spec_replicas=spec_replicas,
        ready=snap.pods.ready if snap.pods else 0,
        predicted_ready=capacity.predicted_ready(decision),
        cold_start=derived.figures,
        readings=snap.readings,
    )
    return Plan(outcome, tuple(effects), mem)


def _note(text: str) -> str:
    return cut_utf8(text, NOTE_LIMIT_BYTES)


def _metric_warnings(
    readings: Mapping[str, MetricReading],
    before: Mapping[str, tuple[str, float]],
    max_age_s: float | None,
    now: float,
) -> tuple[dict[str, tuple[str, float]], list[Emit]]:
    """Upstream's FailedGetExternalMetric Warning while a metric cannot be used (failed, empty, or
    older than max_metric_age_s): when it starts, when the reason changes, and every
    METRIC_EVENT_REPEAT_S while it lasts."""
    failures: dict[str, tuple[str, float]] = {}
    events: list[Emit] = []
    for name, reading in readings.items():
        if reading.values_milli is None:
            error = reading.error or "the read failed"
        elif not reading.values_milli:
            error = "the metrics API returned no items"
        elif max_age_s is not None and reading.age_s > max_age_s:
            error = f"the newest sample is {reading.age_s:.0f} s old, more than the {max_age_s:.0f} s allowed"
        else:
            continue
        old = before.get(name)
        if old is None or old[0] != error or now - old[1] >= METRIC_EVENT_REPEAT_S:
            events.append(
                Emit(
                    "Warning",
                    "FailedGetExternalMetric",
                    _note(f"unable to get external metric {name}: {error}"),
                    "GetMetric",
                )
            )
            failures[name] = (error, now)
        else:
            failures[name] = old
    return failures, events


def _significant(status: Mapping[str, Any]) -> dict[str, Any]:
    """What is news for a user. A condition's message alone is not (it may carry a moving figure,
    a sample's age): it is written with the next change."""
    out = {k: v for k, v in status.items() if k not in ("lastDecision", "policyState", "coldStarts")}
    out["conditions"] = [{k: c[k] for k in ("type", "status", "reason")} for c in status["conditions"]]
    out["samples"] = len((status.get("coldStarts") or {}).get("samples", []))
    return out


def _due(
    a: Autoscaler, mem: Memory, significant: Mapping[str, Any], now: float, settings: Settings, *, force: bool
) -> bool:
    """Write the status? News (what `significant` holds), a scale, the policy state moved and the
    interval passed, or (mode hpa) the published recommendation getting old."""
    if force or significant != mem.written:
        return True
    if a.mode is Mode.HPA and now - mem.written_at >= settings.publish_max_age_s / 3:
        return True
    return now - mem.written_at >= settings.status_interval_s and state_digest(mem.state) != mem.written_state


def _write(
    a: Autoscaler, mem: Memory, status: dict[str, Any], significant: Mapping[str, Any], now: float
) -> tuple[Memory, PatchStatus]:
    previous = mem.status if mem.status is not None else a.status
    status["conditions"] = conditions_json(previous.get("conditions") or [], status["conditions"], now)
    patch = PatchStatus(with_deletions(previous, status))
    digest = state_digest(mem.state)
    return replace(mem, written=significant, written_state=digest, written_at=now, status=status), patch


def _without_scale(a: Autoscaler, snap: Snapshot, mem: Memory, now: float, settings: Settings) -> Plan:
    """No scale this time: the last status stays, with the AbleToScale verdict replaced."""
    cond = ConditionStatus(
        "AbleToScale",
        "False",
        "FailedGetScale",
        f"the controller was unable to get the target's current scale: {snap.scale_error}",
    )
    previous = mem.status if mem.status is not None else a.status
    kept = [
        ConditionStatus(
            str(c.get("type")), str(c.get("status")), str(c.get("reason", "")), str(c.get("message", ""))
        )
        for c in previous.get("conditions") or []
        if isinstance(c, Mapping) and c.get("type") != cond.type
    ]
    restored = restore_report(mem)
    kept = [c for c in kept if not restored or c.type != restored[0].type]
    status = {
        **previous,
        "conditions": [cond, *kept, *restored[:1]],
        "policyState": crd.state_to_status(mem.state),
    }
    status["conditions"] = conditions_json(previous.get("conditions") or [], status["conditions"], now)
    significant = _significant(status)
    effects: tuple[Effect, ...] = ()
    if significant != mem.written:
        effects = (*restored[1:], PatchStatus(with_deletions(previous, status)))
        mem = replace(
            mem, written=significant, written_state=state_digest(mem.state), written_at=now, status=status
        )
    return Plan(Outcome(a.key, error=snap.scale_error, conditions=(cond,)), effects, mem)
