"""`--ray`: the league's and the sweep's cases as tasks on a real local Ray cluster give the
numbers of a local run (Ray is a dev dependency; skipped cleanly where it is not installed)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from replay.cli import parse_grid, sweep
from replay.league import LeagueSpec, league
from replay.league.ray_runner import _worker_core, core_runtime_env
from replay.league.sources import TraceSource
from replay.traces import time_window
from tests.replay.test_league import _numbers
from tests.replay.test_simulate import FAST, PARAMS, ramp_trace

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_cluster():  # type: ignore[no-untyped-def]
    """One real local Ray cluster (a head node, 2 CPUs) for the module's tests."""
    env = core_runtime_env()  # under INFSCALE_COMPILED_CORE, the workers load the build too
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False, runtime_env=env)
    yield
    ray.shutdown()


def test_league_on_ray_gives_the_numbers_of_local_processes(local_cluster: None) -> None:
    import replay.league.sources as src

    spec = LeagueSpec(
        (TraceSource("ramp", rate_scales=(1.0,)),),
        (FAST,),
        ("static-peak", "hpa", "kpa"),
        PARAMS,
        startups_s=(200.0,),
        workers=2,
    )
    src._BASES[(None, None, (), 0)] = time_window(ramp_trace(), 0.0, 600.0)
    try:
        local = league(spec)
        on_ray = league(replace(spec, ray_address="auto"))  # the cluster the fixture started
    finally:
        src._BASES.clear()
    assert on_ray["runner"] == "ray" and local["runner"] == "2 local process(es)"
    assert len(on_ray["rows"]) == 6
    assert _numbers(on_ray["rows"]) == _numbers(local["rows"])
    assert ray.is_initialized()  # a cluster it did not start is left running


def test_sweep_on_ray_gives_the_numbers_of_local_processes(local_cluster: None) -> None:
    trace = time_window(ramp_trace(), 0.0, 600.0)
    grid = parse_grid(["target=4,16"])
    local = sweep(trace, FAST, "hpa", PARAMS, grid, workers=1)
    on_ray = sweep(trace, FAST, "hpa", PARAMS, grid, workers=1, ray_address="auto")
    assert _numbers(on_ray) == _numbers(local)
    assert [p["params"] for p in on_ray] == grid


def test_the_workers_run_the_core_this_process_runs(local_cluster: None) -> None:
    """The compiled core when this process runs it (INFSCALE_COMPILED_CORE=true pytest), else the
    sources: a Ray worker imports the core afresh, and loads the build by the setup hook."""
    assert ray.get(ray.remote(_worker_core).remote()) == _worker_core()
