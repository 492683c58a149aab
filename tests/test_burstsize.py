"""burstsize.py: the capacity held for bursts (the late share of a gamma-mixed rate seen by its
requests, the least rate whose late share fits the budget) and the sizing that takes it."""

from __future__ import annotations

import math

import pytest
from test_policy_planner import NOW, planner_spec

from autoscaler.policy import burstsize, capacity, capacityfacts, demand, lookahead
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityspec import ReplicaProfile, SloTarget

PROFILE = ReplicaProfile(
    step_base_s=0.02,
    prefill_s_per_token=1e-4,
    decode_s_per_request=9e-4,
    prefill_s_per_attention_pair=3e-9,
    decode_s_per_context_token=2e-7,
)
SLO = SloTarget(ttft_s=2.0, tpot_s=0.2)


def _late_by_quadrature(c: float, rate: float, theta: float) -> float:
    """E[(1 - c/Λ)+] for Λ gamma of mean `rate` and scale `theta`, size-biased: its density
    λ^k e^(-λ/θ) / (Γ(k+1) θ^(k+1)), integrated by the midpoint rule on a fine grid."""
    k = rate / theta
    top = c + 60.0 * theta
    n = 200_000
    step = (top - c) / n
    total = 0.0
    log_norm = math.lgamma(k + 1.0) + (k + 1.0) * math.log(theta)
    for i in range(n):
        x = c + (i + 0.5) * step
        total += (1.0 - c / x) * math.exp(k * math.log(x) - x / theta - log_norm)
    return total * step


@pytest.mark.parametrize(("rate", "theta", "c"), [(14.0, 45.0, 120.0), (2.0, 0.2, 3.0), (40.0, 10.0, 80.0)])
def test_the_late_share_is_the_size_biased_gammas(rate: float, theta: float, c: float) -> None:
    expected = _late_by_quadrature(c, rate, theta)
    assert burstsize.late_share(c, rate, theta) == pytest.approx(expected, rel=1e-4)


def test_poisson_arrivals_hold_their_own_rate() -> None:
    assert burstsize.hold_rate(20.0, 1.0, 2.0, 0.02) == 20.0
    assert burstsize.hold_rate(20.0, 0.7, 2.0, 0.02) == 20.0
    assert burstsize.hold_rate(0.0, 90.0, 2.0, 0.02) == 0.0


def test_the_hold_stays_finite_at_the_extremes() -> None:
    # a restored state's huge typical rate over a dispersion a hair above 1: Poisson's
    assert burstsize.hold_rate(5.7e9, 1.0 + 1e-12, 2.0, 0.02) == 5.7e9
    tiny = burstsize.hold_rate(1e-300, 1e4, 2.0, 0.02)
    assert 1e-300 <= tiny < 3.0 * (1e4 - 1.0) / 2.0  # at most a few θ
    assert burstsize.hold_rate(math.nan, 90.0, 2.0, 0.02) == 0.0
    assert burstsize.hold_rate(14.0, math.nan, 2.0, 0.02) == 14.0


def test_the_hold_meets_its_budget_and_grows_with_the_bursts() -> None:
    # Azure code x 5.5 as the policy counts it: 14 req/s, index ~90 over the 2 s TTFT target
    held = burstsize.hold_rate(14.0, 90.0, 2.0, 0.02)
    theta = 89.0 / 2.0
    assert burstsize.late_share(held, 14.0, theta) == pytest.approx(0.02, rel=0.02)  # its cache's rounding
    # the mean rate a request sees (14 + 44.5/s) below it, the 300/s of the trace's largest burst above
    assert 100.0 < held < 200.0
    assert burstsize.hold_rate(14.0, 30.0, 2.0, 0.02) < held < burstsize.hold_rate(14.0, 300.0, 2.0, 0.02)
    assert burstsize.hold_rate(14.0, 90.0, 2.0, 0.05) < held  # a looser budget holds less
    # nearly Poisson (Mooncake as counted, index ~1.4): the rate's spread over 2 s, sd 0.63/s
    assert 2.0 < burstsize.hold_rate(2.0, 1.4, 2.0, 0.02) < 2.0 + 2.5 * math.sqrt(0.4 * 2.0 / 2.0)


