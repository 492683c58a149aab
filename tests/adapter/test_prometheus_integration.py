"""A real Prometheus scrapes engine-like endpoints; the Prometheus source reads it back and agrees with
the direct scraper. Skipped when the `prometheus` binary (Debian package `prometheus`) is absent."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from engine_fixtures import vllm_text

from adapter.backend import NoData, SourceUnavailable
from adapter.catalog import Catalog, build_catalog
from adapter.catalogconfig import CatalogSettings
from adapter.telemetry import Telemetry
from common.selector import EVERYTHING
from tests.prometheus_server import prometheus as real_prometheus

pytestmark = pytest.mark.integration

# pod -> (namespace, deployment, (waiting, running, kv-cache usage, model))
PODS: dict[str, tuple[str, str, tuple[float, float, float, str]]] = {
    "llama-0": ("serving", "llama", (4, 2, 0.5, "llama")),
    "llama-1": ("serving", "llama", (6, 3, 0.7, "llama")),
    "qwen-0": ("serving", "qwen", (1, 8, 0.9, "qwen")),
    "batch-0": ("batch", "llama", (11, 1, 0.1, "llama")),
}
REQUESTS_PER_S = 10.0  # every pod's success counter grows this fast, in real time
METRICS = [
    ("infscale_queue_size", "queue_size", "sum"),
    ("infscale_batch_size", "batch_size", "sum"),
    ("infscale_kv_cache_usage", "kv_cache_usage", "mean"),
    ("infscale_kv_cache_max", "kv_cache_usage", "max"),
]
RATE = ("infscale_request_rate", "request_rate", "sum")
# every pod's prefills per second ending within each bound, in real time (+Inf: all of them)
PREFILLS_PER_S = {"0.3": 6.0, "2.5": 9.0, "+Inf": REQUESTS_PER_S}
PREFILL = ("infscale_prefill_time_bucket_rate", "prefill_time_bucket_rate", "sum")
# every pod's requests per second finishing within each output length; batch-0's histogram is
# hostile, fewer in all than within 1 token (a refused pod, in a namespace of its own)
OUTPUTS_PER_S = {"1.0": 2.0, "10.0": 5.0, "100.0": 8.0, "+Inf": REQUESTS_PER_S}
HOSTILE_OUTPUTS_PER_S = {"1.0": 7.0, "+Inf": 3.0}
OUTPUT = ("infscale_output_length_bucket_rate", "output_length_bucket_rate", "sum")


def histogram(name: str, per_s: dict[str, float], elapsed_s: float, model: str) -> str:
    """vLLM's histogram `name` of one engine, each bound's count growing `per_s[le]` a second."""
    labels = f'engine="0",model_name="{model}"'
    lines = [f'{name}_bucket{{{labels},le="{le}"}} {rate * elapsed_s}' for le, rate in per_s.items()]
    return "\n".join([f"# TYPE {name} histogram", *lines, ""])


@dataclass(frozen=True)
class Engines:
    urls: dict[str, str]  # pod -> metrics URL


@pytest.fixture
async def engines() -> AsyncIterator[Engines]:
    app = web.Application()
    started = time.monotonic()

    async def metrics(request: web.Request) -> web.Response:
        waiting, running, kv, model = PODS[request.match_info["pod"]][2]
        elapsed = time.monotonic() - started
        text = vllm_text(waiting, running, kv, model=model, success=REQUESTS_PER_S * elapsed)
        outputs = HOSTILE_OUTPUTS_PER_S if request.match_info["pod"] == "batch-0" else OUTPUTS_PER_S
        text += histogram("vllm:request_prefill_time_seconds", PREFILLS_PER_S, elapsed, model)
        return web.Response(text=text + histogram("vllm:request_generation_tokens", outputs, elapsed, model))

    app.router.add_get("/{pod}/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    try:
        yield Engines({pod: f"http://127.0.0.1:{port}/{pod}/metrics" for pod in PODS})
    finally:
        await runner.cleanup()


@pytest.fixture
def prometheus(tmp_path: Path, engines: Engines) -> Iterator[str]:
    # the target labels are what kubernetes_sd relabelling gives in a cluster
    targets = [
        (url, {"namespace": PODS[pod][0], "pod": pod, "deployment": PODS[pod][1]})
        for pod, url in engines.urls.items()
    ]
    with real_prometheus(tmp_path, targets, interval_s=0.5) as url:
        yield url


def catalog_settings(engines: Engines, prometheus_url: str | None) -> CatalogSettings:
    if prometheus_url is None:  # direct scraping of the same endpoints, labelled as Prometheus labels them
        return CatalogSettings.model_validate(
            {
                "metrics": [
                    {"name": n, "signal": s, "aggregation": a}
                    for n, s, a in [*METRICS, RATE, PREFILL, OUTPUT]
                ],
                "endpoints": [
                    {
                        "url": url,
                        "namespace": PODS[pod][0],
                        "deployment": PODS[pod][1],
                        "labels": {"pod": pod},
                    }
                    for pod, url in engines.urls.items()
                ],
                "scrape": {"interval_s": 0.2},
            }
        )
    return CatalogSettings.model_validate(
        {
            "metrics": [
                {"name": n, "signal": s, "aggregation": a, "source": "prometheus"}
                for n, s, a in [*METRICS, RATE, PREFILL, OUTPUT]
            ]
            + [{"name": "broken", "source": "prometheus", "query": "sum by (x) (up"}],
            # a short window: Prometheus scrapes every 0.5 s, so 3 s holds ~6 samples
            "prometheus": {"url": prometheus_url, "cache_ttl_s": 0, "rate_window_s": 3},
        }
    )


async def answers(catalog: Catalog) -> dict[tuple[str, str], list[tuple[dict[str, str], float]]]:
    out: dict[tuple[str, str], list[tuple[dict[str, str], float]]] = {}
    for namespace in ("serving", "batch"):
        for name, _, _ in METRICS:
            samples = await catalog.read(namespace, name, EVERYTHING)
            out[namespace, name] = [(dict(s.labels), round(s.value, 9)) for s in samples]
    return out


def _near(rates: dict[str, float]) -> bool:
    expected = {"llama": 2 * REQUESTS_PER_S, "qwen": REQUESTS_PER_S}  # llama has two pods
    return rates.keys() == expected.keys() and all(
        rates[d] == pytest.approx(v, rel=0.15) for d, v in expected.items()
    )


async def _rates(settings: CatalogSettings, telemetry: Telemetry) -> dict[str, float]:
    """infscale_request_rate per deployment in `serving`, once it is the true rate.

    Until a series is older than the rate window, Prometheus' rate() divides a partial increase by
    the whole window and reads low; the scraper needs two scrapes. Both must then settle on the
    true rate; a wrong query (double counting, a missed pod) never would, and the hang guard fails.
    """
    async with build_catalog(settings, telemetry) as catalog:
        got: dict[str, float] = {}

        async def settled() -> bool:
            try:
                samples = await catalog.read("serving", "infscale_request_rate", EVERYTHING)
            except (NoData, SourceUnavailable):
                return False
            got.clear()
            got.update({s.labels["deployment"]: s.value for s in samples})
            return _near(got)

        await until(settled, "the true request rate")
        return got


async def until(ready: Callable[[], Awaitable[bool]], what: str) -> None:
    for _ in range(200):  # hang guard of ~20 s; typically ready in 1–2 s
        try:
            if await ready():
                return
        except (httpx.HTTPError, KeyError, ValueError):  # not ready, or an error body
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


async def test_prometheus_source_agrees_with_direct_scraping(engines: Engines, prometheus: str) -> None:
    telemetry = Telemetry()

    async def one_full_round() -> bool:
        sample = telemetry.registry.get_sample_value
        return (
            sample("infscale_adapter_targets") == len(PODS) and sample("infscale_adapter_stale_targets") == 0
        )

    async def every_pod_in_prometheus() -> bool:
        async with httpx.AsyncClient() as client:
            r = await client.get(
                f"{prometheus}/api/v1/query", params={"query": "count(vllm:num_requests_waiting)"}
            )
        result = r.json()["data"]["result"]
        return bool(result) and result[0]["value"][1] == str(len(PODS))

    async with build_catalog(catalog_settings(engines, None), telemetry) as direct:
        await until(one_full_round, "a full scrape round")
        scraped = await answers(direct)
    await until(every_pod_in_prometheus, "Prometheus to scrape every pod")
    async with build_catalog(catalog_settings(engines, prometheus), Telemetry()) as via_prometheus:
        queried = await answers(via_prometheus)

        async def agree() -> bool:  # a scrape missed on a busy machine leaves a pod stale for a round
            nonlocal queried
            queried = await answers(via_prometheus)
            return queried == scraped

        with contextlib.suppress(AssertionError):  # the comparison below shows what differs
            await until(agree, "Prometheus's answers to match direct scraping")
        with pytest.raises(SourceUnavailable, match=r"rejected query .*bad_data"):
            await via_prometheus.read("serving", "broken", EVERYTHING)
    assert queried == scraped
    # rates: the scraper divides by the time between two scrapes, Prometheus uses rate() over
    # its window; on counters growing 10/s per pod both settle on it
    assert _near(await _rates(catalog_settings(engines, None), Telemetry()))
    assert _near(await _rates(catalog_settings(engines, prometheus), Telemetry()))
    llama = {"namespace": "serving", "deployment": "llama", "model": "llama"}
    qwen = {"namespace": "serving", "deployment": "qwen", "model": "qwen"}
    assert scraped["serving", "infscale_queue_size"] == [(llama, 10.0), (qwen, 1.0)]
    assert scraped["serving", "infscale_kv_cache_usage"] == [(llama, 0.6), (qwen, 0.9)]
    assert scraped["serving", "infscale_kv_cache_max"] == [(llama, 0.7), (qwen, 0.9)]
    assert scraped["batch", "infscale_batch_size"] == [({**llama, "namespace": "batch"}, 1.0)]


async def _bucket_rates(
    settings: CatalogSettings,
    metric: str,
    per_s: dict[str, float],
    telemetry: Telemetry,
    refused_in: str | None = None,
) -> dict[tuple[str, str], tuple[float, int | None]]:
    """`metric`'s rates per (deployment, le) in `serving`, once they are the true rate per bound
    (`per_s` a pod, as _rates waits for the request rate), with each item's window; in namespace
    `refused_in`, its one pod refused as not cumulative."""
    expected = {
        (deployment, le): pods * rate
        for deployment, pods in (("llama", 2), ("qwen", 1))
        for le, rate in per_s.items()
    }
    got: dict[tuple[str, str], tuple[float, int | None]] = {}
    async with build_catalog(settings, telemetry) as catalog:

        async def settled() -> bool:
            try:
                samples = await catalog.read("serving", metric, EVERYTHING)
            except (NoData, SourceUnavailable):
                return False
            got.clear()
            got.update({(s.labels["deployment"], s.labels["le"]): (s.value, s.window_s) for s in samples})
            return got.keys() == expected.keys() and all(
                got[k][0] == pytest.approx(v, rel=0.15) for k, v in expected.items()
            )

        await until(settled, f"the true {metric} per bound")
        if refused_in is not None:
            with pytest.raises(NoData, match=r"1 with invalid values \(1 not cumulative\)"):
                await catalog.read(refused_in, metric, EVERYTHING)
    return got


async def test_prefill_bucket_rates_settle_on_the_true_rate_per_bound_through_both_sources(
    engines: Engines, prometheus: str
) -> None:
    """Every pod's histogram grows 6, 9 and 10 prefills a second at le 0.3, 2.5 and +Inf: summed
    per deployment and bound, llama's two pods 12, 18, 20 and qwen's 6, 9, 10, whether the adapter
    scrapes them (window: the seconds between its scrapes) or Prometheus' rate() reads them
    (window: rate_window_s)."""
    args = (PREFILL[0], PREFILLS_PER_S)
    direct = await _bucket_rates(catalog_settings(engines, None), *args, Telemetry())
    via_prometheus = await _bucket_rates(catalog_settings(engines, prometheus), *args, Telemetry())
    order = [(d, le) for d in ("llama", "qwen") for le in PREFILLS_PER_S]
    assert list(direct) == list(via_prometheus) == order  # lowest bound first, "+Inf" last
    assert {window for _, window in via_prometheus.values()} == {3}
    assert all(window is not None and window >= 1 for _, window in direct.values())


async def test_output_length_bucket_rates_settle_per_bound_and_a_hostile_pod_is_refused_through_both(
    engines: Engines, prometheus: str
) -> None:
    """Every pod's output lengths: 2, 5, 8 and 10 requests a second within 1, 10, 100 tokens and in
    all; llama's two pods 4, 10, 16, 20 and qwen's 2, 5, 8, 10 through either source. batch-0
    counts 7 a second within 1 token and 3 in all: both sources refuse it as not_cumulative."""
    for prometheus_url in (None, prometheus):
        telemetry = Telemetry()
        settings = catalog_settings(engines, prometheus_url)
        got = await _bucket_rates(settings, OUTPUT[0], OUTPUTS_PER_S, telemetry, refused_in="batch")
        assert list(got) == [(d, le) for d in ("llama", "qwen") for le in OUTPUTS_PER_S]
        excluded = telemetry.registry.get_sample_value(
            "infscale_adapter_invalid_pods_excluded_total", {"metric": OUTPUT[0], "reason": "not_cumulative"}
        )
        assert excluded is not None and excluded >= 1, prometheus_url
