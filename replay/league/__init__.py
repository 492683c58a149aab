"""`infscale replay league`: every policy on every trace, at several loads, on every scenario,
with a start-up sweep -- the comparison the policies are judged by.

    sources.py  traces (files, folders, the embedded default) and their rate scales
    startup.py  a scenario at another cold-start time
    runner.py   one case = one policy x trace x rate scale x scenario (x start-up): local
                processes or Ray tasks, identical results
    tables.py   per-case tables with deltas against hpa and Pareto dominance, the start-up
                sweep's collapse points, who wins where, predictive's goals and their tally
    markdown.py the document as Markdown (league.md)
    cli.py      the command

`league(spec)` returns the whole document (schema infscale.replay.league/v1, cli.py writes it as
league.json beside league.md and the plots).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from replay.league import tables
from replay.league.runner import Case, Setup, run_local, trace_key
from replay.league.sources import SourceError, TraceSource, auto_rate_scales
from replay.league.startup import DEFAULT_STARTUPS_S, StartupMode, with_startup
from replay.policies import POLICY_NAMES, PolicyParams, build_policy
from replay.profiles import Scenario
from replay.report import slo_text
from replay.trace import Trace

SCHEMA = "infscale.replay.league/v1"
# the league's policies, in table order: fixed fleets, the reactive baselines, infscale, the bound
DEFAULT_POLICIES = (
    "static-peak",
    "static-mean",
    "hpa",
    "keda",
    "keda-cached",
    "kpa",
    "planner",
    "predictive",
    "clairvoyant",
)
SweepScale = Literal["low", "high", "all"]


@dataclass(frozen=True, slots=True)
class LeagueSpec:
    sources: tuple[TraceSource, ...]
    scenarios: tuple[Scenario, ...]
    policies: tuple[str, ...] = DEFAULT_POLICIES
    params: PolicyParams = field(default_factory=PolicyParams)
    rate_scales: tuple[float, ...] | None = None  # None: each source's own (shared table, else the rule)
    startups_s: tuple[float, ...] = DEFAULT_STARTUPS_S  # (): no start-up sweep
    startup_mode: StartupMode = StartupMode.DILATE
    sweep_scale: SweepScale = "low"  # the sweep runs at each trace's lowest, highest or every scale
    seed: int = 0
    workers: int = 1
    ray_address: str | None = None  # set ("" or "auto" or host:port): Ray tasks instead of processes
    warmup_s: float | None = None  # None: each scenario's default warm-up (replay/warmup.py); 0: none

    def __post_init__(self) -> None:
        if not self.sources:
            raise SourceError("a league needs at least one trace")
        if not self.scenarios:
            raise SourceError("a league needs at least one scenario")
        names = [s.name for s in self.scenarios]
        if len(set(names)) != len(names):
            raise SourceError(
                f"scenario given twice: {', '.join(sorted({n for n in names if names.count(n) > 1}))}"
            )
        if not self.policies or len(set(self.policies)) != len(self.policies):
            raise SourceError("--policies: give each policy once, at least one")
        for rate in self.rate_scales or ():
            if not rate > 0:
                raise SourceError(f"rate scales must be > 0, got {rate}")


def load_traces(spec: LeagueSpec) -> tuple[dict[str, Trace], dict[str, tuple[float, ...]]]:
    """Every (source, rate scale) trace, loaded here once; and each source's scales."""
    traces: dict[str, Trace] = {}
    scales: dict[str, tuple[float, ...]] = {}
    for source in spec.sources:
        chosen = spec.rate_scales or source.rate_scales
        if chosen is None:
            chosen = auto_rate_scales(source, spec.scenarios[0], spec.params.target, spec.seed)
        scales[source.label] = chosen
        for k in chosen:
            trace = source.load(k, spec.seed)
            if not len(trace):
                raise SourceError(f"trace {source.label!r} at rate scale {k:g} has no request")
            traces[trace_key(source.label, k)] = trace
    return traces, scales


