"""Demand from engine counters: conservation, the damped forecast, the scored band, persistence."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from autoscaler.policy import band, demand
from autoscaler.policy import mix as mixes
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityspec import DemandSpec

SPEC = DemandSpec()


def feed(
    samples: list[tuple[float, float, float, float, float]], spec: DemandSpec = SPEC
) -> demand.DemandState:
    """(at, finished/s, prompt tok/s, generated tok/s, in flight) -> the state after them."""
    state = None
    for at, f, p, g, n in samples:
        state, _ = demand.observe(spec, state, at, f, p, g, n)
    assert state is not None
    return state


def test_arrivals_are_finished_plus_the_growth_in_flight() -> None:
    """Counters say 5/s finished while in-flight grew by 30 in 15 s: 7/s arrived."""
    state = feed([(0.0, 5.0, 5000.0, 1000.0, 10.0)])
    _, est = demand.observe(SPEC, state, 15.0, 5.0, 5000.0, 1000.0, 40.0)
    assert est.growth_per_s == pytest.approx(2.0)
    assert est.now.requests == pytest.approx(7.0)
    # the extra 2/s carry the mean tokens of a finished request: 1000 prompt and 200 output each
    assert est.now.prompt_tokens == pytest.approx(5000.0 + 2 * 1000.0)
    assert est.now.output_tokens == pytest.approx(1000.0 + 2 * 200.0)


def test_a_draining_queue_is_not_demand() -> None:
    state = feed([(0.0, 8.0, 8000.0, 1600.0, 100.0)])
    _, est = demand.observe(SPEC, state, 10.0, 8.0, 8000.0, 1600.0, 20.0)
    assert est.now.requests == 0.0  # 8/s finished while 8/s left the queue: nothing arrived
    assert est.now.prompt_tokens == 0.0


def test_constant_demand_is_forecast_flat() -> None:
    state = feed([(15.0 * i, 10.0, 10_000.0, 2_000.0, 30.0) for i in range(40)])
    for h in (0.0, 60.0, 600.0):
        got = demand.expected(SPEC, state, h)
        assert got.requests == pytest.approx(10.0, rel=1e-6)
        assert got.prompt_tokens == pytest.approx(10_000.0, rel=1e-6)


def test_the_damped_trend_never_runs_away() -> None:
    """A ramp of +0.1/s per second: the forecast grows, but by at most trend × damping_s."""
    state = feed([(15.0 * i, 1.0 + 1.5 * i, 1000.0 * (1.0 + 1.5 * i), 200.0, 0.0) for i in range(90)])
    trend = state.requests.trend  # learnt from 0 at beta 0.05 a tick: within 5 % after ~60 ticks
    assert trend == pytest.approx(0.1, rel=0.05)
    near = demand.expected(SPEC, state, 60.0).requests
    far = demand.expected(SPEC, state, 1e6).requests
    assert near > state.requests.level
    assert far == pytest.approx(state.requests.level + trend * SPEC.damping_s, rel=1e-6)


def test_the_first_difference_starts_no_trend() -> None:
    """The first sample has no earlier in-flight gauge to difference, so it reads the finishes
    alone: its difference to the second is the fleet filling, not a trend (103 -> 380 req/s in
    one tick forecast 2,580 req/s ten minutes on, which sized maxReplicas on Poisson traffic)."""
    state = feed([(0.0, 103.0, 103_000.0, 20_600.0, 0.0), (15.0, 380.0, 380_000.0, 76_000.0, 0.0)])
    assert state.requests.trend == 0.0
    assert demand.expected(SPEC, state, 600.0).requests == pytest.approx(state.requests.level)


def test_the_default_level_follows_a_step_within_four_periods() -> None:
    """10/s, then 20/s from one tick on (no trend: beta 0): the level is past 3/4 of the step four
    periods later and under a third of it after one, so a burst longer than that is scored in full
    while one scrape's noise is damped (docs/policy.md, "Defaults": alpha)."""
    spec = DemandSpec(beta=0.0)
    period = spec.smoothing_period_s
    before = [(period * i, 10.0, 10_000.0, 2_000.0, 0.0) for i in range(10)]
    step = [(period * (10 + i), 20.0, 20_000.0, 4_000.0, 0.0) for i in range(4)]
    after_one = feed([*before, step[0]], spec).requests.level
    after_four = feed([*before, *step], spec).requests.level
    assert 10.0 < after_one < 10.0 + 10.0 / 3.0
    assert 17.5 < after_four < 20.0


