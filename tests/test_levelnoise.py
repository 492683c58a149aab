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


def stationary_band(rate: float, noise_aware: bool, ticks: int = 1_500) -> float:
    """The upper band over a mean of `rate` after scoring flat forecasts of `rate` against the
    level of Poisson arrivals at that rate (observe's finished count; no in-flight growth)."""
    rng = np.random.default_rng(3)
    dt = SPEC.smoothing_period_s
    state: demand.DemandState | None = None
    for i in range(ticks):
        finished = rng.poisson(rate * dt) / dt
        state, _ = demand.observe(SPEC, state, dt * i, finished, finished * 1000.0, finished * 100.0, 0.0)
        level = demand.expected(SPEC, state, 0.0).requests
        typical = state.typical.requests
        state = band.track(SPEC, state, dt * i, level, 300.0, rate, typical, level if noise_aware else 0.0)
    assert state is not None
    return (
        band.upper(SPEC, state, Demand(rate, 1000.0 * rate, 100.0 * rate), lambda d: d.requests).requests
        / rate
    )


def test_a_steady_poisson_rate_keeps_a_narrower_band() -> None:
    """At 2 req/s (30 a tick) the level's noise alone widened the band; less its excess the band
    is narrower, and at 200 req/s (where the noise is ~1 %) the two are within a few per cent."""
    plain, aware = stationary_band(2.0, False), stationary_band(2.0, True)
    assert aware < plain - 0.05
    assert aware > 1.0  # the forecast's own noise (the level it was made from) stays in the errors
    assert stationary_band(200.0, True) == pytest.approx(stationary_band(200.0, False), rel=0.03)


def test_the_typical_peak_keeps_the_raw_level() -> None:
    """scaledown.slo_weight reads how high the level went: the noise is taken off the scoring only."""
    state, _ = demand.observe(SPEC, None, 0.0, 2.0, 2000.0, 200.0, 0.0)
    tracked = band.track(SPEC, state, 0.0, 2.5, 300.0, 2.0, 2.0, 2.0)
    assert tracked.typical_peak == pytest.approx(max(state.typical_peak, 2.5))
    assert tracked.peaks[-1][1] < 2.5
