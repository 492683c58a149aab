"""lateband.py: the overshoot and the unused allowance under the band's lognormal, the least width
whose late share fits, and the count sized at it (lookahead.planned_at)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from test_lookahead import _ahead

from autoscaler.policy import band, idlemiss, lateband, levelbins, lookahead, replicarates
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityspec import SloTarget
from autoscaler.policy.lookahead import Lookahead
from replay.policies.predictive import replica_profile
from replay.profiles import LLAMA_8B_H100, SCENARIOS

TAIL = 0.01
Z = lateband.peak_deviate(0.98)  # the level at the horizon under a 0.98 band of the peak


def _terms_by_quadrature(c: float, t: float, sigma: float) -> tuple[float, float, float]:
    """E[(L - c)+], E[L·(1 - L/c); 0 < L <= c] and E[L; 0 < L <= c] for L = X - t, ln X
    normal(0, σ²): the midpoint rule over ln X from -12σ to 12σ."""
    n = 200_000
    lo, hi = -12.0 * sigma, 12.0 * sigma
    step = (hi - lo) / n
    norm = 1.0 / (sigma * math.sqrt(2.0 * math.pi))
    over = unused = below = 0.0
    for i in range(n):
        y = lo + (i + 0.5) * step
        density = norm * math.exp(-0.5 * (y / sigma) ** 2) * step
        load = math.exp(y) - t
        if load > c:
            over += (load - c) * density
        elif load > 0.0:
            unused += load * (1.0 - load / c) * density
            below += load * density
    return over, unused, below


@pytest.mark.parametrize(
    ("c", "t", "sigma"), [(1.3, 0.0, 0.15), (0.9, 0.4, 0.3), (2.5, 0.7, 0.8), (0.5, 0.2, 0.05)]
)
def test_the_overshoot_and_the_unused_allowance_are_the_integrals(c: float, t: float, sigma: float) -> None:
    over, unused, below = lateband.terms(c, t, sigma)
    by_sum = _terms_by_quadrature(c, t, sigma)
    assert over == pytest.approx(by_sum[0], rel=1e-6, abs=1e-12)
    assert unused == pytest.approx(by_sum[1], rel=1e-6, abs=1e-12)
    # its integrand jumps at c: the midpoint rule's error there is a half step's
    assert below == pytest.approx(by_sum[2], rel=2e-5, abs=1e-12)


@pytest.mark.parametrize(("q", "t"), [(0.1, 0.0), (0.2, 0.3), (0.3, 0.0), (0.45, 0.1)])
def test_the_width_is_the_least_whose_late_share_fits(q: float, t: float) -> None:
    w = lateband.solve(q, Z, t, TAIL)
    assert w is not None and 1.0 < w < math.exp(q)
    sigma = q / Z

    def fits(width: float) -> bool:
        over, unused, _ = lateband.terms(width - t, t, sigma)
        return (1.0 - TAIL) * over <= TAIL * unused

    assert fits(w) and not fits(w * math.exp(-1e-4 * sigma))


def test_a_wide_band_keeps_its_own_upper_and_none_keeps_the_mean() -> None:
    assert lateband.width(1.5, Z, 0.0, TAIL) is None  # the fluid overshoot past it is above budget
    assert lateband.width(0.0, Z, 0.3, TAIL) is None
    assert lateband.width(0.3, Z, 0.3, 0.0) is None  # no allowance: the band's own
    # a tolerant SLO spends more of the margin; one past half its requests, all of it
    tolerant, strict = lateband.width(0.3, Z, 0.0, 0.3), lateband.width(0.3, Z, 0.0, TAIL)
    assert tolerant is not None and strict is not None and tolerant < strict
    assert lateband.width(0.3, Z, 0.0, 0.6) == 1.0


def _at(ahead: Lookahead, h: float, rate: float) -> tuple[Demand, Demand]:
    """Set the tick's forecast h ahead to `rate` requests/s at the state's mix, the band at its
    bin's width; the bursts' hold and spread off, so the band alone decides."""
    observed = ahead._observed
    mix = observed.typical.scaled(1.0 / observed.typical.requests)
    mean = mix.scaled(rate)
    mean_load = ahead.load(mean)
    typical = ahead.typical_load
    width = ahead._widths[levelbins.bin_of(mean_load, typical)]
    assert width is not None and width > 1.0
    upper = band.widened(observed, mean, mean_load, typical, width)
    ahead._at[h] = ahead._last = lookahead._Horizon(h, mean, upper, mean_load)  # nothing planned or sized
    return mean, upper


def _edge(count: int) -> tuple[Lookahead, float]:
    """A Lookahead with its hold off and the rate at which the band's upper needs `count` + 1."""
    ahead = _ahead()
    ahead.forecast_at(0.0)  # both bins' widths read
    ahead._widths[1] = ahead._widths[0] = 1.35  # the prior's band (×e^0.3)
    ahead.hold, ahead.lifetime_hold, ahead.spread = 0.0, 0.0, 1.0
    ahead.typical_load = 0.0  # steady traffic: the errors relative to the level alone
    ahead.z = Z  # the default quantile's (the test spec plans on 0.9)
    lo, hi = 0.01, 1e5
    for _ in range(80):  # the least rate whose upper needs count + 1
        mid = math.sqrt(lo * hi)
        _, upper = _at(ahead, 60.0, mid)
        if ahead.sized(upper).replicas > count:
            hi = mid
        else:
            lo = mid
    return ahead, hi


