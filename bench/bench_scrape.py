"""One scrape round over 1,000 engine endpoints served locally, and the adapter's memory.

Run: `python -m bench.bench_scrape [--endpoints 1000] [--rounds 5] [--concurrency 100] [--ports 1000]`
(or `python -m bench scrape`). Goal: a round ≤ 1 s; adapter RSS ≤ 150 MB.

The engines run in a separate process (so their CPU is not charged to the scraper's event loop):
`--ports` aiohttp listeners (default one per endpoint, as every pod has its own IP) serving distinct
`/pod-N/metrics` URLs, each a full vLLM V1 exposition (~230 lines: gauges, counters, eight
histograms, two data-parallel engines) with its own values. The scraper is the real `ScrapeSource`
with the vLLM preset; a round is `scrape_round()` (all requests, parsing and per-pod signals). The
first round pays for TCP connects; later rounds reuse keep-alive connections, as the adapter's loop
does every interval. Besides wall time it prints the scraper's own CPU time per round, which other
processes on a shared machine disturb less.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import multiprocessing.connection
import resource
import statistics
import time
from collections.abc import Sequence

_HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": (
        0.001,
        0.005,
        0.01,
        0.02,
        0.04,
        0.06,
        0.08,
        0.1,
        0.25,
        0.5,
        0.75,
        1,
        2.5,
        5,
    ),
    "vllm:inter_token_latency_seconds": (
        0.01,
        0.025,
        0.05,
        0.075,
        0.1,
        0.15,
        0.2,
        0.3,
        0.4,
        0.5,
        0.75,
        1,
        2.5,
    ),
    "vllm:e2e_request_latency_seconds": (0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120),
    "vllm:request_queue_time_seconds": (0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120),
    "vllm:request_prefill_time_seconds": (0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60),
    "vllm:request_decode_time_seconds": (0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60),
    "vllm:request_prompt_tokens": (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000),
    "vllm:request_generation_tokens": (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000),
}


def vllm_exposition(pod: int) -> str:
    """A vLLM V1 exposition with two data-parallel engines, values varying by pod."""
    lines = []
    for engine in ("0", "1"):
        labels = f'engine="{engine}",model_name="meta-llama/Llama-3.1-8B-Instruct"'
        lines += [
            f"vllm:num_requests_running{{{labels}}} {pod % 7}.0",
            f"vllm:num_requests_waiting{{{labels}}} {pod % 5}.0",
            f"vllm:kv_cache_usage_perc{{{labels}}} {(pod % 100) / 100}",
            f"vllm:num_preemptions_total{{{labels}}} {pod}.0",
            f"vllm:prompt_tokens_total{{{labels}}} {pod * 1000}.0",
            f"vllm:generation_tokens_total{{{labels}}} {pod * 300}.0",
            f'vllm:request_success_total{{{labels},finished_reason="stop"}} {pod * 3}.0',
            f'vllm:request_success_total{{{labels},finished_reason="length"}} {pod}.0',
            f"vllm:prefix_cache_queries_total{{{labels}}} {pod * 50}.0",
            f"vllm:prefix_cache_hits_total{{{labels}}} {pod * 20}.0",
        ]
        for name, buckets in _HISTOGRAMS.items():
            count = 0
            for le in buckets:
                count += pod % 3 + 1
                lines.append(f'{name}_bucket{{{labels},le="{float(le)}"}} {count}.0')
            lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {count}.0')
            lines.append(f"{name}_count{{{labels}}} {count}.0")
            lines.append(f"{name}_sum{{{labels}}} {count * 0.7}")
    return "\n".join(lines) + "\n"


def _serve(endpoints: int, ports: int, conn: multiprocessing.connection.Connection) -> None:
    """The engines' process: `ports` listeners, pod i on listener i % ports."""
    from aiohttp import web

    texts = [vllm_exposition(i) for i in range(endpoints)]

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=texts[int(request.match_info["pod"])])

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/pod-{pod}/metrics", metrics)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        bound = []
        for _ in range(ports):
            site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
            await site.start()
            bound.append(runner.addresses[-1][1])
        conn.send(bound)
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # until the parent is done
        await runner.cleanup()

    asyncio.run(main())


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


async def _bench(urls: Sequence[str], rounds: int, concurrency: int) -> list[tuple[float, float]]:
    from adapter.catalogconfig import ScrapeSettings, StaticEndpoint
    from adapter.presets import Signal, get_preset
    from adapter.sources.scrape import ScrapeSource, StaticTargets
    from adapter.telemetry import Telemetry

    settings = ScrapeSettings(concurrency=concurrency, timeout_s=5.0)
    targets = StaticTargets([StaticEndpoint(url=u) for u in urls])
    durations = []
    async with ScrapeSource(get_preset("vllm"), [targets], settings, Telemetry()) as source:
        for _ in range(rounds):
            started, cpu = time.perf_counter(), time.process_time()
            await source.scrape_round()
            durations.append((time.perf_counter() - started, time.process_time() - cpu))
        reading = await source.read(Signal.QUEUE_SIZE, None, "default", time.time(), 30.0)
        if len(reading.values) != len(urls) or reading.failing:
            raise SystemExit(
                f"only {len(reading.values)} of {len(urls)} pods answered ({reading.failing} failing)"
            )
    return durations


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--endpoints", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument(
        "--ports", type=int, default=1000, help="listeners (origins) the engines are spread over"
    )
    args = parser.parse_args([] if argv is None else argv)

    rss_before = _rss_mb()
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(args.endpoints, args.ports, child), daemon=True)
    server.start()
    try:
        ports = parent.recv()
        urls = [f"http://127.0.0.1:{ports[i % len(ports)]}/pod-{i}/metrics" for i in range(args.endpoints)]
        durations = asyncio.run(_bench(urls, args.rounds, args.concurrency))
    finally:
        parent.send("stop")
        server.join(timeout=10)
        if server.is_alive():
            server.kill()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    walls, cpus = [d[0] for d in durations], [d[1] for d in durations]
    warm, warm_cpu = walls[1:] or walls, cpus[1:] or cpus
    size_kb = len(vllm_exposition(0).encode()) / 1024
    print(
        f"{args.endpoints} endpoints ({size_kb:.0f} kB vLLM exposition each), "
        f"concurrency {args.concurrency}, {args.ports} listeners"
    )
    print(f"first round (connects):   {walls[0]:.3f} s wall, {cpus[0]:.3f} s scraper CPU")
    print(
        f"warm rounds (median/max): {statistics.median(warm):.3f} s / {max(warm):.3f} s wall, "
        f"{statistics.median(warm_cpu):.3f} s scraper CPU (median)   goal <= 1 s"
    )
    print(
        f"adapter RSS: {_rss_mb():.0f} MB now, {peak_mb:.0f} MB peak (python + imports: {rss_before:.0f} MB)"
        "   goal <= 150 MB"
    )


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
