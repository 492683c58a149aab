"""output_length_bucket_rate: the engines' per-request output-length histograms as one rate per
`le` bound, through the presets, the scrape source and catalog (real HTTP, a manual clock) and the
Prometheus source (its HTTP API mocked); malformed histograms refused whole, by reason."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Mapping

import httpx
import pytest
import respx
from aiohttp import web
from conftest import serve, vector
from engine_fixtures import TGI, VLLM

from adapter.backend import NoData
from adapter.buckets import Buckets
from adapter.catalog import Catalog
from adapter.catalogconfig import CatalogSettings, PrometheusSettings, SourceKind
from adapter.exposition import parse_exposition
from adapter.presetread import bucket_counts
from adapter.presets import PRESETS, Kind, Signal, get_preset, square_rate
from adapter.sources.prometheus import PrometheusSource, promql_for
from adapter.sources.scrape import ScrapeSource, StaticTargets
from adapter.telemetry import Telemetry
from common.clock import ManualClock
from common.selector import EVERYTHING

SIGNAL = Signal.OUTPUT_LENGTH_BUCKET_RATE
METRIC = "infscale_output_length_bucket_rate"
HISTOGRAMS = {  # engine -> its per-request generated-token histogram (../shared/engine_metrics.md)
    "vllm": "vllm:request_generation_tokens",
    "tgi": "tgi_request_generated_tokens",
    "jetstream": "jetstream_request_output_length",
}


def histogram(of: str, counts: Mapping[str, float], typed: bool = True, **labels: str) -> str:
    """One series of engine `of`'s output-length histogram: its cumulative count per bound (a
    family's second series `typed=False`: one TYPE line a family)."""
    name = HISTOGRAMS[of]
    lines = []
    for le, c in counts.items():
        pairs = ",".join(f'{k}="{v}"' for k, v in {**labels, "le": le}.items())
        lines.append(f"{name}_bucket{{{pairs}}} {c}")
    return "\n".join([f"# TYPE {name} histogram"] * typed + [*lines, ""])


# --- the presets --------------------------------------------------------------------------------


def test_the_engines_with_a_per_request_output_length_histogram_have_the_signal() -> None:
    """SGLang, Triton, TensorRT-LLM and llama.cpp expose none (../shared/engine_metrics.md)."""
    have = {name: p.rules[SIGNAL] for name, p in PRESETS.items() if SIGNAL in p.rules}
    assert sorted(have) == sorted(HISTOGRAMS)
    for engine, rule in have.items():
        assert rule.kind is Kind.BUCKET_RATE
        assert [a.name for t in rule.terms for a in t.alternatives] == [f"{HISTOGRAMS[engine]}_bucket"]


def test_the_output_square_rate_still_reads_the_same_histogram_as_before() -> None:
    assert get_preset("vllm").rule(Signal.OUTPUT_TOKEN_SQUARE_RATE) == square_rate(
        "vllm:request_generation_tokens"
    )


def test_the_rules_read_each_engines_exposition() -> None:
    """TGI's fixture (engine_fixtures.TGI): 41 requests, none of one token; vLLM's data-parallel
    engines add up per bound, bounds as prometheus_client spells them."""
    assert bucket_counts(get_preset("tgi").rule(SIGNAL), parse_exposition(TGI)) == Buckets(
        ("1", "+Inf"), (0.0, 41.0)
    )
    vllm = (
        VLLM
        + histogram("vllm", {"1.0": 2.0, "10.0": 5.0, "+Inf": 6.0}, engine="0", model_name="m")
        + histogram("vllm", {"1.0": 0.0, "10.0": 1.0, "+Inf": 3.0}, False, engine="1", model_name="m")
    )
    assert bucket_counts(get_preset("vllm").rule(SIGNAL), parse_exposition(vllm)) == Buckets(
        ("1.0", "10.0", "+Inf"), (2.0, 6.0, 9.0)
    )
    jetstream = histogram("jetstream", {"+Inf": 4.0, "100.0": 3.0}, id="host-0")  # out of order
    assert bucket_counts(get_preset("jetstream").rule(SIGNAL), parse_exposition(jetstream)) == Buckets(
        ("100.0", "+Inf"), (3.0, 4.0)
    )
    assert bucket_counts(get_preset("vllm").rule(SIGNAL), parse_exposition(VLLM)) is None  # no data, not 0


