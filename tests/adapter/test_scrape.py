"""The direct scraper against engines on a loopback server: values, freshness, rates, errors,
concurrency, connection reuse."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from aiohttp import web
from conftest import serve
from engine_fixtures import VLLM, vllm_text

from adapter.catalogconfig import ScrapeSettings, StaticEndpoint
from adapter.presets import Signal, get_preset
from adapter.sources import SourceError, SourceReading
from adapter.sources.scrape import ScrapeSource, StaticTargets, Target
from adapter.telemetry import Telemetry
from adapter.tls import generate_self_signed
from common.clock import ManualClock

Handler = Callable[[web.Request], Awaitable[web.Response]]
MakeSource = Callable[..., Awaitable[ScrapeSource]]


class Engines:
    """Engine pods on one loopback server: `/{pod}/metrics` answers as `respond`/`handle` said."""

    def __init__(self) -> None:
        self.base = ""
        self.handlers: dict[str, Handler] = {}
        self.peers: set[object] = set()  # client (host, port) pairs: one per connection
        self.requests = 0
        self.closing = asyncio.Event()  # set at teardown: hanging handlers return

    def url(self, pod: str) -> str:
        return f"{self.base}/{pod}/metrics"

    def respond(self, pod: str, text: str = "", status: int = 200) -> str:
        async def answer(request: web.Request) -> web.Response:
            return web.Response(text=text, status=status)

        return self.handle(pod, answer)

    def handle(self, pod: str, handler: Handler) -> str:
        self.handlers[pod] = handler
        return self.url(pod)

    async def hang(self, request: web.Request) -> web.Response:
        await self.closing.wait()
        return web.Response(status=503)

    def app(self) -> web.Application:
        async def metrics(request: web.Request) -> web.Response:
            self.requests += 1
            assert request.transport is not None
            self.peers.add(request.transport.get_extra_info("peername"))
            handler = self.handlers.get(request.match_info["pod"])
            if handler is None:
                raise web.HTTPNotFound()  # no such pod: what a wrong metrics path gets
            return await handler(request)

        app = web.Application()
        app.router.add_get("/{pod}/metrics", metrics)
        return app


@pytest.fixture
async def engines() -> AsyncIterator[Engines]:
    fake = Engines()
    async with serve(fake.app()) as base:
        fake.base = base
        try:
            yield fake
        finally:
            fake.closing.set()


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/metrics"  # nothing listens there any more: connection refused


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
async def make_source(clock: ManualClock, telemetry: Telemetry) -> AsyncIterator[MakeSource]:
    """Open sources, closed at teardown."""
    async with AsyncExitStack() as stack:

        async def make(*urls: str, namespace: str | None = None, **settings: float) -> ScrapeSource:
            source = ScrapeSource(
                get_preset("vllm"),
                [endpoints(*urls, namespace=namespace)],
                ScrapeSettings.model_validate(settings),
                telemetry,
                clock,
            )
            return await stack.enter_async_context(source)

        yield make


async def read(source: ScrapeSource, signal: Signal, now: float, max_age_s: float = 30.0) -> SourceReading:
    return await source.read(signal, None, "default", now, max_age_s)


async def test_values_are_per_pod_and_timestamped(make_source: MakeSource, engines: Engines) -> None:
    a = engines.respond("a", text=vllm_text(4, 2, 0.5, model="m1"))
    b = engines.respond("b", text=VLLM)
    source = await make_source(a, b)
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
async def test_a_pod_older_than_max_age_is_left_out_and_counted(
    make_source: MakeSource, engines: Engines, read_at: float, max_age_s: float, fresh: bool
) -> None:
    source = await make_source(engines.respond("a", text=vllm_text(4, 2, 0.5)))
    await source.scrape_round()
    reading = await read(source, Signal.QUEUE_SIZE, now=read_at, max_age_s=max_age_s)
    assert [v.value for v in reading.values] == ([4.0] if fresh else [])
    assert reading.stale == (0 if fresh else 1)


async def test_a_failed_scrape_keeps_the_last_good_value_until_it_is_stale(
    make_source: MakeSource, engines: Engines, clock: ManualClock, telemetry: Telemetry
) -> None:
    url = engines.respond("a", text=vllm_text(4, 2, 0.5))
    source = await make_source(url)
    await source.scrape_round()
    clock.set(1010.0)
    engines.respond("a", status=503)
    await source.scrape_round()
    reading = await read(source, Signal.QUEUE_SIZE, now=1010.0)
    assert ([v.value for v in reading.values], reading.failing) == ([4.0], 1)
    assert [v.timestamp for v in reading.values] == [1000.0]  # the time of the data, not of the read
    stale = await read(source, Signal.QUEUE_SIZE, now=1031.0)
    assert (stale.values, stale.stale, stale.failing) == ((), 1, 1)
    assert source.error_of(url) == "HTTP 503"
    assert (
        counter(telemetry, "infscale_adapter_scrape_errors_total", source="scrape", reason="http_status") == 1
    )


async def _redirect(request: web.Request) -> web.Response:
    raise web.HTTPFound("/b/metrics")


@pytest.mark.parametrize(
    ("pod", "reason", "message"),
    [
        pytest.param("500", "http_status", "HTTP 500", id="server error"),
        pytest.param("unknown", "http_status", "HTTP 404", id="wrong path"),
        pytest.param("redirect", "http_status", "HTTP 302", id="a redirect is not followed"),
        pytest.param(None, "connect", "ClientConnectorError: Cannot connect", id="connection refused"),
        pytest.param("hang", "timeout", "no answer within 0.2s", id="no answer in time"),
        pytest.param("garbage", "parse", "broken", id="garbage line"),
    ],
)
async def test_scrape_failures_are_counted_by_reason(
    make_source: MakeSource,
    engines: Engines,
    telemetry: Telemetry,
    pod: str | None,
    reason: str,
    message: str,
) -> None:
    engines.respond("500", status=500)
    engines.handle("redirect", _redirect)
    engines.respond("b", text=vllm_text(4, 2, 0.5))
    engines.handle("hang", engines.hang)
    engines.respond("garbage", text="vllm:num_requests_waiting{broken 1\n")
    url = closed_port_url() if pod is None else engines.url(pod)
    source = await make_source(url, timeout_s=0.2)
    await source.scrape_round()
    reading = await read(source, Signal.QUEUE_SIZE, now=1000.0)
    assert (reading.values, reading.failing, reading.stale) == ((), 1, 1)
    assert message in (source.error_of(url) or "")
    assert counter(telemetry, "infscale_adapter_scrape_errors_total", source="scrape", reason=reason) == 1


@pytest.mark.parametrize(
    ("text", "reason", "message"),
    [
        pytest.param(
            vllm_text(4, 2, 0.5) + "".join(f'flood{{i="{i}"}} 1\n' for i in range(60)),
            "too_many_series",
            "64 series, more than max_series_per_target 50",
            id="too many series",
        ),
        pytest.param(
            "#\n" * 200, "too_many_lines", "more than max_lines_per_target 100", id="too many lines"
        ),
        pytest.param(
            "vllm:num_requests_waiting 1 2 3 4\n", "parse", "expected a value, then", id="extra tokens"
        ),
        pytest.param(
            vllm_text(4, 2, 0.5) + "vllm:time_to_first_token_seconds_bucket{le=0.1} 3\n",
            "parse",
            "not a metric name with optional {labels}",
            id="a malformed line the preset does not read",
        ),
    ],
)
async def test_an_exposition_past_a_bound_or_malformed_fails_that_pod_only(
    make_source: MakeSource, engines: Engines, telemetry: Telemetry, text: str, reason: str, message: str
) -> None:
    bad = engines.respond("bad", text=text)
    good = engines.respond("good", text=vllm_text(6, 2, 0.5))
    source = await make_source(bad, good, max_series_per_target=50, max_lines_per_target=100)
    await source.scrape_round()
    reading = await read(source, Signal.QUEUE_SIZE, now=1000.0)
    assert ([v.value for v in reading.values], reading.failing) == ([6.0], 1)
    assert message in (source.error_of(bad) or "")
    assert counter(telemetry, "infscale_adapter_scrape_errors_total", source="scrape", reason=reason) == 1


async def test_expositions_are_parsed_off_the_event_loop(
    make_source: MakeSource, engines: Engines, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from adapter.exposition import ExpositionParser

    threads: list[str] = []
    parse = ExpositionParser.parse

    def recording(self: ExpositionParser, body: bytes | str) -> object:
        threads.append(threading.current_thread().name)
        return parse(self, body)

    monkeypatch.setattr(ExpositionParser, "parse", recording)
    from adapter.sources import scrape

    observe = scrape.observe

    def observing(*args: object) -> object:
        threads.append(threading.current_thread().name)
        return observe(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(scrape, "observe", observing)  # reading the signals is as costly: also off it
    source = await make_source(engines.respond("a", text=vllm_text(4, 2, 0.5)))
    await source.scrape_round()
    assert [v.value for v in (await read(source, Signal.QUEUE_SIZE, now=1000.0)).values] == [4.0]
    assert len(threads) == 2 and all(t.startswith("infscale-parse") for t in threads)
    assert threading.current_thread().name not in threads


async def test_a_hanging_pod_is_cut_off_by_the_per_request_timeout(
    make_source: MakeSource, engines: Engines, telemetry: Telemetry
) -> None:
    slow = engines.handle("slow", engines.hang)
    a = engines.respond("a", text=vllm_text(4, 2, 0.5))
    source = await make_source(slow, a, timeout_s=0.5)
    await source.scrape_round()
    reading = await read(source, Signal.QUEUE_SIZE, now=1000.0)
    assert ([v.value for v in reading.values], reading.failing) == ([4.0], 1)
    assert counter(telemetry, "infscale_adapter_scrape_errors_total", source="scrape", reason="timeout") == 1


async def test_one_slow_pod_never_delays_the_others_values(make_source: MakeSource, engines: Engines) -> None:
    release = asyncio.Event()
    release.set()  # the first round ends; then the slow pod hangs in the second

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text=vllm_text(9, 1, 0.1))

    fast = engines.respond("a", text=vllm_text(4, 2, 0.5))
    source = await make_source(engines.handle("slow", slow), fast)
    await source.scrape_round()
    release.clear()
    engines.respond("a", text=vllm_text(5, 2, 0.5))
    round_task = asyncio.create_task(source.scrape_round())
    for _ in range(500):  # until the fast pod's new value has landed; the slow one is still blocked
        during = await read(source, Signal.QUEUE_SIZE, now=1000.0)
        if 5.0 in [v.value for v in during.values]:
            break
        await asyncio.sleep(0.01)
    assert not round_task.done()
    assert sorted(v.value for v in during.values) == [5.0, 9.0]  # the slow pod's last value meanwhile
    release.set()
    await round_task


async def test_reads_wait_for_the_first_round_to_end(
    engines: Engines, telemetry: Telemetry, clock: ManualClock
) -> None:
    """At start every pod is unread, not idle: a sum over the pods scraped so far would tell the
    HPA a queue of 4 where there are 13. Until the first round ends a read is an error naming why
    (the HPA holds its count on a failed metric); afterwards a pod not scraped yet is a new one."""
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text=vllm_text(9, 1, 0.1))

    class Discovered:
        def __init__(self, *urls: str) -> None:
            self.urls = list(urls)

        def targets(self) -> list[Target]:
            return [Target(key=u, url=u) for u in self.urls]

    pods = Discovered(engines.handle("slow", slow), engines.respond("a", text=vllm_text(4, 2, 0.5)))
    async with ScrapeSource(get_preset("vllm"), [pods], ScrapeSettings(), telemetry, clock) as source:
        round_task = asyncio.create_task(source.scrape_round())
        for _ in range(500):  # until the fast pod's scrape has landed
            if source.generation() and source.generation() > 1:
                break
            await asyncio.sleep(0.01)
        with pytest.raises(SourceError, match="first scrape round over 2 pods has not ended"):
            await read(source, Signal.QUEUE_SIZE, now=1000.0)
        release.set()
        await round_task
        after = await read(source, Signal.QUEUE_SIZE, now=1000.0)
        assert sorted(v.value for v in after.values) == [4.0, 9.0]
        pods.urls.append(engines.respond("new", text=vllm_text(1, 1, 0.1)))  # discovered after the round
        reading = await read(source, Signal.QUEUE_SIZE, now=1000.0)
    assert sorted(v.value for v in reading.values) == [4.0, 9.0] and reading.targets == 3


async def test_concurrency_is_bounded(make_source: MakeSource, engines: Engines) -> None:
    in_flight = peak = 0

    async def engine(request: web.Request) -> web.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.1)  # long enough for every request the bound lets through to arrive
        in_flight -= 1
        return web.Response(text=vllm_text(1, 1, 0.1))

    urls = [engines.handle(f"pod-{i}", engine) for i in range(7)]
    source = await make_source(*urls, concurrency=3)
    await source.scrape_round()
    assert peak == 3
    assert len((await read(source, Signal.QUEUE_SIZE, now=1000.0)).values) == 7


async def test_rates_come_from_consecutive_scrapes_of_the_same_pod(
    make_source: MakeSource, engines: Engines, clock: ManualClock
) -> None:
    source = await make_source(engines.respond("a", text=vllm_text(0, 0, 0, success=100)))
    await source.scrape_round()
    first = await read(source, Signal.REQUEST_RATE, now=1000.0)
    assert first.values == ()  # one scrape is no rate: no data, not 0
    clock.set(1010.0)
    engines.respond("a", text=vllm_text(0, 0, 0, success=160))
    await source.scrape_round()
    (value,) = (await read(source, Signal.REQUEST_RATE, now=1010.0)).values
    assert (value.value, value.window_s, value.timestamp) == (6.0, 10, 1010.0)
    clock.set(1015.0)
    engines.respond("a", text=vllm_text(0, 0, 0, success=20))  # engine restarted
    await source.scrape_round()
    (value,) = (await read(source, Signal.REQUEST_RATE, now=1015.0)).values
    assert (value.value, value.window_s) == (4.0, 5)


async def test_static_endpoints_with_a_namespace_serve_only_it(
    make_source: MakeSource, engines: Engines
) -> None:
    source = await make_source(engines.respond("a", text=vllm_text(4, 2, 0.5)), namespace="serving")
    await source.scrape_round()
    assert len((await source.read(Signal.QUEUE_SIZE, None, "serving", 1000.0, 30.0)).values) == 1
    other = await source.read(Signal.QUEUE_SIZE, None, "default", 1000.0, 30.0)
    assert (other.values, other.targets) == ((), 0)


async def test_queries_are_refused(make_source: MakeSource) -> None:
    source = await make_source("http://a:8000/metrics")
    with pytest.raises(SourceError, match="not PromQL"):
        await source.read(None, "up", "default", 1000.0, 30.0)


async def test_round_updates_target_gauges(
    make_source: MakeSource, engines: Engines, telemetry: Telemetry
) -> None:
    a = engines.respond("a", text=vllm_text(4, 2, 0.5))
    b = engines.respond("b", status=500)
    source = await make_source(a, b)
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


async def test_connections_are_kept_across_rounds(make_source: MakeSource, engines: Engines) -> None:
    urls = [engines.respond(f"pod-{i}", text=vllm_text(1, 1, 0.1)) for i in range(3)]
    source = await make_source(*urls)
    for _ in range(3):
        await source.scrape_round()
    assert len((await read(source, Signal.QUEUE_SIZE, now=1000.0)).values) == 3
    assert (engines.requests, len(engines.peers)) == (9, 3)  # one connection per pod, reused


async def test_a_source_that_is_not_open_refuses_to_scrape(telemetry: Telemetry, clock: ManualClock) -> None:
    source = ScrapeSource(
        get_preset("vllm"), [endpoints("http://a/metrics")], ScrapeSettings(), telemetry, clock
    )
    with pytest.raises(AssertionError, match="async context manager"):
        await source.scrape_round()


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


async def test_a_failed_round_is_logged_and_the_loop_goes_on(
    engines: Engines, telemetry: Telemetry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The loop is the only thing that scrapes: an unexpected error in one round must not end it."""
    url = engines.respond("a", text=vllm_text(4, 2, 0.5))

    class FailsOnce:
        calls = 0

        def targets(self) -> list[Target]:
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("discovery bug")
            return [Target(key=url, url=url)]

    targets = FailsOnce()  # the first round fails; no read may call targets() before it
    settings = ScrapeSettings(interval_s=0.01)
    async with ScrapeSource(get_preset("vllm"), [targets], settings, telemetry, clock) as source:
        loop = asyncio.create_task(source.run())
        try:
            for _ in range(500):  # until a round has completed (the failed one never does)
                if telemetry.registry.get_sample_value(
                    "infscale_adapter_scrape_round_duration_seconds_count"
                ):
                    break
                await asyncio.sleep(0.01)
        finally:
            loop.cancel()
        assert [v.value for v in (await read(source, Signal.QUEUE_SIZE, now=1000.0)).values] == [4.0]
    (record,) = [r for r in caplog.records if r.name == "adapter.sources.scrape"]
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert "discovery bug" in str(record.exc_info[1])


