"""The compiled per-tick arithmetic (replay/policies/tickkernel.py) and sizing (sizekernel.py), all
installed as `python -m bench policy` installs them, decide as the pure-Python policy does, decision
for decision and state for state, over the bench's varying load (its ramps, falls and bursts)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from autoscaler import compiledcore
from autoscaler.policy import flatahead, flatband
from autoscaler.policy.decide import decide, record_rescale
from autoscaler.policy.state import PolicyState
from bench import bench_policy as b

TICKS = 600


@contextmanager
def _compiled() -> Iterator[None]:
    b.install_sizing([])
    try:
        yield
    finally:
        b.uninstall_sizing()


def _decisions() -> list[str]:
    spec = b.SCENARIOS[b.PREDICTIVE]
    state = PolicyState()
    replicas = 4
    out = []
    for i, (queue, batch) in enumerate(b.observations(TICKS)):
        now = b.START + i * 15.0
        decision, state = decide(spec, state, b.observation(queue, batch, replicas), now)
        out.append(repr((decision, state)))
        if decision.desired_replicas != replicas:
            state = record_rescale(spec, state, now, replicas, decision.desired_replicas)
            replicas = decision.desired_replicas
    return out


def test_the_compiled_policy_decides_as_the_python_one() -> None:
    want = _decisions()
    with _compiled():
        # installed on the Python core; the compiled one runs its own arithmetic (tickkernel.py)
        installed = compiledcore.active() is None
        assert (flatahead.kernels is not None) is installed
        assert (flatband.kernel is not flatband.burst_test) is installed
        got = _decisions()
    assert flatahead.kernels is None and flatband.kernel is flatband.burst_test
    assert len({w.split("stages=")[0] for w in want}) > 2  # the load moves the counts
    for tick, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"tick {tick}"