# --- the scrape source and the catalog ------------------------------------------------------------


@pytest.fixture
async def pods() -> AsyncIterator[tuple[dict[str, str], str]]:
    """Engine pods on one loopback server: `/{pod}/metrics` answers texts[pod]."""
    texts: dict[str, str] = {}

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=texts[request.match_info["pod"]])

    app = web.Application()
    app.router.add_get("/{pod}/metrics", metrics)
    async with serve(app) as base:
        yield texts, base


async def scraping(
    engine: str, base: str, names: list[str], clock: ManualClock
) -> tuple[Catalog, ScrapeSource, Telemetry]:
    """A catalog over the scrape source of `names` (pod `<deployment>-<n>`), and its telemetry."""
    settings = CatalogSettings.model_validate(
        {
            "engine": engine,
            "endpoints": [
                {"url": f"{base}/{n}/metrics", "namespace": "serving", "deployment": n.split("-")[0]}
                for n in names
            ],
            "metrics": [
                {"name": METRIC, "signal": SIGNAL.value},
                {"name": "infscale_queue_size", "signal": "queue_size"},
            ],
        }
    )
    telemetry = Telemetry(clock)
    source = ScrapeSource(
        get_preset(engine), [StaticTargets(settings.endpoints)], settings.scrape, telemetry, clock
    )
    return Catalog(settings, {SourceKind.SCRAPE: source}, telemetry, clock), source, telemetry


# TGI's bounds for max_total_tokens 4096 (4096 / 100 x 1, 2, 100), as its Rust exporter prints them
TGI_LE = ("40.96", "81.92", "4096", "+Inf")


async def test_tgi_rates_per_bound_from_two_scrapes_and_a_restart(
    pods: tuple[dict[str, str], str],
) -> None:
    """Over 10 s: 4 requests of at most 40.96 tokens, 1 more within 81.92, 2 past 4096: per bound
    0.4, 0.5, 0.5, 0.7 a second, in bound order ("4096" after "81.92"), labelled as TGI spells them."""
    texts, base = pods
    clock = ManualClock(1_000.0)
    texts["tgi-0"] = "tgi_queue_size 3\n" + histogram("tgi", dict(zip(TGI_LE, (10, 12, 20, 20), strict=True)))
    catalog, source, _ = await scraping("tgi", base, ["tgi-0"], clock)
    async with source:
        await source.scrape_round()
        clock.set(1_010.0)
        texts["tgi-0"] = "tgi_queue_size 3\n" + histogram(
            "tgi", dict(zip(TGI_LE, (14, 17, 25, 27), strict=True))
        )
        await source.scrape_round()
        got = await catalog.read("serving", METRIC, EVERYTHING)
        assert [(s.labels, s.value, s.window_s) for s in got] == [
            ({"namespace": "serving", "deployment": "tgi", "le": le}, rate, 10)
            for le, rate in zip(TGI_LE, (0.4, 0.5, 0.5, 0.7), strict=True)
        ]
        clock.set(1_015.0)  # restarted: 1 request within 40.96, 2 past 4096; every count all increase
        texts["tgi-0"] = "tgi_queue_size 3\n" + histogram("tgi", dict(zip(TGI_LE, (1, 1, 1, 3), strict=True)))
        await source.scrape_round()
        got = await catalog.read("serving", METRIC, EVERYTHING)
        assert [s.value for s in got] == [0.2, 0.2, 0.2, 0.6]


