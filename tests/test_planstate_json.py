"""The predictive stages' memory as JSON (planstate.PlannerState, demand.DemandState; the rules in
policy/statejson.py): every state the policy makes reads back exactly, in seconds and in the
status's RFC 3339; what is malformed, hostile or too long is refused naming its path, before it is
walked; a state the reader accepts never crashes a decision."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_policy_planner import NOW, QUEUE, obs, planner_spec

from autoscaler.controller.crd import STATUS_TIMES
from autoscaler.policy import band, demand, levelbins
from autoscaler.policy.capacity import Demand
from autoscaler.policy.decide import decide, record_rescale
from autoscaler.policy.demand import DemandState, Series
from autoscaler.policy.lasting import Lasting
from autoscaler.policy.levelbins import Heights, Relative
from autoscaler.policy.mix import Mix
from autoscaler.policy.observation import MetricReading
from autoscaler.policy.panic import PanicState
from autoscaler.policy.planstate import MAX_LEVELS, PlannerState
from autoscaler.policy.speedlearn import SpeedState
from autoscaler.policy.state import PolicyState
from autoscaler.policy.statejson import SECONDS, TimeCodec

CODECS = [pytest.param(SECONDS, id="seconds"), pytest.param(STATUS_TIMES, id="rfc3339")]
# a steady 30 req/s with nothing waiting: what the older states' tests decide on after loading
STEADY = {
    QUEUE: MetricReading.of(0.0),
    "infscale_request_rate": MetricReading.of(30.0),
    "infscale_prompt_token_rate": MetricReading.of(9000.0),
    "infscale_generation_token_rate": MetricReading.of(4500.0),
    "infscale_inflight": MetricReading.of(60.0),
}


def through_json(state: PlannerState, codec: TimeCodec) -> PlannerState:
    text = json.dumps(state.to_dict(codec), allow_nan=False)  # NaN or inf in the output fails here
    return PlannerState.from_dict(json.loads(text), codec)


def policy_states(rates: list[float], queues: list[float]) -> list[PlannerState]:
    """Each tick's planner state over a closed loop (the replicas follow the decisions), with the
    queue making the replicas saturated at times (the learned speed) and bursts (panic)."""
    spec = planner_spec(
        demand=demand.DemandSpec(
            prompt_square_metric="infscale_prompt_token_square_rate",
            output_square_metric="infscale_output_token_square_rate",
            output_sum_metric="infscale_finished_output_token_rate",
            arrival_rate_metric="infscale_arrival_rate",
        )
    )
    state, replicas, out = PolicyState(), 2, []
    for i, (rate, queue) in enumerate(zip(rates, queues, strict=False)):
        now = NOW + 15 * i
        metrics = {
            QUEUE: MetricReading.of(queue),
            "infscale_request_rate": MetricReading.of(rate),
            "infscale_prompt_token_rate": MetricReading.of(rate * 300.0),
            "infscale_generation_token_rate": MetricReading.of(rate * 150.0),
            "infscale_inflight": MetricReading.of(rate * 2.0 + queue),
            # prompts of 300 tokens with cv² 1.5 (E[x²] = 2.5 · 300²)
            "infscale_prompt_token_square_rate": MetricReading.of(rate * 2.5 * 300.0**2),
            # outputs of 150 tokens with cv² 3 (E[o²] = 4 · 150²)
            "infscale_output_token_square_rate": MetricReading.of(rate * 4.0 * 150.0**2),
            "infscale_finished_output_token_rate": MetricReading.of(rate * 150.0),
            # the gateway's count, lost at times (its level then starts again)
            "infscale_arrival_rate": MetricReading.of(rate * 1.1)
            if queue != 5.0
            else MetricReading.failed("no data"),
        }
        decision, state = decide(spec, state, obs(replicas, metrics), now)
        if decision.scale:
            state = record_rescale(spec, state, now, replicas, decision.desired_replicas)
            replicas = decision.desired_replicas
        assert state.planner is not None
        out.append(state.planner)
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.floats(0.0, 400.0), min_size=2, max_size=120),
    st.lists(st.sampled_from([0.0, 0.0, 5.0, 50.0, 400.0]), min_size=120, max_size=120),
)
def test_every_state_the_policy_makes_reads_back_exactly(rates: list[float], queues: list[float]) -> None:
    for state in policy_states(rates, queues):
        for codec in (SECONDS, STATUS_TIMES):
            assert through_json(state, codec) == state


def test_the_time_line_reaches_every_part_of_the_state() -> None:
    """The property above is not vacuous: its states hold forecasts, peaks, a need history, gaps,
    a learned speed and a panic."""
    rates = [5.0] * 20 + [200.0] * 4 + [60.0] * 30 + [1.0] * 60 + [120.0] * 6 + [2.0] * 40
    # the backlog that began on 2 replicas stands while the fleet grows (no sample); the one at the
    # end begins on the 44 it finds, which it saturates (samples)
    queues = [0.0] * 20 + [400.0] * 8 + [50.0] * 30 + [0.0] * 82 + [50.0] * 8 + [0.0] * 12
    states = policy_states(rates, queues)
    assert any(s.demand is not None and s.demand.pending and s.demand.peaks for s in states)
    assert any(s.demand is not None and len(s.demand.bins) == 2 and s.demand.relative.scored for s in states)
    assert any(s.demand is not None and s.demand.spread[1] > 0.0 for s in states)
    assert any(s.demand is not None and s.demand.counted is not None for s in states)
    assert any(s.demand is not None and s.demand.lasting.excess != 0.0 for s in states)
    assert any(len(s.needs) > 2 for s in states) and any(s.gaps for s in states)
    assert any(s.speed.samples > 0 for s in states) and any(s.panic.since is not None for s in states)
    assert any(s.speed.backlog_ready for s in states)
    assert states[0].found == (NOW, 2) and states[-1].found is None  # held at first, then forgotten
    assert all(through_json(s, STATUS_TIMES) == s for s in states)


# --- states at and beyond the bounds ---------------------------------------------------------------

finite = st.floats(-1e15, 1e15, allow_nan=False)  # the reader's whole range
positive = st.floats(0.0, 1e15, allow_nan=False)
times = st.floats(NOW - 1e5, NOW + 1e5, allow_nan=False)


@st.composite
def demand_states(draw: st.DrawFn) -> DemandState:
    made = sorted(draw(st.lists(times, max_size=demand.MAX_PENDING)))
    loads, bins_of = st.sampled_from([-1.0, 3.5]), st.sampled_from([-1, 0, 1])
    pending = tuple((m, m + draw(st.floats(0.0, 600.0)), draw(loads), draw(bins_of)) for m in made)
    bins = draw(st.lists(st.tuples(st.floats(0.0, 4.0), st.floats(0.0, 1000.0)), max_size=levelbins.BINS))
    peak_times = sorted(draw(st.lists(times, max_size=demand.MAX_PENDING + 1)))
    loads = sorted(draw(st.lists(positive, min_size=len(peak_times), max_size=len(peak_times), unique=True)))
    return DemandState(
        draw(times),
        draw(finite),
        Mix(
            draw(positive),
            draw(positive),
            draw(positive),
            draw(st.sampled_from([0.0, 1.5e8])),
            draw(positive),
            draw(positive),
            draw(st.sampled_from([0.0, 9e4])),
            draw(positive),
        ),
        Series(draw(finite), draw(finite)),
        draw(st.booleans()),
        pending,
        draw(st.floats(-4.4, 4.4)),
        draw(st.floats(0.0, 4.0)),
        draw(st.floats(0.0, 1000.0)),
        Demand(draw(positive), draw(positive), draw(positive)),
        tuple(zip(peak_times, reversed(loads), strict=True)),
        draw(positive),
        tuple(bins),
        Relative(draw(st.floats(-8.8, 8.8)), draw(st.floats(0.0, 8.0)), draw(st.floats(0.0, 1000.0))),
        (draw(finite), draw(positive)),
        lasting=Lasting(draw(st.floats(0.0, 600.0)), draw(finite), draw(finite)),
        heights=Heights(
            draw(st.floats(-2 * band.MAX_HEIGHT, 2 * band.MAX_HEIGHT)),
            draw(st.floats(0.0, band.MAX_HEIGHT)),
            draw(st.floats(0.0, 1000.0)),
            draw(finite),
            draw(positive),
            draw(finite),
        ),
    )


@st.composite
def planner_states(draw: st.DrawFn, most: int = 60) -> PlannerState:
    counts = sorted(draw(st.sets(st.integers(0, MAX_LEVELS), max_size=most)), reverse=True)
    needs = tuple((draw(times), n) for n in counts)
    peak = counts[0] if counts else 0
    gaps = tuple(draw(st.lists(st.floats(0.0, 1e5), max_size=min(peak, most))))
    return PlannerState(
        draw(st.none() | demand_states()),
        SpeedState(
            draw(st.floats(-5.0, 5.0)),
            draw(st.floats(0.0, 100.0)),
            draw(st.integers(0, 10**6)),
            draw(st.integers(0, 1000)),
            draw(positive),
        ),
        needs,
        PanicState(draw(st.none() | times), draw(times)),
        draw(finite),
        gaps,
        draw(positive),
        draw(st.none() | st.tuples(times, st.integers(0, MAX_LEVELS))),
    )


@settings(max_examples=200, deadline=None)
@given(planner_states(), st.sampled_from([SECONDS, STATUS_TIMES]))
def test_round_trip_of_any_state_within_the_bounds(state: PlannerState, codec: TimeCodec) -> None:
    assert through_json(state, codec) == state


def test_an_older_demand_state_without_the_heights_plans_bin_0_in_log_space() -> None:
    """A state saved before bin 0's heights (levelbins.Heights): none scored, the lean at 0, so
    bin 0 plans on its log band until the heights have scored their own errors (band.track)."""
    doc = good()
    assert "heights" in doc["demand"]
    del doc["demand"]["heights"]
    state = PlannerState.from_dict(doc)
    assert state.demand is not None and state.demand.heights == Heights()
    with pytest.raises(ValueError, match=r"demand.heights.scale"):
        negative = {"quantile": 0.0, "scale": -1.0, "scored": 0.0, "mean": 0.0, "variance": 0.0, "lean": 0.0}
        PlannerState.from_dict({**doc, "demand": {**doc["demand"], "heights": negative}})


def test_a_state_at_the_bounds_reads_back_and_the_next_entry_is_refused() -> None:
    needs = tuple((NOW + i, MAX_LEVELS - i) for i in range(MAX_LEVELS + 1))  # 4096 ... 0
    full = PlannerState(needs=needs, gaps=(60.0,) * MAX_LEVELS)
    assert through_json(full, STATUS_TIMES) == full
    doc = full.to_dict()
    doc["gaps"].append(1.0)
    with pytest.raises(ValueError, match=rf"planner.gaps: expected a list of at most {MAX_LEVELS}"):
        PlannerState.from_dict(doc)


def test_levels_above_the_bound_are_folded_into_it() -> None:
    """A reactive proposal far above maxReplicas: the history's entries above 4,096 become one at
    4,096 (the newest of them), the gaps above it go; the rest is kept as it was."""
    state = PlannerState(
        needs=((NOW, 9000), (NOW + 15, 5000), (NOW + 30, 12), (NOW + 45, 3)), gaps=(30.0,) * 9000
    )
    bounded = state.bounded()
    assert bounded.needs == ((NOW + 15, MAX_LEVELS), (NOW + 30, 12), (NOW + 45, 3))
    assert bounded.gaps == (30.0,) * MAX_LEVELS
    assert through_json(state, SECONDS) == bounded
    small = PlannerState(needs=((NOW, 12),), gaps=(1.0,) * 12)
    assert small.bounded() is small


# --- hostile and malformed input -------------------------------------------------------------------


def good() -> dict[str, Any]:
    rates = [5.0] * 20 + [200.0] * 4 + [60.0] * 30 + [1.0] * 20
    return policy_states(rates, [0.0] * 20 + [400.0] * 8 + [0.0] * 46)[-1].to_dict()


def _set(path: str, value: Any) -> Any:
    def change(doc: dict[str, Any]) -> None:
        *head, last = path.split(".")
        node: Any = doc
        for part in head:
            node = node[int(part)] if part.isdigit() else node[part]
        if last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value

    return change


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(
            _set("demand.requests.level", math.nan),
            r"planner.demand.requests.level: expected a finite",
            id="NaN level",
        ),
        pytest.param(
            _set("demand.typical.requests", math.inf),
            r"planner.demand.typical.requests: expected a finite",
            id="inf",
        ),
        pytest.param(
            _set("speed.queue", -math.inf), r"planner.speed.queue: expected a finite", id="-inf queue"
        ),
        pytest.param(
            _set("startedFor", math.nan), r"planner.startedFor: expected a finite number", id="NaN load"
        ),
        pytest.param(_set("needs.0.at", math.nan), r"planner.needs\[0\].at: expected a time", id="NaN time"),
        pytest.param(_set("panic.last", math.inf), r"planner.panic.last: expected a time", id="inf time"),
        pytest.param(
            _set("gaps", [1.0, -1.0]),
            r"planner.gaps\[1\]: expected a finite number in \[0, 1e\+09\], got -1.0",
            id="negative gap",
        ),
        pytest.param(
            _set("startedFor", "1"), r"planner.startedFor: expected a finite number.*got '1'", id="a string"
        ),
        pytest.param(
            _set("needs.0.replicas", 2.5),
            r"planner.needs\[0\].replicas: expected an integer",
            id="a fraction",
        ),
        pytest.param(
            _set("needs.0.replicas", True), r"planner.needs\[0\].replicas: expected an integer", id="a bool"
        ),
        pytest.param(
            _set("speed", [0.0, 1.0, 2]), r"planner.speed: expected an object", id="the first form's list"
        ),
        pytest.param(
            _set("demand", "yes"),
            r"planner.demand: expected an object, got 'yes'",
            id="a string for an object",
        ),
        pytest.param(
            _set("needs", {"at": 1}),
            r"planner.needs: expected a list of at most 4097",
            id="an object for a list",
        ),
        pytest.param(
            _set("demand.errorQuantile", 1e9),
            r"planner.demand.errorQuantile: expected a finite number in \[-8, 8\]",
            id="out of range",
        ),
        pytest.param(
            _set("speed.logRatio", 800.0),
            r"planner.speed.logRatio: expected a finite number in \[-50, 50\]",
            id="exp overflow",
        ),
        pytest.param(
            _set("demand.requests.level", 1e300),
            r"planner.demand.requests.level: expected a finite number in \[-1e\+15, 1e\+15\]",
            id="huge rate",
        ),
        pytest.param(
            _set("demand.mix.promptPerRequest", -1.0),
            r"planner.demand.mix.promptPerRequest: expected a finite number in \[0, 1e\+15\]",
            id="negative mix",
        ),
        pytest.param(_set("version", 1), r"planner.version: expected 2, got 1", id="the first form"),
        pytest.param(
            _set("demand.version", None),
            r"planner.demand.version: expected 2, got None",
            id="no demand version",
        ),
    ],
)
def test_malformed_input_is_refused_naming_its_path(change: Any, message: str) -> None:
    doc = good()
    change(doc)
    with pytest.raises(ValueError, match=message):
        PlannerState.from_dict(doc)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        pytest.param("needs", [{"at": NOW, "replicas": 1}] * 10**6, id="a million needs"),
        pytest.param("gaps", [1.0] * 10**6, id="a million gaps"),
        pytest.param(
            "demand.pending", [{"madeAt": NOW, "dueAt": NOW, "load": 1.0}] * 10**6, id="a million forecasts"
        ),
        pytest.param("demand.peaks", [{"at": NOW, "load": 1.0}] * 10**6, id="a million peaks"),
    ],
)
def test_a_huge_list_is_refused_without_being_walked(path: str, value: list[Any]) -> None:
    doc = good()
    _set(path, value)(doc)
    begun = time.perf_counter()
    with pytest.raises(ValueError, match=rf"planner.{path}: expected a list of at most \d+, got \["):
        PlannerState.from_dict(doc)
    assert time.perf_counter() - begun < 0.05  # refused on its length, not item by item


def test_out_of_order_history_is_refused() -> None:
    """The scale-down's walk down the levels and the scoring's search for a window's peak rely on
    the order the policy keeps (scaledown.remember, band.track)."""
    doc = good()
    assert len(doc["needs"]) >= 2 and doc["demand"]["pending"]
    doc["needs"] = list(reversed(doc["needs"]))
    with pytest.raises(ValueError, match=r"planner.needs\[1\].replicas: expected the counts falling"):
        PlannerState.from_dict(doc)
    doc = good()
    doc["demand"]["pending"][0]["dueAt"] = NOW - 1e6
    with pytest.raises(
        ValueError, match=r"planner.demand.pending\[0\].madeAt: expected the forecasts in order"
    ):
        PlannerState.from_dict(doc)


def test_a_state_without_fields_reads_with_their_defaults() -> None:
    doc = good()
    for name in ("speed", "panic", "startedFor", "gaps", "typicalCapacity", "needs", "demand"):
        del doc[name]
    assert PlannerState.from_dict(doc) == PlannerState()
    assert PlannerState.from_dict({"version": 2}) == PlannerState()
    with pytest.raises(ValueError, match=r"planner: expected an object, got \[\]"):
        PlannerState.from_dict([])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"planner.version: expected 2, got None"):
        PlannerState.from_dict({})


def test_the_found_fleet_reads_back_is_optional_and_bounded() -> None:
    """A state written before the found fleet existed reads without it (no hold: a restart with
    memory is no first sight); a count above the bound is folded into it; a malformed one is refused."""
    state = PlannerState(needs=((NOW, 3),), found=(NOW, 12))
    doc = state.to_dict(STATUS_TIMES)
    assert doc["found"] == {"at": STATUS_TIMES.encode(NOW), "replicas": 12}
    assert PlannerState.from_dict(doc, STATUS_TIMES) == state
    del doc["found"]
    assert PlannerState.from_dict(doc, STATUS_TIMES) == state._replace(found=None)
    assert "found" not in PlannerState(needs=((NOW, 3),)).to_dict()
    assert through_json(state._replace(found=(NOW, 9000)), SECONDS).found == (NOW, MAX_LEVELS)
    with pytest.raises(ValueError, match=r"planner.found.replicas: expected an integer"):
        PlannerState.from_dict({**state.to_dict(), "found": {"at": NOW, "replicas": -1}})
    with pytest.raises(ValueError, match=r"planner.found.at"):
        PlannerState.from_dict({**state.to_dict(), "found": {"replicas": 3}})


def test_an_older_demand_state_without_the_bins_reads_and_plans_on_the_pooled_band() -> None:
    """A state saved before the bins (levelbins.py): no bins, no ratio tracker, pending forecasts
    without a bin (-1: scored into the pooled tracker alone); the band is the pooled one until the
    bins score errors of their own, and the next decisions are made."""
    doc = good()
    demand_doc = doc["demand"]
    assert demand_doc["pending"] and demand_doc["bins"]
    for name in ("bins", "relative"):
        del demand_doc[name]
    for p in demand_doc["pending"]:
        del p["bin"]
    state = PlannerState.from_dict(doc)
    assert state.demand is not None
    assert state.demand.bins == () and state.demand.relative == Relative()
    assert {b for _, _, _, b in state.demand.pending} == {-1}
    spec = demand.DemandSpec()
    pooled = band.error_quantile(spec, state.demand)
    assert band.band_quantile(spec, state.demand, 0.0, 1.0) == pooled
    planner_state = state
    policy = PolicyState(planner=planner_state)
    at = state.demand.at
    for i in range(1, 60):
        _, policy = decide(planner_spec(demand=spec), policy, obs(4, STEADY), at + 15 * i)
    assert policy.planner is not None and policy.planner.demand is not None
    assert policy.planner.demand.bins  # scored since


def test_an_older_demand_state_without_the_spread_reads_as_poisson_and_counts_from_there() -> None:
    """A state saved before the arrivals' dispersion (demand.spread): none counted, so the sizing
    plans on Poisson arrivals (dispersion 1) until the next decisions count some."""
    doc = good()
    del doc["demand"]["spread"]
    state = PlannerState.from_dict(doc)
    assert state.demand is not None and state.demand.spread == (0.0, 0.0)
    assert demand.dispersion(state.demand, 2.0) == 1.0
    with pytest.raises(ValueError, match=r"demand.spread.count"):
        negative = {"excessPerSecond": 1.0, "count": -1}
        PlannerState.from_dict({**doc, "demand": {**doc["demand"], "spread": negative}})
    policy = PolicyState(planner=state)
    for i in range(1, 4):
        _, policy = decide(planner_spec(), policy, obs(4, STEADY), state.demand.at + 15 * i)
    assert policy.planner is not None and policy.planner.demand is not None
    assert policy.planner.demand.spread[1] > 0.0


def test_an_older_demand_state_without_the_counted_level_starts_one_at_the_next_reading() -> None:
    """A state saved before the gateway's count (demand.counted), or after a tick without its
    reading: none, so the next reading starts the count's level and the one after is counted."""
    doc = good()
    assert "counted" in doc["demand"]
    del doc["demand"]["counted"]
    state = PlannerState.from_dict(doc)
    assert state.demand is not None and state.demand.counted is None
    with pytest.raises(ValueError, match=r"demand.counted.level"):
        PlannerState.from_dict({**doc, "demand": {**doc["demand"], "counted": {"trend": 0.0}}})
    spec = planner_spec(demand=demand.DemandSpec(arrival_rate_metric="infscale_arrival_rate"))
    policy = PolicyState(planner=state)
    metrics = {**STEADY, "infscale_arrival_rate": MetricReading.of(33.0)}
    _, policy = decide(spec, policy, obs(4, metrics), state.demand.at + 15)
    assert policy.planner is not None and policy.planner.demand is not None
    assert policy.planner.demand.counted == Series(33.0, 0.0)


