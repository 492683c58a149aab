"""Shared by the emulator and online replay tests: a manual clock and an emulator app on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from aiohttp import web

from adapter.exposition import parse_exposition
from adapter.presetread import bucket_counts, counter_total, gauge_value, histogram_total
from adapter.presets import EnginePreset, Kind
from replay.emulate.server import EmulatorConfig, create_app
from replay.profiles import EngineProfile

# millisecond steps: a 20-token answer streams in ~30 ms
TINY = EngineProfile(
    max_num_seqs=4,
    max_num_batched_tokens=2_048,
    kv_budget_tokens=4_096,
    step_base_s=0.001,
    prefill_token_s=1e-6,
    prefill_attention_s=0.0,
    decode_request_s=0.0002,
    decode_context_s=0.0,
)


def assert_every_signal_read(preset: EnginePreset, text: str) -> None:
    """Every signal the adapter knows for the engine reads a value from this /metrics text, each rule
    by its kind's reader (one scrape: a counter's total, not its rate)."""
    samples = parse_exposition(text)
    for signal, rule in preset.rules.items():
        read = {
            Kind.RATE: counter_total,
            Kind.SQUARE_RATE: histogram_total,
            Kind.BUCKET_RATE: bucket_counts,
        }.get(rule.kind, gauge_value)
        assert read(rule, samples) is not None, signal


@asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[str]:
    """The app on an ephemeral loopback port; yields its base URL."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def emulator(
    engine: str = "vllm", profile: EngineProfile = TINY, **kw: object
) -> AsyncIterator[tuple[str, web.Application]]:
    app = create_app(EmulatorConfig(engine=engine, profile=profile, **kw))  # type: ignore[arg-type]
    async with serve(app) as url:
        yield url, app


async def until(condition: Callable[[], bool]) -> None:
    """Wait until `condition()` holds, checking every 10 ms, at most 5 s (a hang guard: the engine
    sees requests, and the server a client's reset, within milliseconds); the caller asserts it."""
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
