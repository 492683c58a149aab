"""The Lookahead's arithmetic in flat floats (autoscaler/policy/flatahead.py), by its own source and
by the copy the bench compiles (replay/policies/tickkernel.py), reads the state and forecasts as
the Lookahead's own code does, to the bit: the horizon, the sizing and the band's scoring read them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy import capacityfacts, flatahead, lookahead
from autoscaler.policy.capacityspec import CapacitySpec, DemandSpec, ReplicaProfile, SloTarget
from autoscaler.policy.demand import DemandState
from replay.policies import tickkernel
from tests.test_flatband import specs, states
from tests.test_sizer import profiles

KERNELS = {"python": (flatahead.start, flatahead.forecast), "compiled": tickkernel.compiled_ahead()}
spreads = st.tuples(
    st.one_of(st.sampled_from([0.0, -1.0, 1e9]), st.floats(-10.0, 1e4)),
    st.one_of(st.sampled_from([0.0, 1e-9]), st.floats(0.0, 1e3)),
)
horizons = st.lists(st.one_of(st.sampled_from([0.0, 15.0]), st.floats(0.0, 3_600.0)), min_size=1, max_size=5)


def _read(cap: CapacitySpec, state: DemandState, hs: list[float], copies: Any) -> str:
    flatahead.use(copies)
    try:
        ahead = lookahead.Lookahead(capacityfacts.facts(cap), state, 1.0, 64)
        forecasts = [(ahead.forecast_at(h), ahead.mean_load_at(h)) for h in [*hs, 0.0, *hs]]
    finally:
        flatahead.use(None)
    return repr((ahead.typical_load, ahead.mean_now, ahead.level, ahead.spread, ahead.hold, forecasts))


@pytest.mark.parametrize("name", KERNELS)
@settings(max_examples=400, deadline=None)
@given(
    profile=profiles,
    spec=specs,
    state=states,
    spread=spreads,
    ttft=st.sampled_from([0.5, 2.0, 10.0]),
    hs=horizons,
)
def test_the_lookahead_reads_as_its_own_code_to_the_bit(
    name: str,
    profile: ReplicaProfile,
    spec: DemandSpec,
    state: DemandState,
    spread: tuple[float, float],
    ttft: float,
    hs: list[float],
) -> None:
    """repr tells -0.0 from 0.0; each horizon asked twice (the second read from the Lookahead's cache)."""
    cap = CapacitySpec(profile=profile, slo=SloTarget(ttft_s=ttft), demand=spec)
    state = state._replace(spread=spread)
    assert _read(cap, state, hs, KERNELS[name]) == _read(cap, state, hs, None)
