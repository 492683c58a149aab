"""Shared by the emulator and online replay tests: a manual clock and an emulator app on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web

from replay.emulate.server import EmulatorConfig, create_app
from replay.profiles import EngineProfile

# millisecond steps: a 20-token answer streams in ~30 ms
TINY = EngineProfile(
    max_running=4,
    kv_budget_tokens=4_096,
    prefill_tokens_per_s=1_000_000.0,
    decode_base_s=0.001,
    decode_per_running_s=0.0002,
)


@dataclass
class ManualClock:
    """Time moves only when the test says so; sleepers wake in order."""

    t: float = 0.0
    sleepers: list[tuple[float, asyncio.Future[None]]] = field(default_factory=list)

    def now(self) -> float:
        return self.t

    async def sleep_until(self, t: float) -> None:
        if t <= self.t:
            return
        fut = asyncio.get_running_loop().create_future()
        self.sleepers.append((t, fut))
        await fut

    async def advance(self, to: float) -> None:
        """Move to `to`, waking each sleeper at its own time and letting the loop react."""
        while True:
            await _settle()
            due = sorted((s for s in self.sleepers if s[0] <= to), key=lambda s: s[0])
            if not due:
                break
            when, fut = due[0]
            self.sleepers.remove(due[0])
            self.t = when
            fut.set_result(None)
        self.t = to
        await _settle()


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


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