@pytest.mark.parametrize("count", [2, 5, 40])
def test_a_sliver_over_a_step_is_not_bought_a_whole_replica(count: int) -> None:
    ahead, edge = _edge(count)
    _, upper = _at(ahead, 60.0, edge * 1.01)
    assert ahead.sized(upper).replicas == count + 1  # the band's upper buys the step
    # its late share is within the unused allowance (a large fleet's count may go a step lower)
    assert ahead.need_at(60.0) == count if count < 10 else ahead.need_at(60.0) <= count
    assert ahead.planned_at(60.0).requests < upper.requests


@pytest.mark.parametrize("count", [2, 5, 40])
def test_a_shortfall_past_the_late_share_is_still_bought(count: int) -> None:
    ahead, edge = _edge(count)
    _, upper = _at(ahead, 60.0, edge * 1.1)
    # 10 % over the step: more than the late share's ~6 % below the band (at 40 a step is 2.5 %)
    assert count < ahead.need_at(60.0) <= ahead.sized(upper).replicas
    if count < 10:
        assert ahead.need_at(60.0) == ahead.sized(upper).replicas


def test_the_peaks_quantile_is_the_ends_by_reflection() -> None:
    """A Brownian motion's maximum over [0, h] exceeds x twice as often as its end: the 0.98 of
    the peak is the 0.99 of the end (2.326 standard deviations)."""
    assert lateband.peak_deviate(0.98) == pytest.approx(2.3263479, abs=1e-6)
    assert lateband.peak_deviate(0.9) == pytest.approx(lateband.deviate(0.95))


def test_the_grids_width_is_the_solved_one_within_half_a_per_cent() -> None:
    """width() interpolates u / z between grid points solved once: within 0.5 % of solve()'s width,
    the band's own (None) where solve() finds it and not far from its edge."""
    for q in (0.02, 0.1, 0.27, 0.5, 0.8, 1.2, 2.5):
        for t in (0.0, 0.013, 0.3, 0.62, 0.97):
            exact, grid = lateband.solve(q, Z, t, TAIL), lateband.width(q, Z, t, TAIL)
            a = math.exp(q) if exact is None else exact
            b = math.exp(q) if grid is None else grid
            assert abs(math.log(b / a)) < 5e-3, (q, t, exact, grid)


def test_the_idle_misses_spend_the_allowance_first() -> None:
    """The width rises with the idle misses λ to the band's upper (None) once λ takes the
    allowance: the grid's within 0.5 % of solve()'s, and solve()'s width fits with λ counted."""
    q, t = 0.3, 0.1
    sigma = q / Z
    widths = []
    for lost in (0.0, 0.001, 0.0023, 0.004, 0.0071, 0.0099):
        exact, grid = lateband.solve(q, Z, t, TAIL, lost), lateband.width(q, Z, t, TAIL, lost)
        a = math.exp(q) if exact is None else exact
        b = math.exp(q) if grid is None else grid
        assert abs(math.log(b / a)) < 5e-3, (lost, exact, grid)
        if exact is not None:
            assert lateband.fits(*lateband.terms(exact - t, t, sigma), TAIL, lost)
            below = exact * math.exp(-1e-4 * sigma) - t
            assert not lateband.fits(*lateband.terms(below, t, sigma), TAIL, lost)
        widths.append(a)
    assert widths == sorted(widths) and widths[0] < widths[-1] == math.exp(q)
    assert lateband.width(q, Z, t, TAIL, TAIL) is None and lateband.width(q, Z, t, TAIL, 0.2) is None