def requests(d: Demand) -> float:
    return d.requests


def test_the_band_starts_at_the_prior_and_learns_the_error() -> None:
    """Forecasts of 10 that come out 20, scored at the 0.9 quantile, with a typical load of 10:
    the error is log((20 + 10) / (10 + 10)), and the upper band over a mean of 10 comes out 20."""
    spec = DemandSpec(prior_error=0.25, prior_weight=8.0)
    state = feed([(0.0, 10.0, 1.0, 1.0, 0.0)], spec)
    mean = Demand(10.0, 1.0, 1.0)
    assert band.upper(spec, state, mean, requests).requests == pytest.approx(20 * math.exp(0.25) - 10)
    for i in range(1, 600):
        state = band.track(spec, state, 15.0 * i, 20.0, 60.0, 10.0, 10.0)
    assert state.scored > 100
    assert band.upper(spec, state, mean, requests).requests == pytest.approx(20.0, rel=0.05)
    assert len(state.pending) <= demand.MAX_PENDING


def test_right_forecasts_narrow_the_band_to_nothing() -> None:
    spec = DemandSpec(prior_error=0.25, prior_weight=8.0)
    state = feed([(0.0, 10.0, 1.0, 1.0, 0.0)], spec)
    for i in range(1, 400):
        state = band.track(spec, state, 15.0 * i, 10.0, 60.0, 10.0, 10.0)
    # what is left is the prior's weight: 8 of 407 samples at 0.25
    assert (
        band.upper(spec, state, Demand(10.0, 1.0, 1.0), requests).requests < 10.0 * 2 * math.exp(0.006) - 10
    )


def test_a_forecast_is_scored_against_the_peak_over_its_horizon() -> None:
    """Idle, one 15 s spike to 50 inside each 60 s horizon: the band learns the spike."""
    spec = DemandSpec(prior_error=0.0, prior_weight=0.0, quantile=0.9)
    state = feed([(0.0, 1.0, 1.0, 1.0, 0.0)], spec)
    for i in range(1, 800):
        load = 50.0 if i % 4 == 0 else 0.0
        state = band.track(spec, state, 15.0 * i, load, 60.0, 0.0, 5.0)
    # every forecast of 0 met a peak of 50: log(55 / 5); the upper band at a mean of 0 is 50
    # (a constant error: the tracker hovers within one step, 0.1 × |error|, above it)
    assert band.error_quantile(spec, state) == pytest.approx(math.log(55 / 5), abs=0.25)
    assert len(state.peaks) <= 6


def test_the_band_at_zero_spreads_over_the_typical_mix() -> None:
    spec = DemandSpec(prior_error=math.log(3.0), prior_weight=1.0)
    state = feed([(0.0, 2.0, 2000.0, 200.0, 0.0)], spec)
    up = band.upper(spec, state, Demand(0.0, 0.0, 0.0), requests)
    assert up.values() == pytest.approx((4.0, 4000.0, 400.0))


def _counted(counts: list[float], tick: float = 15.0) -> demand.DemandState:
    """The state after ticks that counted these arrivals (finished as they come, in flight steady)."""
    return feed([(tick * i, n / tick, 1e3 * n / tick, 1e2 * n / tick, 20.0) for i, n in enumerate(counts)])


def test_the_arrivals_dispersion_is_one_for_poisson_and_more_for_bursts() -> None:
    """The index of dispersion of the counts about the level's forecast: Poisson counts give ~1,
    the same mean in bursts (a tick in ten brings ten times the mean, the rest none) far more; over
    a window shorter than the tick its excess over 1 shrinks with the window."""
    rng = np.random.default_rng(0)
    poisson = _counted([float(n) for n in rng.poisson(150.0, 400)])
    assert demand.dispersion(poisson, 15.0) == pytest.approx(1.0, abs=0.25)
    bursts = _counted([1500.0 * float(x) for x in rng.random(400) < 0.1])
    wide = demand.dispersion(bursts, 15.0)
    assert wide > 100.0
    assert demand.dispersion(bursts, 2.0) - 1.0 == pytest.approx((wide - 1.0) * 2.0 / 15.0)
    # before any count, and never below Poisson's: steadier than Poisson is not planned on
    assert demand.dispersion(None, 15.0) == 1.0
    assert demand.dispersion(_counted([150.0] * 400), 15.0) == 1.0


