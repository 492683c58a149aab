"""The TTFT wait tail under a least-loaded router (leastloaded.py), and what it moves in
capacity.size and the spec (CapacitySpec.router, the CRD's capacity.router)."""

from __future__ import annotations

import itertools
import math

import pytest

from autoscaler.policy import capacity, demand, leastloaded, lengths, tailsearch
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityfacts import facts
from autoscaler.policy.capacityspec import CapacitySpec, Router, SloTarget
from autoscaler.policy.lookahead import Lookahead
from autoscaler.specsections import CapacityModel
from tests.test_lengths import EIGHT_B

SLO = SloTarget(ttft_s=2.0, tpot_s=0.2)
# Mooncake's first third at x 1.5: 5.4 req/s of 11,600-token prompts (cv² 1.65), 200-token outputs
MOONCAKE = Demand(5.4, 5.4 * 11_600.0, 5.4 * 200.0)


def _per_replica(n: int, offered: float, slack: float) -> float:
    u = offered / n
    return u * math.exp(-(1.0 - u) * slack)


def test_with_many_requests_in_flight_a_replica_the_tail_falls_as_the_router_pools_the_prefills() -> None:
    # chat-like: tens of decodes in flight a replica, so every replica holds one (few_held's factor
    # is 1); a prefilling replica is one above the level until the fleet's arrivals outrun its
    # departures by the replicas tied with it, which takes longer the more replicas there are
    for n in (4, 8, 16):
        assert leastloaded.few_held(n, 2.0, 400.0, 1.0, 1.0) == 1.0
    at = [leastloaded.wait_tail(n, 0.31 * n, 1.5, 40.0 * n, 0.3 * n) for n in (1, 2, 4, 8, 21)]
    assert at[0] == _per_replica(1, 0.31, 1.5)  # one replica: its own M/G/1 queue
    assert all(a > b for a, b in itertools.pairwise(at))
    assert at[-1] < 0.25 * at[0]


def test_the_pooled_factor_follows_the_walk_and_the_own_departures() -> None:
    # each replica at u = 0.31: the factor falls with n, rises with the arrivals' dispersion (the
    # walk reaches the tied replicas sooner), with the prefills' spread (an older prefill) and with
    # the replica's own requests finishing during its prefill; never above 1
    base = [leastloaded.pooled(n, 0.31 * n, 0.0, 1.0, 1.0, 0.0) for n in (1, 2, 4, 8, 21, 200)]
    assert base[0] == 1.0
    assert all(1.0 >= a > b > 0.0 for a, b in itertools.pairwise(base))
    n, offered = 8, 0.31 * 8
    plain = leastloaded.pooled(n, offered, 0.0, 1.0, 1.0, 0.0)
    assert leastloaded.pooled(n, offered, 0.0, 4.0, 1.0, 0.0) > plain
    assert leastloaded.pooled(n, offered, 0.0, 1.0, 2.0, 0.0) > plain
    assert leastloaded.pooled(n, offered, 0.0, 1.0, 1.0, 5.0) > plain
    assert leastloaded.pooled(n, offered, 0.0, 1.0, 1.0, 1e9) == pytest.approx(1.0)
    # the walk's sum by hand at n = 2: g = 0 is level at once, g = 1 once the walk reaches 1
    walk = 2.0 * 2.0 * (2 * 0.31) * 1.0  # 2·(1 + I)·λ·A, A = E[S] at cs² 1
    assert leastloaded.pooled(2, 0.62, 0.0, 1.0, 1.0, 0.0) == pytest.approx(
        (1.0 + math.erfc(1.0 / math.sqrt(walk))) / 2.0
    )


def test_with_about_one_request_a_replica_the_tail_falls_as_the_poisson_counts() -> None:
    # long prompts, short outputs: ~12 in flight; at 24 replicas a request almost always finds an
    # idle one (the replay: 0.1 % of requests wait past their slack), where a random split waits at u
    offered, slack, decoding, rho = 3.2, 0.5, 9.0, 0.4
    at = {n: leastloaded.wait_tail(n, offered, slack, decoding, rho) for n in (12, 16, 20, 24)}
    assert at[12] > at[16] > at[20] > at[24]
    assert at[24] < 1e-3 < 0.05 < _per_replica(24, offered, slack)
    assert at[12] < _per_replica(12, offered, slack)


