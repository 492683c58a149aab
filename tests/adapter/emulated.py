"""Signals end to end, for the tests of what the adapter serves from an engine emulator: the
emulator's real /metrics (replay/emulate) on a manual clock, the scrape source and catalog, the
adapter's HTTP server, and the controller's reader of it.

`Chain` holds them together, scraping when told; `served` scrapes the emulator once before and once
`WINDOW_S` after a list of requests, each run alone to completion, so every rate is an exact count
over `WINDOW_S` (`served_buckets`: one bucket-rate signal).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import httpx
from conftest import serve

from adapter.auth import InsecureDevAccess
from adapter.catalog import Catalog
from adapter.catalogconfig import CatalogSettings, SourceKind
from adapter.presets import get_preset
from adapter.server import create_app as adapter_app
from adapter.sources.scrape import ScrapeSource, StaticTargets
from adapter.telemetry import Telemetry
from autoscaler.controller.metrics import AdapterMetricsReader
from autoscaler.policy.observation import MetricReading
from autoscaler.policy.spec import MetricSpec, TargetType
from common.clock import ManualClock
from replay.emulate.server import EMULATOR, EmulatorConfig
from replay.emulate.server import create_app as emulator_app

WINDOW_S = 60
LABELS = {"namespace": "serving", "deployment": "llama", "model": "emulated-model"}


@dataclass(frozen=True)
class Served:
    items: list[dict[str, Any]]  # the External Metrics API's items, as the adapter sent them
    reading: MetricReading  # what the controller read of them


def request_body(engine: str, words: int, max_tokens: int) -> tuple[str, dict[str, Any]]:
    """The path and body of one request of `words` prompt words: JetStream's own API, else OpenAI's."""
    prompt = " ".join(["w"] * words)
    if engine == "jetstream":
        return "/v1/generate", {"max_tokens": max_tokens, "text_content": {"text": prompt}}
    return "/v1/completions", {"prompt": prompt, "max_tokens": max_tokens}


async def complete(
    client: httpx.AsyncClient, clock: ManualClock, words: int, max_tokens: int, engine: str = "vllm"
) -> None:
    """One request through the emulator's API, its engine steps run by moving its clock."""
    path, body = request_body(engine, words, max_tokens)
    answer = asyncio.create_task(client.post(path, json=body))
    for _ in range(20_000):  # hang guard: the request reaches the engine within a few loop turns
        if answer.done():
            break
        await clock.advance_to(clock.t + 1.0)
        await asyncio.sleep(0.001)
    assert (await answer).status_code == 200


