"""Cases as Ray tasks (the optional extra `infscale[ray]`), for `league` and `sweep`.

Each case is one task; every trace goes into the object store once (`ray.put`) and the tasks get
its reference, so a trace crosses the network once per node, not once per case. A task runs the
function local processes run: the results are the same wherever a case ran.

    address "" : a local Ray cluster started for this run (and stopped after it);
    "auto": the cluster this machine belongs to; "ray://host:10001" or "host:6379": that one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from autoscaler import compiledcore
from replay.league.runner import Case, Setup, run_case
from replay.trace import Trace

T = TypeVar("T")
R = TypeVar("R")


class RayUnavailable(ValueError):
    """Ray is not installed: `pip install 'infscale[ray]'` (a usage error: exit 2)."""


def ray_map(
    fn: Callable[[Any, T], R],
    shared: Mapping[str, Any],
    items: Sequence[tuple[str, T]],
    *,
    address: str,
    on_done: Callable[[int], None] | None = None,
) -> list[R]:
    """fn(shared[key], item) for each (key, item), as Ray tasks, in order; each `shared` value
    goes into the object store once."""
    try:
        import ray
    except ImportError as e:
        raise RayUnavailable("--ray needs Ray: pip install 'infscale[ray]'") from e
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(
            address=address or None,
            include_dashboard=False,
            logging_level=logging.ERROR,
            log_to_driver=False,
            runtime_env=core_runtime_env(),
        )
    try:
        _same_core(ray)
        task = ray.remote(fn)
        refs = {key: ray.put(value) for key, value in shared.items()}
        futures = [task.remote(refs[key], item) for key, item in items]
        index = {f: i for i, f in enumerate(futures)}
        out: list[Any] = [None] * len(items)
        pending = list(futures)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for f in done:
                out[index[f]] = ray.get(f)
                if on_done is not None:
                    on_done(1)
        return out
    finally:
        if started_here:
            ray.shutdown()


def core_runtime_env() -> dict[str, Any] | None:
    """Ray's runtime_env that loads in each worker, before its first task, the compiled policy core
    this process runs (INFSCALE_COMPILED_CORE); None for the sources."""
    env = compiledcore.worker_env()
    if not env:
        return None
    return {"env_vars": env, "worker_process_setup_hook": "autoscaler.compiledcore.activate_from_settings"}


def _worker_core() -> str | None:
    build = compiledcore.active()
    return None if build is None else str(build)


def _same_core(ray: Any) -> None:
    """The workers run the driver's core, or an error (a cluster started without core_runtime_env)."""
    mine = _worker_core()
    theirs = ray.get(ray.remote(_worker_core).remote())
    if theirs != mine:
        raise compiledcore.CompiledCoreError(
            f"the Ray workers' policy core is {theirs or 'the sources'}, this process's "
            f"{mine or 'the sources'}: start the cluster with replay.league.ray_runner.core_runtime_env(), "
            "or let infscale start it"
        )


def run_ray(
    traces: Mapping[str, Trace],
    cases: Sequence[Case],
    setup: Setup,
    *,
    address: str,
    on_done: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """The league's cases; the setup rides with each case (a few hundred bytes)."""
    return ray_map(
        _league_case, traces, [(c.trace_key, (c, setup)) for c in cases], address=address, on_done=on_done
    )


def _league_case(trace: Trace, item: tuple[Case, Setup]) -> dict[str, Any]:
    return run_case(trace, *item)