def _read_through(window_s: float, tick: float = 15.0, rate: float = 10.0, ticks: int = 600) -> list[float]:
    """Poisson arrivals at `rate` served in exponential times (mean 30 s): each tick's finished
    rate as a w-second rate reads it (the finishes in the last window_s, over window_s) and the
    in flight then, for demand.observe."""
    rng = np.random.default_rng(1)
    end = tick * ticks
    arrived = np.sort(rng.uniform(0.0, end, rng.poisson(rate * end)))
    done = np.sort(arrived + rng.exponential(30.0, len(arrived)))
    state = None
    for t in np.arange(tick * 4, end, tick):
        finished = (np.searchsorted(done, t) - np.searchsorted(done, t - window_s)) / window_s
        inflight = float(np.searchsorted(arrived, t) - np.searchsorted(done, t))
        state, _ = demand.observe(
            SPEC, state, float(t), finished, 1e3 * finished, 1e2 * finished, inflight, window_s=window_s
        )
    assert state is not None
    return [demand.dispersion(state, tick), demand.dispersion(state, 2.0)]


@pytest.mark.parametrize("window_s", [5.0, 15.0, 60.0])
def test_poisson_arrivals_read_through_a_rate_window_are_poisson(window_s: float) -> None:
    """The arrivals counted from a finished rate over window_s and the in-flight growth: a Poisson
    stream reads as Poisson (index ~1) whatever the window, not dt / window_s (3.3 at a 5 s scrape
    and a 15 s tick, 1.3 over the TTFT target's 2 s, which read as bursts)."""
    over_tick, over_ttft = _read_through(window_s)
    assert over_tick == pytest.approx(1.0, abs=0.4)
    assert over_ttft == pytest.approx(1.0, abs=0.06)


def test_the_variance_a_poisson_count_shows_through_a_rate_window() -> None:
    assert demand.read_variance(15.0, None) == 1.0
    assert demand.read_variance(15.0, 15.0) == 1.0
    assert demand.read_variance(15.0, 5.0) == pytest.approx(3.0)
    assert demand.read_variance(15.0, 60.0) == 1.0  # a longer window: the level shares its noise


def test_a_clock_that_steps_back_starts_over() -> None:
    state = feed([(100.0, 5.0, 5.0, 5.0, 0.0), (115.0, 6.0, 6.0, 6.0, 0.0)])
    again, est = demand.observe(SPEC, state, 50.0, 3.0, 3.0, 3.0, 0.0)
    assert again.at == 50.0 and not again.primed and est.now.requests == 3.0


def test_state_round_trips_through_json_ready_dicts() -> None:
    state = feed([(15.0 * i, 10.0 + i, 1000.0, 200.0, float(i)) for i in range(10)])
    state = band.track(SPEC, state, 150.0, 12.0, 60.0, 13.0, 11.0)
    assert demand.DemandState.from_dict(state.to_dict()) == state


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        pytest.param("version", 1, r"demand.version: expected 2, got 1", id="the never-persisted first form"),
        pytest.param("requests", [1.0], r"demand.requests: expected an object", id="a series as a list"),
        pytest.param(
            "pending",
            [{"madeAt": 1.0, "dueAt": 2.0}],
            r"demand.pending\[0\].load: missing",
            id="a forecast without its load",
        ),
        pytest.param("primed", 1, "demand.primed: expected true or false, got 1", id="an int for a bool"),
        pytest.param("at", float("nan"), r"demand.at: expected a time", id="NaN time"),
        pytest.param(
            "mix",
            {"requests": float("inf"), "promptPerRequest": 1.0, "outputPerRequest": 1.0},
            r"demand.mix.requests: expected a finite number",
            id="inf weight",
        ),
        pytest.param(
            "mix", {"requests": 1.0}, r"demand.mix.promptPerRequest: missing", id="a mix half written"
        ),
        pytest.param("inflight", 1e300, r"demand.inflight: expected a finite number in", id="overflowing"),
        pytest.param("scored", True, r"demand.scored: expected a finite number", id="a bool for a number"),
        pytest.param(
            "pending",
            [{"madeAt": 5.0, "dueAt": 9.0, "load": 1.0}, {"madeAt": 4.0, "dueAt": 9.0, "load": 1.0}],
            r"demand.pending\[1\].madeAt: expected the forecasts in order",
            id="forecasts out of order",
        ),
        pytest.param(
            "peaks",
            [{"at": 1.0, "load": 1.0}, {"at": 2.0, "load": 3.0}],
            r"demand.peaks\[1\].at: expected the peaks in time order with loads falling",
            id="peaks rising",
        ),
        pytest.param(
            "pending",
            [{"madeAt": 1.0, "dueAt": 2.0, "load": 1.0}] * (demand.MAX_PENDING + 1),
            rf"demand.pending: expected a list of at most {demand.MAX_PENDING}",
            id="more forecasts than the policy keeps",
        ),
    ],
)
def test_a_malformed_state_is_refused_naming_the_field(field: str, value: object, message: str) -> None:
    data = feed([(0.0, 1.0, 1.0, 1.0, 0.0)]).to_dict()
    data[field] = value
    with pytest.raises(ValueError, match=message):
        demand.DemandState.from_dict(data)


