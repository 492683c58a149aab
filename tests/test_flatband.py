"""The panic's test in flat floats (autoscaler/policy/flatband.py), by its own source and by the copy
the bench compiles (replay/policies/tickkernel.py), is band.upper's over demand.expected and the
loads' comparison, to the bit: whether a burst is sized and the stage's message both read it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy import band, capacityfacts, demand, flatband, flatcalls
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityspec import DemandSpec, ReplicaProfile
from autoscaler.policy.demand import DemandState, Series
from autoscaler.policy.levelbins import Heights, Relative
from autoscaler.policy.mix import Mix
from replay.policies import tickkernel
from tests.test_sizer import profiles

KERNELS = {"python": flatband.burst_test, "compiled": tickkernel.compiled_burst_test()}

rates = st.one_of(st.sampled_from([0.0, 5e-324, 1e-7, 1e-6, 1.0]), st.floats(0.0, 1e4))
tokens = st.one_of(st.sampled_from([0.0, 1e-7, 1.0]), st.floats(0.0, 2e4))
demands = st.builds(lambda r, p, o: Demand(r, r * p, r * o), rates, tokens, tokens)
counts = st.sampled_from([0.0, 1.0, 3.0, 50.0, 1000.0])
bins = st.lists(st.tuples(st.one_of(st.just(0.0), st.floats(0.0, 4.0)), counts), max_size=2).map(tuple)
# bin 0's heights: in log space (lean <= 0) or on heights, their quantile below 0 or not
heights = st.builds(
    Heights,
    st.one_of(st.just(0.0), st.floats(-1.0, 20.0)),
    st.just(0.5),
    counts,
    st.just(0.0),
    st.just(0.0),
    st.one_of(st.sampled_from([0.0, -0.1, 5e-324, 0.1]), st.floats(-1.0, 1.0)),
)
states = st.builds(
    lambda at, level, trend, p, o, typical, q, scored, b, relative, h: DemandState(
        at,
        0.0,
        Mix(100.0, p, o),
        Series(level, trend),
        True,
        (),
        q,
        0.1,
        scored,
        typical,
        bins=b,
        relative=relative,
        heights=h,
    ),
    st.floats(0.0, 1e5),
    rates,
    st.one_of(st.just(0.0), st.floats(-5.0, 5.0)),
    tokens,
    tokens,
    demands,
    st.floats(-1.0, 4.0),
    counts,
    bins,
    st.builds(Relative, st.floats(-2.0, 8.0), st.floats(0.0, 4.0), counts),
    heights,
)
specs = st.builds(
    DemandSpec,
    damping_s=st.sampled_from([1.0, 120.0, 1e7]),
    prior_error=st.sampled_from([0.0, 0.3, 5.0]),
    prior_weight=st.sampled_from([0.0, 8.0, 1e6]),
)


def _band_upper(
    profile: ReplicaProfile, spec: DemandSpec, prior: DemandState, now: float, seen: Demand, x: float
) -> Any:
    """planstages.panic_stage's test as it read before flatband (band.upper and the loads)."""
    load = capacityfacts._load_function(profile)
    expected_now = band.upper(spec, prior, demand.expected(spec, prior, now - prior.at), load)
    return load(seen) > x * load(expected_now), expected_now.requests


@pytest.mark.parametrize("name", KERNELS)
@settings(max_examples=500, deadline=None)
@given(
    profile=profiles,
    spec=specs,
    prior=states,
    gap=st.one_of(st.sampled_from([0.0, 15.0]), st.floats(0.0, 3_600.0)),
    seen=demands,
    threshold=st.sampled_from([1.0, 2.0, 3.5]),
)
def test_the_burst_test_is_band_uppers_to_the_bit(
    name: str,
    profile: ReplicaProfile,
    spec: DemandSpec,
    prior: DemandState,
    gap: float,
    seen: Demand,
    threshold: float,
) -> None:
    kernel: Callable[..., Any] = KERNELS[name]
    flatband.use(kernel)
    try:
        terms, band_terms = capacityfacts.load_terms(profile), capacityfacts.band_terms(spec)
        got = flatcalls.above_band(terms, band_terms, prior, prior.at + gap, seen, threshold)
    finally:
        flatband.use(None)
    assert repr(got) == repr(_band_upper(profile, spec, prior, prior.at + gap, seen, threshold))
    assert type(got[0]) is bool and type(got[1]) is float
