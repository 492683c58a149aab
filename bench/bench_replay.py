"""Replay speed: simulated requests and seconds per wall second, and a 100-configuration sweep.

    python -m bench replay              # all four
    python -m bench.bench_replay real   # one: real | day | sweep | breakdown

- real: a 1-hour real trace (Azure 2023 conversation, from ../shared/traces when present, else a
  1-hour synthetic stand-in), HPA on reference-70b.
- day: a 24-hour synthetic trace of >= 5 M requests (a real diurnal period), HPA.
- sweep: 100 configurations of the predictive policy on a 1-hour synthetic trace, on every core.
- breakdown: the day again with a CPU timer around each part of the run: where the time goes (a
  timer read costs ~5 us on this machine, ~0.6 s over the run, counted mostly in the small parts).
Goals from the issue: >= 1,000,000 requests/s and >= 10,000x real time on one core; the sweep
<= 30 s on 2 cores.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

from replay import engine, kernel, simulate
from replay.cli import run_policy, sweep
from replay.metrics.direct import DirectPipeline
from replay.policies import PolicyParams
from replay.policies.hpa import DecidePolicy
from replay.profiles import REFERENCE_70B
from replay.trace import Trace
from replay.traces import Burst, SyntheticSpec, load_trace, synthetic_trace

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"


def _run(label: str, trace: Trace) -> None:
    """One HPA replay; rates per CPU second of this process (the machine may be shared) and per wall."""
    cpu = time.process_time()
    result = run_policy(trace, REFERENCE_70B, "hpa", PolicyParams())
    cpu = time.process_time() - cpu
    wall, sim = result.wall_seconds, result.end_s
    print(
        f"{label}: {len(trace):,} requests, {sim / 3600:.2f} simulated h; "
        f"{cpu:.2f} s CPU -> {len(trace) / cpu:,.0f} requests/s, {sim / cpu:,.0f}x real time "
        f"({wall:.2f} s wall -> {len(trace) / wall:,.0f} requests/s, {sim / wall:,.0f}x)",
        flush=True,
    )


def bench_real() -> None:
    path = SHARED / "azure_llm_2023_conv.csv"
    if path.is_file():
        trace = load_trace(path, "azure")
        label = "real 1 h (azure_llm_2023_conv)"
    else:
        trace = synthetic_trace(SyntheticSpec(duration_s=3600.0, period_s=3600.0, peak_at_s=1800.0), seed=1)
        label = "1 h synthetic (shared traces absent)"
    _run(label, trace)


def day_trace() -> Trace:
    spec = SyntheticSpec(
        duration_s=86_400.0,
        period_s=86_400.0,
        peak_at_s=20 * 3600.0,
        bursts=(Burst(start_s=15 * 3600.0, duration_s=1800.0, multiplier=1.5),),
        name="synthetic-24h",
    )
    return synthetic_trace(spec, seed=0)


def bench_day() -> None:
    start = time.perf_counter()
    trace = day_trace()
    print(f"24 h synthetic trace generated in {time.perf_counter() - start:.1f} s", flush=True)
    _run("24 h synthetic", trace)


def bench_sweep() -> None:
    trace = synthetic_trace(SyntheticSpec(duration_s=3600.0, period_s=3600.0, peak_at_s=1800.0), seed=2)
    grid = [
        {"target": target, "tolerance": tol, "warm_floor": floor, "downscale_window_s": window}
        for target in (8.0, 12.0, 16.0, 20.0, 24.0)
        for tol in (0.1, 0.2)
        for floor in (0, 4, 8, 12, 16)
        for window in (60, 300)
    ]
    workers = os.cpu_count() or 1
    start, own = time.perf_counter(), time.process_time()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    points = sweep(trace, REFERENCE_70B, "predictive", PolicyParams(), grid, workers)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the workers, reaped when the pool closed
    workers_cpu = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    total = time.process_time() - own + workers_cpu
    cpu = sum(p["cpu_seconds"] for p in points)
    print(
        f"sweep: {len(points)} configurations of predictive on {len(trace):,} requests (1 h), "
        f"in {wall:.1f} s wall on {workers} processes; {cpu:.1f} CPU-seconds in the "
        f"configurations, {total:.1f} in all (this process and its workers, start-up included), "
        f"i.e. {total / workers:.1f} s on {workers} idle cores",
        flush=True,
    )


# (label, owner, attribute): disjoint parts of a run, each timed around every call
PARTS = (
    ("engine set-up (per-request results)", engine.Engine, "__init__"),
    ("compiled kernel (kernel.advance)", kernel, "advance"),
    ("engine.run around the kernel", engine.Engine, "run"),
    ("scrape: the pods' rows", simulate, "_cluster"),
    ("scrape: the metric pipeline", DirectPipeline, "scrape"),
    ("decisions: the observation", simulate, "_observe"),
    ("decisions: the policy (decide)", DecidePolicy, "desired"),
)


def bench_breakdown() -> None:
    trace = day_trace()
    spent = {label: [0.0, 0] for label, _, _ in PARTS}
    originals = [(owner, name, getattr(owner, name)) for _, owner, name in PARTS]

    def timed(label: str, f: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return f(*args, **kwargs)
            finally:
                spent[label][0] += time.process_time() - start
                spent[label][1] += 1

        return call

    for (label, owner, name), (_, _, f) in zip(PARTS, originals, strict=True):
        setattr(owner, name, timed(label, f))
    try:
        cpu = time.process_time()
        run_policy(trace, REFERENCE_70B, "hpa", PolicyParams())
        cpu = time.process_time() - cpu
    finally:
        for owner, name, f in originals:
            setattr(owner, name, f)
    spent["engine.run around the kernel"][0] -= spent["compiled kernel (kernel.advance)"][0]
    print(f"breakdown of the 24 h HPA run, {cpu:.2f} s CPU (timers included):", flush=True)
    for label, (seconds, calls) in spent.items():
        print(
            f"  {label:36s} {seconds:6.2f} s {seconds / cpu:6.1%}  {calls:>9,} calls, "
            f"{1e6 * seconds / max(calls, 1):9.1f} us each"
        )
    rest = cpu - sum(s for s, _ in spent.values())
    print(f"  {'the run loop, fleet and the rest':36s} {rest:6.2f} s {rest / cpu:6.1%}", flush=True)


BENCHES = {"real": bench_real, "day": bench_day, "sweep": bench_sweep, "breakdown": bench_breakdown}


def main() -> None:
    chosen = [a for a in sys.argv[1:] if a in BENCHES] or list(BENCHES)
    for name in chosen:
        BENCHES[name]()


if __name__ == "__main__":
    main()
