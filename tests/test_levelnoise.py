"""levelnoise.py: the level's Poisson noise, against a simulation of the level itself, and the band
that scores the level less it (band.track's `rate`)."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.policy import band, demand, levelnoise
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityspec import DemandSpec

SPEC = DemandSpec()


def simulated_excess(rate: float, horizon_s: float, rng: np.random.Generator, ticks: int = 40_000) -> float:
    """The mean of the level's maximum over the `horizon_s` after a tick, relative to `rate`: the
    level an exponential average (SPEC.alpha a SPEC.smoothing_period_s tick) of Poisson counts."""
    dt, w = SPEC.smoothing_period_s, SPEC.alpha
    counts = rng.poisson(rate * dt, ticks) / dt
    level = np.empty(ticks)
    x = rate
    for i, c in enumerate(counts):
        x += w * (c - x)
        level[i] = x
    n = int(horizon_s / dt)
    starts = np.arange(200, ticks - n - 1, 5)
    peaks = np.array([level[s + 1 : s + 1 + n].max() for s in starts])
    return float(peaks.mean() / rate - 1.0)


@pytest.mark.parametrize("rate", [0.5, 2.0, 20.0])
@pytest.mark.parametrize("horizon_s", [30.0, 120.0, 283.0, 600.0])
def test_the_excess_is_most_of_the_noise_and_never_more(rate: float, horizon_s: float) -> None:
    """Blom's largest of n_eff independent normals under-counts a correlated level's maximum a
    little: what the band removes is 55–100 % of the noise's excess, never more than it."""
    simulated = simulated_excess(rate, horizon_s, np.random.default_rng(7))
    got = levelnoise.peak_excess(SPEC.alpha, SPEC.smoothing_period_s, rate, horizon_s)
    assert 0.55 * simulated < got < simulated


def test_the_excess_fades_with_the_rate_and_is_nothing_without_one() -> None:
    at = [levelnoise.peak_excess(0.3, 15.0, r, 300.0) for r in (1.0, 4.0, 100.0)]
    assert at[0] == pytest.approx(2 * at[1], rel=0.01)  # 1 / sqrt(rate)
    assert at[2] < 0.02
    assert levelnoise.peak_excess(0.3, 15.0, 0.0, 300.0) == 0.0
    assert levelnoise.peak_excess(0.3, 15.0, 5.0, 0.0) == 0.0


ALPHA_WINDOW = DemandSpec(level_requests=0.0)  # the level at alpha's window at any rate


def stationary_band(rate: float, noise_aware: bool, ticks: int = 1_500, spec: DemandSpec = SPEC) -> float:
    """The upper band over a mean of `rate` after scoring flat forecasts of `rate` against the
    level of Poisson arrivals at that rate (observe's finished count; no in-flight growth)."""
    rng = np.random.default_rng(3)
    dt = spec.smoothing_period_s
    state: demand.DemandState | None = None
    for i in range(ticks):
        finished = rng.poisson(rate * dt) / dt
        state, _ = demand.observe(spec, state, dt * i, finished, finished * 1000.0, finished * 100.0, 0.0)
        level = demand.expected(spec, state, 0.0).requests
        typical = state.typical.requests
        state = band.track(spec, state, dt * i, level, 300.0, rate, typical, level if noise_aware else 0.0)
    assert state is not None
    return (
        band.upper(spec, state, Demand(rate, 1000.0 * rate, 100.0 * rate), lambda d: d.requests).requests
        / rate
    )


def test_a_steady_poisson_rate_keeps_a_narrower_band() -> None:
    """At 2 req/s (30 a tick) the level's noise alone widened the band of a level at alpha's window;
    less its excess the band is narrower, and at 200 req/s (where the noise is ~1 %) the two are
    within a few per cent."""
    plain = stationary_band(2.0, False, spec=ALPHA_WINDOW)
    aware = stationary_band(2.0, True, spec=ALPHA_WINDOW)
    assert aware < plain - 0.05
    assert aware > 1.0  # the forecast's own noise (the level it was made from) stays in the errors
    assert stationary_band(200.0, True) == pytest.approx(stationary_band(200.0, False), rel=0.03)