def test_scaled_demand_scales_every_rate() -> None:
    assert Demand(2.0, 10.0, 4.0).scaled(1.5) == Demand(3.0, 15.0, 6.0)


def tick(
    spec: DemandSpec, state: demand.DemandState | None, at: float, rate: float, horizon_s: float
) -> tuple[demand.DemandState, float]:
    """One tick as planner.py runs it: observe the readings, then score against the smoothed level
    and keep the mean forecast horizon_s ahead, loads in requests/s (a steady in-flight count, so
    the demand is the rate). Returns the state and the typical load the errors were offset by."""
    state, _ = demand.observe(spec, state, at, rate, rate, rate, 0.0)
    typical = requests(state.typical)
    level = requests(demand.expected(spec, state, 0.0))
    ahead = requests(demand.expected(spec, state, horizon_s))
    return band.track(spec, state, at, level, horizon_s, ahead, typical), typical


def test_a_burst_inside_the_horizon_is_scored_through_observe_and_track() -> None:
    """20/s, one tick at 60/s, back to 20/s, inside a 60 s horizon: the forecasts of 20 made at 0
    and 15 are scored against the burst's 60, not the 20 of their due ticks, and at the burst's
    tick (it is above their band, the error quantile 0 so far: whatever comes, their error is
    above it), not a horizon later. alpha 1 at any rate (level_requests 0) makes the level the
    sample and beta 0 keeps the trend at its first difference (0), so every forecast is 20; the
    first scored error sets the error scale to its size. The log ratio is offset by the typical
    load (about 20 here, see band.upper): log((60 + T) / (20 + T)), log(60 / 20) at T = 0."""
    spec = DemandSpec(alpha=1.0, beta=0.0, level_requests=0.0)
    state: demand.DemandState | None = None
    for at in (0.0, 15.0):
        state, _ = tick(spec, state, at, 20.0, 60.0)
    assert state is not None and state.scored == 0.0
    assert [load for _, _, load, _ in state.pending] == [20.0, 20.0]
    state, typical = tick(spec, state, 30.0, 60.0, 60.0)
    assert 20.0 < typical < 21.0
    assert state.scored == 2.0  # both, early
    assert state.error_scale == pytest.approx(math.log((60.0 + typical) / (20.0 + typical)), rel=1e-9)
    assert demand.DemandState.from_dict(state.to_dict()) == state  # the early-scored marks too
    before = state.error_quantile
    for at in (45.0, 60.0, 75.0):  # their due ticks: not scored again
        state, _ = tick(spec, state, at, 20.0, 60.0)
    assert state.scored == 2.0 and state.error_quantile == before
    state, _ = tick(spec, state, 90.0, 20.0, 60.0)  # the forecast made at 30 (60) meets 20s
    assert state.scored == 3.0 and state.error_quantile < before