def _le(*counts: tuple[str, float]) -> dict[str, float]:
    return dict(counts)


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        pytest.param(histogram("tgi", _le(("40.96", 5), ("+Inf", 3))), "not_cumulative", id="not cumulative"),
        pytest.param(histogram("tgi", _le(("40.96", 1), ("4096", 3))), "no_inf_bucket", id="no +Inf bucket"),
        pytest.param(histogram("tgi", _le(("long", 1), ("+Inf", 3))), "le_not_numeric", id="le not a number"),
        pytest.param(
            histogram("tgi", _le(("4096", 1), ("4096.0", 2), ("+Inf", 3))),
            "duplicate_le",
            id="one bound twice",
        ),
        pytest.param(histogram("tgi", _le(("40.96", -1), ("+Inf", 3))), "negative", id="negative count"),
        pytest.param(histogram("tgi", _le(("40.96", math.nan), ("+Inf", 3))), "not_finite", id="NaN count"),
        pytest.param("tgi_request_generated_tokens_bucket 3\n", "le_missing", id="no le label"),
        pytest.param(
            histogram("tgi", _le(("40.96", 1), ("+Inf", 3)), shard="0")
            + histogram("tgi", _le(("81.92", 1), ("+Inf", 3)), False, shard="1"),
            "bucket_layouts_differ",
            id="series bucketed apart",
        ),
    ],
)
async def test_a_malformed_output_histogram_leaves_its_pod_out_counted_by_reason(
    pods: tuple[dict[str, str], str], bad: str, reason: str
) -> None:
    texts, base = pods
    clock = ManualClock(1_000.0)
    texts["good-0"] = "tgi_queue_size 1\n" + histogram("tgi", _le(("40.96", 1), ("+Inf", 1)))
    texts["bad-0"] = "tgi_queue_size 2\n" + bad
    catalog, source, telemetry = await scraping("tgi", base, ["good-0", "bad-0"], clock)
    async with source:
        await source.scrape_round()
        clock.set(1_005.0)
        texts["good-0"] = "tgi_queue_size 1\n" + histogram("tgi", _le(("40.96", 6), ("+Inf", 11)))
        await source.scrape_round()
        got = await catalog.read("serving", METRIC, EVERYTHING)
        assert [(s.labels["deployment"], s.labels["le"], s.value) for s in got] == [
            ("good", "40.96", 1.0),
            ("good", "+Inf", 2.0),
        ]
        excluded = telemetry.registry.get_sample_value(
            "infscale_adapter_invalid_pods_excluded_total", {"metric": METRIC, "reason": reason}
        )
        assert excluded == 1
        # the pod's other signals are still read
        queues = await catalog.read("serving", "infscale_queue_size", EVERYTHING)
        assert {s.labels["deployment"]: s.value for s in queues} == {"good": 1.0, "bad": 2.0}
        # alone, the pod is no data, and the error names why
        texts["good-0"] = "tgi_queue_size 1\n"
        clock.set(1_010.0)
        await source.scrape_round()
        with pytest.raises(NoData, match="invalid values"):
            await catalog.read("serving", METRIC, EVERYTHING)


# --- the Prometheus source ------------------------------------------------------------------------

BY = ["namespace", "pod", "deployment", "model_name"]
URL = "http://prometheus.test:9090"


@pytest.mark.parametrize("engine", sorted(HISTOGRAMS))
def test_promql_sums_each_pods_bucket_rates_per_bound(engine: str) -> None:
    assert promql_for(get_preset(engine).rule(SIGNAL), BY, 60) == (
        f"sum by (namespace, pod, deployment, model_name, le) (rate({HISTOGRAMS[engine]}_bucket[60s]))"
    )


@respx.mock
async def test_prometheus_rates_are_checked_pod_by_pod() -> None:
    def pod(name: str, le: str) -> dict[str, str]:
        return {"namespace": "serving", "pod": name, "deployment": "tgi", "le": le}

    rows = [
        (pod("ok", "4096"), "0.5"),
        (pod("ok", "40.96"), "0.25"),
        (pod("ok", "+Inf"), "0.75"),
        (pod("decreasing", "40.96"), "2"),
        (pod("decreasing", "+Inf"), "1"),
        (pod("twice", "4096"), "1"),
        (pod("twice", "4096.0"), "1"),
        (pod("twice", "+Inf"), "1"),
    ]
    respx.post(f"{URL}/api/v1/query").respond(json=vector(*rows, t=1.7e9))
    settings = PrometheusSettings(url=URL, cache_ttl_s=0, rate_window_s=30)
    async with httpx.AsyncClient() as client:
        source = PrometheusSource(get_preset("tgi"), settings, Telemetry(), client=client)
        reading = await source.read(SIGNAL, None, "serving", 100.0, 30.0)
    assert sorted((v.labels["pod"], v.labels["le"], v.value, v.window_s) for v in reading.values) == [
        ("ok", "+Inf", 0.75, 30),
        ("ok", "40.96", 0.25, 30),
        ("ok", "4096", 0.5, 30),
    ]
    assert reading.invalid == {"not_cumulative": 1, "duplicate_le": 1}
    assert reading.targets == 3
