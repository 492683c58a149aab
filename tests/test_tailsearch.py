"""The TTFT search's utilization (tailsearch.utilization): Newton's method picks the point and
bisection's own comparisons check it, so the count is bisection's to the bit, in Python and as the
sizing kernel compiles it (replay/policies/sizekernel.py). Every league number depends on it."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy import flattables, tailsearch
from autoscaler.policy.capacityspec import ReplicaProfile, SloTarget
from replay.policies import sizekernel

IMPLEMENTATIONS = {
    "python": (tailsearch.utilization, tailsearch.bisect_utilization, tailsearch.split_servers),
    "compiled": tuple(
        sizekernel.searches()[name] for name in ("utilization", "bisect_utilization", "split_servers")
    ),
}
slacks = st.one_of(
    st.floats(0.0, 1e4),
    st.floats(-50.0, 0.0),  # a tail that falls somewhere in [0, 1]: bisection's own path
    st.sampled_from([0.0, 5e-324, 1e-300, 1e-12, 1e300, math.inf, -math.inf, math.nan]),
)
tails = st.one_of(
    st.floats(1e-12, 1.0),
    st.sampled_from([0.0, 5e-324, 1e-300, 1.0 - 2**-53, 1.0, 2.0, math.inf, math.nan, -1.0]),
)


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
@settings(max_examples=3_000, deadline=None)
@given(slack=slacks, tail=tails)
def test_utilization_is_bisections_at_any_input(name: str, slack: float, tail: float) -> None:
    utilization, bisect, _ = IMPLEMENTATIONS[name]
    assert utilization(slack, tail) == bisect(slack, tail)


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_utilization_is_bisections_over_the_sizings_range(name: str) -> None:
    """The ranges the sizing asks at (slack 0.01-400 mean services, tail 1e-5 to 0.5), log-uniform."""
    utilization, bisect, _ = IMPLEMENTATIONS[name]
    rng = random.Random(7)
    for _ in range(20_000):
        slack = math.exp(rng.uniform(math.log(0.01), math.log(400.0)))
        tail = math.exp(rng.uniform(math.log(1e-5), math.log(0.5)))
        assert utilization(slack, tail) == bisect(slack, tail), (slack, tail)


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_the_count_is_the_load_over_the_largest_utilization_that_fits(name: str) -> None:
    """n = ceil(offered / u) for the u whose tail fits where u + 2^-20's does not."""
    utilization, _, split_servers = IMPLEMENTATIONS[name]
    for offered, slack, tail in ((2.0, 1.0, 0.31), (37.5, 4.0, 0.01), (180.0, 0.3, 1e-4), (0.7, 20.0, 0.05)):
        u = utilization(slack, tail)
        above = u + 2**-20
        assert u * math.exp(-(1.0 - u) * slack) <= tail < above * math.exp(-(1.0 - above) * slack)
        assert split_servers(offered, slack, tail) == max(1, math.ceil(offered / u - 1e-9))


def _rounded(x: float) -> float:
    """An input as ttft_servers searches at it: its step of 1/256 in log scale (0 for x <= 0)."""
    q = tailsearch.TTFT_QUANTUM
    return math.exp(round(math.log(x) * q) / q) if x > 0.0 else 0.0


def test_the_kept_utilization_gives_the_searchs_count_at_every_load() -> None:
    """ttft_servers keeps the utilization by the slack's and the tail's steps alone and divides each
    load by it: the count split_servers works out at the rounded inputs, in Python and in the
    sizing kernel's table (flattables.ttft_servers), where most loads meet a utilization kept."""
    rng = random.Random(11)
    pairs = [(math.exp(rng.uniform(-5.0, 6.0)), math.exp(rng.uniform(-12.0, 0.3))) for _ in range(40)]
    pairs += [(-1.0, 0.01), (0.0, 0.2), (3.0, 0.0), (3.0, 1.0), (3.0, 5.0)]
    c = (
        flattables.consts(ReplicaProfile(step_base_s=0.02, prefill_s_per_token=1e-4), SloTarget())
        + [0.0] * flattables.TABLE_FLOATS
    )
    keys = [0] * flattables.KEYS
    tailsearch._ttft_cache.clear()
    tailsearch._share_cache.clear()
    for _ in range(4_000):
        slack, tail = rng.choice(pairs)
        offered = rng.choice([0.0, -2.0, math.exp(rng.uniform(-8.0, 9.0))])
        want = tailsearch.split_servers(_rounded(offered), _rounded(slack), _rounded(tail))
        assert tailsearch.ttft_servers(offered, slack, tail) == want, (offered, slack, tail)
        assert flattables.ttft_servers(c, keys, offered, slack, tail) == want, (offered, slack, tail)
    assert len(tailsearch._share_cache) <= len(pairs) < len(tailsearch._ttft_cache)