def test_the_sizing_holds_the_burst_rate_at_the_demands_mix() -> None:
    need = Demand(14.0, 14.0 * 2_000.0, 14.0 * 30.0)
    thinned = burstsize.size(PROFILE, SLO, need, 1.0, 1_000, 90.0, {})
    held = burstsize.size(PROFILE, SLO, need, 1.0, 1_000, 90.0, {}, hold=150.0)
    at_hold = capacity.size(PROFILE, SLO, need.scaled(150.0 / 14.0), 1.0, 1_000)
    assert held == at_hold and held.replicas > thinned.replicas
    # no hold, or one under the demand itself: the thinned sizing alone
    assert burstsize.size(PROFILE, SLO, need, 1.0, 1_000, 90.0, {}, hold=10.0) == thinned
    assert burstsize.size(PROFILE, SLO, Demand(0.0, 0.0, 0.0), 1.0, 1_000, 90.0, {}, hold=150.0).replicas <= 1


def _bursty_then_quiet() -> demand.DemandState:
    """Bursts of 300/s one tick in four, then two minutes without a request: the level falls to
    ~0, the typical rate and the counted dispersion remember the bursts."""
    spec = planner_spec().capacity
    assert spec is not None
    state = None
    t = NOW
    for k in range(40):
        rate = 300.0 if k % 4 == 3 else 0.0
        state, _ = demand.observe(spec.demand, state, t, rate, rate * 2_000.0, rate * 30.0, 0.0)
        t += 15.0
    for _ in range(8):
        state, _ = demand.observe(spec.demand, state, t, 0.0, 0.0, 0.0, 0.0)
        t += 15.0
    assert state is not None
    return state


def test_after_a_quiet_spell_the_fleet_still_holds_the_bursts() -> None:
    spec = planner_spec()
    cap = spec.capacity
    assert cap is not None
    ahead = lookahead.Lookahead(capacityfacts.facts(cap), _bursty_then_quiet(), 1.0, spec.max_replicas)
    mean, upper = ahead.forecast_at(60.0)
    assert mean.requests < 1.0 < ahead.spread  # the level has forgotten them, the dispersion not
    assert ahead.hold > 100.0
    thinned = burstsize.size(ahead.profile, ahead.slo, upper, 1.0, ahead.limit, ahead.spread, ahead.shape)
    assert ahead.need_at(60.0) > thinned.replicas
    # the panic's sizing of a burst seen now holds nothing more
    assert ahead.burst(upper) == thinned


def test_an_idle_target_holds_nothing_for_its_bursts() -> None:
    """The dispersion keeps its ratio while no request comes (0 expected, 0 counted): after two hours
    at 0/s the typical demand is under IDLE_LOAD (2^-12 of what it was), and the hold goes."""
    spec = planner_spec()
    cap = spec.capacity
    assert cap is not None
    state = _bursty_then_quiet()
    t = state.at
    for _ in range(480):
        t += 15.0
        state, _ = demand.observe(cap.demand, state, t, 0.0, 0.0, 0.0, 0.0)
    ahead = lookahead.Lookahead(capacityfacts.facts(cap), state, 1.0, spec.max_replicas)
    assert ahead.spread > 1.0 and ahead.typical_load < burstsize.IDLE_LOAD
    assert ahead.hold == 0.0


def test_a_curves_hold_takes_the_curves_own_count_where_that_is_fewer() -> None:
    """A hold priced by a late curve is in the curve's units: a fleet of n replicas serves n·r at the
    SLO (r, the curve's rate a replica, burstprice.py), so its prompts take hold / r replicas. The
    steady sizing at the hold's rate reads the burst as a rate that lasts (capacity's queueing tail
    at it), so it is kept only where it asks for fewer (it knows the router's pooling, the curve not);
    never fewer than the requests in flight at the lasting rate ask for."""
    need = Demand(14.0, 14.0 * 2_000.0, 14.0 * 30.0)

    def sized(per_replica: float) -> capacity.Sizing:
        return burstsize.size(PROFILE, SLO, need, 1.0, 1_000, 90.0, {}, 150.0, 20.0, per_replica)

    steady = sized(0.0)
    lasting = burstsize.size(PROFILE, SLO, need, 1.0, 1_000, 90.0, {}, 20.0, 20.0)
    assert lasting.replicas + 2 < steady.replicas
    between = lasting.replicas + 1
    got = sized(150.0 / between)
    assert got.replicas == between
    # each replica serves its share of the demand, at the lasting sizing's rates
    assert got.requests_per_s == pytest.approx(lasting.requests_per_s * lasting.replicas / between)
    assert got.prefill_tokens_per_s == lasting.prefill_tokens_per_s
    assert sized(150.0 / (steady.replicas + 5)) == steady  # the curve asks for more: the steady count
    assert sized(1e6) == lasting  # a curve that holds nothing more: the requests in flight
    assert sized(5e-324) == steady  # a subnormal r (hold / r overflows): the steady sizing, no error
    counts = [sized(150.0 / k).replicas for k in range(1, 3 * steady.replicas)]
    assert counts == sorted(counts)  # fewer replicas a curve's r asks for, never more
