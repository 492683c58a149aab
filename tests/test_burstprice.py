"""burstprice.py: the bursts' hold priced by the capacity model's own late share of a window above
C (the TTFT and TPOT tails at u·r a replica), against the wall (burstsize.py)."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest

from autoscaler.policy import burstprice, burstsize, lengths
from autoscaler.policy.capacityspec import SloTarget
from replay.policies.predictive import replica_profile
from replay.profiles import SCENARIOS

SLO = SloTarget()
CODE = (2077.0, 28.0)  # Azure code's prompt and output tokens a request
CONV = (1155.0, 211.0)  # Azure conv's


def _curve(
    scenario: str, p: float, o: float, persist_s: float = 0.0
) -> tuple[tuple[object, ...], burstprice.Curve]:
    profile = replica_profile(SCENARIOS[scenario].engine)
    shape = lengths.spread(profile, p, 1.0)
    key, points = burstprice.curve(profile, SLO, p, o, 1.0, 1.0, shape["service_cv2"], persist_s)
    assert points is not None
    return key, points


def _by_quadrature(c: float, rate: float, theta: float, points: burstprice.Points) -> float:
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
    ttft, tpot, decode_s, spell_s = curve
    assert spell_s == pytest.approx(max(2.0, persist_s), rel=0.032)  # made at its key's step, 1/16 in log
    stretch = decode_s / spell_s  # the decode's spells of the rate
    assert stretch > 5.0
    got = burstprice.expected_late(c, rate, theta, curve, 2.0)
    want = _by_quadrature(c, rate, theta, ttft) + _by_quadrature(c, rate, theta / stretch, tpot)
    assert got == pytest.approx(want, rel=2e-3, abs=1e-6)
    _, (ttft, tpot, decode_s, spell_s) = _curve(scenario, *CODE, persist_s)  # decodes within a spell
    assert decode_s < 2.0
    got = burstprice.expected_late(c, rate, theta, (ttft, tpot, decode_s, spell_s), 2.0)
    want = _by_quadrature(c, rate, theta, ttft) + _by_quadrature(c, rate, theta, tpot)
    assert got == pytest.approx(want, rel=2e-3, abs=1e-6)


@pytest.mark.parametrize("scenario", ["fast-load-70b", "one-gpu-8b"])
def test_curve_rises_to_one_from_the_tail_at_c(scenario: str) -> None:
    _, ((us, ttft), (_, tpot), _, _) = _curve(scenario, *CODE)
    assert us[0] == 0.0 and ttft[0] == 0.0 and tpot[0] == 0.0
    assert all(b >= a for a, b in itertools.pairwise(ttft))
    late = [a + b for a, b in zip(ttft, tpot, strict=True)]
    assert all(b >= a for a, b in itertools.pairwise(late))
    at_c = us.index(1.0)
    assert late[at_c] == pytest.approx(1.0 - SLO.attainment, rel=1e-3)  # C: the SLO's tail late
    assert ttft[-1] == 1.0 and tpot[-1] == 0.0  # past the last point all late, once


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


def test_window_wait_is_kingmans_over_a_long_window() -> None:
    """Below the prefill's rate, over a window long against the slack, the first passage is the
    exponential decay capacity's TTFT tail sizes at; over the TTFT target a window above the
    prefill's rate is absorbed as queueing, and all are late once the backlog outgrows the slack."""
    v, service, cs2, slack = 0.8, 0.1, 1.5, 1.0
    long = burstprice.window_wait(v, service, cs2, slack, 1e5)
    assert long == pytest.approx(math.exp(-2.0 * (1.0 - v) * slack / (v * service * (1.0 + cs2))), rel=1e-6)
    assert burstprice.window_wait(v, service, cs2, slack, 2.0) < long
    assert burstprice.window_wait(1.2, service, cs2, slack, 2.0) < 0.5  # (v - 1)·W = 0.4 s of queue
    assert burstprice.window_wait(3.0, service, cs2, slack, 2.0) > 0.9  # 4 s
    assert burstprice.window_wait(v, service, cs2, 0.0, 2.0) == 1.0
    assert burstprice.window_wait(0.0, service, cs2, slack, 2.0) == 0.0


