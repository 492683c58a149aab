"""The direct scraper against respx-mocked engines: values, freshness, rates, errors, concurrency."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
import respx
from aiohttp import web
from engine_fixtures import VLLM, vllm_text

from adapter.catalog import ScrapeSettings, StaticEndpoint
from adapter.presets import Signal, get_preset
from adapter.sources import SourceError, SourceReading
from adapter.sources.scrape import ScrapeSource, StaticTargets
from adapter.telemetry import Telemetry
from adapter.tls import generate_self_signed


class ManualClock:
    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def endpoints(*urls: str, namespace: str | None = None) -> StaticTargets:
    return StaticTargets([StaticEndpoint(url=u, namespace=namespace) for u in urls])


def counter(telemetry: Telemetry, name: str, **labels: str) -> float:
    value = telemetry.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1000.0)


@pytest.fixture
def telemetry(clock: ManualClock) -> Telemetry:
    return Telemetry(clock)


@pytest.fixture
async def make_source(clock: ManualClock, telemetry: Telemetry) -> AsyncIterator[Callable[..., ScrapeSource]]:
    async with httpx.AsyncClient() as client:

        def make(*urls: str, namespace: str | None = None, **settings: float) -> ScrapeSource:
            return ScrapeSource(
                get_preset("vllm"),
                [endpoints(*urls, namespace=namespace)],
                ScrapeSettings(**settings),
                telemetry,
                clock,
                client=client,
            )

        yield make


async def read(source: ScrapeSource, signal: Signal, now: float, max_age_s: float = 30.0) -> SourceReading:
    return await source.read(signal, None, "default", now, max_age_s)


@respx.mock
async def test_values_are_per_pod_and_timestamped(make_source: Callable[..., ScrapeSource]) -> None:
    respx.get("http://a:8000/metrics").respond(text=vllm_text(4, 2, 0.5, model="m1"))
    respx.get("http://b:8000/metrics").respond(text=VLLM)
    source = make_source("http://a:8000/metrics", "http://b:8000/metrics")
    await source.scrape_round()
    reading = await read(source, Signal.QUEUE_SIZE, now=1000.0)
    got = sorted((v.labels.get("model"), v.value, v.timestamp) for v in reading.values)
    assert got == [("m1", 4.0, 1000.0), ("meta-llama/Llama-3.1-8B-Instruct", 6.0, 1000.0)]
    assert (reading.targets, reading.stale, reading.failing) == (2, 0, 0)


@pytest.mark.parametrize(
    ("read_at", "max_age_s", "fresh"),
    [
        pytest.param(1029.0, 30.0, True, id="29 s old, max-age 30: served"),
        pytest.param(1030.0, 30.0, True, id="exactly max-age: served"),
        pytest.param(1031.0, 30.0, False, id="31 s old: left out and counted"),
        pytest.param(1011.0, 10.0, False, id="a metric's shorter max-age applies"),
    ],
)
@respx.mock
async def test_a_pod_older_than_max_age_is_left_out_and_counted(
    make_source: Callable[..., ScrapeSource], read_at: float, max_age_s: float, fresh: bool
) -> None:
    respx.get("http://a:8000/metrics").respond(text=vllm_text(4, 2, 0.5))
    source = make_source("http://a:8000/metrics")
    await source.scrape_round()
    reading = await read(source, Signal.QUEUE_SIZE, now=read_at, max_age_s=max_age_s)
    assert [v.value for v in reading.values] == ([4.0] if fresh else [])
    assert reading.stale == (0 if fresh else 1)


@respx.mock
async def test_a_failed_scrape_keeps_the_last_good_value_until_it_is_stale(
    make_source: Callable[..., ScrapeSource], clock: ManualClock, telemetry: Telemetry
) -> None:
    route = respx.get("http://a:8000/metrics")
    route.respond(text=vllm_text(4, 2, 0.5))
    source = make_source("http://a:8000/metrics")
    await source.scrape_round()
    clock.t = 1010.0
    route.respond(status_code=503)
    await source.scrape_round()
    reading = await read(source, Signal.QUEUE_SIZE, now=1010.0)
    assert ([v.value for v in reading.values], reading.failing) == ([4.0], 1)
    assert [v.timestamp for v in reading.values] == [1000.0]  # the time of the data, not of the read
    stale = await read(source, Signal.QUEUE_SIZE, now=1031.0)
    assert (stale.values, stale.stale, stale.failing) == ((), 1, 1)
    assert source.error_of("http://a:8000/metrics") == "HTTP 503"
    assert (
        counter(telemetry, "infscale_adapter_scrape_errors_total", source="scrape", reason="http_status") == 1
    )


@pytest.mark.parametrize(
    ("effect", "reason", "message"),
    [
        pytest.param(httpx.Response(500), "http_status", "HTTP 500", id="server error"),
        pytest.param(httpx.Response(404), "http_status", "HTTP 404", id="wrong path"),
        pytest.param(
            httpx.ConnectError("refused"), "connect", "ConnectError: refused", id="connection refused"
        ),
        pytest.param(httpx.ReadTimeout("slow"), "timeout", "no answer within 2s", id="read timeout"),
        pytest.param(
            httpx.Response(200, text="vllm:num_requests_waiting{broken 1\n"),
            "parse",
            "broken",
            id="garbage line",
        ),
    ],
)
@respx.mock
async def test_scrape_failures_are_counted_by_reason(
    make_source: Callable[..., ScrapeSource],
    telemetry: Telemetry,
    effect: httpx.Response | Exception,
    reason: str,
    message: str,
) -> None:
    route = respx.get("http://a:8000/metrics")
    if isinstance(effect, Exception):
        route.side_effect = effect
    else:
        route.return_value = effect
    source = make_source("http://a:8000/metrics")
    await source.scrape_round()
    reading = await read(source, Signal.QUEUE_SIZE, now=1000.0)
    assert (reading.values, reading.failing, reading.stale) == ((), 1, 1)
    assert message in (source.error_of("http://a:8000/metrics") or "")
    assert counter(telemetry, "infscale_adapter_scrape_errors_total", source="scrape", reason=reason) == 1


@respx.mock
async def test_a_hanging_pod_is_cut_off_by_the_per_request_timeout(
    make_source: Callable[..., ScrapeSource], telemetry: Telemetry
) -> None:
    never = asyncio.Event()

    async def hang(request: httpx.Request) -> httpx.Response:
        await never.wait()
        raise AssertionError("unreachable")

    respx.get("http://slow:8000/metrics").mock(side_effect=hang)
    respx.get("http://a:8000/metrics").respond(text=vllm_text(4, 2, 0.5))
    source = make_source("http://slow:8000/metrics", "http://a:8000/metrics", timeout_s=0.01)
    await source.scrape_round()
    reading = await read(source, Signal.QUEUE_SIZE, now=1000.0)
    assert ([v.value for v in reading.values], reading.failing) == ([4.0], 1)
    assert counter(telemetry, "infscale_adapter_scrape_errors_total", source="scrape", reason="timeout") == 1


@respx.mock
async def test_one_slow_pod_never_delays_the_others_values(make_source: Callable[..., ScrapeSource]) -> None:
    release = asyncio.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return httpx.Response(200, text=vllm_text(9, 1, 0.1))

    respx.get("http://slow:8000/metrics").mock(side_effect=slow)
    respx.get("http://a:8000/metrics").respond(text=vllm_text(4, 2, 0.5))
    source = make_source("http://slow:8000/metrics", "http://a:8000/metrics")
    round_task = asyncio.create_task(source.scrape_round())
    for _ in range(50):  # let the fast scrape finish; the slow one is still blocked
        await asyncio.sleep(0)
    assert not round_task.done()
    during = await read(source, Signal.QUEUE_SIZE, now=1000.0)
    assert [v.value for v in during.values] == [4.0]
    release.set()
    await round_task
    after = await read(source, Signal.QUEUE_SIZE, now=1000.0)
    assert sorted(v.value for v in after.values) == [4.0, 9.0]


@respx.mock
async def test_concurrency_is_bounded(make_source: Callable[..., ScrapeSource]) -> None:
    in_flight = peak = 0

    async def engine(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        for _ in range(5):
            await asyncio.sleep(0)
        in_flight -= 1
        return httpx.Response(200, text=vllm_text(1, 1, 0.1))

    urls = [f"http://pod-{i}:8000/metrics" for i in range(7)]
    for url in urls:
        respx.get(url).mock(side_effect=engine)
    source = make_source(*urls, concurrency=3)
    await source.scrape_round()
    assert peak == 3
    assert len((await read(source, Signal.QUEUE_SIZE, now=1000.0)).values) == 7


@respx.mock
async def test_rates_come_from_consecutive_scrapes_of_the_same_pod(
    make_source: Callable[..., ScrapeSource], clock: ManualClock
) -> None:
    route = respx.get("http://a:8000/metrics")
    route.respond(text=vllm_text(0, 0, 0, success=100))
    source = make_source("http://a:8000/metrics")
    await source.scrape_round()
    first = await read(source, Signal.REQUEST_RATE, now=1000.0)
    assert first.values == ()  # one scrape is no rate: no data, not 0
    clock.t = 1010.0
    route.respond(text=vllm_text(0, 0, 0, success=160))
    await source.scrape_round()
    (value,) = (await read(source, Signal.REQUEST_RATE, now=1010.0)).values
    assert (value.value, value.window_s, value.timestamp) == (6.0, 10, 1010.0)
    clock.t = 1015.0
    route.respond(text=vllm_text(0, 0, 0, success=20))  # engine restarted
    await source.scrape_round()
    (value,) = (await read(source, Signal.REQUEST_RATE, now=1015.0)).values
    assert (value.value, value.window_s) == (4.0, 5)


@respx.mock
async def test_static_endpoints_with_a_namespace_serve_only_it(
    make_source: Callable[..., ScrapeSource],
) -> None:
    respx.get("http://a:8000/metrics").respond(text=vllm_text(4, 2, 0.5))
    source = make_source("http://a:8000/metrics", namespace="serving")
    await source.scrape_round()
    assert len((await source.read(Signal.QUEUE_SIZE, None, "serving", 1000.0, 30.0)).values) == 1
    other = await source.read(Signal.QUEUE_SIZE, None, "default", 1000.0, 30.0)
    assert (other.values, other.targets) == ((), 0)


async def test_queries_are_refused(make_source: Callable[..., ScrapeSource]) -> None:
    source = make_source("http://a:8000/metrics")
    with pytest.raises(SourceError, match="not PromQL"):
        await source.read(None, "up", "default", 1000.0, 30.0)


@respx.mock
async def test_round_updates_target_gauges(
    make_source: Callable[..., ScrapeSource], telemetry: Telemetry
) -> None:
    respx.get("http://a:8000/metrics").respond(text=vllm_text(4, 2, 0.5))
    respx.get("http://b:8000/metrics").respond(status_code=500)
    source = make_source("http://a:8000/metrics", "http://b:8000/metrics")
    await source.scrape_round()
    assert telemetry.registry.get_sample_value("infscale_adapter_targets") == 2
    assert telemetry.registry.get_sample_value("infscale_adapter_stale_targets") == 1
    assert telemetry.registry.get_sample_value("infscale_adapter_scrape_round_duration_seconds_count") == 1
    assert (
        telemetry.registry.get_sample_value(
            "infscale_adapter_scrape_duration_seconds_count", {"source": "scrape"}
        )
        == 2
    )


@respx.mock
async def test_owned_clients_are_sharded_by_origin_and_closed(
    telemetry: Telemetry, clock: ManualClock
) -> None:
    urls = [f"http://pod-{i}:8000/metrics" for i in range(40)] + ["http://pod-0:8000/other"]
    for url in urls:
        respx.get(url).respond(text=vllm_text(1, 1, 0.1))
    source = ScrapeSource(get_preset("vllm"), [endpoints(*urls)], ScrapeSettings(), telemetry, clock)
    async with source:
        await source.scrape_round()
        clients = {source._client_for(t) for t in source.targets()}
        same_origin = {source._client_for(t) for t in source.targets() if t.url.startswith("http://pod-0:")}
        assert 1 < len(clients) <= 40 and len(same_origin) == 1
        assert len((await read(source, Signal.QUEUE_SIZE, now=1000.0)).values) == 41
    assert all(c.is_closed for c in clients)


@pytest.mark.parametrize(
    ("tls", "served"),
    [
        pytest.param({}, False, id="system roots do not trust a private CA"),
        pytest.param({"tls_ca_file": "CERT"}, True, id="the engines' CA"),
        pytest.param({"tls_insecure_skip_verify": True}, True, id="verification off (development)"),
    ],
)
async def test_https_engines(
    tmp_path: Path, clock: ManualClock, tls: dict[str, object], served: bool
) -> None:
    """A real HTTPS engine on loopback with its own certificate."""
    cert_pem, key_pem = generate_self_signed(["127.0.0.1"])
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(cert_pem)
    key.write_bytes(key_pem)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=vllm_text(4, 2, 0.5))

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_tls).start()
    url = f"https://127.0.0.1:{runner.addresses[0][1]}/metrics"
    settings = ScrapeSettings.model_validate({k: str(cert) if v == "CERT" else v for k, v in tls.items()})
    try:
        async with ScrapeSource(
            get_preset("vllm"), [endpoints(url)], settings, Telemetry(clock), clock
        ) as source:
            await source.scrape_round()
            reading = await read(source, Signal.QUEUE_SIZE, now=1000.0)
    finally:
        await runner.cleanup()
    assert [v.value for v in reading.values] == ([4.0] if served else [])
    if not served:
        assert "CERTIFICATE_VERIFY_FAILED" in (source.error_of(url) or "")