def test_a_negative_or_infinite_counter_gives_no_rate() -> None:
    from adapter.exposition import parse_exposition
    from adapter.sources.scrape import observe

    preset = get_preset("vllm")
    for total in ("-1000", "+Inf"):
        text = f"vllm:request_success_total {total}\n"
        first = observe(preset, parse_exposition("vllm:request_success_total 10\n"), 1000.0, None)
        second = observe(preset, parse_exposition(text), 1005.0, first)
        assert Signal.REQUEST_RATE not in second.counters and Signal.REQUEST_RATE not in second.rates


def _prompt_histogram(counts: tuple[int, int, int], total: float) -> str:
    """vLLM's prompt-length histogram: (<= 1,000, <= 10,000, all) prompts and their exact Σ."""
    labels = 'engine="0",model_name="m"'
    return (
        vllm_text(0, 0, 0)
        + "# TYPE vllm:request_prompt_tokens histogram\n"
        + f'vllm:request_prompt_tokens_bucket{{{labels},le="1000.0"}} {counts[0]}\n'
        + f'vllm:request_prompt_tokens_bucket{{{labels},le="10000.0"}} {counts[1]}\n'
        + f'vllm:request_prompt_tokens_bucket{{{labels},le="+Inf"}} {counts[2]}\n'
        + f"vllm:request_prompt_tokens_sum{{{labels}}} {total}\n"
        + f"vllm:request_prompt_tokens_count{{{labels}}} {counts[2]}\n"
    )