def test_spell_wait_is_the_mean_first_passage_over_its_requests() -> None:
    """A spell's share late is the mean over its requests' arrival times of the queue's first
    passage by then: under the passage at the spell's end, rising with the spell's length, Kingman's
    decay over a spell long against the queue's relaxation (below v = 1), and above v = 1 all but
    the first slack / (v - 1) seconds' requests."""
    service, cs2, slack = 0.1, 1.5, 1.0
    for v in (0.5, 0.8, 0.95, 1.2, 2.0):
        spells = [burstprice.spell_wait(v, service, cs2, slack, s) for s in (2.0, 5.0, 15.0, 60.0)]
        assert all(b >= a for a, b in itertools.pairwise(spells))
        for s, got in zip((2.0, 5.0, 15.0, 60.0), spells, strict=True):
            assert got <= burstprice.window_wait(v, service, cs2, slack, s)
    v = 0.8
    kingman = math.exp(-2.0 * (1.0 - v) * slack / (v * service * (1.0 + cs2)))
    assert burstprice.spell_wait(v, service, cs2, slack, 1e5) == pytest.approx(kingman, rel=1e-3)
    v, spell = 1.5, 100.0
    assert burstprice.spell_wait(v, service, cs2, slack, spell) == pytest.approx(
        1.0 - slack / ((v - 1.0) * spell), abs=0.01
    )
    assert burstprice.spell_wait(v, service, cs2, 0.0, spell) == 1.0
    assert burstprice.spell_wait(0.0, service, cs2, slack, spell) == 0.0


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

    from autoscaler.policy import capacity, demand, lookahead

    spec = planner_spec()
    cap = spec.capacity
    assert cap is not None
    facts = lookahead.facts(cap)
    state = _bursty(400.0)
    tick = demand.tick_s(state)  # the counts' seconds, averaged as the typical demand (~15 s ticks)
    assert tick > 10.0
    for count_s, spell in ((2.0, 2.0), (5.0, 5.0), (None, tick), (40.0, 40.0)):
        ahead = lookahead.Lookahead(facts, state, 1.0, spec.max_replicas, count_s)
        rate = max(state.typical.requests, ahead.mean_now.requests)
        mix = state.mix
        cv2 = ahead.shape.get("service_cv2", capacity.SERVICE_CV2)
        key, curve = burstprice.curve(facts.profile, facts.slo, mix.prompt, mix.output, 1.0, 1.0, cv2, spell)
        assert curve is not None and curve[3] == pytest.approx(max(spell, facts.slo.ttft_s), rel=0.032)
        want = burstprice.hold_rate(
            rate, ahead.spread, facts.ttft_s, burstprice.BUDGET * facts.tail, key, curve
        )
        assert ahead.hold == pytest.approx(want, rel=1e-9)


def test_the_persistence_is_the_counts_window_at_least_the_targets() -> None:
    assert burstprice.persistence(SLO, 5.0) == 5.0
    assert burstprice.persistence(SLO, 0.0) == SLO.ttft_s  # no count window: the target's own
    assert burstprice.persistence(SLO, 1.0) == SLO.ttft_s
    # a degenerate state's ratio (a count over no finite time) reads as the target's own
    assert burstprice.persistence(SLO, math.inf) == SLO.ttft_s
    assert burstprice.persistence(SLO, math.nan) == SLO.ttft_s


def test_the_curves_key_rounds_as_round_does() -> None:
    # _round is round() by math.floor (compiled); half to even at the ties
    ys = [k / 2.0 for k in range(-9, 10)] + [0.49999999999999994, -2.5000000000000004, 110.51, -110.52]
    assert [burstprice._round(y) for y in ys] == [round(y) for y in ys]


def test_equal_specs_share_a_curve_key() -> None:
    # the profile and SLO are named by their values' number, found by identity: equal copies share it
    profile = replica_profile(SCENARIOS["reference-70b"].engine)
    copy = dataclasses.replace(profile)
    assert copy is not profile and copy == profile
    args = (2077.0, 28.0, 1.0, 1.0, 1.0, 16.0)
    key, _ = burstprice.curve(profile, SLO, *args)
    assert burstprice.curve(copy, SloTarget(), *args)[0] == key
    other = dataclasses.replace(SLO, ttft_s=SLO.ttft_s * 2.0)
    assert burstprice.curve(profile, other, *args)[0][0] != key[0]


@pytest.mark.parametrize("scenario", ["fast-load-70b", "one-gpu-8b"])
def test_a_cached_curve_is_its_keys_alone(scenario: str) -> None:
    # made at the key's own step, not at the first mix to land in it: a decision must not depend on
    # the decisions the process made before it (the replay's workers run many cases each)
    profile = replica_profile(SCENARIOS[scenario].engine)
    p, o = 1_500.0, 333.0  # a mix no other test uses, so this test makes the curve
    step = math.exp(round(math.log(p) * 16.0) / 16.0)
    key_a, first = burstprice.curve(profile, SLO, p, o, 1.0, 1.0, 1.5, 7.0)
    key_b, second = burstprice.curve(profile, SLO, p * 1.01, o * 0.99, 1.0, 1.0, 1.5, 7.0)
    assert key_a == key_b and second is first
    at_step = burstprice._curve(
        profile,
        SLO,
        *(math.exp(k / 16.0) for k in key_a[1:]),  # type: ignore[operator]
    )
    assert at_step == first
    assert burstprice._curve(profile, SLO, p, o, 1.0, 1.0, 1.5, 7.0) != first  # p is not its step
    assert step != p