def test_an_older_demand_state_without_the_lasting_rate_reads_it_afresh_at_the_next_reading() -> None:
    """A state saved before the arrivals over the requests' time in the system (demand.lasting):
    none read, so the bursts' hold holds in flight what it holds for the prompts until the next
    readings start it (lasting.after_tick's first reading)."""
    doc = good()
    assert "lasting" in doc["demand"]
    del doc["demand"]["lasting"]
    state = PlannerState.from_dict(doc)
    assert state.demand is not None and state.demand.lasting == Lasting()
    with pytest.raises(ValueError, match=r"demand.lasting.timeInSystemS"):
        negative = {"timeInSystemS": -1.0, "rate": 1.0, "excess": 0.0}
        PlannerState.from_dict({**doc, "demand": {**doc["demand"], "lasting": negative}})
    policy = PolicyState(planner=state)
    _, policy = decide(planner_spec(), policy, obs(4, STEADY), state.demand.at + 15)
    assert policy.planner is not None and policy.planner.demand is not None
    assert policy.planner.demand.lasting.time_s > 0.0


def test_an_older_mix_without_the_prompt_squares_reads_as_no_histogram() -> None:
    """A state saved before the prompt lengths' spread: the mix reads with prompt_sq 0, which the
    sizing takes as no histogram (exponential lengths), and the next reading sets it."""
    doc = good()
    mix = doc["demand"]["mix"]
    assert mix["promptSquaredPerRequest"] > 0.0  # the policy's own states carry it
    del mix["promptSquaredPerRequest"]
    state = PlannerState.from_dict(doc)
    assert state.demand is not None
    assert state.demand.mix.prompt_sq == 0.0 and state.demand.mix.lengths_cv2() is None
    assert state.demand.mix.prompt == mix["promptPerRequest"]


