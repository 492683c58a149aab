"""The gateway's arrivals counter (capacity.demand.arrivalRateMetric): read as the arrivals when it
has a reading, the finishes + the in-flight growth when it has none."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.policy import demand
from autoscaler.policy.capacityspec import DemandSpec
from autoscaler.policy.observation import MetricReading
from autoscaler.specsections import DemandModel

SPEC = DemandSpec()


def _clumped(counter: bool, clump_s: float, tick: float = 15.0, window_s: float = 5.0) -> demand.DemandState:
    """Poisson arrivals at 10/s whose finishes come in clumps (every request in service ends at the
    next multiple of clump_s, as a batch's end together), read every tick as 5-second rates (the
    adapter's scrape) and the in flight; `counter`: the gateway's arrivals rate read too."""
    rng = np.random.default_rng(1)
    end = tick * 600
    arrived = np.sort(rng.uniform(0.0, end, rng.poisson(10.0 * end)))
    done = np.sort(np.ceil((arrived + rng.exponential(30.0, len(arrived))) / clump_s) * clump_s)
    state = None
    for t in np.arange(tick * 4, end, tick):
        finished = (np.searchsorted(done, t) - np.searchsorted(done, t - window_s)) / window_s
        came = (np.searchsorted(arrived, t) - np.searchsorted(arrived, t - window_s)) / window_s
        inflight = float(np.searchsorted(arrived, t) - np.searchsorted(done, t))
        state, _ = demand.observe(
            SPEC,
            state,
            float(t),
            finished,
            1e3 * finished,
            1e2 * finished,
            inflight,
            window_s=window_s,
            arrived=came if counter else None,
            arrived_window_s=window_s,
        )
    assert state is not None
    return state


def test_clumped_finishes_read_as_bursts_the_arrivals_counter_does_not() -> None:
    """Finishes in clumps 3.3 s apart read through a 5 s rate as an index of 2.6 over the TTFT
    target's 2 s (13 over the tick) where the arrivals are Poisson; the gateway's counter, read
    through the same 5 s window about a level of its own, gives Poisson's ~1 (its own dt / window
    is subtracted as the finishes' is: read_variance). The level stays the engines'."""
    finishes = _clumped(counter=False, clump_s=3.3)
    assert demand.dispersion(finishes, 2.0) > 2.0
    counted = _clumped(counter=True, clump_s=3.3)
    assert demand.dispersion(counted, 2.0) == pytest.approx(1.0, abs=0.06)
    assert demand.dispersion(counted, 15.0) == pytest.approx(1.0, abs=0.4)
    assert counted.requests == finishes.requests


def test_without_a_reading_the_finishes_and_the_growth_are_the_arrivals() -> None:
    """No counter reading (None): the state is what it is without the counter, bit for bit."""
    state, _ = demand.observe(SPEC, None, 0.0, 5.0, 5000.0, 1000.0, 10.0)
    plain, est = demand.observe(SPEC, state, 15.0, 5.0, 5000.0, 1000.0, 40.0, window_s=5.0)
    fallback, est2 = demand.observe(
        SPEC, state, 15.0, 5.0, 5000.0, 1000.0, 40.0, window_s=5.0, arrived=None, arrived_window_s=5.0
    )
    assert fallback == plain and est2 == est
    assert est.now.requests == pytest.approx(7.0)  # 5/s finished + 30 more in flight over 15 s


def test_a_reading_moves_the_dispersion_not_the_level() -> None:
    """The level (and the band scored on it) keeps the finishes + the growth, which counts every
    arrival of the tick (a 5 s rate of the counter sees a third of it); the dispersion's count is
    the gateway's, about the counter's own level once it has one (its first reading starts it)."""
    state, _ = demand.observe(SPEC, None, 0.0, 5.0, 5000.0, 1000.0, 10.0)
    state, _ = demand.observe(SPEC, state, 15.0, 5.0, 5000.0, 1000.0, 10.0)
    plain, _ = demand.observe(SPEC, state, 30.0, 5.0, 5000.0, 1000.0, 40.0)
    first, _ = demand.observe(
        SPEC, state, 30.0, 5.0, 5000.0, 1000.0, 40.0, arrived=5.0, arrived_window_s=15.0
    )
    assert first.spread == plain.spread and first.counted == demand.Series(5.0, 0.0)
    # the arrivals in flight too are the gateway's (lasting.py), the rest the finishes + the growth
    assert first.lasting.rate == 5.0 < plain.lasting.rate
    assert first._replace(counted=None, lasting=plain.lasting) == plain
    burst, est2 = demand.observe(
        SPEC, first, 45.0, 5.0, 5000.0, 1000.0, 40.0, arrived=20.0, arrived_window_s=15.0
    )
    after, est3 = demand.observe(SPEC, plain, 45.0, 5.0, 5000.0, 1000.0, 40.0)
    assert est2 == est3 and est3.now.requests == pytest.approx(5.0)  # the engines' count
    assert burst.requests == after.requests  # the level: the engines'
    assert burst.spread[0] > after.spread[0]  # 20/s counted against the counter's 5: a burst
    lost, _ = demand.observe(SPEC, burst, 60.0, 5.0, 5000.0, 1000.0, 40.0)
    assert lost.counted is None  # no reading: the next one starts its level again


def test_the_spec_field() -> None:
    assert DemandSpec().arrival_rate_metric is None  # engines alone by default
    spec = DemandModel.model_validate({"arrivalRateMetric": "infscale_arrival_rate"}).to_spec()
    assert spec.arrival_rate_metric == "infscale_arrival_rate"
    with pytest.raises(ValueError, match="arrivalRateMetric"):
        DemandModel.model_validate({"arrivalRateMetric": ""})
    with pytest.raises(ValueError, match="arrival_rate_metric"):
        DemandSpec(arrival_rate_metric="")


def test_the_metric_is_fetched_only_when_named() -> None:
    from tests.test_policy_planner import planner_spec

    plain = planner_spec(demand=DemandSpec())
    assert plain.capacity is not None and "infscale_arrival_rate" not in plain.capacity.metric_names
    named = planner_spec(demand=DemandSpec(arrival_rate_metric="infscale_arrival_rate"))
    assert named.capacity is not None and "infscale_arrival_rate" in named.capacity.metric_names


def test_the_planner_reads_the_counter_and_falls_back_without_a_reading() -> None:
    from autoscaler.policy.decide import decide
    from autoscaler.policy.state import PolicyState
    from tests.test_policy_planner import NOW, obs, planner_spec, readings

    named = planner_spec(demand=DemandSpec(arrival_rate_metric="infscale_arrival_rate"))
    plain = planner_spec(demand=DemandSpec())

    def spread(spec: object, counter: list[MetricReading | None]) -> tuple[float, float]:
        state = PolicyState()
        for i, reading in enumerate(counter):
            metrics = (
                readings(40.0) if reading is None else {**readings(40.0), "infscale_arrival_rate": reading}
            )
            _, state = decide(spec, state, obs(8, metrics), NOW + 15 * i)  # type: ignore[arg-type]
        assert state.planner is not None and state.planner.demand is not None
        return state.planner.demand.spread

    steady = spread(plain, [None] * 6)
    bursts = [MetricReading.of(80.0 * (i % 2)) for i in range(6)]  # 80/s, 0, 80/s, ...: 40/s on average
    assert spread(named, bursts)[0] > 100 * max(steady[0], 1.0)
    assert spread(plain, bursts) == steady  # not named: not read
    assert spread(named, [MetricReading.failed("no data")] * 6) == steady  # no reading: the engines'