class Chain:
    """The emulator, a scrape source over its /metrics for deployment=llama, and the adapter serving
    `metrics` (name -> signal) from it; scrapes only when told, at the adapter clock's time."""

    def __init__(self, config: EmulatorConfig, metrics: Mapping[str, str]) -> None:
        self.config = config
        self.engine_clock, self.adapter_clock = ManualClock(0.0), ManualClock(1_000.0)
        self.app = emulator_app(config, clock=self.engine_clock)
        self._metrics = metrics
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> Chain:
        telemetry = Telemetry(self.adapter_clock)
        engine_url = await self._stack.enter_async_context(serve(self.app))
        self.engine = await self._stack.enter_async_context(
            httpx.AsyncClient(base_url=engine_url, timeout=10)
        )
        settings = CatalogSettings.model_validate(
            {
                "engine": self.config.engine,
                "endpoints": [
                    {"url": f"{engine_url}/metrics", "namespace": "serving", "deployment": "llama"}
                ],
                "metrics": [{"name": name, "signal": signal} for name, signal in self._metrics.items()],
            }
        )
        self.source = ScrapeSource(
            get_preset(self.config.engine),
            [StaticTargets(settings.endpoints)],
            settings.scrape,
            telemetry,
            self.adapter_clock,
        )
        await self._stack.enter_async_context(self.source)
        catalog = Catalog(settings, {SourceKind.SCRAPE: self.source}, telemetry, self.adapter_clock)
        self.adapter_url = await self._stack.enter_async_context(
            serve(adapter_app(catalog, InsecureDevAccess(), telemetry))
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    @property
    def gauges(self) -> tuple[int, int]:
        """(running, waiting) in the emulated engine now."""
        g = self.app[EMULATOR].engine.core.gauges()
        return g.running, g.waiting

    async def drain(self) -> None:
        """Step the engine until it is idle: a handler streaming to a client that went away notices
        only at its next token, and the emulator's server waits for its handlers when it stops."""
        core = self.app[EMULATOR].engine.core
        for _ in range(20_000):  # hang guard: each aborted stream ends at its next step
            if core.idle:
                return
            await self.engine_clock.advance_to(self.engine_clock.t + 1.0)
            await asyncio.sleep(0.001)
        raise AssertionError("the emulated engine still has requests")

    async def complete(self, words: int, max_tokens: int) -> None:
        await complete(self.engine, self.engine_clock, words, max_tokens, self.config.engine)

    async def complete_together(self, words: int, max_tokens: int, n: int) -> None:
        """`n` requests of `words` prompt words arriving at one instant: the engine's clock stands
        still until all of them are in the idle engine, then moves until every one is answered."""
        path, body = request_body(self.config.engine, words, max_tokens)
        answers = [asyncio.create_task(self.engine.post(path, json=body)) for _ in range(n)]
        for _ in range(20_000):  # hang guard: the requests reach the engine within a few loop turns
            if sum(self.gauges) == n:
                break
            await asyncio.sleep(0.001)
        assert sum(self.gauges) == n, self.gauges
        for _ in range(20_000):  # hang guard: each turn runs the steps that end within a second
            if all(a.done() for a in answers):
                break
            await self.engine_clock.advance_to(self.engine_clock.t + 1.0)
            await asyncio.sleep(0.001)
        assert [(await a).status_code for a in answers] == [200] * n

    async def read(self, metric: str) -> Served:
        """`metric` for deployment=llama, as the adapter serves it and as the controller reads it."""
        async with httpx.AsyncClient(base_url=self.adapter_url) as raw:
            path = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/serving/{metric}"
            answer = await raw.get(path, params={"labelSelector": "deployment=llama"})
        reader = AdapterMetricsReader(self.adapter_url, timeout_s=5, token_file=None)
        try:
            spec = MetricSpec(metric, TargetType.VALUE, 1_000, selector="deployment=llama")
            reading = await reader.read("serving", spec, self.adapter_clock())
        finally:
            await reader.close()
        return Served(answer.json()["items"], reading)


async def served(
    config: EmulatorConfig, metrics: Mapping[str, str], requests: Sequence[tuple[int, int]]
) -> dict[str, Served]:
    """Each of `metrics` (name -> signal) for deployment=llama, after `requests` (prompt words,
    max_tokens), over a window of WINDOW_S."""
    async with Chain(config, metrics) as c:
        await c.source.scrape_round()  # before any request: every counter and bound at 0
        for words, max_tokens in requests:
            await c.complete(words, max_tokens)
        c.adapter_clock.set(1_000.0 + WINDOW_S)
        await c.source.scrape_round()
        return {metric: await c.read(metric) for metric in metrics}


def assert_served_per_bound(
    served: Served, labels: dict[str, str], bounds: tuple[str, ...], expected: dict[str, float]
) -> None:
    """A histogram's bucket rates as the adapter served them: one item per `le` bound (`labels` and
    its `le`) over the API's window, and the controller's reading of them: the same bounds, each
    the expected rate in milli-units (3 / 60 = "50m")."""
    assert [item["metricLabels"] for item in served.items] == [{**labels, "le": le} for le in bounds]
    assert all(item["window"] == WINDOW_S for item in served.items)
    assert served.reading.error == "" and served.reading.window_s == WINDOW_S
    assert [dict(item_labels)["le"] for item_labels in served.reading.labels] == list(bounds)
    assert served.reading.values_milli == tuple(round(expected[le] * 1000) for le in bounds)


async def served_buckets(
    config: EmulatorConfig, metric: str, signal: str, requests: Sequence[tuple[int, int]]
) -> Served:
    """`metric` (serving `signal`) for deployment=llama, after `requests` (prompt words, max_tokens)."""
    return (await served(config, {metric: signal}, requests))[metric]