def test_an_older_mix_without_the_output_squares_reads_as_no_histogram() -> None:
    """A state saved before the outputs' spread (session 27): output_sq 0, which the sizing takes as
    no histogram (outputs geometric, cv² 1), its window's mean output the mix's; the policy's own
    states carry both, and read back the cv² they were saved with."""
    doc = good()
    mix = doc["demand"]["mix"]
    assert mix["outputSquaredPerRequest"] > 0.0 and mix["spreadOutputPerRequest"] > 0.0
    saved = PlannerState.from_dict(doc)
    assert saved.demand is not None
    cv2 = saved.demand.mix.outputs_cv2()
    assert cv2 is not None and cv2 == pytest.approx(3.0, rel=1e-3)
    del mix["outputSquaredPerRequest"], mix["spreadOutputPerRequest"]
    state = PlannerState.from_dict(doc)
    assert state.demand is not None
    read = state.demand.mix
    assert read.output_sq == 0.0 and read.outputs_cv2() is None
    assert read.spread_output == mix["outputPerRequest"]
    assert read._replace(
        output_sq=saved.demand.mix.output_sq, spread_output=saved.demand.mix.spread_output
    ) == (saved.demand.mix)


def test_an_older_mix_without_the_spreads_window_reads_the_mixs_own() -> None:
    """A state saved before the spread's own window (session 22): its requests and mean prompt are
    the mix's, so the cv² reads as it did when the state was saved (E[x²] / p² - 1)."""
    doc = good()
    mix = doc["demand"]["mix"]
    assert mix["spreadRequests"] > 0.0 and mix["spreadPromptPerRequest"] > 0.0  # the policy's own carry it
    del mix["spreadRequests"], mix["spreadPromptPerRequest"]
    state = PlannerState.from_dict(doc)
    assert state.demand is not None
    read = state.demand.mix
    assert (read.spread_requests, read.spread_prompt) == (mix["requests"], mix["promptPerRequest"])
    assert read.lengths_cv2() == mix["promptSquaredPerRequest"] / mix["promptPerRequest"] ** 2 - 1.0


