"""The whole chain on one machine: three engine emulators (`infscale emulate`, vLLM flavour), a real
Prometheus scraping them, the adapter over HTTPS reading them both directly and through Prometheus,
and `infscale replay online` replaying a slice of a trace against the emulators.

Asserted:
  * tracking: every adapter reading of the queue and batch signals lies within what the emulators
    really had (their exact gauge histories) during the last scrape interval before the reading;
    the signals start at 0, rise with the load (the batch fills, the queue forms when the trace
    outruns the slots) and fall back to 0 when the replay drains; their sum follows the client's
    in-flight count (correlation >= 0.8);
  * the direct scrape and the Prometheus source agree within one scrape interval: both readings of
    each poll lie in the band the gauges spanned over [t - interval - slack, t], and they differ by no
    more than that band's width;
  * online TTFT against the offline simulation of the same requests (replay/calibrate.py) within
    50 ms + 20 % at p50 and 100 ms + 30 % at p95. Why: every request carries a fixed cost outside the
    engine model (HTTP, SSE, two event loops: ~5-10 ms measured idle by `calibrate --fit`, more with
    six processes on two shared cores), and under queueing each request ahead in the queue passes
    its own delays on (hence the relative part, larger at p95). The engine model itself is the same
    on both sides (the emulator steps replay/scheduler.py, the offline engine matches it exactly).

The last two (correlation, TTFT) compare real time with a model, so they are judged only when the
machine lets real time be measured: when the one-minute load average at the end of the replay is
above twice the cores (more runnable processes than the cores can serve, so every process waits
tens of milliseconds for a core, as much as the TTFT tolerance itself: TTFT p50 0.09-0.5 s against
0.057 s allowed was seen at load 6-10 on two cores), the test reports them skipped with the figure
instead of failing on the machine's noise. This test's own processes bring a quiet machine to a
load of about 1-2.

Skipped without the prometheus binary. About 35 s; the slice runs 20 s of wall time.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import yaml
from prometheus_server import PROMETHEUS, free_port, prometheus

from autoscaler.quantity import parse
from replay.calibrate import compare, pair, simulate_offline
from replay.online.records import read_records
from replay.profiles import REFERENCE_70B, EngineProfile

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        PROMETHEUS is None, reason="prometheus binary not installed (apt-get install prometheus)"
    ),
]

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
SHARED_TRACE = REPO.parent / "shared" / "traces" / "azure_llm_2023_conv.csv"
# 4 slots x 3 emulators; 60-token answers take ~0.8 s: about 15 requests/s of capacity
PROFILE = EngineProfile(
    max_num_seqs=4,
    max_num_batched_tokens=2_048,
    kv_budget_tokens=16_384,
    step_base_s=0.010,
    prefill_token_s=5e-6,
    prefill_attention_s=0.0,
    decode_request_s=0.001,
    decode_context_s=0.0,
)
EMULATORS = 3
INTERVAL_S = 0.5  # Prometheus' and the adapter's scrape interval
SLACK_S = 0.3  # scheduling on a shared two-core machine
SIGNALS = ("queue_size", "batch_size")


def trace_flags() -> list[str]:
    """The first minute of Azure's conversation trace at 3x speed: 1 request/s rising to ~18/s,
    past the emulators' capacity; without the shared traces, the embedded synthetic trace at 15/s."""
    common = ["--max-output-tokens", "60", "--max-input-tokens", "4000"]
    if SHARED_TRACE.is_file():
        return ["--trace", str(SHARED_TRACE), "--format", "azure", "--end-s", "60", "--speedup", "3", *common]
    return ["--end-s", "20", "--rate-scale", "0.5", *common]


@asynccontextmanager
async def process(
    *argv: str, ready_line: str | None = None, log: Path | None = None
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """`infscale ARGV` as a process; with `log`, its stderr goes there (a pipe nobody reads would
    fill up and stall it); with `ready_line`, wait for its first stdout line to start with it."""
    with open(os.devnull, "w") if log is None else log.open("w") as log_file:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "infscale",
            *argv,
            env=ENV,
            stdout=asyncio.subprocess.PIPE if ready_line or log is None else asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE if log is None else log_file,
        )
        line = ""
        try:
            if ready_line is not None:
                assert proc.stdout is not None
                raw = await asyncio.wait_for(proc.stdout.readline(), 30)
                line = raw.decode().strip()
                if not line.startswith(ready_line):
                    await proc.wait()
                    tail = log.read_text()[-2000:] if log else ""
                    raise AssertionError(f"{argv[0]} did not start: {line!r} {tail}")
            yield proc, line
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(proc.wait(), 10)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()