def test_bursty_arrivals_fill_every_replica_more_often() -> None:
    # the in flight count spread as the arrivals' counts (index 1: Poisson's): bursts find every
    # replica holding a request more often (Azure code x 5.5 on one-gpu-8b lost 4-7 points at the
    # sweep's short start-ups sized with the Poisson count), and never more often than at random
    offered, slack, decoding, rho = 3.2, 0.5, 9.0, 0.4
    tails = [
        leastloaded.wait_tail(20, offered, slack, decoding, rho, index) for index in (1.0, 2.0, 8.0, 1e4)
    ]
    assert tails[0] < tails[1] < tails[2] <= tails[3] <= _per_replica(20, offered, slack)
    assert leastloaded.wait_tail(20, offered, slack, decoding, rho, 0.5) == tails[0]  # at least Poisson's


@pytest.mark.parametrize("tail", [0.001, 0.01, 0.05])
def test_servers_is_the_least_count_whose_tail_fits(tail: float) -> None:
    offered, slack, decoding, rho = 3.2, 0.5, 9.0, 0.4
    most = tailsearch.split_servers(offered, slack, tail)
    n = leastloaded.servers(offered, slack, tail, decoding, rho, 1.0, most)
    assert n <= most
    rounded = leastloaded.wait_tail  # the search runs on inputs rounded to 0.4 %: allow that
    assert rounded(n, offered, slack, decoding, rho) <= tail * 1.01
    assert rounded(n - 1, offered, slack, decoding, rho) > tail * 0.99


def test_a_least_loaded_router_plans_the_waits_on_the_tail_itself() -> None:
    """Where a sixth of the prompts miss 2 s even alone, the random router's budget lets the waits
    miss as often (its tail is pessimistic at light load; the count 14, 15 before session 21's
    least count asking no more than itself, 2.3 points under the ceiling in the replay at 15); the
    least-loaded tail is the replay's within a few tenths, and the waits keep the attainment's tail:
    19 (the replay 0.6 point under the ceiling at 18, 0.3 at 20)."""
    shape = lengths.spread(EIGHT_B, 11_600.0, 1.65)
    random = capacity.size(EIGHT_B, SLO, MOONCAKE, **shape)
    least = capacity.size(EIGHT_B, SLO, MOONCAKE, **shape, least_loaded=True)
    assert random.replicas == 14
    assert least.replicas == 19
    assert least.binding == "ttft"


def test_on_short_prompts_the_router_changes_nothing() -> None:
    chat = Demand(60.0, 60.0 * 1_000.0, 60.0 * 200.0)
    shape = lengths.spread(EIGHT_B, 1_000.0, 1.0)
    assert capacity.size(EIGHT_B, SLO, chat, **shape, least_loaded=True) == capacity.size(
        EIGHT_B, SLO, chat, **shape
    )


def test_the_spec_names_the_router_and_the_lookahead_sizes_with_it() -> None:
    assert CapacitySpec(profile=EIGHT_B).router == Router.RANDOM
    doc = {"profile": {"stepBaseSeconds": 0.0065, "prefillSecondsPerToken": 3e-5}, "router": "LeastRequests"}
    spec = CapacityModel.model_validate(doc).to_spec()
    assert spec.router is Router.LEAST_REQUESTS
    assert (
        CapacityModel.model_validate(CapacityModel.document_of(spec)).to_spec().router
        is Router.LEAST_REQUESTS
    )
    assert "router" not in CapacityModel.document_of(CapacitySpec(profile=spec.profile))
    with pytest.raises(ValueError):
        CapacityModel.model_validate({**doc, "router": "RoundRobin"})
    state = demand._start(0.0, 5.0, 5.0 * 11_600.0, 5.0 * 200.0, 10.0)
    assert Lookahead(facts(spec), state, 1.0, 100).shape.get("least_loaded") is True
    plain = CapacitySpec(profile=spec.profile)
    assert "least_loaded" not in Lookahead(facts(plain), state, 1.0, 100).shape


def test_a_large_count_in_flight_is_read_as_its_normal_limit() -> None:
    # past NORMAL_SHAPE clumps the gamma's series would need more terms than it sums (at 10^5 in
    # flight it read P(X >= L) as 0.44): the normal limit takes over, continuous at the switch
    edge = leastloaded.NORMAL_SHAPE
    for index in (1.0, 3.0):
        n = int(edge * index)
        below = leastloaded.few_held(n, 1.0, (edge - 2.0) * index, 0.0, index)
        above = leastloaded.few_held(n, 1.0, (edge + 2.0) * index, 0.0, index)
        assert 0.0 < below < above < 1.0
        assert below == pytest.approx(above, rel=0.1)
    assert leastloaded.few_held(100_000, 50_000.0, 60_000.0, 10.0, 1.0) == 1.0  # all hold one