def plan(spec: LeagueSpec, scales: dict[str, tuple[float, ...]]) -> list[Case]:
    cases = [
        Case(source.label, k, scenario.name, policy)
        for source in spec.sources
        for k in scales[source.label]
        for scenario in spec.scenarios
        for policy in spec.policies
    ]
    for source in spec.sources:
        chosen = scales[source.label]
        at = {"low": chosen[:1], "high": chosen[-1:], "all": chosen}[spec.sweep_scale]
        cases += [
            Case(source.label, k, scenario.name, policy, startup)
            for k in at
            for scenario in spec.scenarios
            for startup in spec.startups_s
            for policy in spec.policies
        ]
    return cases


def check(spec: LeagueSpec, traces: dict[str, Trace]) -> None:
    """Fail on a bad policy name or start-up time before the first long case."""
    known = set(POLICY_NAMES)
    any_trace = next(iter(traces.values()))
    for name in spec.policies:
        if name not in known and not name.startswith("static-"):
            raise SourceError(f"unknown policy {name!r} (known: {', '.join(POLICY_NAMES)}, static-N)")
        build_policy(name, spec.scenarios[0], any_trace, spec.params, lambda: 0.0)
    for scenario in spec.scenarios:
        for startup in spec.startups_s:
            with_startup(scenario, startup, spec.startup_mode)


def league(spec: LeagueSpec, *, progress: bool = False) -> dict[str, Any]:
    start, cpu = time.perf_counter(), time.process_time()
    traces, scales = load_traces(spec)
    check(spec, traces)
    cases = plan(spec, scales)
    setup = Setup({s.name: s for s in spec.scenarios}, spec.params, spec.startup_mode, spec.warmup_s)
    bar, on_done = _progress(len(cases), progress)
    try:
        if spec.ray_address is not None:
            from replay.league.ray_runner import run_ray

            rows = run_ray(traces, cases, setup, address=spec.ray_address, on_done=on_done)
        else:
            rows = run_local(traces, cases, setup, workers=spec.workers, on_done=on_done)
    finally:
        if bar is not None:
            bar.close()
    case_tables = tables.case_tables(rows)
    sweeps = tables.sweep_tables(rows)
    return {
        "schema": SCHEMA,
        "traces": [
            {
                "label": s.label,
                "path": None if s.path is None else str(s.path),
                "format": s.format,
                "options": dict(s.options),
                "rate_scales": list(scales[s.label]),
                "requests": {f"{k:g}": len(traces[trace_key(s.label, k)]) for k in scales[s.label]},
            }
            for s in spec.sources
        ],
        "scenarios": [asdict(s) for s in spec.scenarios],
        "slo": "; ".join(f"{s.name}: {slo_text(asdict(s))}" for s in spec.scenarios),
        "policies": list(spec.policies),
        "params": {
            k: str(v) if not isinstance(v, int | float | None) else v for k, v in asdict(spec.params).items()
        },
        "startup": {
            "mode": str(spec.startup_mode),
            "startups_s": list(spec.startups_s),
            "at": spec.sweep_scale,
        },
        "seed": spec.seed,
        "warmup_s": "auto" if spec.warmup_s is None else spec.warmup_s,  # each row says its own
        "runner": "ray" if spec.ray_address is not None else f"{spec.workers} local process(es)",
        "wall_seconds": time.perf_counter() - start,
        "cpu_seconds": sum(r["cpu_seconds"] for r in rows) + time.process_time() - cpu,
        "rows": rows,
        "tables": case_tables,
        "sweeps": sweeps,
        "summary": tables.summary(case_tables, sweeps),
        "goals": tables.goal_tally(case_tables, sweeps),
    }


def _progress(total: int, enabled: bool) -> tuple[Any, Callable[[int], None] | None]:
    if not enabled or not sys.stderr.isatty():
        return None, None
    from tqdm import tqdm

    bar = tqdm(total=total, desc="league", unit="case")
    return bar, bar.update
