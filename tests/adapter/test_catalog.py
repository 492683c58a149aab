"""The catalog: settings validation, files, quick start, aggregation and the read path's errors."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from engine_fixtures import vllm_text
from pydantic import ValidationError

from adapter.backend import MetricSample, NoData, SourceUnavailable, UnknownMetric
from adapter.catalog import Catalog, aggregate, build_catalog
from adapter.catalogconfig import Aggregation, CatalogError, CatalogSettings, SourceKind
from adapter.presets import Signal
from adapter.sources import PodValue, SourceError, SourceReading
from adapter.telemetry import Telemetry
from common.selector import EVERYTHING, parse_selector

SCRAPE_OK: dict[str, Any] = {"endpoints": ["http://10.0.0.1:8000/metrics"]}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param({"engine": "vlm", **SCRAPE_OK}, "unknown engine 'vlm'", id="unknown engine"),
        pytest.param({}, "set endpoints or kubernetes", id="scrape metrics without targets"),
        pytest.param(
            {"engine": "triton", "metrics": [{"name": "b", "signal": "batch_size"}], **SCRAPE_OK},
            "engine 'triton' has no signal 'batch_size'",
            id="signal the engine lacks",
        ),
        pytest.param(
            {"metrics": [{"name": "q", "signal": "queue_size", "source": "prometheus"}]},
            "set prometheus.url",
            id="prometheus metric without prometheus",
        ),
        pytest.param(
            {"metrics": [{"name": "a/b", "signal": "queue_size"}], **SCRAPE_OK},
            "may not contain '/'",
            id="slash in metric name",
        ),
        pytest.param(
            {"metrics": [{"name": "..", "signal": "queue_size"}], **SCRAPE_OK},
            "may not be '.' or '..'",
            id="dot-dot",
        ),
        pytest.param(
            {"metrics": [{"name": "status", "signal": "queue_size"}], **SCRAPE_OK},
            "reserved",
            id="status is reserved",
        ),
        pytest.param(
            {
                "metrics": [{"name": "q", "signal": "queue_size"}, {"name": "q", "signal": "batch_size"}],
                **SCRAPE_OK,
            },
            "listed twice",
            id="duplicate names",
        ),
        pytest.param(
            {"metrics": [{"name": "q", "query": "up"}], **SCRAPE_OK},
            "query needs source: prometheus",
            id="query on the scrape source",
        ),
        pytest.param(
            {
                "metrics": [{"name": "q", "signal": "queue_size", "query": "up", "source": "prometheus"}],
                "prometheus": {"url": "http://p:9090"},
            },
            "exactly one of signal and query",
            id="both signal and query",
        ),
        pytest.param(
            {"metrics": [{"name": "q", "signal": "queue_sise"}], **SCRAPE_OK},
            "queue_size",
            id="misspelt signal",
        ),
        pytest.param({"endpoints": ["ftp://x/metrics"]}, "must be http:// or https://", id="endpoint scheme"),
        pytest.param(
            {"endpoints": ["http://x:99999/metrics"]}, "port 99999", id="endpoint port out of range"
        ),
        pytest.param(
            {"endpoints": ["http://[10.0.0.5/metrics"]}, "not a valid host", id="endpoint broken host"
        ),
        pytest.param(
            {"endpoints": ["http://a b/metrics"]}, "not a valid host", id="endpoint host with a space"
        ),
        pytest.param(
            {
                "metrics": [{"name": "q", "signal": "queue_size", "source": "prometheus"}],
                "prometheus": {"url": "ftp://p:9090"},
            },
            "prometheus url 'ftp://p:9090' must be http:// or https://",
            id="prometheus scheme",
        ),
        pytest.param(
            {"endpoints": [{"url": "http://x", "namespace": "Bad_NS"}]}, "DNS-1123", id="bad namespace"
        ),
        pytest.param(
            {"kubernetes": {"label_selector": "app in (a"}},
            "label_selector 'app in (a'",
            id="bad pod selector",
        ),
        pytest.param(
            {"kubernetes": {"label_selector": "a=b", "path": "metrics"}}, "must start with '/'", id="path"
        ),
        pytest.param({"max_age_s": 0, **SCRAPE_OK}, "max_age_s", id="zero max age"),
        pytest.param({"metrics": [], **SCRAPE_OK}, "metrics is empty", id="no metrics"),
        pytest.param({"scrape": {"concurrency": 0}, **SCRAPE_OK}, "concurrency", id="zero concurrency"),
        pytest.param({"surprise": 1, **SCRAPE_OK}, "surprise", id="unknown key"),
        pytest.param(
            {"scrape": {"tls_ca_file": "/ca.pem", "tls_insecure_skip_verify": True}, **SCRAPE_OK},
            "tls_ca_file and tls_insecure_skip_verify exclude each other",
            id="engine TLS options",
        ),
    ],
)
def test_invalid_settings_name_the_problem(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        CatalogSettings.model_validate(data)


@pytest.mark.parametrize(
    ("engine", "served"),
    [
        pytest.param(
            "vllm",
            {
                "infscale_queue_size": ("queue_size", "sum"),
                "infscale_batch_size": ("batch_size", "sum"),
                "infscale_inflight": ("inflight", "sum"),
                "infscale_kv_cache_usage": ("kv_cache_usage", "mean"),
            },
            id="vllm: all four",
        ),
        pytest.param("triton", {"infscale_queue_size": ("queue_size", "sum")}, id="triton: only what it has"),
        pytest.param(
            "gateway-api-inference-extension",
            {"infscale_arrival_rate": ("arrival_rate", "sum")},
            id="a gateway: its arrivals",
        ),
    ],
)
def test_quick_start(engine: str, served: dict[str, tuple[str, str]]) -> None:
    settings = CatalogSettings.quick_start(
        ["http://127.0.0.1:8000/metrics", "http://127.0.0.1:8001/metrics"], engine
    )
    specs = settings.metric_specs()
    assert {m.name: (m.signal, m.aggregation) for m in specs} == served
    assert all(m.source is SourceKind.SCRAPE for m in specs)
    assert [e.namespace for e in settings.endpoints] == [None, None]  # served in every namespace
    assert settings.max_age_s == 30.0


def test_yaml_and_json_files_load_the_same(tmp_path: Path) -> None:
    data = {
        "engine": "sglang",
        "max_age_s": 20,
        "metrics": [
            {"name": "infscale_queue_size", "signal": "queue_size"},
            {"name": "infscale_kv_cache_usage", "signal": "kv_cache_usage", "aggregation": "max"},
            {
                "name": "llm_queue",
                "source": "prometheus",
                "query": "sum by (namespace) (sglang:num_queue_reqs)",
            },
        ],
        "kubernetes": {"namespace": "serving", "label_selector": "app=sglang", "port": "http"},
        "prometheus": {"url": "http://prometheus.monitoring.svc:9090"},
    }
    yaml_file = tmp_path / "catalog.yaml"
    yaml_file.write_text(
        "engine: sglang\nmax_age_s: 20\nmetrics:\n"
        "  - {name: infscale_queue_size, signal: queue_size}\n"
        "  - {name: infscale_kv_cache_usage, signal: kv_cache_usage, aggregation: max}\n"
        "  - name: llm_queue\n    source: prometheus\n    query: sum by (namespace) (sglang:num_queue_reqs)\n"
        "kubernetes: {namespace: serving, label_selector: app=sglang, port: http}\n"
        "prometheus: {url: 'http://prometheus.monitoring.svc:9090'}\n"
    )
    json_file = tmp_path / "catalog.json"
    json_file.write_text(json.dumps(data))
    from_yaml, from_json = CatalogSettings.from_file(yaml_file), CatalogSettings.from_file(json_file)
    assert from_yaml == from_json == CatalogSettings.model_validate(data)
    assert from_yaml.metric_specs()[1].aggregation is Aggregation.MAX


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("engine: [", "cannot read catalog", id="broken yaml"),
        pytest.param("- a\n- b\n", "a catalog is a mapping, got list", id="not a mapping"),
        pytest.param(
            "endpoints: [http://a:1/metrics]\n"
            "metrics:\n  - {name: q, signal: queue_size, aggregation: median}\n",
            "metrics.0.aggregation: Input should be 'sum', 'mean' or 'max' (got \"median\")",
            id="field path and value in the message",
        ),
        pytest.param(
            "engine: triton\nendpoints: [http://a:1/metrics]\nmetrics: [{name: b, signal: batch_size}]\n",
            ": metric 'b': engine 'triton' has no signal 'batch_size' (has: queue_size, request_rate)",
            id="cross-field rule, no pydantic noise",
        ),
    ],
)
def test_bad_files_name_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text(text)
    with pytest.raises(CatalogError, match=re.escape(message)) as info:
        CatalogSettings.from_file(path)
    assert str(path) in str(info.value) and "Value error" not in str(info.value)


def test_missing_file_is_a_catalog_error(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"no-such\.yaml"):
        CatalogSettings.from_file(tmp_path / "no-such.yaml")


def pv(value: float, t: float = 100.0, window: int | None = None, **labels: str) -> PodValue:
    return PodValue(labels, value, t, window)


LABELS = ("namespace", "deployment", "model")


@pytest.mark.parametrize(
    ("values", "how", "expected"),
    [
        pytest.param(
            [
                pv(3, deployment="a", pod="a-1"),
                pv(5, deployment="a", pod="a-2"),
                pv(7, deployment="b", pod="b-1"),
            ],
            Aggregation.SUM,
            [({"namespace": "ns", "deployment": "a"}, 8.0), ({"namespace": "ns", "deployment": "b"}, 7.0)],
            id="sum per deployment, pod label not served",
        ),
        pytest.param(
            [pv(0.2, deployment="a"), pv(0.6, deployment="a")],
            Aggregation.MEAN,
            [({"namespace": "ns", "deployment": "a"}, 0.4)],
            id="mean",
        ),
        pytest.param(
            [pv(0.2, deployment="a"), pv(0.9, deployment="a")],
            Aggregation.MAX,
            [({"namespace": "ns", "deployment": "a"}, 0.9)],
            id="max",
        ),
        pytest.param(
            [pv(1, model="m1"), pv(2, model="m2"), pv(4, model="m1")],
            Aggregation.SUM,
            [({"namespace": "ns", "model": "m1"}, 5.0), ({"namespace": "ns", "model": "m2"}, 2.0)],
            id="static endpoints grouped by model, under the requested namespace",
        ),
        pytest.param([], Aggregation.SUM, [], id="nothing in, nothing out"),
    ],
)
def test_aggregate(
    values: list[PodValue], how: Aggregation, expected: list[tuple[dict[str, str], float]]
) -> None:
    got = aggregate(values, "ns", LABELS, how)
    assert [(dict(s.labels), s.value) for s in got] == [(labels, pytest.approx(v)) for labels, v in expected]


def test_aggregate_keeps_newest_timestamp_and_widest_window() -> None:
    (sample,) = aggregate([pv(1, t=90, window=10), pv(2, t=95, window=15)], "ns", LABELS, Aggregation.SUM)
    assert (sample.timestamp, sample.window_s) == (95, 15)


class ScriptedSource:
    def __init__(self, reading: SourceReading | Exception, generation: int | None = None) -> None:
        self.reading = reading
        self.calls: list[tuple[Signal | None, str, float]] = []
        self.gen = generation

    def generation(self) -> int | None:
        return self.gen

    async def read(
        self, signal: Signal | None, query: str | None, namespace: str, now: float, max_age_s: float
    ) -> SourceReading:
        self.calls.append((signal, namespace, max_age_s))
        if isinstance(self.reading, Exception):
            raise self.reading
        return self.reading


def catalog_with(
    reading: SourceReading | Exception, telemetry: Telemetry | None = None, **extra: Any
) -> Catalog:
    settings = CatalogSettings.model_validate({**SCRAPE_OK, **extra})
    return Catalog(
        settings, {SourceKind.SCRAPE: ScriptedSource(reading)}, telemetry or Telemetry(), lambda: 200.0
    )


@pytest.mark.parametrize(
    ("reading", "error", "message"),
    [
        pytest.param(SourceReading((), targets=0), NoData, "no engine pods found", id="no pods"),
        pytest.param(
            SourceReading((), stale=2, targets=2),
            NoData,
            "2 pods known, 2 older than 30s, 0 failing",
            id="all stale: an error, never 0",
        ),
        pytest.param(
            SourceReading((), targets=2), NoData, "none exposes the signal", id="engine does not expose it"
        ),
        pytest.param(
            SourceReading((), stale=2, failing=2, targets=2),
            SourceUnavailable,
            "all 2 pods fail their scrapes",
            id="every pod failing",
        ),
        pytest.param(SourceError("Prometheus down"), SourceUnavailable, "Prometheus down", id="source error"),
    ],
)
async def test_read_errors(reading: SourceReading | Exception, error: type[Exception], message: str) -> None:
    catalog = catalog_with(reading)
    with pytest.raises(error, match=re.escape(message)):
        await catalog.read("default", "infscale_queue_size", EVERYTHING)


async def test_unknown_metric() -> None:
    with pytest.raises(UnknownMetric, match="could not find the metric nope for namespace default"):
        await catalog_with(SourceReading(())).read("default", "nope", EVERYTHING)


async def test_selector_narrows_and_a_miss_is_an_empty_list() -> None:
    reading = SourceReading((pv(3, deployment="a"), pv(5, deployment="b")), targets=2)
    catalog = catalog_with(reading)
    narrowed = await catalog.read("default", "infscale_queue_size", parse_selector("deployment in (b,c)"))
    assert [(dict(s.labels), s.value) for s in narrowed] == [
        ({"namespace": "default", "deployment": "b"}, 5.0)
    ]
    assert await catalog.read("default", "infscale_queue_size", parse_selector("deployment=zzz")) == []


async def test_per_metric_max_age_reaches_the_source() -> None:
    source = ScriptedSource(SourceReading((pv(1),), targets=1))
    settings = CatalogSettings.model_validate(
        {**SCRAPE_OK, "max_age_s": 45, "metrics": [{"name": "q", "signal": "queue_size", "max_age_s": 12}]}
    )
    catalog = Catalog(settings, {SourceKind.SCRAPE: source}, Telemetry(), lambda: 200.0)
    await catalog.read("ns1", "q", EVERYTHING)
    assert source.calls == [(Signal.QUEUE_SIZE, "ns1", 12.0)]


async def test_answers_are_reused_until_data_changes_or_ages_out() -> None:
    source = ScriptedSource(
        SourceReading((pv(1, t=190, deployment="a"), pv(2, t=195, deployment="b")), targets=2), 7
    )
    now = [200.0]
    catalog = Catalog(
        CatalogSettings.model_validate(SCRAPE_OK), {SourceKind.SCRAPE: source}, Telemetry(), lambda: now[0]
    )

    async def read(selector: str = "") -> list[float]:
        return [
            s.value for s in await catalog.read("default", "infscale_queue_size", parse_selector(selector))
        ]

    assert await read() == [1.0, 2.0]
    assert await read("deployment=b") == [2.0]  # the selector applies to the reused answer
    assert len(source.calls) == 1
    await catalog.read("other", "infscale_queue_size", EVERYTHING)  # per namespace
    assert len(source.calls) == 2
    source.gen = 8  # a scrape landed
    await read()
    assert len(source.calls) == 3
    now[0] = 220.0  # the value from t=190 is exactly max-age (30 s) old: still valid
    await read()
    assert len(source.calls) == 3
    now[0] = 220.5  # now it is older: ask again
    await read()
    assert len(source.calls) == 4


async def test_sources_without_a_generation_are_asked_every_time() -> None:
    source = ScriptedSource(SourceReading((pv(1),), targets=1), None)
    catalog = Catalog(
        CatalogSettings.model_validate(SCRAPE_OK), {SourceKind.SCRAPE: source}, Telemetry(), lambda: 100.0
    )
    for _ in range(3):
        await catalog.read("default", "infscale_queue_size", EVERYTHING)
    assert len(source.calls) == 3


async def test_reads_feed_telemetry() -> None:
    telemetry = Telemetry(lambda: 200.0)
    await catalog_with(SourceReading((pv(1, t=190),), stale=3, targets=4), telemetry).read(
        "default", "infscale_queue_size", EVERYTHING
    )
    with pytest.raises(NoData):
        await catalog_with(SourceReading((), targets=1), telemetry).read(
            "default", "infscale_batch_size", EVERYTHING
        )
    sample = telemetry.registry.get_sample_value
    assert sample("infscale_adapter_metric_age_seconds", {"metric": "infscale_queue_size"}) == 10.0
    assert sample("infscale_adapter_stale_pods_excluded_total", {"metric": "infscale_queue_size"}) == 3
    assert sample("infscale_adapter_no_data_reads_total", {"metric": "infscale_batch_size"}) == 1


@pytest.mark.parametrize(
    ("metric", "bad", "reason"),
    [
        pytest.param("infscale_queue_size", -1000.0, "negative", id="a -1000 pod beside a 5 (was -995)"),
        pytest.param("infscale_queue_size", math.inf, "not_finite", id="+Inf (hid the deployment)"),
        pytest.param("infscale_queue_size", -math.inf, "not_finite", id="-Inf"),
        pytest.param("infscale_queue_size", math.nan, "not_finite", id="NaN"),
        pytest.param("infscale_queue_size", 1e30, "out_of_range", id="1e30 (hid the deployment)"),
        pytest.param("infscale_kv_cache_usage", -12.5, "negative", id="KV usage -1250%"),
        pytest.param("infscale_kv_cache_usage", 1.5, "above_one", id="KV usage 150%"),
    ],
)
async def test_an_invalid_pod_is_left_out_and_counted_never_poisoning_its_group(
    metric: str, bad: float, reason: str
) -> None:
    telemetry = Telemetry(lambda: 200.0)
    good = 5.0 if metric == "infscale_queue_size" else 0.5
    reading = SourceReading((pv(bad, t=190, deployment="a"), pv(good, t=190, deployment="a")), targets=2)
    (sample,) = await catalog_with(reading, telemetry).read("default", metric, EVERYTHING)
    assert sample.value == good
    excluded = telemetry.registry.get_sample_value(
        "infscale_adapter_invalid_pods_excluded_total", {"metric": metric, "reason": reason}
    )
    assert excluded == 1


async def test_a_group_of_only_invalid_pods_is_no_data_naming_why() -> None:
    reading = SourceReading((pv(-3, deployment="a"), pv(math.inf, deployment="a")), targets=2)
    with pytest.raises(NoData, match=r"2 with invalid values \(1 negative, 1 not finite\)"):
        await catalog_with(reading).read("default", "infscale_queue_size", EVERYTHING)


async def test_a_query_metric_is_checked_for_finite_values_only() -> None:
    settings = CatalogSettings.model_validate(
        {
            "prometheus": {"url": "http://prometheus:9090"},
            "metrics": [{"name": "q", "source": "prometheus", "query": "sum(x)"}],
        }
    )
    reading = SourceReading((pv(-3, deployment="a"), pv(math.nan, deployment="b")), targets=2)
    catalog = Catalog(settings, {SourceKind.PROMETHEUS: ScriptedSource(reading)}, Telemetry(), lambda: 200.0)
    got = await catalog.read("default", "q", EVERYTHING)
    assert [s.value for s in got] == [-3.0]  # a query may be negative on purpose; NaN is no value


async def test_the_answer_cache_keeps_the_most_recently_read_namespaces_only() -> None:
    source = ScriptedSource(SourceReading((pv(1),), targets=1), generation=1)
    settings = CatalogSettings.model_validate({**SCRAPE_OK, "answer_cache_size": 100})
    catalog = Catalog(settings, {SourceKind.SCRAPE: source}, Telemetry(), lambda: 100.0)
    for i in range(2_000):  # the attack: 20,660 namespaces once grew the cache by 10.6 MB for good
        await catalog.read(f"ns-{i}", "infscale_queue_size", EVERYTHING)
    assert len(catalog._answers) == 100
    calls = len(source.calls)
    await catalog.read("ns-1999", "infscale_queue_size", EVERYTHING)  # recent: from the cache
    assert len(source.calls) == calls
    await catalog.read("ns-0", "infscale_queue_size", EVERYTHING)  # forgotten: asked again
    assert len(source.calls) == calls + 1


@pytest.fixture
async def engines() -> AsyncIterator[list[str]]:
    """Two vLLM-like pods on loopback (real HTTP) plus one that always answers 500."""
    texts = [vllm_text(4, 2, 0.5, model="llama"), vllm_text(6, 3, 0.7, model="llama")]
    app = web.Application()

    async def metrics(request: web.Request) -> web.Response:
        index = int(request.match_info["i"])
        return web.Response(text=texts[index]) if index < len(texts) else web.Response(status=500)

    app.router.add_get("/{i}/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    try:
        yield [f"http://127.0.0.1:{port}/{i}/metrics" for i in range(3)]
    finally:
        await runner.cleanup()


async def first_answer(
    catalog: Catalog, metric: str, namespace: str = "default", telemetry: Telemetry | None = None
) -> Sequence[MetricSample]:
    """The first answer after a whole scrape round (pods' results land one by one within a round)."""
    for _ in range(500):  # hang guard: waits for the first scrape round, not for a duration
        if telemetry is None or telemetry.registry.get_sample_value(
            "infscale_adapter_scrape_round_duration_seconds_count"
        ):
            try:
                return await catalog.read(namespace, metric, EVERYTHING)
            except (NoData, SourceUnavailable):  # unavailable: the first round has not ended
                pass
        await asyncio.sleep(0.01)
    raise AssertionError(f"{metric} never answered")


async def test_quick_start_end_to_end_over_real_http(engines: list[str]) -> None:
    telemetry = Telemetry()
    async with build_catalog(CatalogSettings.quick_start(engines, "vllm"), telemetry) as catalog:
        assert catalog.metric_names() == [
            "infscale_queue_size",
            "infscale_batch_size",
            "infscale_inflight",
            "infscale_kv_cache_usage",
        ]
        got = {m: await first_answer(catalog, m, "any-namespace", telemetry) for m in catalog.metric_names()}
    summary = {m: [(dict(s.labels), s.value) for s in samples] for m, samples in got.items()}
    labels = {"namespace": "any-namespace", "model": "llama"}
    assert summary == {
        "infscale_queue_size": [(labels, 10.0)],
        "infscale_batch_size": [(labels, 5.0)],
        "infscale_inflight": [(labels, 15.0)],  # waiting + running
        "infscale_kv_cache_usage": [(labels, pytest.approx(0.6))],
    }
    assert telemetry.registry.get_sample_value(
        "infscale_adapter_scrape_errors_total", {"source": "scrape", "reason": "http_status"}
    )


async def test_build_catalog_stops_its_loops(engines: list[str]) -> None:
    before = {t for t in asyncio.all_tasks() if not t.done()}
    async with build_catalog(CatalogSettings.quick_start(engines), Telemetry()) as catalog:
        await first_answer(catalog, "infscale_queue_size")
        started = {t.get_name() for t in asyncio.all_tasks() - before}
        assert "infscale-scrape-loop" in started
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("infscale-") and not t.done()]