def test_a_forecasts_bin_outside_the_bins_is_refused() -> None:
    doc = good()
    doc["demand"]["pending"][0]["bin"] = levelbins.BINS
    message = r"planner.demand.pending\[0\].bin: expected an integer in \[-1, 1\]"
    with pytest.raises(ValueError, match=message):
        PlannerState.from_dict(doc)


def test_gaps_beyond_the_histories_peak_are_dropped_as_record_drops_them() -> None:
    doc = PlannerState(needs=((NOW, 3),), gaps=(1.0, 2.0, 3.0)).to_dict()
    doc["gaps"] = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert PlannerState.from_dict(doc).gaps == (1.0, 2.0, 3.0)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planner_states(most=30), st.sampled_from([0.0, 3.0, 500.0]), st.integers(1, 60))
def test_a_state_the_reader_accepts_never_crashes_a_decision(
    state: PlannerState, rate: float, replicas: int
) -> None:
    """Whatever a status held that passed the reader, the next decisions are made (the values may
    be odd, the process does not stop): extreme but accepted levels, trends, bands and histories."""
    restored = PlannerState.from_dict(state.to_dict())
    spec = planner_spec()
    policy = PolicyState(planner=restored)
    now = max([NOW, *(t for t, _ in restored.needs)]) + 15.0
    for i in range(3):
        metrics = {
            QUEUE: MetricReading.of(rate),
            "infscale_request_rate": MetricReading.of(rate),
            "infscale_prompt_token_rate": MetricReading.of(rate * 300.0),
            "infscale_generation_token_rate": MetricReading.of(rate * 150.0),
            "infscale_inflight": MetricReading.of(rate),
        }
        decision, policy = decide(spec, policy, obs(replicas, metrics), now + 15.0 * i)
        assert 0 <= decision.desired_replicas <= spec.max_replicas
