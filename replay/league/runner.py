"""Running a league's cases: one case is one policy on one trace (at one rate scale) on one
scenario (at one start-up time); local processes by default, Ray tasks with `ray_address`.

A case is self-contained and deterministic: the same case gives the same numbers wherever it
runs (only its wall and CPU seconds differ). A case whose requests are never served is cut an
hour past the trace's end and scored with them as not good (`requests_unfinished` in its row); one
that raises ends as `failed`, with the message: the league reports it, it does not stop.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from replay import report
from replay.league.startup import StartupMode, with_startup
from replay.policies import PolicyParams
from replay.profiles import Scenario
from replay.trace import Trace
from replay.warmup import resolve_warmup

# summary keys a league row keeps (report.policy_summary has more; the timelines stay out)
TIMING_KEYS = ("wall_seconds", "simulated_requests_per_second", "cpu_seconds")


@dataclass(frozen=True, slots=True)
class Case:
    trace: str  # the source's label
    rate_scale: float
    scenario: str
    policy: str
    startup_s: float | None = None  # None: the scenario's own cold start

    @property
    def trace_key(self) -> str:
        return trace_key(self.trace, self.rate_scale)


def trace_key(label: str, rate_scale: float) -> str:
    return f"{label}@{rate_scale:g}"


@dataclass(frozen=True, slots=True)
class Setup:
    """What every case of one league shares (sent to each worker once)."""

    scenarios: Mapping[str, Scenario]
    params: PolicyParams
    startup_mode: StartupMode = StartupMode.DILATE
    warmup_s: float | None = None  # None: each case's scenario's own (replay/warmup.py), dilated too


def run_case(trace: Trace, case: Case, setup: Setup) -> dict[str, Any]:
    """One case -> its row: the case, `status` (ok / failed), the summary numbers."""
    from replay.cli import run_policy

    scenario = setup.scenarios[case.scenario]
    if case.startup_s is not None:
        scenario = with_startup(scenario, case.startup_s, setup.startup_mode)
    warmup_s = resolve_warmup(setup.warmup_s, scenario, setup.params.downscale_window_s)
    row: dict[str, Any] = {
        "trace": case.trace,
        "rate_scale": case.rate_scale,
        "scenario": case.scenario,
        "startup_s": case.startup_s,
        "policy": case.policy,
        "requests": len(trace),
        "warmup_s": warmup_s,
    }
    cpu = time.process_time()
    try:
        result = run_policy(trace, scenario, case.policy, setup.params, warmup_s=warmup_s)
    except Exception as e:  # a bug in one policy must not lose the other cases' hours of work
        message = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}"
        return {**row, "status": "failed", "error": message, "cpu_seconds": time.process_time() - cpu}
    summary = report.policy_summary(result)
    return {**row, "status": "ok", "error": "", **summary, "cpu_seconds": time.process_time() - cpu}


# --- local processes ------------------------------------------------------------------------------

_WORKER: tuple[Mapping[str, Trace], Setup] | None = None


def _init_worker(traces: Mapping[str, Trace], setup: Setup) -> None:
    global _WORKER
    _WORKER = (traces, setup)


def _local_case(case: Case) -> dict[str, Any]:
    assert _WORKER is not None
    traces, setup = _WORKER
    return run_case(traces[case.trace_key], case, setup)


def run_local(
    traces: Mapping[str, Trace],
    cases: Sequence[Case],
    setup: Setup,
    *,
    workers: int,
    on_done: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Every case's row, in case order; `workers` processes (1: this process)."""
    rows: list[dict[str, Any] | None] = [None] * len(cases)
    if workers <= 1:
        for i, case in enumerate(cases):
            rows[i] = run_case(traces[case.trace_key], case, setup)
            if on_done is not None:
                on_done(1)
        return [r for r in rows if r is not None]
    # the largest traces first: the pool ends together instead of waiting on one long case
    order = sorted(range(len(cases)), key=lambda i: -len(traces[cases[i].trace_key]))
    with ProcessPoolExecutor(workers, initializer=_init_worker, initargs=(traces, setup)) as pool:
        pending: dict[Future[dict[str, Any]], int] = {pool.submit(_local_case, cases[i]): i for i in order}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                rows[pending.pop(future)] = future.result()
                if on_done is not None:
                    on_done(1)
    return [r for r in rows if r is not None]


def default_workers() -> int:
    return os.cpu_count() or 1
