"""latecurve.py: the capacity model's late share of a window at u times C, by its two tails (the TTFT
queue's first passage within the window's spell, the per-request TPOT tail), and the curves' key."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random

import pytest

from autoscaler.policy import burstprice, latecurve, lengths
from autoscaler.policy.capacityspec import SloTarget
from replay.policies import holdkernel
from replay.policies.predictive import replica_profile
from replay.profiles import SCENARIOS

SLO = SloTarget()
CODE = (2077.0, 28.0)  # Azure code's prompt and output tokens a request


def _curve(
    scenario: str, p: float, o: float, persist_s: float = 0.0
) -> tuple[tuple[object, ...], latecurve.Curve]:
    profile = replica_profile(SCENARIOS[scenario].engine)
    shape = lengths.spread(profile, p, 1.0)
    key, points = latecurve.curve(profile, SLO, p, o, 1.0, 1.0, shape["service_cv2"], persist_s)
    assert points is not None
    return key, points


@pytest.mark.parametrize("scenario", ["fast-load-70b", "one-gpu-8b"])
def test_curve_rises_to_one_from_the_tail_at_c(scenario: str) -> None:
    _, ((us, ttft), (_, tpot), *_) = _curve(scenario, *CODE)
    assert us[0] == 0.0 and ttft[0] == 0.0 and tpot[0] == 0.0
    assert all(b >= a for a, b in itertools.pairwise(ttft))
    late = [a + b for a, b in zip(ttft, tpot, strict=True)]
    assert all(b >= a for a, b in itertools.pairwise(late))
    at_c = us.index(1.0)
    assert late[at_c] == pytest.approx(1.0 - SLO.attainment, rel=1e-3)  # C: the SLO's tail late
    assert ttft[-1] == 1.0 and tpot[-1] == 0.0  # past the last point all late, once


@pytest.mark.parametrize("scenario", ["fast-load-70b", "one-gpu-8b", "reference-70b"])
def test_the_curve_carries_the_rate_a_replica_serves_at_c(scenario: str) -> None:
    """The curve's last field is r, the requests/s one replica serves with the SLO's tail late (its
    u = 1): a hold in the curve's units takes hold / r replicas (burstsize.size)."""
    profile = replica_profile(SCENARIOS[scenario].engine)
    for p, o in (CODE, (1_500.0, 3_200.0), (12_000.0, 300.0)):
        shape = lengths.spread(profile, p, 1.0)
        spell = latecurve.persistence(SLO, 0.0)
        points = latecurve._curve(profile, SLO, p, o, 1.0, 1.0, shape["service_cv2"])  # at this mix itself
        assert points is not None
        r = points[4]
        late = latecurve.late_at(profile, SLO, p, o, 1.0, 1.0, shape["service_cv2"], spell)
        tail = 1.0 - SLO.attainment
        assert sum(late(r * 0.999)) <= tail < sum(late(r * 1.001))


def test_window_wait_is_kingmans_over_a_long_window() -> None:
    """Below the prefill's rate, over a window long against the slack, the first passage is the
    exponential decay capacity's TTFT tail sizes at; over the TTFT target a window above the
    prefill's rate is absorbed as queueing, and all are late once the backlog outgrows the slack."""
    v, service, cs2, slack = 0.8, 0.1, 1.5, 1.0
    long = latecurve.window_wait(v, service, cs2, slack, 1e5)
    assert long == pytest.approx(math.exp(-2.0 * (1.0 - v) * slack / (v * service * (1.0 + cs2))), rel=1e-6)
    assert latecurve.window_wait(v, service, cs2, slack, 2.0) < long
    assert latecurve.window_wait(1.2, service, cs2, slack, 2.0) < 0.5  # (v - 1)·W = 0.4 s of queue
    assert latecurve.window_wait(3.0, service, cs2, slack, 2.0) > 0.9  # 4 s
    assert latecurve.window_wait(v, service, cs2, 0.0, 2.0) == 1.0
    assert latecurve.window_wait(0.0, service, cs2, slack, 2.0) == 0.0


def test_spell_wait_is_the_mean_first_passage_over_its_requests() -> None:
    """A spell's share late is the mean over its requests' arrival times of the queue's first
    passage by then: under the passage at the spell's end, rising with the spell's length, Kingman's
    decay over a spell long against the queue's relaxation (below v = 1), and above v = 1 all but
    the first slack / (v - 1) seconds' requests."""
    service, cs2, slack = 0.1, 1.5, 1.0
    for v in (0.5, 0.8, 0.95, 1.2, 2.0):
        spells = [latecurve.spell_wait(v, service, cs2, slack, s) for s in (2.0, 5.0, 15.0, 60.0)]
        assert all(b >= a for a, b in itertools.pairwise(spells))
        for s, got in zip((2.0, 5.0, 15.0, 60.0), spells, strict=True):
            assert got <= latecurve.window_wait(v, service, cs2, slack, s)
    v = 0.8
    kingman = math.exp(-2.0 * (1.0 - v) * slack / (v * service * (1.0 + cs2)))
    assert latecurve.spell_wait(v, service, cs2, slack, 1e5) == pytest.approx(kingman, rel=1e-3)
    v, spell = 1.5, 100.0
    assert latecurve.spell_wait(v, service, cs2, slack, spell) == pytest.approx(
        1.0 - slack / ((v - 1.0) * spell), abs=0.01
    )
    assert latecurve.spell_wait(v, service, cs2, 0.0, spell) == 1.0
    assert latecurve.spell_wait(0.0, service, cs2, slack, spell) == 0.0


