"""Throughput of the online driver against the emulator on loopback, and of the emulator itself.

Run: `python -m bench.bench_online` (or `python -m bench online`). About a minute; the emulator runs
in its own process (as `infscale emulate`), so client and server each get a core when the machine
has two free.

  1. the engine core alone (virtual time, no I/O): tokens/s through BatchCore at a full batch of 256;
  2. the real-time engine loop in-process (no HTTP), zero-cost steps: tokens/s delivered to 256
     concurrent consumers, i.e. the emulator's ceiling before HTTP;
  3. the online driver against one emulator with zero-cost steps: requests/s and streamed tokens/s
     sustained with 64 in flight, and the client's CPU per request (the driver's own cost);
  4. reference-70b's 64 slots kept full in real time over HTTP (256 streams of 100 tokens, four
     batches back to back): measured e2e and tokens/s against the engine model's, i.e. the emulator's
     real-time fidelity at full batch.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np
import yaml

from replay.emulate.batching import EngineLoop, run_virtual
from replay.online.driver import run_online
from replay.online.records import OnlineConfig, Status
from replay.profiles import REFERENCE_70B, EngineProfile
from replay.scheduler import StepScheduler
from replay.trace import Trace

REPO = Path(__file__).resolve().parents[1]
# steps that cost (almost) nothing: what remains is the emulator's and the driver's own overhead
INSTANT = EngineProfile(
    kv_budget_tokens=10_000_000,
    step_base_s=1e-7,
    prefill_token_s=0.0,
    prefill_attention_s=0.0,
    decode_request_s=0.0,
    decode_context_s=0.0,
)


def bench_core(batch: int = 256, tokens: int = 200) -> float:
    profile = EngineProfile(max_num_seqs=batch, kv_budget_tokens=10_000_000)
    core = StepScheduler(profile)
    for _ in range(batch):
        core.submit(10, tokens, 0.0)
    start = time.perf_counter()
    generated = 0
    now = 0.0
    while (step := core.schedule(now)) is not None:
        generated += len(core.complete(step))
        now = step.end_s
    return generated / (time.perf_counter() - start)


async def bench_loop(batch: int = 256, tokens: int = 200) -> float:
    engine = EngineLoop(INSTANT)
    task = asyncio.create_task(engine.run())
    received = 0

    async def consume() -> None:
        nonlocal received
        async with engine.open(10, tokens) as stream:
            async for _ in stream:
                received += 1

    start = time.perf_counter()
    await asyncio.gather(*(consume() for _ in range(batch)))
    wall = time.perf_counter() - start
    task.cancel()
    return received / wall


@contextmanager
def emulator(profile_yaml: str) -> Iterator[str]:
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "profile.yaml"
        path.write_text(profile_yaml)
        proc = subprocess.Popen(
            [sys.executable, "-m", "infscale", "emulate", "--listen", "127.0.0.1:0", "--profile", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            text=True,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            if not line.startswith("listening on "):
                raise RuntimeError(f"emulator did not start: {line!r}")
            yield "http://" + line.removeprefix("listening on ")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)


def _yaml(p: EngineProfile) -> str:
    return yaml.safe_dump({"engine": asdict(p)})  # 1e-07 needs YAML's own writer


def _trace(n: int, input_tokens: int, output_tokens: int) -> Trace:
    return Trace(
        "bench",
        np.zeros(n),
        np.full(n, input_tokens, dtype=np.int64),
        np.full(n, output_tokens, dtype=np.int64),
    )


def bench_driver(n: int = 2_000, tokens: int = 16, in_flight: int = 64) -> tuple[float, float, float]:
    with emulator(_yaml(INSTANT)) as url:
        cpu0, start = time.process_time(), time.perf_counter()
        result = asyncio.run(
            run_online(_trace(n, 8, tokens), OnlineConfig(endpoints=(url,), max_in_flight=in_flight))
        )
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
    ok = sum(r.status is Status.OK for r in result.records)
    if ok != n:
        raise RuntimeError(f"{n - ok} requests failed")
    return n / wall, n * tokens / wall, cpu / n


def bench_full_batch(batch: int = 256, tokens: int = 100) -> tuple[float, float, float, float]:
    """256 requests at once on reference-70b (one batch)."""
    profile = REFERENCE_70B.engine
    model = run_virtual(profile, [0.0] * batch, [10] * batch, [tokens] * batch)
    expected = float(np.median([r.finished_s for r in model]))
    expected_tps = batch * tokens / max(r.finished_s for r in model)
    with emulator(_yaml(profile)) as url:
        result = asyncio.run(
            run_online(_trace(batch, 10, tokens), OnlineConfig(endpoints=(url,), max_in_flight=batch))
        )
    e2e = [r.e2e_s for r in result.records if r.status is Status.OK]
    if len(e2e) != batch:
        raise RuntimeError(f"{batch - len(e2e)} requests failed")
    measured = float(np.median(e2e))
    return expected, measured, expected_tps, batch * tokens / max(r.finished_s for r in result.records)


def main() -> None:
    print(f"engine core, batch 256, virtual time:     {bench_core():>12,.0f} tokens/s")
    print(f"engine loop in-process, 256 consumers:    {asyncio.run(bench_loop()):>12,.0f} tokens/s")
    rps, tps, cpu = bench_driver()
    print(
        f"online driver vs emulator (64 in flight): {rps:>12,.0f} requests/s, {tps:,.0f} streamed tokens/s, "
        f"client CPU {cpu * 1000:.2f} ms/request"
    )
    expected, measured, expected_tps, tps = bench_full_batch()
    print(
        f"reference-70b, 64 slots full (256 x 100 tokens) over HTTP: e2e p50 {measured:.2f} s vs model "
        f"{expected:.2f} s ({(measured / expected - 1):+.1%}); {tps:,.0f} tokens/s vs {expected_tps:,.0f}"
    )


if __name__ == "__main__":
    main()