def test_the_band_learns_a_recurring_burst_through_observe_and_track() -> None:
    """A steady 20/s with a one-tick burst to 60/s in every minute (a 60 s horizon sees one in each
    forecast's window): the scored quantile settles near the burst's log ratio, not at the 0 of
    the quiet ticks the forecasts fall due on."""
    spec = DemandSpec(alpha=1.0, beta=0.0, quantile=0.9, prior_weight=0.0)
    state: demand.DemandState | None = None
    typical = 0.0
    for i in range(400):
        state, typical = tick(spec, state, 15.0 * i, 60.0 if i % 4 == 2 else 20.0, 60.0)
    assert state is not None and state.scored > 300
    burst = math.log((60.0 + typical) / (20.0 + typical))
    assert band.error_quantile(spec, state) > 0.5 * burst


def test_the_typical_peak_rises_with_a_burst_at_once_and_fades_with_the_typical() -> None:
    """20/s, one tick at 60/s, then 20/s again (alpha 1 at any rate: the level is the sample, a 60 s
    horizon): the typical peak is 60 from the burst's tick on; once the windows holding the burst
    have been scored the window maximum is 20, and the typical peak decays towards it with the
    typical's half-life (600 s: halfway after 10 minutes). A state from before the field reads as 0."""
    spec = DemandSpec(alpha=1.0, beta=0.0, level_requests=0.0)
    state: demand.DemandState | None = None
    for i in range(4):
        state, _ = tick(spec, state, 15.0 * i, 20.0, 60.0)
    assert state is not None and state.typical_peak == pytest.approx(20.0)
    state, _ = tick(spec, state, 60.0, 60.0, 60.0)
    assert state.typical_peak == 60.0
    t = 60.0
    while t < 60.0 + 60.0 + 600.0:  # the burst's windows close a horizon after it, then 600 s
        t += 15.0
        state, _ = tick(spec, state, t, 20.0, 60.0)
    assert 38.0 < state.typical_peak < 44.0
    assert demand.DemandState.from_dict(json.loads(json.dumps(state.to_dict()))) == state
    doc = state.to_dict()
    del doc["typicalPeak"]
    assert demand.DemandState.from_dict(doc).typical_peak == 0.0


def test_the_peaks_kept_stay_bounded_at_short_ticks_and_round_trip() -> None:
    """Ticks 1 s apart, a 600 s horizon and a level falling every tick (each a new window maximum
    for the forecast made just before it): at most one level is kept per gap between forecasts,
    the state still round-trips through JSON, and the first forecast (200, made at 0) is scored at
    600 against the peak of (0, 600], 99.9, not the 40 of its due tick."""
    spec = DemandSpec(prior_weight=0.0)
    state = feed([(0.0, 10.0, 10.0, 10.0, 0.0)], spec)
    state = band.track(spec, state, 0.0, 10.0, 600.0, 200.0, 0.0)
    for t in range(1, 601):
        state = band.track(spec, state, float(t), 100.0 - t / 10.0, 600.0, 200.0, 0.0)
        assert len(state.peaks) <= demand.MAX_PENDING + 1
    assert state.scored == 1.0
    assert state.error_scale == pytest.approx(math.log(200.0 / 99.9), rel=1e-9)
    assert demand.DemandState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def test_on_off_traffic_keeps_a_band_per_level_the_forecasts_were_made_at() -> None:
    """Bursts to 60 every other half minute over a typical load of 10, a 60 s horizon: every
    forecast's window holds a burst. Those made inside a burst (50) meet about their own level
    (log(70 / 60) = 0.15), those made in the gaps (0) meet the burst (log(70 / 10) = 1.95). One
    pooled quantile gave the in-burst forecasts the gaps' ×7: an upper of (50 + 10) × 7 - 10 =
    410 for a level that never passes 60. Per bin, the in-burst band stays near the bursts'
    height and the gaps' band still holds it (levelbins.py)."""
    spec = DemandSpec(prior_weight=8.0)
    state = feed([(0.0, 10.0, 1.0, 1.0, 0.0)], spec)
    for i in range(1, 400):
        level, ahead = (60.0, 50.0) if i % 4 < 2 else (0.0, 0.0)
        state = band.track(spec, state, 15.0 * i, level, 60.0, ahead, 10.0)
    assert len(state.bins) == 2 and state.relative.scored > 300
    in_burst = band.upper(spec, state, Demand(50.0, 1.0, 1.0), requests, 10.0).requests
    in_gap = band.upper(spec, state, Demand(0.0, 0.0, 0.0), requests, 10.0)
    assert 55.0 < in_burst < 80.0
    assert in_gap.requests > 50.0  # the typical's mix, scaled: capacity kept for the next burst
    assert band.band_quantile(spec, state, 0.0, 10.0) > 1.5  # the gaps' ×7 stays theirs
    assert demand.DemandState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def _bin_0_traffic(levels: list[tuple[float, float]], spec: DemandSpec) -> demand.DemandState:
    """band.track over (level, mean forecast 60 s ahead) a tick 15 s apart, typical load 10."""
    state = feed([(0.0, 10.0, 1.0, 1.0, 0.0)], spec)
    for i, (level, ahead) in enumerate(levels, start=1):
        state = band.track(spec, state, 15.0 * i, level, 60.0, ahead, 10.0)
        # one score a forecast, in every tracker at one time: bin 0's heights count its log errors
        assert state.heights.scored == (state.bins[0][1] if state.bins else 0.0)
    return state