async def until(what: str, check: Any, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds  # hang guard; each wait below ends in about a second
    while True:
        try:
            if await check():
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


@dataclass
class Poll:
    t_req: float
    t_resp: float
    values: dict[str, float]  # "direct:queue_size", "prometheus:batch_size", ...


@dataclass
class Poller:
    client: httpx.AsyncClient
    polls: list[Poll] = field(default_factory=list)

    async def read(self) -> dict[str, float]:
        names = [f"{source}:{signal}" for source in ("direct", "prometheus") for signal in SIGNALS]
        responses = await asyncio.gather(*(self.client.get(metric_path(n)) for n in names))
        out = {}
        for name, r in zip(names, responses, strict=True):
            r.raise_for_status()
            (item,) = r.json()["items"]
            out[name] = float(parse(item["value"]))
        return out

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            t_req = time.time()
            try:
                values = await self.read()
            except httpx.HTTPError:
                values = {}
            if values:
                self.polls.append(Poll(t_req, time.time(), values))
            await asyncio.sleep(0.2)


def metric_path(name: str) -> str:
    source, signal_name = name.split(":")
    metric = f"infscale_{signal_name}" if source == "direct" else f"prom_{signal_name}"
    return f"/apis/external.metrics.k8s.io/v1beta1/namespaces/serving/{metric}"


@dataclass(frozen=True)
class History:
    """One emulator's exact gauge history: change times and the values from then on."""

    t: np.ndarray
    values: np.ndarray  # columns: waiting, running, kv tokens

    @classmethod
    def of(cls, points: list[list[float]]) -> History:
        arr = np.array(points, dtype=np.float64).reshape(-1, 4)
        return cls(arr[:, 0], arr[:, 1:])

    def span(self, column: int, lo: float, hi: float) -> tuple[float, float]:
        """Min and max of a gauge over [lo, hi]: its value at lo and every value it took inside."""
        start = int(np.searchsorted(self.t, lo, side="right"))
        end = int(np.searchsorted(self.t, hi, side="right"))
        at_lo = self.values[start - 1, column] if start > 0 else 0.0
        inside = self.values[start:end, column]
        values = np.append(inside, at_lo)
        return float(values.min()), float(values.max())

    def longest_queue_s(self) -> float:
        """The longest stretch with requests waiting."""
        longest, since = 0.0, None
        for t, waiting in zip(self.t, self.values[:, 0], strict=True):
            if waiting > 0 and since is None:
                since = t
            elif waiting == 0 and since is not None:
                longest, since = max(longest, t - since), None
        return longest


def band(histories: Sequence[History], column: int, lo: float, hi: float) -> tuple[float, float]:
    """Sum over emulators of the min and max a gauge took during [lo, hi]."""
    spans = [h.span(column, lo, hi) for h in histories]
    return sum(s[0] for s in spans), sum(s[1] for s in spans)


async def test_emulators_prometheus_adapter_and_online_replay(tmp_path: Path) -> None:
    profile_file = tmp_path / "profile.yaml"
    profile_file.write_text(yaml.safe_dump({"name": "e2e", "engine": asdict(PROFILE)}))
    async with AsyncExitStack() as stack:
        # three engines, ready after a one-second "weight load"
        emulators = []
        for k in range(EMULATORS):
            _, line = await stack.enter_async_context(
                process(
                    "emulate", "--listen", "127.0.0.1:0", "--profile", str(profile_file), "--model", "llama",
                    "--startup-seconds", "1", ready_line="listening on", log=tmp_path / f"emulator-{k}.log",
                )
            )  # fmt: skip
            emulators.append("http://" + line.removeprefix("listening on "))
        client = await stack.enter_async_context(httpx.AsyncClient(timeout=10))

        async def all_ready() -> bool:
            codes = [(await client.get(f"{u}/health")).status_code for u in emulators]
            return codes == [200] * EMULATORS

        await until("the emulators to finish loading", all_ready)

        # Prometheus scraping them, labelled as kubernetes_sd relabelling would
        targets = [
            (f"{u}/metrics", {"namespace": "serving", "deployment": "llama", "pod": f"llama-{k}"})
            for k, u in enumerate(emulators)
        ]
        prom_url = stack.enter_context(prometheus(tmp_path, targets, INTERVAL_S))

        # the adapter over HTTPS (throwaway self-signed certificate), both sources for both signals
        catalog = tmp_path / "catalog.yaml"
        catalog.write_text(
            yaml.safe_dump(
                {
                    "engine": "vllm",
                    "endpoints": [
                        {"url": url, "namespace": "serving", "deployment": "llama", "labels": labels}
                        for url, labels in targets
                    ],
                    "scrape": {"interval_s": INTERVAL_S},
                    "prometheus": {"url": prom_url, "cache_ttl_s": 0, "rate_window_s": 2},
                    "metrics": [
                        *({"name": f"infscale_{s}", "signal": s} for s in SIGNALS),
                        *({"name": f"prom_{s}", "signal": s, "source": "prometheus"} for s in SIGNALS),
                    ],
                }
            )
        )
        port = free_port()
        adapter_proc, _ = await stack.enter_async_context(
            process(
                "adapter", "--insecure-dev", "--self-signed-dev", "--listen", f"127.0.0.1:{port}",
                "--catalog", str(catalog), log=tmp_path / "adapter.log",
            )
        )  # fmt: skip
        adapter = await stack.enter_async_context(
            httpx.AsyncClient(base_url=f"https://127.0.0.1:{port}", verify=False, timeout=5)  # self-signed
        )
        poller = Poller(adapter)

        async def every_signal_served() -> bool:
            if adapter_proc.returncode is not None:
                raise AssertionError(f"the adapter exited: {(tmp_path / 'adapter.log').read_text()[-3000:]}")
            await poller.read()
            return True

        await until("the adapter to serve every signal from both sources", every_signal_served)

        # replay while polling the adapter
        stop = asyncio.Event()
        polling = asyncio.create_task(poller.run(stop))

        async def polled(k: int) -> bool:
            return len(poller.polls) >= k

        await until("idle readings", lambda: polled(3))
        out = tmp_path / "online"
        endpoints = ",".join(emulators)
        replay_proc, _ = await stack.enter_async_context(
            process(
                "replay", "online", "--endpoint", endpoints, *trace_flags(), "--out", str(out), "--no-plots"
            )
        )
        stdout, stderr = await asyncio.wait_for(replay_proc.communicate(), 90)
        assert replay_proc.returncode == 0, stderr.decode()[-3000:] + stdout.decode()[-3000:]

        async def drained() -> bool:  # the drain has reached both sources, twice in a row
            return len(poller.polls) >= 2 and all(
                v == 0 for p in poller.polls[-2:] for v in p.values.values()
            )

        await until("both sources to read 0 after the replay", drained, seconds=15)
        stop.set()
        await polling
        histories = [History.of((await client.get(f"{u}/emulator/history")).json()) for u in emulators]

    records = read_records(out / "requests.jsonl")
    started = float(json.loads((out / "report.json").read_text())["online"]["started_unix_s"])
    polls = poller.polls
    assert len(polls) > 50

    # --- the signals track the load ---
    first, last = polls[0].values, polls[-1].values
    assert all(v == 0 for v in first.values()), first
    assert all(v == 0 for v in last.values()), last
    for p in polls:
        for column, signal_name in ((0, "queue_size"), (1, "batch_size")):
            lo, hi = band(histories, column, p.t_req - INTERVAL_S - SLACK_S, p.t_resp)
            direct = p.values[f"direct:{signal_name}"]
            via_prometheus = p.values[f"prometheus:{signal_name}"]
            assert lo <= direct <= hi, (signal_name, p, lo, hi)
            assert lo <= via_prometheus <= hi, (signal_name, p, lo, hi)
            assert abs(direct - via_prometheus) <= hi - lo
    batch = np.array([p.values["direct:batch_size"] for p in polls])
    queue = np.array([p.values["direct:queue_size"] for p in polls])
    assert batch.max() >= EMULATORS * PROFILE.max_num_seqs - 2  # the batch filled up
    if max(h.longest_queue_s() for h in histories) >= 2 * INTERVAL_S:
        assert queue.max() >= 1  # the queue formed and lasted, and the adapter saw it
    assert all(r.status.value == "ok" for r in records)
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > 2 * cores:
        pytest.skip(f"tracking passed; correlation and TTFT not judged at load {load:.1f} on {cores} cores")

    sent = np.array([r.sent_s for r in records]) + started
    done = np.array([r.finished_s if math.isfinite(r.finished_s) else r.sent_s for r in records]) + started
    t_mid = np.array([(p.t_req + p.t_resp) / 2 for p in polls])
    in_flight = np.array([np.count_nonzero((sent <= t) & (done > t)) for t in t_mid])
    assert np.corrcoef(batch + queue, in_flight)[0, 1] >= 0.8

    # --- online TTFT against the offline simulation of the same requests ---
    scenario = replace(REFERENCE_70B, engine=PROFILE)
    offline = simulate_offline(records, scenario, EMULATORS)
    doc = compare(pair(records, offline))
    p50, p95 = doc["metrics"]["ttft_p50_s"], doc["metrics"]["ttft_p95_s"]
    print(
        f"\nTTFT online vs offline: p50 {p50['online']:.4f} vs {p50['offline']:.4f} s, "
        f"p95 {p95['online']:.4f} vs {p95['offline']:.4f} s; {len(records)} requests, {len(polls)} polls"
    )
    assert abs(p50["diff"]) <= 0.05 + 0.2 * p50["offline"]
    assert abs(p95["diff"]) <= 0.10 + 0.3 * p95["offline"]
