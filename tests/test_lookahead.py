"""lookahead.py: the tick's forecast and sizing ahead, each horizon worked out once, its loads
capacityfacts.load_of's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_policy_planner import NOW, planner_spec

from autoscaler.policy import band, burstsize, capacity, capacityfacts, demand, lookahead


def _ahead() -> lookahead.Lookahead:
    spec = planner_spec()
    cap = spec.capacity
    assert cap is not None
    state = None
    for k in range(8):  # a rising demand: the forecast ahead differs from the level
        state, _ = demand.observe(
            cap.demand, state, NOW + 15.0 * k, 10.0 + k, 5_000.0 + 500 * k, 2_000.0, 40.0
        )
    assert state is not None
    return lookahead.Lookahead(capacityfacts.facts(cap), state, 1.0, spec.max_replicas)


def test_each_horizon_is_forecast_and_sized_once_a_tick() -> None:
    ahead = _ahead()
    at_300 = ahead.sizing_at(300.0)
    assert ahead.need_at(300.0) == at_300.replicas
    assert ahead.forecast_at(0.0)[0] is ahead.mean_now  # the level, not forecast again
    assert ahead.upper_at(300.0).requests > ahead.upper_at(0.0).requests  # the trend read ahead
    mean, upper = ahead.forecast_at(300.0)
    # read back from the tick's caches (a compiled build returns equal tuples, not the same ones)
    kept = ahead._at[300.0]  # what the tick read at 300 s, one record
    kept.sized = capacity.Sizing(at_300.replicas + 7, *at_300.values()[1:])
    kept.mean, kept.upper = upper, mean
    assert ahead.sizing_at(300.0).replicas == at_300.replicas + 7
    assert ahead.forecast_at(300.0) == (upper, mean) and ahead.need_at(300.0) == at_300.replicas + 7


def test_the_burst_is_sized_like_a_forecast_at_the_same_demand() -> None:
    ahead = _ahead()
    upper = ahead.upper_at(120.0)
    expected = burstsize.size(
        ahead.profile, ahead.slo, upper, ahead.speed, ahead.limit, ahead.spread, ahead.shape
    )
    assert ahead.burst(upper) == expected == ahead.sizing_at(120.0)


def test_the_loads_kept_are_the_loads_of_the_forecasts_and_the_band_over_them_the_same() -> None:
    """The level's load and each horizon's mean load, kept for plan() and band.upper, are load_of
    of the demands they stand for, and the band given them is the band that computes them."""
    ahead = _ahead()
    profile = ahead.profile
    observed = ahead._observed
    assert ahead.level == capacityfacts.load_of(profile, ahead.mean_now)
    for h in (0.0, 45.0, 300.0):
        mean, upper = ahead.forecast_at(h)
        assert ahead.mean_load_at(h) == capacityfacts.load_of(profile, mean)
        assert upper == band.upper(ahead._demand, observed, mean, ahead.load)  # computes both loads
    fresh = _ahead()
    assert fresh.mean_load_at(120.0) == capacityfacts.load_of(profile, fresh.forecast_at(120.0)[0])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.floats(min_value=0.0, max_value=500.0), min_size=2, max_size=60),
    st.lists(st.floats(min_value=0.0, max_value=1_800.0), min_size=1, max_size=6),
)
def test_the_band_read_once_a_bin_is_band_upper_to_the_bit(rates: list[float], horizons: list[float]) -> None:
    """forecast_at's upper band, its width worked out once a tick for each bin, is band.upper's
    over the same mean, on states whose errors were scored (both bins, early and due)."""
    spec = planner_spec()
    cap = spec.capacity
    assert cap is not None
    d = cap.demand
    load = capacityfacts._load_function(cap.profile)
    state = None
    for k, r in enumerate(rates):
        now = NOW + 15.0 * k
        state, _ = demand.observe(d, state, now, r, 400.0 * r, 150.0 * r, 3.0 * r)
        level = load(demand.expected(d, state, 0.0))
        ahead_load = load(demand.expected(d, state, 120.0))
        state = band.track(d, state, now, level, 120.0, ahead_load, load(state.typical))
    assert state is not None
    ahead = lookahead.Lookahead(capacityfacts.facts(cap), state, 1.0, spec.max_replicas)
    for h in [*horizons, 0.0, *horizons]:
        mean, upper = ahead.forecast_at(h)
        assert mean == demand.expected(d, state, h)
        assert upper == band.upper(d, state, mean, load)
