"""A controller restarted mid-trace decides as one that ran through: the predictive stages' memory
(status.policyState.planner) survives the restart, and a malformed one is a fresh start with a
condition and an Event, never a crash.

The time-line: the predictive policy (a capacity section) over 300 ticks of 15 s with demand that
steps, ramps, bursts and falls, the engine counters served as External metrics through the fake
kube-apiserver, pods that become ready 45 s after they are created. One controller runs it through;
another is killed at a few ticks (its loop closed, its memory gone) and a new one started against
the same fake API, which has only the status to go on. Decision for decision, both must agree.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from controller_harness import NAME, NS, QUEUE, T0, Env, autoscaler, environment, only

from autoscaler.controller.kubetime import rfc3339
from autoscaler.policy.decide import Decision
from tests.policy_helpers import PROFILE_70B

LABELS = {"deployment": NAME}
TICK_S = 15.0
TICKS = 300
READY_AFTER_S = 45.0
DEMAND = ("infscale_request_rate", "infscale_prompt_token_rate", "infscale_generation_token_rate")


def predictive() -> dict[str, Any]:
    return (
        autoscaler(
            min_replicas=1,
            max_replicas=24,
            target_type="AverageValue",
            target_value="16",
            behavior={"scaleDown": {"stabilizationWindowSeconds": 60}},
            cold_start={"weightsGB": 140, "storageGBps": 10, "gpusPerReplica": 4, "warmupSeconds": 10},
            prediction={"forecaster": "holt"},
        )
        | {}
    )


def with_capacity(doc: dict[str, Any]) -> dict[str, Any]:
    doc["spec"]["capacity"] = {"profile": PROFILE_70B, "slo": {"ttftSeconds": 2, "tpotSeconds": 0.2}}
    return doc


def rates() -> list[float]:
    """Requests/s per tick: steady, a ramp, a burst over the band, a fall, idle, a noisy return."""
    rng = np.random.default_rng(7)
    out = []
    for i in range(TICKS):
        m = i * TICK_S / 60.0
        if m < 10:
            r = 4.0
        elif m < 25:
            r = 4.0 + (m - 10) / 15 * 36.0
        elif m < 28:
            r = 110.0
        elif m < 45:
            r = 20.0
        elif m < 55:
            r = 2.0
        else:
            r = 30.0 * (1.0 + 0.25 * math.sin(m))
        out.append(max(r * float(rng.uniform(0.85, 1.15)), 0.0))
    return out


def serve(env: Env, rate: float, created: dict[str, float]) -> None:
    """The engines' counters as the adapter serves them: what the ready replicas get through (a
    replica serves ~4 req/s of this mix), the rest waits in the queue and in flight."""
    now = env.clock()
    for pod in env.kubelet.names:
        at = created.setdefault(pod, now)
        if now - at >= READY_AFTER_S and env.fake.pods[(NS, pod)]["status"].get("phase") != "Running":
            env.fake.mark_pod_ready(NS, pod, rfc3339(now))
    ready = sum(1 for p in env.kubelet.names if env.fake.pods[(NS, p)]["status"].get("phase") == "Running")
    served = min(rate, 4.0 * ready)
    queue = (rate - served) * TICK_S
    stamp = rfc3339(now)
    env.fake.set_metric(NS, QUEUE, f"{queue:.3f}", labels=LABELS, timestamp=stamp)
    for name, value in zip(DEMAND, (served, served * 1000.0, served * 200.0), strict=True):
        env.fake.set_metric(NS, name, f"{value:.3f}", labels=LABELS, timestamp=stamp)
    env.fake.set_metric(
        NS, "infscale_inflight", f"{served * 3.0 + queue:.3f}", labels=LABELS, timestamp=stamp
    )


def key(d: Decision) -> tuple[Any, ...]:
    return (
        d.current_replicas,
        d.desired_replicas,
        tuple((s.name, s.before, s.after, s.reason) for s in d.stages),
    )


async def run(
    restarts: tuple[int, ...] = (),
    tamper: Any = None,
    status_interval_s: float = TICK_S,
    ticks: int = TICKS,
) -> tuple[list[tuple[Any, ...]], list[Any], list[dict[str, Any]]]:
    """(each tick's decision, each restart's outcome, the Events) over the time-line's first
    `ticks`; at each tick in `restarts` the controller is closed and a new one takes over; `tamper`
    may change the status in between (the stored object, in place)."""
    decisions: list[tuple[Any, ...]] = []
    restored: list[Any] = []
    async with environment(ready_after_s=None) as env:
        env.start(1, with_capacity(predictive()))
        created: dict[str, float] = {p: T0 - 600.0 for p in env.kubelet.names}

        def settings() -> dict[str, Any]:
            return {"tick_s": TICK_S, "status_interval_s": status_interval_s, "max_metric_age_s": None}

        controller = env.controller(**settings())
        for i, rate in enumerate(rates()[:ticks]):
            env.clock.set(T0 + i * TICK_S)
            serve(env, rate, created)
            if i in restarts:
                await controller.close()
                if tamper is not None:
                    env.fake.corrupt_autoscaler(NS, NAME, tamper)
                controller = env.controller(**settings())
            out = only(await controller.step())
            assert out.decision is not None, f"tick {i}: {out.error}"
            decisions.append(key(out.decision))
            if i in restarts:
                restored.append(out)
        events = env.fake.events
    return decisions, restored, events


async def test_a_restarted_controller_decides_as_the_one_that_ran_through() -> None:
    through, _, _ = await run()
    stages = {s[3] for d in through for s in d[2]}
    # the time-line reaches what the planner's memory holds: the start-up hold, scale-ups confirmed
    # over two decisions, a burst over the band, releases past the break-even, recurrence
    assert {"DemandForecast", "StartAll", "BurstAboveBand", "ReleaseIdle"} <= stages, stages
    assert len({d[1] for d in through}) >= 5
    restarts = (20, 97, 105, 160, 230)  # at the start-up, in the burst, after it, idle, noisy return
    resumed, outcomes, events = await run(restarts)
    for i, (a, b) in enumerate(zip(through, resumed, strict=True)):
        assert a == b, f"tick {i}: ran through {a}, restarted {b}"
    assert all(o.condition("PolicyStateRestored") is None for o in outcomes)
    assert not [e for e in events if e["reason"] == "MalformedPolicyState"]


async def test_without_the_planner_state_the_restart_decides_otherwise() -> None:
    """The control: the same restarts with status.policyState.planner removed (what the controller
    wrote before it was persisted) change decisions, so the test above can fail."""
    through, _, _ = await run()

    def drop(obj: dict[str, Any]) -> None:
        obj["status"]["policyState"].pop("planner", None)

    resumed, _, _ = await run((97, 160), tamper=drop)
    differ = [i for i, (a, b) in enumerate(zip(through, resumed, strict=True)) if a != b]
    assert differ and differ[0] >= 97, differ


@pytest.mark.parametrize(
    ("change", "named"),
    [
        pytest.param(
            lambda p: p["needs"].append({"at": p["needs"][-1]["at"], "replicas": 10**6}),
            "status.policyState.planner.needs[",
            id="a need above the bound",
        ),
        pytest.param(
            lambda p: p["demand"].__setitem__("pending", [p["demand"]["pending"][0]] * 10_000),
            "status.policyState.planner.demand.pending: expected a list of at most 48",
            id="a huge list",
        ),
        pytest.param(
            lambda p: p["speed"].__setitem__("logRatio", 1e6),
            "status.policyState.planner.speed.logRatio: expected a finite number in [-50, 50], got 1000000",
            id="an overflowing speed",
        ),
        pytest.param(
            lambda p: p.__setitem__("needs", list(reversed(p["needs"]))),
            "status.policyState.planner.needs[1].replicas: expected the counts falling from the front",
            id="the need history out of order",
        ),
        pytest.param(
            lambda p: p["demand"].__setitem__("at", "soon"),
            "status.policyState.planner.demand.at: expected a time",
            id="not a time",
        ),
        pytest.param(
            lambda p: p.__setitem__("version", 1), "planner.version: expected 2", id="the first form"
        ),
    ],
)
async def test_a_malformed_planner_state_is_a_fresh_start_with_a_condition_and_an_event(
    change: Any, named: str
) -> None:
    """The status is the API's (kubectl edit, another version, a restore from backup); the CRD's
    schema cannot say everything (order, the bounds a hostile list breaks before they are read).
    The windows and events are kept; only the predictive stages start afresh."""

    def tamper(obj: dict[str, Any]) -> None:
        planner = obj["status"]["policyState"]["planner"]
        change(planner)

    decisions, outcomes, events = await run((120,), tamper=tamper, ticks=122)  # the restart, and one after
    assert len(decisions) == 122
    (out,) = outcomes
    cond = out.condition("PolicyStateRestored")
    assert cond is not None and (cond.status, cond.reason) == ("False", "MalformedPolicyState")
    assert named in cond.message, cond.message
    (event,) = [e for e in events if e["reason"] == "MalformedPolicyState"]
    assert event["type"] == "Warning" and named in event["note"]