def test_where_the_idle_misses_take_the_tail_the_count_is_the_bands_upper() -> None:
    ahead, edge = _edge(5)
    _, upper = _at(ahead, 60.0, edge * 1.01)
    assert ahead.idle_misses() < 1e-6  # the test spec's prompts all fit
    assert ahead.planned_at(60.0).requests < upper.requests  # the allowance spent below the upper
    mix = ahead._observed.mix
    prefill = mix.prompt * replicarates.prefill_token_s(ahead.profile, mix.prompt)
    # a target the mean prompt's prefill alone fills: a third of the prompts miss it idle
    ahead.slo = dataclasses.replace(ahead.slo, ttft_s=ahead.profile.step_base_s + prefill)
    ahead._lost = None
    _at(ahead, 60.0, edge * 1.01)
    assert ahead.idle_misses() > TAIL and ahead.planned_at(60.0) == upper


@pytest.mark.parametrize(
    ("p", "cv2", "low", "high"), [(15325.0, 1.44, 0.15, 0.25), (1155.0, 0.92, 0.0, 1e-6)]
)
def test_the_idle_misses_of_a_mix(p: float, cv2: float, low: float, high: float) -> None:
    # Mooncake's mix on one-gpu-8b's engine (22 % of its prompts past 2 s alone; the model's gamma
    # 19 %) and Azure conv's (none)
    profile = replica_profile(LLAMA_8B_H100)
    lost = idlemiss.idle_misses(
        replicarates.engine(profile), SloTarget(ttft_s=2.0, tpot_s=0.2), p, 150.0, 1.0, cv2
    )
    assert low < lost < high
    assert (
        idlemiss.idle_misses(replicarates.engine(profile), SloTarget(ttft_s=2.0, tpot_s=0.2), 0.0, 150.0)
        == 0.0
    )


@pytest.mark.parametrize("scenario", ["one-gpu-8b", "reference-70b", "fast-load-70b"])
@pytest.mark.parametrize(("p", "o"), [(15325.0, 150.0), (2077.0, 28.0), (1155.0, 0.5), (40_000.0, 211.0)])
@pytest.mark.parametrize("speed", [0.7, 1.0, 1.3])
def test_the_idle_misses_read_the_profiles_fields_from_its_engine(
    scenario: str, p: float, o: float, speed: float
) -> None:
    # idlemiss.idle_misses reads the profile's fields from its Engine (a compiled class): the same
    # arithmetic as the profile's own functions
    profile = replica_profile(SCENARIOS[scenario].engine)
    for first in (False, True):
        for budget in (None, 2048, 8192):
            pr = dataclasses.replace(profile, max_batched_tokens=budget, prefill_first=first)
            slo = SloTarget(ttft_s=2.0, tpot_s=0.2)
            base = pr.step_base_s / speed
            rate = replicarates.prefill_rate(pr, 0.0, p, max(o, 1.0), base, 0.0, speed)
            beta = pr.prefill_s_per_attention_pair * 0.5 / speed
            want = idlemiss.misses_at(p, rate, beta, slo.ttft_s - base, slo.ttft_tokens_per_s, 1.2)
            assert idlemiss.idle_misses(replicarates.engine(pr), slo, p, o, speed, 1.2) == want


# The overshoot at the count's queue (lateband.late_at, queued_width; lookahead.queue_utilization)


@pytest.mark.parametrize("u", [0.05, 0.17, 0.5, 0.9])
def test_the_late_share_is_the_lesser_of_the_fluid_and_the_queues_tail(u: float) -> None:
    steep = lateband.steepness(u, TAIL)
    # the queue's tail u·exp(-(1 - u)·κ) meets the SLO's at the count (x = 1)
    kappa = steep / u
    assert u * math.exp(-(1.0 - u) * kappa) == pytest.approx(TAIL)
    for x in (0.3, 0.9, 1.0):  # below the count: the linear bound, as the fluid rule's
        assert lateband.late_at(x, TAIL, steep, u) == pytest.approx(TAIL * x)
    for x in (1.05, 1.3, 2.0, 0.99 / u, 1.01 / u, 3.0 / u):
        fluid = 1.0 - (1.0 - TAIL) / x
        queue = TAIL * x * math.exp(steep * (x - 1.0)) if x * u < 1.0 else 1.0
        assert lateband.late_at(x, TAIL, steep, u) == pytest.approx(min(fluid, queue))
    # a load 25 % over a count at Mooncake's u_C of 0.17: 1.5 % late, where the fluid says 20.8 %
    if u == 0.17:
        assert lateband.late_at(1.25, TAIL, steep, u) == pytest.approx(0.0145, abs=5e-4)


