"""How fast traces load and generate (replay/traces), so loading never dominates a replay.

Run: `python -m bench.bench_traces` (or `python -m bench traces`). Single process, one core.

The replay aims at >= 1,000,000 simulated requests per wall second, so a trace must load or
generate well above that. Measured (best of a few repeats, wall time, requests per second):
1. the built-in synthetic generator: the embedded 2-hour default and a 24-hour diurnal trace of
   >= 5 M requests (goal: a few seconds);
2. bulk parsing at scale: a 2 M-row Azure-format CSV and a 1 M-line Mooncake-format JSONL,
   written to a temporary folder first (the real files are small);
3. transforms on the 24-hour trace: rate ×0.5 and ×2.5, a one-hour window;
4. when ../shared/traces exists: the real Azure and Mooncake traces, and ServeGen synthesis
   (deepseek-r1's full day, 1.38 M requests; one hour of the 14-day m-large model at 1 %).
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from replay.trace import Trace
from replay.traces import SyntheticSpec, default_trace, load_trace, scale_rate, synthetic_trace, time_window

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"
DAY = SyntheticSpec(duration_s=86_400.0, period_s=86_400.0, peak_at_s=50_400.0, name="synthetic-24h")


def timed(make: Callable[[], Trace], repeats: int) -> tuple[Trace, float]:
    best, trace = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        trace = make()
        best = min(best, time.perf_counter() - start)
    assert trace is not None
    return trace, best


def report(label: str, make: Callable[[], Trace], repeats: int = 3) -> Trace:
    trace, seconds = timed(make, repeats)
    print(
        f"{label:<52} {len(trace):>11,} req {seconds:8.3f} s {len(trace) / seconds:>14,.0f} req/s"
        f"  ({trace.duration_s / 3600:.2f} h of traffic)",
        flush=True,
    )
    return trace


def first(trace: Trace, n: int) -> Trace:
    return Trace(trace.name, trace.arrival_s[:n], trace.input_tokens[:n], trace.output_tokens[:n])


def write_azure_csv(path: Path, trace: Trace) -> None:
    base = np.datetime64("2024-05-10T00:00:00", "ns")
    stamps = np.datetime_as_string(base + (trace.arrival_s * 1e9).astype("timedelta64[ns]"), unit="us")
    lines = [
        f"{s.replace('T', ' ')},{i},{o}"
        for s, i, o in zip(stamps, trace.input_tokens.tolist(), trace.output_tokens.tolist(), strict=True)
    ]
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(lines))


def write_mooncake_jsonl(path: Path, trace: Trace) -> None:
    ms = np.rint(trace.arrival_s * 1000).astype(np.int64).tolist()
    path.write_text(
        "".join(
            f'{{"timestamp": {t}, "input_length": {i}, "output_length": {o}, "hash_ids": [1, 2, 3]}}\n'
            for t, i, o in zip(ms, trace.input_tokens.tolist(), trace.output_tokens.tolist(), strict=True)
        )
    )


def main() -> None:
    print("-- synthetic generator")
    report("default (2 h, the embedded default)", lambda: default_trace(0))
    day = report("24 h diurnal, bursts, spikes", lambda: synthetic_trace(DAY, 0))
    if len(day) < 5_000_000:
        print(f"   NOTE: only {len(day):,} requests; the goal is >= 5 M")

    print("-- transforms on the 24 h trace")
    report("rate x0.5 (thinning)", lambda: scale_rate(day, 0.5, seed=1))
    report("rate x2.5 (superposition)", lambda: scale_rate(day, 2.5, seed=1), repeats=1)
    report("window [12 h, 13 h)", lambda: time_window(day, 43_200.0, 46_800.0))

    print("-- bulk parsing (files written to a temporary folder)")
    with tempfile.TemporaryDirectory() as folder:
        csv_path, jsonl_path = Path(folder) / "azure_big.csv", Path(folder) / "mooncake_big.jsonl"
        write_azure_csv(csv_path, first(day, 2_000_000))
        write_mooncake_jsonl(jsonl_path, first(day, 1_000_000))
        print(
            f"   ({csv_path.stat().st_size / 1e6:.0f} MB CSV, {jsonl_path.stat().st_size / 1e6:.0f} MB JSONL)"
        )
        report("azure CSV, 2 M rows", lambda: load_trace(csv_path, "azure"), repeats=1)
        report("mooncake JSONL, 1 M lines", lambda: load_trace(jsonl_path, "mooncake"), repeats=1)

    if not SHARED.is_dir():
        print(f"-- real traces: skipped ({SHARED} is absent)")
        return
    print("-- real traces")
    report("azure_llm_2023_code.csv", lambda: load_trace(SHARED / "azure_llm_2023_code.csv", "azure"))
    report("azure_llm_2023_conv.csv", lambda: load_trace(SHARED / "azure_llm_2023_conv.csv", "azure"))
    report(
        "mooncake_fast25_synthetic.jsonl",
        lambda: load_trace(SHARED / "mooncake_fast25_synthetic.jsonl", "mooncake"),
    )
    report(
        "servegen deepseek-r1, full day (synthesized)",
        lambda: load_trace(SHARED / "servegen_reason_deepseek-r1.tar.gz", "servegen"),
        repeats=1,
    )
    report(
        "servegen m-large, 20:00-21:00 of day 0 at 1 %",
        lambda: load_trace(
            SHARED / "servegen_language_m-large.tar.gz",
            "servegen",
            start_s=72_000,
            end_s=75_600,
            rate_scale=0.01,
        ),
        repeats=1,
    )


if __name__ == "__main__":
    main()
