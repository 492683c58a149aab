"""A bucket-rate signal end to end, for the tests of each histogram the adapter serves per `le`:
the engine emulator's real /metrics (replay/emulate) on a manual clock, the scrape source and
catalog, the adapter's HTTP server, and the controller's reader of it.

`served_buckets` scrapes the emulator once before and once `WINDOW_S` after a list of requests,
each run alone to completion, so every rate is an exact count over `WINDOW_S`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
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
from replay.emulate.server import EmulatorConfig
from replay.emulate.server import create_app as emulator_app

WINDOW_S = 60
LABELS = {"namespace": "serving", "deployment": "llama", "model": "emulated-model"}


@dataclass(frozen=True)
class Served:
    items: list[dict[str, Any]]  # the External Metrics API's items, as the adapter sent them
    reading: MetricReading  # what the controller read of them


async def complete(client: httpx.AsyncClient, clock: ManualClock, words: int, max_tokens: int) -> None:
    """One request through the emulator's API, its engine steps run by moving its clock."""
    body = {"prompt": " ".join(["w"] * words), "max_tokens": max_tokens}
    answer = asyncio.create_task(client.post("/v1/completions", json=body))
    for _ in range(20_000):  # hang guard: the request reaches the engine within a few loop turns
        if answer.done():
            break
        await clock.advance_to(clock.t + 1.0)
        await asyncio.sleep(0.001)
    assert (await answer).status_code == 200


async def served_buckets(
    config: EmulatorConfig, metric: str, signal: str, requests: Sequence[tuple[int, int]]
) -> Served:
    """`metric` (serving `signal`) for deployment=llama, after `requests` (prompt words, max_tokens)."""
    engine_clock, adapter_clock = ManualClock(0.0), ManualClock(1_000.0)
    telemetry = Telemetry(adapter_clock)
    async with (
        serve(emulator_app(config, clock=engine_clock)) as engine_url,
        httpx.AsyncClient(base_url=engine_url, timeout=10) as engine,
    ):
        settings = CatalogSettings.model_validate(
            {
                "engine": config.engine,
                "endpoints": [
                    {"url": f"{engine_url}/metrics", "namespace": "serving", "deployment": "llama"}
                ],
                "metrics": [{"name": metric, "signal": signal}],
            }
        )
        source = ScrapeSource(
            get_preset(config.engine),
            [StaticTargets(settings.endpoints)],
            settings.scrape,
            telemetry,
            adapter_clock,
        )
        async with source:
            await source.scrape_round()  # before any request: every bound at 0
            for words, max_tokens in requests:
                await complete(engine, engine_clock, words, max_tokens)
            adapter_clock.set(1_000.0 + WINDOW_S)
            await source.scrape_round()
            catalog = Catalog(settings, {SourceKind.SCRAPE: source}, telemetry, adapter_clock)
            async with (
                serve(adapter_app(catalog, InsecureDevAccess(), telemetry)) as adapter_url,
                httpx.AsyncClient(base_url=adapter_url) as raw,
            ):
                path = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/serving/{metric}"
                answer = await raw.get(path, params={"labelSelector": "deployment=llama"})
                reader = AdapterMetricsReader(adapter_url, timeout_s=5, token_file=None)
                try:
                    spec = MetricSpec(metric, TargetType.VALUE, 1_000, selector="deployment=llama")
                    reading = await reader.read("serving", spec, adapter_clock())
                finally:
                    await reader.close()
    return Served(answer.json()["items"], reading)
