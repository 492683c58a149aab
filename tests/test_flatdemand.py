"""The demand's tick in flat floats (autoscaler/policy/flatdemand.py), by its own source and by the
copy the bench compiles (replay/policies/tickkernel.py), folds a tick into the state demand.observe
folds it into, to the bit: every decision after it reads that state."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy import demand, flatcalls, flatdemand
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityspec import DemandSpec
from autoscaler.policy.demand import DemandState, Series
from autoscaler.policy.lasting import Lasting
from autoscaler.policy.mix import Mix
from replay.policies import tickkernel

KERNELS = {"python": flatdemand.tick, "compiled": tickkernel.compiled()}
SPECS = [DemandSpec(), DemandSpec(alpha=0.6, beta=0.05), DemandSpec(alpha=1.0, smoothing_period_s=60.0)]

values = st.one_of(st.sampled_from([0.0, -0.0, 1e-300, 5e-324, 1.0]), st.floats(-1e4, 1e6, allow_nan=False))
positive = st.one_of(st.sampled_from([0.0, 5e-324, 1.0]), st.floats(0.0, 1e6))
windows = st.one_of(st.none(), st.sampled_from([0.0, 5.0, 15.0, 60.0]), st.floats(-1.0, 120.0))
series = st.builds(Series, positive, values)
states = st.builds(
    lambda at, n, mix, req, primed, typical, peaks, peak, spread, counted, lasted: DemandState(
        at,
        n,
        mix,
        req,
        primed,
        (),
        0.0,
        0.0,
        0.0,
        typical,
        peaks,
        peak,
        (),
        spread=spread,
        counted=counted,
        lasting=lasted,
    ),
    st.floats(0.0, 1e5),
    positive,
    st.builds(Mix, positive, positive, positive, positive, positive, positive, positive, positive),
    series,
    st.booleans(),
    st.builds(Demand, positive, positive, positive),
    st.one_of(st.just(()), st.builds(lambda t, x: ((t, x),), st.floats(0.0, 1e5), positive)),
    positive,
    st.tuples(values, positive),
    st.one_of(st.none(), series),
    st.one_of(st.just(Lasting()), st.builds(Lasting, positive, positive, values)),
)
readings = st.tuples(
    st.one_of(st.sampled_from([15.0, 5.0]), st.floats(1e-3, 900.0)),  # the tick's seconds
    positive,
    positive,
    positive,
    positive,
    st.one_of(st.none(), positive),
    windows,
    st.one_of(st.none(), positive),
    windows,
    st.one_of(st.none(), positive),  # the generated tokens² per second
    st.one_of(st.none(), positive),  # the generated tokens per second of the requests finished
)


@contextmanager
def _folding(kernel: Callable[..., Any] | None) -> Iterator[None]:
    flatdemand.install(kernel)
    try:
        yield
    finally:
        flatdemand.install(None)


def _both(spec: DemandSpec, state: DemandState, now: float, *rest: Any, kernel: Callable[..., Any]) -> None:
    """observe's own and by `kernel` give the same values: repr tells -0.0 from 0.0 and an int
    from a float, and reads NaN as NaN."""
    want = demand.observe(spec, state, now, *rest)
    with _folding(kernel):
        got = demand.observe(spec, state, now, *rest)
    assert repr(got) == repr(want)


@pytest.mark.parametrize("name", KERNELS)
@settings(max_examples=500, deadline=None)
@given(spec=st.sampled_from(SPECS), state=states, reading=readings)
def test_a_tick_folds_as_observe_folds_it(
    name: str, spec: DemandSpec, state: DemandState, reading: Any
) -> None:
    dt, *rest = reading
    _both(spec, state, state.at + dt, *rest, kernel=KERNELS[name])


@pytest.mark.parametrize("name", KERNELS)
@settings(max_examples=100, deadline=None)
@given(
    spec=st.sampled_from(SPECS),
    ticks=st.lists(
        st.tuples(st.floats(0.0, 400.0), st.floats(0.0, 3_000.0), st.booleans()), min_size=2, max_size=40
    ),
)
def test_a_run_of_ticks_folds_as_observe_folds_it(name: str, spec: DemandSpec, ticks: list[Any]) -> None:
    """States as a run of readings leaves them (the mix weighed in, the series primed, a gateway's
    count read and lost), each tick folded both ways from observe's own state."""
    state = None
    for k, (rate, inflight, counter) in enumerate(ticks):
        now = 15.0 * k
        rest = (
            rate,
            rate * 900.0,
            rate * 150.0,
            inflight,
            rate * 9e5,
            5.0,
            rate * 1.1 if counter else None,
            5.0,
            rate * 6e4 if counter else None,
        )
        if state is not None:
            _both(spec, state, now, *rest, kernel=KERNELS[name])
        state, _ = demand.observe(spec, state, now, *rest)


def test_the_guards_stay_observes() -> None:
    """A first sight, a clock stepped back and no time passed are observe's own, kernel or not."""
    state, _ = demand.observe(SPECS[0], None, 15.0, 5.0, 5_000.0, 1_000.0, 40.0)
    for now in (15.0, 10.0):
        _both(SPECS[0], state, now, 5.0, 5_000.0, 1_000.0, 40.0, kernel=KERNELS["compiled"])
    with _folding(KERNELS["compiled"]):
        assert demand._fused is flatcalls.fold
        assert demand.observe(SPECS[0], state, 15.0, 5.0, 5_000.0, 1_000.0, 40.0)[0] is state
    assert demand._fused is None
