"""The policy core's optional mypyc build (autoscaler/compiledcore.py, `make compiled`) decides as
its Python sources do: the bench's six digests and the predictive row's decisions and states tick by
tick, with the numba kernels installed (the sizing's reached from the compiled modules; the
per-tick copies installed on the sources alone) and without.
Skipped where the build is absent or older than the sources (.ci/run builds it first)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from autoscaler import compiledcore
from bench import mypyc_core
from bench.bench_policy import uninstall_sizing

pytestmark = pytest.mark.skipif(mypyc_core.stale() is not None, reason=str(mypyc_core.stale()))

TICKS = 600


def _run(kernels: bool, mypyc: bool) -> dict[str, Any]:
    args = (["--mypyc"] if mypyc else []) + ([] if kernels else ["--python"])
    env = {k: v for k, v in os.environ.items() if not k.startswith(compiledcore.ENV)}
    command = [sys.executable, "-m", "bench.mypyc_core", "decisions", *args]
    run = subprocess.run(command, capture_output=True, text=True, check=True, cwd=mypyc_core.ROOT, env=env)
    got: dict[str, Any] = json.loads(run.stdout)
    return got


@contextmanager
def _uninstalled() -> Iterator[None]:
    try:
        yield
    finally:
        uninstall_sizing()


@pytest.mark.parametrize("kernels", [True, False], ids=["numba kernels", "no kernels"])
def test_the_compiled_core_decides_as_its_sources(kernels: bool) -> None:
    got = _run(kernels, mypyc=True)
    if compiledcore.compiled():  # this process runs the build (INFSCALE_COMPILED_CORE): the sources apart
        want = _run(kernels, mypyc=False)
    else:
        with _uninstalled():
            want = mypyc_core.decisions(TICKS, kernels)
    assert want["compiled"] == []
    core = {"decide", "planner", "demand", "band", "capacity", "replicarates", "burstsize", "burstprice"}
    core |= {"latecurve", "lookahead", "capacityfacts", "hpa"}
    assert core <= set(got["compiled"])
    assert not set(got["compiled"]) & mypyc_core.PYTHON_ONLY
    assert got["digests"] == want["digests"]
    assert len(set(got["digests"].values())) == 6
    assert got["ticks"] == want["ticks"]
    # the sizing's kernel is called from the compiled modules as often as from the sources; the
    # per-tick copies are the Python core's alone (replay/policies/tickkernel.py), the compiled
    # core running its own arithmetic
    assert {"flatahead", "flatband"} <= set(got["compiled"])
    assert got["calls"] == {k: v for k, v in want["calls"].items() if k == "sizing"}
    assert set(want["calls"]) == (
        {"sizing", "demand tick", "panic test", "lookahead start", "forecast"} if kernels else set()
    )
    assert all(n > 0 for n in want["calls"].values())
