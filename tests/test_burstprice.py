"""burstprice.py: the bursts' hold priced by the capacity model's own late share of a window above
C (latecurve.py's curve), against the wall (burstsize.py)."""

from __future__ import annotations

import math
import random

import pytest
from test_latecurve import CODE, _curve

from autoscaler.policy import burstprice, burstsize, flathold, latecurve
from replay.policies import holdkernel

CONV = (1155.0, 211.0)  # Azure conv's prompt and output tokens a request


def _by_quadrature(c: float, rate: float, theta: float, points: latecurve.Points) -> float:
    """E[share(Λ / c)] by the midpoint rule over the size-biased gamma's density."""
    us, shares = points
    k = rate / theta
    n = 100_000
    top = theta * (k + 1.0 + 60.0 * math.sqrt(k + 1.0) + 60.0)
    step = top / n
    log_norm = math.lgamma(k + 1.0) + (k + 1.0) * math.log(theta)
    total = 0.0
    for i in range(n):
        x = (i + 0.5) * step
        u = x / c
        if u >= us[-1]:
            late = shares[-1]
        else:
            j = next(j for j in range(1, len(us)) if u < us[j])
            late = shares[j - 1] + (shares[j] - shares[j - 1]) * (u - us[j - 1]) / (us[j] - us[j - 1])
        total += late * math.exp(k * math.log(x) - x / theta - log_norm)
    return total * step


@pytest.mark.parametrize("scenario", ["fast-load-70b", "one-gpu-8b"])
@pytest.mark.parametrize(("rate", "theta", "c"), [(14.0, 46.0, 120.0), (2.0, 0.5, 3.0), (40.0, 10.0, 80.0)])
@pytest.mark.parametrize("persist_s", [0.0, 5.0])
def test_closed_form_is_the_integral(
    scenario: str, rate: float, theta: float, c: float, persist_s: float
) -> None:
    _, curve = _curve(scenario, *CONV, persist_s)  # decodes of ~25-30 s: the TPOT over the decode's rate
    ttft, tpot, decode_s, spell_s, _ = curve
    assert spell_s == pytest.approx(max(2.0, persist_s), rel=0.032)  # made at its key's step, 1/16 in log
    stretch = decode_s / spell_s  # the decode's spells of the rate
    assert stretch > 5.0
    got = burstprice.expected_late(c, rate, theta, curve, 2.0)
    want = _by_quadrature(c, rate, theta, ttft) + _by_quadrature(c, rate, theta / stretch, tpot)
    assert got == pytest.approx(want, rel=2e-3, abs=1e-6)
    _, code = _curve(scenario, *CODE, persist_s)  # decodes within a spell
    ttft, tpot, decode_s = code[0], code[1], code[2]
    assert decode_s < 2.0
    got = burstprice.expected_late(c, rate, theta, code, 2.0)
    want = _by_quadrature(c, rate, theta, ttft) + _by_quadrature(c, rate, theta, tpot)
    assert got == pytest.approx(want, rel=2e-3, abs=1e-6)


def test_hold_meets_its_budget_and_falls_with_it() -> None:
    key, curve = _curve("fast-load-70b", *CODE)
    rate, spread, window = 14.07, 112.0, 2.0
    theta = (spread - 1.0) / window
    held = [burstprice.hold_rate(rate, spread, window, b, key, curve) for b in (0.01, 0.02, 0.04)]
    assert held[0] > held[1] > held[2] > rate
    for b, c in zip((0.01, 0.02, 0.04), held, strict=True):
        # interpolated on the shape's grid: within a per cent of the budget
        assert burstprice.expected_late(c, rate, theta, curve, window) == pytest.approx(b, rel=0.01)


def test_poisson_and_idle() -> None:
    key, curve = _curve("one-gpu-8b", *CODE)
    assert burstprice.hold_rate(5.0, 1.0, 2.0, 0.02, key, curve) == 5.0
    assert burstprice.hold_rate(0.0, 50.0, 2.0, 0.02, key, curve) == 0.0


def test_the_engines_part_from_the_wall() -> None:
    """At Azure code's mix the 70B's prefill has ~2.7x the headroom of its SLO rate and its late
    share rises gently past C: its hold a third under the wall's; the 8B's (~1.7x) rises steeply:
    its hold not under the wall's."""
    for scenario, below in (("fast-load-70b", True), ("one-gpu-8b", False)):
        key, curve = _curve(scenario, *CODE)
        for rate, spread in ((1.0, 112.0), (14.07, 93.4), (40.0, 112.0)):
            priced = burstprice.hold_rate(rate, spread, 2.0, 0.02, key, curve)
            wall = burstsize.hold_rate(rate, spread, 2.0, 0.02)
            assert (priced < 0.75 * wall) if below else (priced >= wall)


@pytest.mark.parametrize("scenario", ["fast-load-70b", "one-gpu-8b"])
def test_a_windows_rate_persists_over_its_count(scenario: str) -> None:
    """The hold's gamma gives the rate over the TTFT target the excess of the rate counted over
    P seconds: that rate persists over P. Azure code's decodes end within the window and its
    prompts' queue drains within it: its hold moves under 2 % from P = 2 to 15 s. Azure conv's
    decodes (~25-30 s) see D / P spells of the rate, not D / W windows: its hold rises with P
    (at the gateway's 5 s rate, the replay's, within the wall's, where session 23's fell 8-10 %
    under it)."""
    code = (CODE, ((14.07, 93.4), (1.0, 112.0), (6.0, 2.3)))
    conv = (CONV, ((20.0, 2.3), (57.7, 5.85)))
    for mix, readings in (code, conv):
        for rate, spread in readings:
            held = []
            for persist in (0.0, 5.0, 15.0):
                key, curve = _curve(scenario, *mix, persist)
                assert curve[3] == pytest.approx(max(2.0, persist), rel=0.032)
                held.append(burstprice.hold_rate(rate, spread, 2.0, 0.02, key, curve))
            wall = burstsize.hold_rate(rate, spread, 2.0, 0.02)
            if mix is CODE:
                assert held[2] == pytest.approx(held[0], rel=0.02)
            else:
                assert held[0] < held[1] < held[2]
                assert held[1] <= wall < held[2]