def level_spread(rate: float, spec: DemandSpec, ticks: int = 4_000) -> float:
    """The level's standard deviation over Poisson arrivals at a steady `rate`, relative to it."""
    rng = np.random.default_rng(5)
    dt = spec.smoothing_period_s
    state: demand.DemandState | None = None
    levels = []
    for i in range(ticks):
        finished = rng.poisson(rate * dt) / dt
        state, _ = demand.observe(spec, state, dt * i, finished, finished * 1000.0, finished * 100.0, 0.0)
        levels.append(state.requests.level)
    return float(np.std(levels[300:]) / rate)


def test_the_level_averages_400_requests_at_a_few_a_tick() -> None:
    """demand.level_alpha: alpha's window holds (2 - 0.3) / 0.3 ticks, ~170 requests at 2 req/s (a
    7.7 % noise) and ~42 at 0.5 req/s (15 %); the default level averages 400 (5 %, plus the trend's
    share). At 20 req/s alpha's window already holds 1,700 and the level is alpha's to the bit."""
    assert 0.045 < level_spread(2.0, SPEC) < 0.065 < 0.075 < level_spread(2.0, ALPHA_WINDOW) < 0.09
    assert level_spread(0.5, SPEC) < 0.07 < 0.14 < level_spread(0.5, ALPHA_WINDOW)
    assert level_spread(20.0, SPEC) == level_spread(20.0, ALPHA_WINDOW)


def test_the_noise_taken_off_the_band_is_the_longer_windows() -> None:
    """band.track takes off the noise of the level as observe smooths it: over 400 requests at
    2 req/s that is little (the band within 0.03 of the plain one), where alpha's window's excess,
    taken off the longer window's level, made the band 0.06 narrower than the plain one."""
    plain, aware = stationary_band(2.0, False), stationary_band(2.0, True)
    assert 0.0 < plain - aware < 0.03


def test_level_alpha_holds_the_requests_it_is_given() -> None:
    for rate in (0.1, 1.0, 3.0):
        w = demand.level_alpha(0.3, 15.0, rate, 400.0)
        assert w < 0.3
        assert rate * 15.0 * (2.0 - w) / w == pytest.approx(400.0)
    assert demand.level_alpha(0.3, 15.0, 5.0, 400.0) == 0.3  # 1,417 requests in alpha's window
    assert demand.level_alpha(0.3, 15.0, 0.1, 0.0) == 0.3  # 0: alpha's window at any rate
    assert demand.level_alpha(0.3, 15.0, 0.0, 400.0) == 0.0


def test_a_burst_after_a_long_idle_is_followed_within_a_few_ticks() -> None:
    """At 0 req/s the level stands still, but observe reads the higher of the level and the
    typical demand, which moves at any rate: 50 req/s after an hour idle is 75 % in the level
    within six ticks (alpha's window alone: four; the first tick moves it not at all). The
    panic stage sizes such a burst's first ticks on the tick's own demand, not the level."""

    def ticks_to_follow(spec: DemandSpec) -> int:
        state: demand.DemandState | None = None
        for i in range(240):
            state, _ = demand.observe(spec, state, 15.0 * i, 0.0, 0.0, 0.0, 0.0)
        for k in range(1, 40):
            state, _ = demand.observe(spec, state, 15.0 * (239 + k), 50.0, 50_000.0, 5_000.0, 0.0)
            if state.requests.level >= 37.5:
                return k
        return 99

    assert ticks_to_follow(ALPHA_WINDOW) == 4
    assert ticks_to_follow(SPEC) == 6


