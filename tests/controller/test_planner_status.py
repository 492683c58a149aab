"""status.policyState.planner against the CRD: the schema describes what the controller writes
(with the code's bounds), the fake API refuses what the schema does and what is too large for etcd,
and the largest state the bounds allow stays well within the object budget."""

from __future__ import annotations

import json
from typing import Any

import pytest
from controller_harness import NAME, NS, environment
from fake_apiserver import MAX_OBJECT_BYTES, ApiStatus
from fake_validation import crd_schema, validate_custom
from test_restart import predictive, with_capacity

from autoscaler.controller.crd import STATUS_TIMES, state_to_status
from autoscaler.policy import demand, latefeedback, levelbins, outputsteps, survival
from autoscaler.policy.capacity import Demand
from autoscaler.policy.demand import DemandState, Series
from autoscaler.policy.levelbins import Relative
from autoscaler.policy.mix import Mix
from autoscaler.policy.panic import PanicState
from autoscaler.policy.planstate import MAX_GAP_S, MAX_LEVELS, MAX_LOG_SPEED, PlannerState
from autoscaler.policy.speedlearn import MAX_SPEED_SAMPLES, SpeedState
from autoscaler.policy.state import PolicyState, Recommendation, ScaleEvent
from autoscaler.policy.statejson import MAX_PEAK_ENTRIES, MAX_PENDING_ENTRIES
from autoscaler.policy.survival import Survival

T = 1795946400.123456789


def largest_tail(units: survival.Units) -> Survival:
    """A histogram's survival with as many bounds as the reader keeps, the last at the most."""
    n = survival.MAX_BOUNDS
    bounds = tuple(units.most * (i + 1) / n for i in range(n))
    return Survival(T, bounds, tuple(1234.56789012345 * (n - i) / n for i in range(n)), 1234.56789012345)


def largest_planner() -> PlannerState:
    """Every field set, every list at the length the reader allows, every figure with all its digits."""
    x = 1234.56789012345
    d = DemandState(
        T,
        x,
        Mix(x, 100.123456789012, 20.1234567890123),
        Series(x, -1.23456789012e-3),
        True,
        tuple((T - 600 + i * 12.3456789, T + i * 12.3456789, x, i % 2) for i in range(MAX_PENDING_ENTRIES)),
        0.123456789012345,
        0.234567890123456,
        1000.0,
        Demand(x, x * 100, x * 20),
        tuple((T - 600 + i * 12.3456789, 99999.123456789 - i) for i in range(MAX_PEAK_ENTRIES)),
        x,
        ((0.123456789012345, 1000.0),) * levelbins.BINS,
        Relative(2.34567890123456, 0.345678901234567, 1000.0),
        (x, x),
        Series(x, -1.23456789012e-3),
    )
    return PlannerState(
        d,
        SpeedState(-0.123456789012345, MAX_SPEED_SAMPLES, 123456, MAX_LEVELS, x, MAX_LEVELS),
        tuple((T + i * 15.123456789, MAX_LEVELS - i) for i in range(MAX_LEVELS + 1)),
        PanicState(T, T + 1.5),
        x,
        (x,) * MAX_LEVELS,
        x,
        (T, MAX_LEVELS),
        largest_tail(survival.SECONDS),
        largest_tail(outputsteps.UNITS),
        latefeedback.ALARM * 0.999999,
        largest_tail(survival.SECONDS),
    )


def schema_of(*path: str) -> Any:
    node = crd_schema()["properties"]["status"]["properties"]["policyState"]["properties"]["planner"]
    for part in path:
        node = node["properties"][part] if part != "items" else node["items"]
    return node


def test_the_crd_carries_the_codes_bounds() -> None:
    assert schema_of("needs")["maxItems"] == MAX_LEVELS + 1
    assert schema_of("needs", "items", "replicas")["maximum"] == MAX_LEVELS
    assert schema_of("gaps")["maxItems"] == MAX_LEVELS
    assert schema_of("gaps", "items")["maximum"] == MAX_GAP_S
    assert schema_of("demand", "pending")["maxItems"] == MAX_PENDING_ENTRIES == demand.MAX_PENDING
    assert schema_of("demand", "peaks")["maxItems"] == MAX_PEAK_ENTRIES
    assert schema_of("demand", "bins")["maxItems"] == levelbins.BINS
    assert schema_of("demand", "pending", "items", "bin")["maximum"] == levelbins.BINS - 1
    assert schema_of("demand", "relative", "scale")["maximum"] == levelbins.MAX_RATIO
    assert schema_of("speed", "logRatio")["maximum"] == MAX_LOG_SPEED
    assert schema_of("speed", "samples")["maximum"] == MAX_SPEED_SAMPLES
    assert schema_of("version")["enum"] == [largest_planner().to_dict()["version"]]
    seconds, tokens = survival.SECONDS, outputsteps.UNITS
    for tail, units in (("prefillTail", seconds), ("outputTail", tokens), ("ttftTail", seconds)):
        most = survival.MAX_BOUNDS
        assert schema_of(tail, "bounds")["maxItems"] == schema_of(tail, "over")["maxItems"] == most
        assert schema_of(tail, "bounds", "items")["maximum"] == units.most
    assert schema_of("lateEvidence")["maximum"] >= latefeedback.ALARM * 0.999999