async def test_the_prompt_square_rate_comes_from_the_histograms_deltas(
    make_source: MakeSource, engines: Engines, clock: ManualClock
) -> None:
    """Between two scrapes 10 s apart 4 prompts of <= 1,000 tokens and 2 of (1,000, 10,000]
    arrive, 12,000 tokens in all: the buckets' squares (4 · 10⁶/3 + 2 · 111·10⁶/3) scaled by the
    exact Σ over the buckets' (4 · 500 + 2 · 5,500 = 13,000), per second."""
    source = await make_source(engines.respond("a", text=_prompt_histogram((1, 1, 1), 300.0)))
    await source.scrape_round()
    assert (await read(source, Signal.PROMPT_TOKEN_SQUARE_RATE, now=1000.0)).values == ()
    clock.set(1010.0)
    engines.respond("a", text=_prompt_histogram((5, 7, 7), 12_300.0))
    await source.scrape_round()
    (value,) = (await read(source, Signal.PROMPT_TOKEN_SQUARE_RATE, now=1010.0)).values
    squares = 4 * 1e6 / 3 + 2 * (1e6 + 1e7 + 1e8) / 3
    assert value.value == pytest.approx(squares * (12_000 / 13_000) ** 2 / 10)
    assert value.window_s == 10
    clock.set(1020.0)
    engines.respond("a", text=vllm_text(0, 0, 0))  # the histogram gone (an engine without it)
    await source.scrape_round()
    assert (await read(source, Signal.PROMPT_TOKEN_SQUARE_RATE, now=1020.0)).values == ()