def test_the_typical_peak_keeps_the_raw_level() -> None:
    """scaledown.slo_weight reads how high the level went: the noise is taken off the scoring only."""
    state, _ = demand.observe(SPEC, None, 0.0, 2.0, 2000.0, 200.0, 0.0)
    tracked = band.track(SPEC, state, 0.0, 2.5, 300.0, 2.0, 2.0, 2.0)
    assert tracked.typical_peak == pytest.approx(max(state.typical_peak, 2.5))
    assert tracked.peaks[-1][1] < 2.5


def test_level_requests_is_read_from_the_crd_and_checked() -> None:
    """capacity.demand.levelRequests: a number of requests, 0 for alpha's window at any rate; a
    negative one is refused naming the field."""
    from autoscaler.specsections import DemandModel

    assert DemandModel.model_validate({}).to_spec().level_requests == 400.0
    assert DemandModel.model_validate({"levelRequests": 0}).to_spec().level_requests == 0.0
    assert DemandModel.model_validate({"levelRequests": 1000}).to_spec() == DemandSpec(level_requests=1000.0)
    with pytest.raises(ValueError, match="level_requests"):
        DemandModel.model_validate({"levelRequests": -1}).to_spec()


def read_spread(rate: float, window_s: float | None, ticks: int = 4_000) -> float:
    """The level's relative standard deviation when each 15 s tick reads the finishes as a rate
    over the last 5 s (3 times a tick count's variance), told the window (`window_s`) or not."""
    rng = np.random.default_rng(9)
    dt = SPEC.smoothing_period_s
    state: demand.DemandState | None = None
    levels = []
    for i in range(ticks):
        finished = rng.poisson(rate * 5.0) / 5.0
        state, _ = demand.observe(
            SPEC, state, dt * i, finished, finished * 1000.0, finished * 100.0, 0.0, None, window_s
        )
        levels.append(state.requests.level)
    return float(np.std(levels[300:]) / rate)


def test_a_rate_read_over_part_of_the_tick_counts_its_own_noise() -> None:
    """demand.level_alpha_at: a 5 s rate read each 15 s tick carries 3 times a count's variance
    (demand.read_variance), so the level holds 1,200 counted requests for 400 requests' precision:
    ~5 % at 3 req/s where, told nothing of the window, it averages 400 and keeps ~9 %. A window as
    long as the tick, or none, counts them as Poisson's."""
    assert 0.04 < read_spread(3.0, 5.0) < 0.065 < 0.075 < read_spread(3.0, None) < 0.11
    state, _ = demand.observe(SPEC, None, 0.0, 3.0, 3000.0, 300.0, 0.0)
    for window, requests in ((5.0, 1200.0), (15.0, 400.0), (60.0, 400.0), (None, 400.0)):
        w = demand.level_alpha_at(SPEC, state, 15.0, window)
        assert 3.0 * 15.0 * (2.0 - w) / w == pytest.approx(requests)


def test_the_band_takes_off_the_noise_of_the_level_observe_made() -> None:
    """band.track's `alpha` is the weight observe applied (the planner passes level_alpha_at's): a
    slower level's peak over a horizon is less noise above the rate, so less is taken off."""
    state, _ = demand.observe(SPEC, None, 0.0, 3.0, 3000.0, 300.0, 0.0)
    slow = demand.level_alpha_at(SPEC, state, 15.0, 5.0)
    plain = demand.level_alpha_at(SPEC, state, 15.0, None)
    assert slow < plain < SPEC.alpha
    by_slow = band.track(SPEC, state, 0.0, 3.0, 300.0, 3.0, 3.0, 3.0, slow)
    by_plain = band.track(SPEC, state, 0.0, 3.0, 300.0, 3.0, 3.0, 3.0, plain)
    assert by_plain.peaks[-1][1] < by_slow.peaks[-1][1] < 3.0
    assert band.track(SPEC, state, 0.0, 3.0, 300.0, 3.0, 3.0, 3.0).peaks == by_plain.peaks