def test_the_crd_describes_every_field_the_controller_writes() -> None:
    """A field the schema leaves out is pruned by the API server (or refused where validation is
    strict, as the fake is), and the state it held is lost at each restart without a trace."""
    assert set(largest_planner().to_dict(STATUS_TIMES)) == set(schema_of()["properties"])


def test_the_largest_state_validates_and_fits_the_object_budget() -> None:
    planner = largest_planner()
    recs = tuple(Recommendation(T + 15 * i, 64) for i in range(40))  # a 10 min window at 15 s
    events = tuple(ScaleEvent(T + 60 * i, 4) for i in range(30))
    status = {"policyState": state_to_status(PolicyState(recs, events, events, planner=planner))}
    doc = with_capacity(predictive()) | {"status": status}
    validate_custom(doc)  # the schema takes every field the controller writes
    size = len(json.dumps(doc, separators=(",", ":")))
    # ~0.3 MB: a fifth of etcd's 1.5 MiB, room for the forecasters' weekly seasons (~24 KB each),
    # the cold-start samples and lastDecision (docs/controller.md, "The status's size")
    assert 250_000 < size < MAX_OBJECT_BYTES / 4, size


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        pytest.param(("needs", 0, "replicas"), MAX_LEVELS + 1, "needs.0.replicas", id="above the bound"),
        pytest.param(("needs", 0, "at"), "yesterday", "needs.0.at", id="not a date-time"),
        pytest.param(("speed", "ready"), 2**31, "speed.ready", id="beyond int32"),
        pytest.param(("demand", "primed"), "yes", "demand.primed", id="a string for a bool"),
        pytest.param(("demand", "surprise"), 1, "demand", id="an unknown field"),
    ],
)
def test_the_fake_api_refuses_what_the_schema_does(path: tuple[Any, ...], value: Any, field: str) -> None:
    planner = PlannerState(needs=((T, 3),), speed=SpeedState(0.0, 1.0, 1)).to_dict(STATUS_TIMES)
    planner["demand"] = largest_planner().to_dict(STATUS_TIMES)["demand"]
    node: Any = planner
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    doc = with_capacity(predictive()) | {"status": {"policyState": {"planner": planner}}}
    with pytest.raises(ApiStatus) as info:
        validate_custom(doc)
    fields = {c["field"] for c in info.value.causes}
    assert f"status.policyState.planner.{field}" in fields, fields


def test_a_demand_state_from_before_the_mix_still_validates_and_loads() -> None:
    """Written before 2026-12-03: smoothed rates and token series where the mix is now."""
    planner = largest_planner().to_dict(STATUS_TIMES)
    old = planner["demand"]
    del old["mix"]
    old |= {"finished": 5.0, "prompt": 5000.0, "generated": 1000.0}
    old |= {"promptTokens": {"level": 5000.0, "trend": 0.0}, "outputTokens": {"level": 1000.0, "trend": 0.0}}
    validate_custom(with_capacity(predictive()) | {"status": {"policyState": {"planner": planner}}})
    loaded = PlannerState.from_dict(planner, STATUS_TIMES).demand
    assert loaded is not None and loaded.mix == Mix(0.0, 1000.0, 200.0, spread_prompt=1000.0)


async def test_a_status_too_large_for_etcd_is_refused_as_the_api_does() -> None:
    async with environment() as env:
        env.start(1, with_capacity(predictive()))
        huge = {"lastDecision": {"stages": [{"message": "x" * 1000} for _ in range(2000)]}}  # ~2 MB
        with pytest.raises(Exception) as info:
            await env.kube.patch_autoscaler_status(NS, NAME, huge)
        assert "etcdserver: request is too large" in str(info.value)
        bigger = {"lastDecision": {"stages": [{"message": "x" * 1000} for _ in range(4000)]}}  # ~4 MB
        with pytest.raises(Exception) as info:
            await env.kube.patch_autoscaler_status(NS, NAME, bigger)
        assert "Request entity too large: limit is 3145728" in str(info.value)