def test_the_planner_reads_the_persistence_from_the_counts_window() -> None:
    """Lookahead's hold takes the seconds the dispersion's rate was read over (the planner passes the
    gateway's rate window, or the finishes'; the tick's where there is none): the curve's spell."""
    from test_lasting import _bursty
    from test_policy_planner import planner_spec

    from autoscaler.policy import capacity, capacityfacts, demand, lookahead

    spec = planner_spec()
    cap = spec.capacity
    assert cap is not None
    facts = capacityfacts.facts(cap)
    state = _bursty(400.0)
    tick = demand.tick_s(state)  # the counts' seconds, averaged as the typical demand (~15 s ticks)
    assert tick > 10.0
    for count_s, spell in ((2.0, 2.0), (5.0, 5.0), (None, tick), (40.0, 40.0)):
        ahead = lookahead.Lookahead(facts, state, 1.0, spec.max_replicas, count_s)
        rate = max(state.typical.requests, ahead.mean_now.requests)
        mix = state.mix
        cv2 = ahead.shape.get("service_cv2", capacity.SERVICE_CV2)
        key, curve = latecurve.curve(facts.profile, facts.slo, mix.prompt, mix.output, 1.0, 1.0, cv2, spell)
        assert curve is not None and curve[3] == pytest.approx(max(spell, facts.slo.ttft_s), rel=0.032)
        want = burstprice.hold_rate(
            rate, ahead.spread, facts.ttft_s, burstprice.BUDGET * facts.tail, key, curve
        )
        assert ahead.hold == pytest.approx(want, rel=1e-9)


def test_the_compiled_bisection_gives_the_bits_of_its_python_source() -> None:
    """replay/policies/holdkernel.py compiles flathold.bisect for the replay: every league number with a
    bursts' hold depends on its bits (numba's lgamma is not CPython's, so ln Γ comes in)."""
    rng = random.Random(7)
    cases = 0
    for scenario in ("one-gpu-8b", "reference-70b", "fast-load-70b"):
        for _ in range(8):
            p = math.exp(rng.uniform(math.log(200.0), math.log(15_000.0)))
            o = math.exp(rng.uniform(math.log(5.0), math.log(1_000.0)))
            _, curve = _curve(scenario, p, o, rng.choice((0.0, 5.0, 15.0)))
            (us, ttfts), (vs, tpots) = curve[0], curve[1]
            for _ in range(4):
                k = math.exp(rng.uniform(math.log(1e-5), math.log(1e4)))
                stretch = rng.choice((1.0, math.exp(rng.uniform(0.0, 3.0))))
                budget = rng.choice((0.002, 0.01, 0.02, 0.04))
                args = (k, budget, us, ttfts, vs, tpots, stretch, *burstprice._lgammas(k, stretch))
                assert holdkernel.bisect(*args) == flathold.bisect(*args)
                cases += 1
    assert cases == 96


def test_the_installed_bisection_serves_the_hold() -> None:
    key, curve = _curve("fast-load-70b", *CODE)
    interpreted = burstprice.hold_rate(14.07, 112.0, 2.0, 0.02, key, curve)
    burstprice._holds.clear()  # the hold is cached by the curve's key: bisected again below
    holdkernel.install()
    try:
        assert burstprice._kernel is holdkernel.bisect
        assert burstprice.hold_rate(14.07, 112.0, 2.0, 0.02, key, curve) == interpreted > 14.07
    finally:
        burstprice.use(None)
        burstprice._holds.clear()


def _fresh_hold(*args: object) -> float:
    """hold_rate with no grid table kept (every point worked out anew)."""
    burstprice._holds.clear()  # the last table read too
    return burstprice.hold_rate(*args)  # type: ignore[arg-type]


def test_the_grids_tables_are_kept_by_curve_budget_and_stretch() -> None:
    """A table per (curve key, budget, stretch), the last one read first: interleaved curves,
    budgets and windows each read their own. Azure conv's decode (26 s) outlasts the spell its
    rate persists (2 s), so windows of 2-10 s stretch it differently (13.2 to 2.6) while the
    spread keeps the shape k, the grid point read, the same."""
    curves = [_curve("fast-load-70b", *CODE), _curve("one-gpu-8b", *CODE), _curve("fast-load-70b", *CONV)]
    assert len({burstprice._stretch(curves[2][1], w) for w in (2.0, 5.0, 10.0)}) == 3
    rng = random.Random(5)
    asks = []
    for _ in range(80):
        j = rng.randrange(3)
        window = rng.choice([2.0, 5.0, 10.0, 30.0])
        rate = rng.choice([3.0, 14.07, rng.uniform(0.5, 40.0)])
        asks.append((rate, 1.0 + 25.0 * window, window, rng.choice([0.01, 0.02]), j))  # θ = 25
    burstprice._holds.clear()
    kept = [burstprice.hold_rate(r, s, w, b, *curves[j]) for r, s, w, b, j in asks]
    for got, (r, s, w, b, j) in zip(kept, asks, strict=True):
        assert got == _fresh_hold(r, s, w, b, *curves[j]), (r, s, w, b, j)