def _prefill_histogram(counts: dict[str, int], engine: str = "0") -> str:
    """vLLM's prefill-time histogram of one data-parallel engine: cumulative count per bound."""
    labels = f'engine="{engine}",model_name="m"'
    lines = [
        f'vllm:request_prefill_time_seconds_bucket{{{labels},le="{le}"}} {c}.0' for le, c in counts.items()
    ]
    return "\n".join(["# TYPE vllm:request_prefill_time_seconds histogram", *lines, ""])


async def test_prefill_bucket_rates_are_one_value_per_bound_from_the_histograms_deltas(
    make_source: MakeSource, engines: Engines, clock: ManualClock
) -> None:
    """Two data-parallel engines; over 10 s engine 0 sees 5 prefills within 0.3 s and 1 over 2.5 s,
    engine 1 one of 2 s: per bound 0.5, 0.6, 0.7 per second, as exposed ("+Inf" = every prefill)."""

    def text(zero: tuple[int, int, int], one: tuple[int, int, int]) -> str:
        bounds = ("0.3", "2.5", "+Inf")
        return (
            vllm_text(0, 0, 0)
            + _prefill_histogram(dict(zip(bounds, zero, strict=True)), "0")
            + _prefill_histogram(dict(zip(bounds, one, strict=True)), "1")
        )

    source = await make_source(engines.respond("a", text=text((10, 12, 12), (3, 3, 4))))
    await source.scrape_round()
    assert (await read(source, Signal.PREFILL_TIME_BUCKET_RATE, now=1000.0)).values == ()  # one scrape
    clock.set(1010.0)
    engines.respond("a", text=text((15, 17, 18), (3, 4, 5)))
    await source.scrape_round()
    reading = await read(source, Signal.PREFILL_TIME_BUCKET_RATE, now=1010.0)
    got = [(v.labels["le"], v.value, v.window_s, v.labels["model"]) for v in reading.values]
    assert got == [("0.3", 0.5, 10, "m"), ("2.5", 0.6, 10, "m"), ("+Inf", 0.7, 10, "m")]
    clock.set(1015.0)
    engines.respond("a", text=text((2, 2, 3), (0, 0, 0)))  # restarted: 2 within 0.3 s, 1 beyond
    await source.scrape_round()
    reading = await read(source, Signal.PREFILL_TIME_BUCKET_RATE, now=1015.0)
    assert [(v.labels["le"], v.value) for v in reading.values] == [("0.3", 0.4), ("2.5", 0.4), ("+Inf", 0.6)]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        pytest.param(_prefill_histogram({"0.3": 5, "+Inf": 3}), "not_cumulative", id="not cumulative"),
        pytest.param(_prefill_histogram({"0.3": 1, "2.5": 3}), "no_inf_bucket", id="no +Inf bucket"),
        pytest.param(_prefill_histogram({"slow": 1, "+Inf": 3}), "le_not_numeric", id="le not a number"),
        pytest.param(
            'vllm:request_prefill_time_seconds_bucket{model_name="m"} 3.0\n', "le_missing", id="no le label"
        ),
        pytest.param(
            'vllm:request_prefill_time_seconds_bucket{le="0.3"} NaN\n'
            'vllm:request_prefill_time_seconds_bucket{le="+Inf"} 3.0\n',
            "not_finite",
            id="NaN bucket",
        ),
    ],
)
async def test_a_malformed_prefill_histogram_leaves_its_pod_out_naming_why(
    make_source: MakeSource, engines: Engines, clock: ManualClock, bad: str, reason: str
) -> None:
    good = vllm_text(0, 0, 0) + _prefill_histogram({"0.3": 1, "+Inf": 1})
    source = await make_source(engines.respond("good", text=good), engines.respond("bad", text=bad))
    await source.scrape_round()
    clock.set(1005.0)
    engines.respond("good", text=vllm_text(0, 0, 0) + _prefill_histogram({"0.3": 6, "+Inf": 11}))
    await source.scrape_round()
    reading = await read(source, Signal.PREFILL_TIME_BUCKET_RATE, now=1005.0)
    assert [(v.labels["le"], v.value) for v in reading.values] == [("0.3", 1.0), ("+Inf", 2.0)]
    assert reading.invalid == {reason: 1}
    assert source.error_of(engines.url("bad")) is None  # its other signals are still read