PREFILL = {"name": "infscale_prefill_time_bucket_rate", "signal": "prefill_time_bucket_rate"}


async def test_prefill_bucket_rates_are_one_item_per_bound_summed_over_pods_in_bound_order() -> None:
    """Two llama pods (rates 0.5 / 0.7 / 0.9 and 0.25 / 0.25 / 0.5 per bound) and one qwen pod;
    items per (deployment, bound), the bound as exposed, lowest first ("10.0" after "2.5")."""
    pods = {
        "llama-0": ("llama", (0.5, 0.7, 0.9)),
        "llama-1": ("llama", (0.25, 0.25, 0.5)),
        "qwen-0": ("qwen", (0, 0, 1)),
    }
    values = tuple(
        pv(rate, t=190, window=10, deployment=deployment, pod=pod, le=le)
        for pod, (deployment, rates) in pods.items()
        for le, rate in zip(("+Inf", "2.5", "10.0"), (rates[2], rates[0], rates[1]), strict=True)
    )
    catalog = catalog_with(SourceReading(values, targets=3), metrics=[PREFILL])
    got = await catalog.read(
        "default", "infscale_prefill_time_bucket_rate", parse_selector("deployment=llama")
    )
    assert [(s.labels, s.value, s.window_s) for s in got] == [
        ({"namespace": "default", "deployment": "llama", "le": "2.5"}, 0.75, 10),
        ({"namespace": "default", "deployment": "llama", "le": "10.0"}, 0.95, 10),
        ({"namespace": "default", "deployment": "llama", "le": "+Inf"}, 1.4, 10),
    ]


async def test_pods_a_source_refused_are_counted_and_named_when_nothing_else_is_left() -> None:
    telemetry = Telemetry(lambda: 200.0)
    reading = SourceReading((), targets=2, invalid={"not_cumulative": 1, "no_inf_bucket": 1})
    catalog = catalog_with(reading, telemetry, metrics=[PREFILL])
    with pytest.raises(NoData, match=r"2 with invalid values \(1 no inf bucket, 1 not cumulative\)"):
        await catalog.read("default", "infscale_prefill_time_bucket_rate", EVERYTHING)
    excluded = telemetry.registry.get_sample_value(
        "infscale_adapter_invalid_pods_excluded_total",
        {"metric": "infscale_prefill_time_bucket_rate", "reason": "not_cumulative"},
    )
    assert excluded == 1
