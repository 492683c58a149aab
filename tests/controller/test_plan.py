"""plan(): one reconcile as values. Snapshot and memory in, outcome, effects and memory out; no I/O."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from controller_harness import FAST, QUEUE, T0, autoscaler

from autoscaler.controller import crd
from autoscaler.controller.kube import Scale
from autoscaler.controller.plan import METRIC_EVENT_REPEAT_S, plan
from autoscaler.controller.planvalues import (
    Emit,
    Memory,
    PatchStatus,
    Settings,
    Snapshot,
    WriteScale,
    restore,
)
from autoscaler.controller.podfacts import summarize
from autoscaler.controller.report import cut_utf8
from autoscaler.policy.observation import MetricReading

SETTINGS = Settings(status_interval_s=15.0, publish_max_age_s=60.0)


def parsed(**kw: Any) -> crd.Autoscaler:
    obj = autoscaler(behavior=FAST, **kw)
    obj["metadata"]["uid"] = "uid-1"
    obj["spec"].setdefault("mode", "direct")
    return crd.parse_autoscaler(obj, tolerance=0.1, downscale_stabilization_s=300, max_metric_age_s=60)


def pods(ready: int) -> Any:
    stamp = "2026-11-29T09:00:00Z"
    return summarize(
        [
            {
                "metadata": {"name": f"p{i}", "creationTimestamp": stamp},
                "spec": {"containers": [{"name": "engine", "image": "vllm"}]},
                "status": {
                    "phase": "Running",
                    "conditions": [
                        {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp},
                        {"type": "Ready", "status": "True", "lastTransitionTime": stamp},
                    ],
                },
            }
            for i in range(ready)
        ]
    )


def snapshot(queue: float | None = 24.0, **kw: Any) -> Snapshot:
    reading = MetricReading.of(queue) if queue is not None else MetricReading.failed("404 NotFound: gone")
    base: dict[str, Any] = {
        "scale": Scale(2, 2, "app=llama", "42"),
        "pods": pods(2),
        "readings": {QUEUE: reading},
    }
    base.update(kw)
    return Snapshot(**base)


def fresh(a: crd.Autoscaler) -> Memory:
    return restore(a)[0]


def kinds(effects: tuple[Any, ...]) -> list[str]:
    return [type(e).__name__ + (f":{e.reason}" if isinstance(e, Emit) else "") for e in effects]


def test_a_scale_up_is_a_write_then_an_event_then_the_status() -> None:
    a = parsed()
    result = plan(a, snapshot(), fresh(a), T0, SETTINGS)
    assert kinds(result.effects) == ["WriteScale", "Emit:SuccessfulRescale", "PatchStatus"]
    write = result.effects[0]
    assert write == WriteScale(6, "42", 2)  # with the resourceVersion read: a concurrent write is a 409
    assert result.outcome.scaled_to == 6
    assert result.memory.state.scale_up_events[0].change == 4  # booked, assuming the write succeeds
    patch = next(e for e in result.effects if isinstance(e, PatchStatus)).patch
    assert (patch["currentReplicas"], patch["desiredReplicas"], patch["lastScaleTime"]) == (
        6,
        6,
        "2026-11-29T10:00:00Z",
    )


def test_a_failed_write_planned_again_reports_it_and_books_nothing() -> None:
    a = parsed()
    mem = fresh(a)
    result = plan(a, snapshot(write_error="500 InternalError: etcd timeout"), mem, T0, SETTINGS)
    assert kinds(result.effects) == ["Emit:FailedRescale", "PatchStatus"]
    assert result.outcome.scaled_to is None and result.memory.state.scale_up_events == ()
    able = result.outcome.condition("AbleToScale")
    assert able is not None and (able.reason, able.status) == ("FailedUpdateScale", "False")
    assert "etcd timeout" in able.message


@pytest.mark.parametrize(
    ("snap", "reason"),
    [
        pytest.param(snapshot(foreign_hpas=("llama-cpu",)), "ForeignHPA", id="a foreign HPA"),
        pytest.param(snapshot(siblings=("llama-2",)), "AmbiguousTarget", id="another direct-mode autoscaler"),
        pytest.param(
            snapshot(hpa_error="the HorizontalPodAutoscalers are not listed yet"),
            "FailedListHPAs",
            id="HPAs unknown",
        ),
    ],
)
def test_refusals_write_nothing(snap: Snapshot, reason: str) -> None:
    a = parsed()
    result = plan(a, snap, fresh(a), T0, SETTINGS)
    assert not any(isinstance(e, WriteScale) for e in result.effects)
    able = result.outcome.condition("AbleToScale")
    assert able is not None and able.reason == reason and result.outcome.refused


@pytest.mark.parametrize("mode", ["hpa", "dryRun"])
def test_modes_without_writes(mode: str) -> None:
    a = parsed(mode=mode)
    result = plan(a, snapshot(), fresh(a), T0, SETTINGS)
    assert not any(isinstance(e, WriteScale) for e in result.effects)
    assert result.outcome.decision is not None and result.outcome.decision.desired_replicas == 6


def test_a_steady_object_plans_no_effects() -> None:
    a = parsed()
    mem = plan(a, snapshot(queue=8.0), fresh(a), T0, SETTINGS).memory
    for t in range(5, 600, 5):
        result = plan(a, snapshot(queue=8.0), mem, T0 + t, SETTINGS)
        assert result.effects == (), t
        mem = result.memory


def test_mode_hpa_rewrites_often_enough_for_the_published_recommendation() -> None:
    a = parsed(mode="hpa")
    mem = plan(a, snapshot(queue=8.0), fresh(a), T0, SETTINGS).memory
    writes = []
    for t in range(5, 65, 5):
        result = plan(a, snapshot(queue=8.0), mem, T0 + t, SETTINGS)
        if result.effects:
            writes.append(t)
        mem = result.memory
    assert writes == [20, 40, 60]  # publish_max_age_s / 3


def test_metric_failures_are_warning_events_at_a_bounded_pace() -> None:
    a = parsed()
    mem = fresh(a)
    times = [T0 + t for t in (0, 5, 10, METRIC_EVENT_REPEAT_S, METRIC_EVENT_REPEAT_S + 5)]
    warned = []
    for now in times:
        result = plan(a, snapshot(queue=None), mem, now, SETTINGS)
        mem = result.memory
        warned += [
            (now - T0, e.note)
            for e in result.effects
            if isinstance(e, Emit) and e.reason == "FailedGetExternalMetric"
        ]
    assert [t for t, _ in warned] == [0, METRIC_EVENT_REPEAT_S]  # when it starts, then every 5 min
    assert warned[0][1] == f"unable to get external metric {QUEUE}: 404 NotFound: gone"
    result = plan(a, snapshot(queue=8.0), mem, T0 + 400, SETTINGS)
    assert result.memory.metric_failures == {}  # recovered: the next failure warns at once


def test_notes_are_cut_in_bytes_on_a_character_boundary() -> None:
    text = "é" * 1024  # 1,024 characters, 2,048 bytes
    cut = cut_utf8(text, 1024)
    assert len(cut.encode()) == 1024 and cut == "é" * 512
    assert cut_utf8("a" + "€" * 400, 1024).encode().__len__() <= 1024  # 3-byte characters: 1 + 3 x 341
    a = parsed()
    result = plan(a, snapshot(write_error="Ü" * 2000), fresh(a), T0, SETTINGS)
    notes = [e.note for e in result.effects if isinstance(e, Emit)]
    assert notes and all(len(n.encode("utf-8")) <= 1024 for n in notes)


def test_messages_name_the_controller_not_an_hpa() -> None:
    a = parsed()
    result = plan(a, snapshot(), fresh(a), T0, SETTINGS)
    messages = [c.message for c in result.outcome.conditions]
    assert not any("HPA" in m for m in messages), messages
    assert any(m.startswith("the controller was able to") for m in messages)


def test_status_times_are_rfc3339() -> None:
    a = parsed()
    result = plan(a, snapshot(), fresh(a), T0 + 0.25, SETTINGS)
    patch = next(e for e in result.effects if isinstance(e, PatchStatus)).patch
    state = patch["policyState"]
    assert state["scaleUpEvents"] == [{"at": "2026-11-29T10:00:00.250000000Z", "change": 4}]
    assert all(isinstance(r["at"], str) for r in state["recommendations"])
    assert crd.state_from_status(state) == result.memory.state  # and back, exactly


def test_restore_reads_what_an_older_controller_wrote() -> None:
    a = parsed()
    a = replace(a, status={"policyState": {"scaleUpEvents": [{"at": T0, "change": 4}]}, "currentReplicas": 6})
    mem, problem = restore(a)
    assert problem == "" and mem.state.scale_up_events[0].at == T0 and mem.last_spec_replicas == 6
    broken = replace(a, status={"policyState": {"scaleUpEvents": [{"at": "yesterday", "change": 4}]}})
    mem, problem = restore(broken)
    assert "scaleUpEvents[0].at" in problem and mem.state.scale_up_events == ()


@pytest.mark.parametrize("scale_first", [True, False], ids=["with a scale", "without a scale at first"])
def test_a_malformed_planner_state_is_reported_once_and_the_windows_are_kept(scale_first: bool) -> None:
    """The Warning Event with the first status written after the restore (whether the target's
    scale could be read then or not), the condition for as long as this leader runs on it."""
    a = parsed()
    stored = {
        "scaleUpEvents": [{"at": "2026-11-29T09:59:00.000000000Z", "change": 4}],
        "planner": {"version": 2, "needs": [{"at": "2026-11-29T09:59:00.000000000Z", "replicas": 2.5}]},
    }
    mem, problem = restore(replace(a, status={"policyState": stored}))
    assert problem.startswith("status.policyState.planner.needs[0].replicas: expected an integer")
    assert mem.state.planner is None and len(mem.state.scale_up_events) == 1  # only the planner lost
    plans = []
    for i, has_scale in enumerate((scale_first, True, True)):
        snap = snapshot(queue=8.0) if has_scale else Snapshot(scale=None, scale_error="not found")
        result = plan(a, snap, mem, T0 + 15 * i, SETTINGS)
        mem = result.memory
        plans.append(result)
    events = [
        e for p in plans for e in p.effects if isinstance(e, Emit) and e.reason == "MalformedPolicyState"
    ]
    assert len(events) == 1 and "needs[0].replicas" in events[0].note
    assert isinstance(plans[0].effects[-1], PatchStatus)
    written = plans[0].effects[-1].patch["conditions"]
    restored = next(c for c in written if c["type"] == "PolicyStateRestored")
    assert (restored["status"], restored["reason"]) == ("False", "MalformedPolicyState")
    cond = plans[-1].outcome.condition("PolicyStateRestored")
    assert cond is not None and "started afresh" in cond.message


def test_no_scale_reports_failed_get_scale_once() -> None:
    a = parsed()
    mem = fresh(a)
    first = plan(a, Snapshot(scale=None, scale_error='deployments.apps "llama" not found'), mem, T0, SETTINGS)
    assert kinds(first.effects) == ["PatchStatus"]
    able = first.outcome.condition("AbleToScale")
    assert able is not None and able.reason == "FailedGetScale"
    again = plan(a, Snapshot(scale=None, scale_error="still"), first.memory, T0 + 5, SETTINGS)
    assert again.effects == ()


def test_what_the_slow_inputs_give_is_reused_only_while_they_are_the_same() -> None:
    """The cluster facts but the readings, and the horizon, are worked out again only when the pods'
    facts, the GPU nodes, the spec or the cold-start history are other objects; either way the
    plan is the one a memory without them gives."""
    a = parsed(cold_start={"weightsGB": 16, "storageGBps": 10, "gpusPerReplica": 1})
    two = pods(2)
    first = plan(a, snapshot(queue=8.0, pods=two), fresh(a), T0, SETTINGS)
    without = replace(first.memory, derived=None)

    def seen(result: Any) -> tuple[Any, ...]:
        return result.outcome.observation, result.outcome.decision, result.outcome.cold_start

    again = plan(a, snapshot(queue=8.0, pods=two), first.memory, T0 + 15, SETTINGS)
    assert again.memory.derived is first.memory.derived  # nothing slow changed
    assert seen(again) == seen(plan(a, snapshot(queue=8.0, pods=two), without, T0 + 15, SETTINGS))
    moved = plan(a, snapshot(queue=8.0, pods=pods(4)), first.memory, T0 + 15, SETTINGS)
    assert moved.memory.derived is not first.memory.derived and moved.outcome.ready == 4
    assert seen(moved) == seen(plan(a, snapshot(queue=8.0, pods=pods(4)), without, T0 + 15, SETTINGS))