def test_the_queued_integrals_are_the_quadratures() -> None:
    """queued()'s 192-node midpoint rule against 200,000 nodes over ±12σ."""
    for c, t, sigma, u in ((1.3, 0.0, 0.15, 0.17), (0.9, 0.4, 0.3, 0.5), (1.1, 0.1, 0.6, 0.05)):
        steep = lateband.steepness(u, TAIL)
        n = 200_000
        lo, step = -12.0 * sigma, 24.0 * sigma / n
        late = load = 0.0
        for i in range(n):
            y = lo + (i + 0.5) * step
            lv = math.exp(y) - t
            if lv > 0.0:
                density = math.exp(-0.5 * (y / sigma) ** 2)
                load += lv * density
                late += lv * lateband.late_at(lv / c, TAIL, steep, u) * density
        got_late, got_load = lateband.queued(c, t, sigma, TAIL, u)
        assert got_late / got_load == pytest.approx(late / load, rel=2e-3)


@pytest.mark.parametrize(("q", "t"), [(0.1, 0.0), (0.2, 0.3), (0.3, 0.0), (0.45, 0.1), (0.66, 0.0)])
def test_the_queue_narrows_the_width_and_near_saturation_is_the_fluid_rule(q: float, t: float) -> None:
    widths = [lateband.solve_queued(q, Z, t, TAIL, u) for u in (0.0, 0.1, 0.17, 0.3, 0.5, 0.7, 0.9, 0.97)]
    assert all(w is not None for w in widths)
    assert widths == sorted(widths)  # a busier queue saturates sooner past the count
    fluid = lateband.solve(q, Z, t, TAIL)
    assert fluid is not None and widths[-1] == pytest.approx(fluid, rel=2e-3)
    assert widths[-1] <= math.exp(q)


def test_the_queued_grids_width_is_the_solved_one_within_half_a_per_cent() -> None:
    for q in (0.05, 0.27, 0.5, 0.8, 1.2):
        for t in (0.0, 0.3, 0.62):
            for u in (0.0, 0.04, 0.17, 0.33, 0.61, 0.9):
                exact, grid = lateband.solve_queued(q, Z, t, TAIL, u), lateband.queued_width(q, Z, t, TAIL, u)
                a = math.exp(q) if exact is None else exact
                b = math.exp(q) if grid is None else grid
                assert abs(math.log(b / a)) < 5e-3, (q, t, u, exact, grid)


def test_where_the_ttft_binds_the_overshoot_meets_the_queue_whatever_the_idle_misses() -> None:
    """Where the TTFT binds at the band's upper, the count prices the overshoot at the queue's tail
    of the requests a fleet can serve: below the upper even where the idle misses take the SLO's
    whole allowance (the fluid rule's count is the upper there)."""
    ahead, edge = _edge(5)
    mix = ahead._observed.mix
    prefill = mix.prompt * replicarates.prefill_token_s(ahead.profile, mix.prompt)
    # a TTFT target twice the mean prompt's prefill: 13.5 % of the prompts miss it idle
    ahead.slo = dataclasses.replace(ahead.slo, ttft_s=ahead.profile.step_base_s + 2.0 * prefill)
    ahead._lost = None
    mean, upper = _at(ahead, 60.0, edge * 1.01)
    _at(ahead, 0.0, edge * 1.01)
    assert ahead.idle_misses() > TAIL
    u = ahead.queue_utilization()
    assert u is not None and 0.1 < u < 0.3
    planned = ahead.planned_at(60.0)
    assert mean.requests < planned.requests < upper.requests
    assert ahead.need_at(60.0) < ahead.sized(upper).replicas


def test_where_another_bound_sets_the_count_the_overshoot_is_fluid() -> None:
    ahead, edge = _edge(5)
    _at(ahead, 0.0, edge * 1.01)
    assert ahead.burst(ahead.upper_at(0.0)).binding == "tpot"
    assert ahead.queue_utilization() is None