def test_steady_troughs_keep_bin_0_in_log_space() -> None:
    """A level below the typical load (10) that swings slowly from 1 to 9 with noise ×exp(0.3 z):
    its errors scale with the level, so the log band, (forecast + 10) × width - 10, is narrower
    where the level is low and covers as often: the heights' lean stays below 0 and bin 0 plans on
    the log ratios (main's band), to the bit."""
    rng = np.random.default_rng(7)
    levels = []
    for i in range(1, 1200):
        mean = 5.0 + 4.0 * math.sin(2.0 * math.pi * i / 240.0)
        levels.append((mean * math.exp(0.3 * rng.standard_normal()), mean))
    spec = DemandSpec(prior_weight=8.0)
    state = _bin_0_traffic(levels, spec)
    assert state.heights.scored > 1000.0 - 1.0 and state.heights.lean < 0.0
    for mean in (1.0, 5.0, 9.0):
        width = band.band_width(spec, state, mean, 10.0)
        assert width == math.exp(band.band_quantile(spec, state, mean, 10.0))
        upper = band.upper(spec, state, Demand(mean, 1.0, 1.0), requests, 10.0).requests
        assert upper == pytest.approx((mean + 10.0) * width - 10.0, rel=1e-12)


def test_on_off_traffic_plans_bin_0_on_heights_over_the_typical_load() -> None:
    """Bursts to 60 every other half minute over a typical load of 10, the gaps idling at 0 to 8:
    a gap's forecast meets the next burst whatever its own level, so its error is a height,
    (60 - forecast) / 10, where the log band grows with the forecast ((8 + 10) × 7 - 10 = 116 at
    8, a burst at 60). The heights' lean turns above 0 after their first 50 errors and bin 0 plans
    the level plus 10 × their quantile (~6: the burst over the typical load)."""
    levels = []
    for i in range(1, 1200):
        gap = float(2 * (i // 4 % 5))  # 0, 2, 4, 6, 8 from one gap to the next
        levels.append((60.0, 50.0) if i % 4 < 2 else (gap, gap))
    spec = DemandSpec(prior_weight=8.0)
    state = _bin_0_traffic(levels[:100], spec)
    assert state.heights.scored < 50.0 and state.heights.lean == 0.0  # still in log space
    state = _bin_0_traffic(levels, spec)
    assert state.heights.lean > 0.0 and 4.0 < state.heights.quantile < 7.0
    q = state.heights.quantile
    assert band.band_width(spec, state, 8.0, 10.0) == 1.0 + q
    upper = band.upper(spec, state, Demand(8.0, 1.0, 1.0), requests, 10.0).requests
    assert upper == pytest.approx(8.0 + 10.0 * q, rel=1e-12)
    log_upper = (8.0 + 10.0) * math.exp(band.band_quantile(spec, state, 8.0, 10.0)) - 10.0
    assert 60.0 < upper < log_upper
    # bin 1 is not moved: its band is the log ratios' as before
    assert band.band_width(spec, state, 50.0, 10.0) == math.exp(band.band_quantile(spec, state, 50.0, 10.0))
    assert demand.DemandState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def test_a_noisy_prompt_counter_does_not_swing_the_token_forecast() -> None:
    """6 requests/s of 15,000 prompt tokens, steady, then the prompt counter bursting as prefills do
    when replicas join or saturate (×2 one tick, ×0.5 the next two; Mooncake's counters read 7,707
    to 177,700 tokens/s at a steady arrival rate): the token demand the capacity stage reads 300 s
    ahead stays within ×1.5 from its lowest to its highest (×1.36 here): the arrivals' forecast at
    the mix. Forecast as a series of its own, its level and trend following the counter, it swung
    ×1.94."""
    steady = [(15.0 * i, 6.0, 90_000.0, 900.0, 30.0) for i in range(40)]
    bursts = [(15.0 * i, 6.0, 90_000.0 * (2.0 if i % 3 == 0 else 0.5), 900.0, 30.0) for i in range(40, 120)]
    state = feed(steady)
    ahead = []
    for at, f, p, g, n in bursts:
        state, _ = demand.observe(SPEC, state, at, f, p, g, n)
        ahead.append(demand.expected(SPEC, state, 300.0).prompt_tokens)
    assert max(ahead) / min(ahead) < 1.5
    assert min(ahead) > 0.75 * 90_000.0 and max(ahead) < 1.15 * 90_000.0


@pytest.mark.parametrize(
    ("rate", "reached"),
    [
        # 15 requests a tick: a request weighs exp(-1 / 400) per one counted since; after four ticks
        # (60 requests) 14 % of the step, after 27 (405) 1 - 1/e
        pytest.param(1.0, (0.14, 0.64), id="few requests: their count"),
        # 1,500 a tick: the level's own window (alpha 0.3 a period) is the longer, 76 % after four
        pytest.param(100.0, (0.76, 1.0), id="many: the level's window"),
    ],
)
def test_the_mix_averages_the_last_requests_or_the_levels_window(
    rate: float, reached: tuple[float, float]
) -> None:
    """The prompt per request steps from 1,000 to 2,000: the mix moves over the last ~MIX_REQUESTS
    requests (docs/policy.md, "Defaults and why"), or the level's window where those are fewer."""
    before = [(15.0 * i, rate, rate * 1000.0, rate * 100.0, 0.0) for i in range(300)]
    after = [(15.0 * (300 + i), rate, rate * 2000.0, rate * 100.0, 0.0) for i in range(27)]
    four = feed([*before, *after[:4]]).mix.prompt
    all_27 = feed([*before, *after]).mix.prompt
    assert four == pytest.approx(1000.0 + 1000.0 * reached[0], abs=15.0)
    assert all_27 == pytest.approx(1000.0 + 1000.0 * reached[1], abs=15.0)


def test_the_mix_of_long_requests_outlasts_the_counters_offset() -> None:
    """Requests last 100 s (1,000 in flight at 10/s finished, 1,000 prompt tokens each) and the
    arrivals step to 20/s: the prompt counter counts them when they start, the finished counter
    100 s later, so for 100 s their ratio says 2,000 tokens a request. The mix's window (twice the
    requests' time in the system) keeps it under halfway; the level's ~50 s window alone took it to
    ~1,900, and the token demand with it (docs/policy.md, "Defaults and why": mix window)."""
    steady = [(15.0 * i, 10.0, 10_000.0, 1000.0, 1000.0) for i in range(60)]
    # 15 s ticks for 90 s: 20/s arrive (prompts counted at 20,000 tok/s), 10/s finish, in flight grows
    step = [(15.0 * (60 + i), 10.0, 20_000.0, 1000.0, 1000.0 + 150.0 * i) for i in range(1, 7)]
    state = feed([*steady, *step])
    assert state.mix.prompt < 1500.0  # less than halfway to the counters' 2,000 (1,395)
    assert demand.mix_window_s(10.0, 1000.0) == pytest.approx(2 * 100.0)
    assert demand.mix_window_s(0.0, 5.0) == demand.mix_window_s(1e-9, 1e9) == demand.TYPICAL_HALF_LIFE_S
    assert demand.mix_window_s(10.0, 0.0) == 0.0


def test_the_mix_of_on_off_long_requests_holds_through_the_drains() -> None:
    """30 s of 40 requests/s every 5 minutes, each of 2,000 prompt tokens and 90 s in the system:
    after a burst the fleet drains, its last requests finish with none starting, and in flight /
    finished falls to a tick or two. The mix's window keeps the typical time in the system
    through it; read from the drain's own, it forgot the prompts of the requests still finishing
    and sat at 1,150 tokens a request (docs/policy.md, "Defaults and why": mix window)."""
    tick, life, prompt, output = 15.0, 90.0, 2_000.0, 1_500.0
    arrivals = [40.0 if (tick * i) % 300.0 < 30.0 else 0.0 for i in range(480)]
    lag = int(life / tick)
    state, seen = None, []
    for i, a in enumerate(arrivals):
        finished = arrivals[i - lag] if i >= lag else 0.0
        inflight = sum(arrivals[max(0, i - lag + 1) : i + 1]) * tick
        generated = inflight * output / life
        state, _ = demand.observe(SPEC, state, tick * i, finished, a * prompt, generated, inflight)
        if i >= 120:  # after the typical time has settled (30 minutes)
            seen.append(state.mix.prompt)
    assert 0.8 * prompt < min(seen) and max(seen) < 1.25 * prompt
    assert float(np.median(seen)) == pytest.approx(prompt, rel=0.1)
    assert demand.mix_window_s(10.0, 5.0, 90.0) == 2 * 90.0  # the typical time where longer
    assert demand.mix_window_s(10.0, 0.0, 90.0) == 2 * 90.0  # ... also with nothing in flight
    assert demand.mix_window_s(1.0, 1_000.0, 90.0) == demand.TYPICAL_HALF_LIFE_S


def test_a_state_from_before_the_mix_reads_its_rates_ratio() -> None:
    """A state saved before the mix (2026-12-03) has smoothed rates and token series instead: it
    reads back with their ratio as the mix, weighing no requests (the next tick's counts replace it)."""
    state = feed([(15.0 * i, 5.0, 5000.0, 1000.0, 10.0) for i in range(5)])
    doc = state.to_dict()
    del doc["mix"]
    doc |= {"finished": 4.0, "prompt": 6000.0, "generated": 800.0}
    doc |= {"promptTokens": {"level": 6000.0, "trend": 0.0}, "outputTokens": {"level": 800.0, "trend": 0.0}}
    old = demand.DemandState.from_dict(doc)
    assert old.mix == mixes.Mix(0.0, 1500.0, 200.0, spread_prompt=1500.0)
    assert old._replace(mix=state.mix) == state
    after, _ = demand.observe(SPEC, old, 75.0, 5.0, 5000.0, 1000.0, 10.0)
    # the outputs' two moments move only with the output-length histogram's readings (none here)
    assert after.mix.values() == pytest.approx((75.0, 1000.0, 200.0, 0.0, 75.0, 1000.0, 0.0, 0.0))


def _observed_through(spec: DemandSpec, gaps: list[float]) -> demand.DemandState:
    state = None
    now = 0.0
    for k, gap in enumerate(gaps):
        now += gap
        state, _ = demand.observe(spec, state, now, 10.0 + k % 3, 5_000.0, 2_000.0, 40.0 + k)
    assert state is not None
    return state


def test_the_tick_weights_kept_are_those_of_each_spec_and_gap() -> None:
    """observe keeps its weights by (alpha, beta, period, dt): specs and gaps met in any order, the
    cache warm with others', give the state a cold cache gives; the weights are each _weight's."""
    specs = [SPEC, DemandSpec(alpha=0.6, beta=0.05), DemandSpec(smoothing_period_s=60.0)]
    gaps = [15.0, 15.0, 30.0, 15.0, 5.0, 30.0, 15.0]
    cold = []
    for spec in specs:
        demand._tick_weights.clear()
        cold.append(_observed_through(spec, gaps))
    for spec, expected in zip([*specs, *specs], [*cold, *cold], strict=True):
        assert _observed_through(spec, gaps) == expected  # warm, with every spec's weights in it
    assert cold[0] != cold[1] != cold[2]
    weight, b, typical = demand.tick_weights(0.6, 0.05, 15.0, 30.0)
    assert math.isclose(weight, 1.0 - 0.4**2.0) and math.isclose(b, 1.0 - 0.95**2.0)
    assert typical == -math.expm1(-30.0 * math.log(2.0) / demand.TYPICAL_HALF_LIFE_S)