def test_the_persistence_is_the_counts_window_at_least_the_targets() -> None:
    assert latecurve.persistence(SLO, 5.0) == 5.0
    assert latecurve.persistence(SLO, 0.0) == SLO.ttft_s  # no count window: the target's own
    assert latecurve.persistence(SLO, 1.0) == SLO.ttft_s
    # a degenerate state's ratio (a count over no finite time) reads as the target's own
    assert latecurve.persistence(SLO, math.inf) == SLO.ttft_s
    assert latecurve.persistence(SLO, math.nan) == SLO.ttft_s


def test_the_curves_key_rounds_as_round_does() -> None:
    # _round is round() by math.floor (compiled); half to even at the ties
    ys = [k / 2.0 for k in range(-9, 10)] + [0.49999999999999994, -2.5000000000000004, 110.51, -110.52]
    assert [latecurve._round(y) for y in ys] == [round(y) for y in ys]


def test_equal_specs_share_a_curve_key() -> None:
    # the profile and SLO are named by their values' number, found by identity: equal copies share it
    profile = replica_profile(SCENARIOS["reference-70b"].engine)
    copy = dataclasses.replace(profile)
    assert copy is not profile and copy == profile
    args = (2077.0, 28.0, 1.0, 1.0, 1.0, 16.0)
    key, _ = latecurve.curve(profile, SLO, *args)
    assert latecurve.curve(copy, SloTarget(), *args)[0] == key
    other = dataclasses.replace(SLO, ttft_s=SLO.ttft_s * 2.0)
    assert latecurve.curve(profile, other, *args)[0][0] != key[0]


@pytest.mark.parametrize("scenario", ["fast-load-70b", "one-gpu-8b"])
def test_a_cached_curve_is_its_keys_alone(scenario: str) -> None:
    # made at the key's own step, not at the first mix to land in it: a decision must not depend on
    # the decisions the process made before it (the replay's workers run many cases each)
    profile = replica_profile(SCENARIOS[scenario].engine)
    p, o = 1_500.0, 333.0  # a mix no other test uses, so this test makes the curve
    step = math.exp(round(math.log(p) * 16.0) / 16.0)
    key_a, first = latecurve.curve(profile, SLO, p, o, 1.0, 1.0, 1.5, 7.0)
    key_b, second = latecurve.curve(profile, SLO, p * 1.01, o * 0.99, 1.0, 1.0, 1.5, 7.0)
    assert key_a == key_b and second is first
    at_step = latecurve._curve(
        profile,
        SLO,
        *(math.exp(k / 16.0) for k in key_a[1:-1]),  # type: ignore[operator]
        None,  # key_a[-1]: no output-length histogram
    )
    assert at_step == first
    assert latecurve._curve(profile, SLO, p, o, 1.0, 1.0, 1.5, 7.0) != first  # p is not its step
    assert step != p


def test_the_compiled_spell_wait_gives_the_bits_of_its_python_source() -> None:
    """replay/policies/holdkernel.py compiles spell_wait for the replay: a curve's TTFT shares, and
    every bursts' hold priced by them, depend on its bits (erfc, exp and log are the C library's)."""
    compiled = holdkernel.compiled_spell_wait()
    rng = random.Random(3)
    for _ in range(3_000):
        v = rng.choice((rng.uniform(0.0, 1.0), rng.uniform(0.9, 1.1), rng.uniform(1.0, 6.0)))
        service = math.exp(rng.uniform(math.log(1e-3), math.log(5.0)))
        cs2 = rng.uniform(0.0, 8.0)
        slack = rng.choice((-0.1, 0.0, rng.uniform(0.0, 2.0), rng.uniform(0.0, 1e-3)))
        spell = math.exp(rng.uniform(math.log(0.1), math.log(600.0)))
        assert compiled(v, service, cs2, slack, spell) == latecurve.spell_wait(v, service, cs2, slack, spell)


def test_the_installed_spell_wait_serves_the_curves() -> None:
    profile = replica_profile(SCENARIOS["fast-load-70b"].engine)
    interpreted = latecurve._curve(profile, SLO, *CODE, 1.0, 1.0, 1.3, 5.0)
    holdkernel.install()
    try:
        assert latecurve._spell_wait is holdkernel.compiled_spell_wait()
        assert latecurve._curve(profile, SLO, *CODE, 1.0, 1.0, 1.3, 5.0) == interpreted is not None
    finally:
        latecurve.use(None)
        burstprice.use(None)
