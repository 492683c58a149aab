"""The Prometheus source against a respx-mocked HTTP API: PromQL built from presets, results, errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
import respx
from conftest import vector

from adapter.catalogconfig import PrometheusSettings
from adapter.presets import Signal, get_preset
from adapter.sources import SourceError
from adapter.sources.prometheus import PrometheusSource, promql_for
from adapter.telemetry import Telemetry

URL = "http://prometheus.test:9090"
QUERY_URL = f"{URL}/api/v1/query"
BY = ["namespace", "pod", "deployment", "model_name"]


@pytest.mark.parametrize(
    ("engine", "signal", "expected"),
    [
        pytest.param(
            "vllm",
            Signal.QUEUE_SIZE,
            "sum by (namespace, pod, deployment, model_name) (vllm:num_requests_waiting)",
            id="gauge summed per pod",
        ),
        pytest.param(
            "vllm",
            Signal.KV_CACHE_USAGE,
            "(avg by (namespace, pod, deployment, model_name) (vllm:kv_cache_usage_perc))"
            " or (avg by (namespace, pod, deployment, model_name) (vllm:gpu_cache_usage_perc))",
            id="both vLLM generations, per-pod fallback with or",
        ),
        pytest.param(
            "tensorrt-llm",
            Signal.QUEUE_SIZE,
            "sum by (namespace, pod, deployment, model_name)"
            ' (nv_trt_llm_request_metrics{request_type="waiting"})',
            id="label matcher",
        ),
        pytest.param(
            "tgi",
            Signal.KV_CACHE_USAGE,
            "(sum by (namespace, pod, deployment, model_name) (tgi_batch_current_max_tokens))"
            " / ((sum by (namespace, pod, deployment, model_name) (tgi_batch_max_total_tokens)) > 0)",
            id="ratio drops zero capacity",
        ),
        pytest.param(
            "vllm",
            Signal.REQUEST_RATE,
            "sum by (namespace, pod, deployment, model_name) (rate(vllm:request_success_total[60s]))",
            id="rate over the window",
        ),
        pytest.param(
            "vllm",
            Signal.PREFILL_TIME_BUCKET_RATE,
            "sum by (namespace, pod, deployment, model_name, le)"
            " (rate(vllm:request_prefill_time_seconds_bucket[60s]))",
            id="bucket rates per pod and bound",
        ),
        pytest.param(
            "sglang",
            Signal.TTFT_BUCKET_RATE,
            "sum by (namespace, pod, deployment, model_name, le)"
            " (rate(sglang:time_to_first_token_seconds_bucket[60s]))",
            id="sglang's time to first token per pod and bound",
        ),
        pytest.param(
            "jetstream",
            Signal.QUEUE_SIZE,
            "((sum by (namespace, pod, deployment, model_name) (jetstream_prefill_backlog_size))"
            " + (sum by (namespace, pod, deployment, model_name) (jetstream_generate_backlog_size)))"
            " or (sum by (namespace, pod, deployment, model_name) (jetstream_prefill_backlog_size))"
            " or (sum by (namespace, pod, deployment, model_name) (jetstream_generate_backlog_size))",
            id="sum of terms, each alone where the other is missing",
        ),
    ],
)
def test_promql_for(engine: str, signal: Signal, expected: str) -> None:
    assert promql_for(get_preset(engine).rule(signal), BY, 60) == expected


@pytest.fixture
async def source() -> AsyncIterator[PrometheusSource]:
    settings = PrometheusSettings(url=URL, cache_ttl_s=5, deployment_label="app")
    async with httpx.AsyncClient() as client:
        yield PrometheusSource(get_preset("vllm"), settings, Telemetry(), client=client)


@respx.mock
async def test_results_become_pod_values_with_canonical_labels(source: PrometheusSource) -> None:
    route = respx.post(QUERY_URL).respond(
        json=vector(
            ({"namespace": "serving", "pod": "p1", "app": "llama", "model_name": "m"}, "4"),
            ({"namespace": "serving", "pod": "p2", "app": "llama", "model_name": "m"}, "6"),
            ({"namespace": "batch", "pod": "p3", "app": "llama", "model_name": "m"}, "9"),
        )
    )
    reading = await source.read(Signal.QUEUE_SIZE, None, "serving", 100.0, 30.0)
    assert [(dict(v.labels), v.value, v.timestamp) for v in reading.values] == [
        ({"namespace": "serving", "pod": "p1", "deployment": "llama", "model": "m"}, 4.0, 1700000000.5),
        ({"namespace": "serving", "pod": "p2", "deployment": "llama", "model": "m"}, 6.0, 1700000000.5),
    ]
    sent = parse_qs(route.calls.last.request.content.decode())
    assert sent == {"query": [source.query_for(Signal.QUEUE_SIZE)]}
    assert "by (namespace, pod, app, model_name)" in sent["query"][0]  # configured label names


@respx.mock
async def test_answers_are_cached_for_the_ttl(source: PrometheusSource) -> None:
    route = respx.post(QUERY_URL).respond(json=vector(({"namespace": "serving"}, "1")))
    for now in (100.0, 102.0, 105.0):
        await source.read(Signal.QUEUE_SIZE, None, "serving", now, 30.0)
    await source.read(Signal.QUEUE_SIZE, None, "other", 105.0, 30.0)  # one query serves all namespaces
    assert route.call_count == 1
    await source.read(Signal.QUEUE_SIZE, None, "serving", 105.1, 30.0)
    assert route.call_count == 2


@respx.mock
async def test_explicit_query_keeps_its_labels_and_nan_is_no_data(source: PrometheusSource) -> None:
    respx.post(QUERY_URL).respond(
        json=vector(
            ({"__name__": "x", "queue": "gold"}, "3"),
            ({"queue": "silver"}, "NaN"),
            ({"queue": "bronze"}, "+Inf"),
        )
    )
    reading = await source.read(None, "sum by (queue) (x)", "anywhere", 100.0, 30.0)
    assert [(dict(v.labels), v.value) for v in reading.values] == [({"queue": "gold"}, 3.0)]


@pytest.mark.parametrize(
    ("response", "message"),
    [
        pytest.param(
            httpx.Response(
                400,
                json={
                    "status": "error",
                    "errorType": "bad_data",
                    "error": "parse error at char 5: unexpected",
                },
            ),
            "rejected query 'sum by (queue) (x' (HTTP 400): bad_data: parse error at char 5",
            id="bad PromQL",
        ),
        pytest.param(
            httpx.Response(503, text="<html>unavailable</html>"),
            "answered HTTP 503 without a JSON body",
            id="proxy error page",
        ),
        pytest.param(
            httpx.Response(200, json={"status": "success", "data": {"resultType": "matrix", "result": []}}),
            "returned a 'matrix'; an instant vector is needed",
            id="range vector",
        ),
        pytest.param(
            httpx.Response(
                200, json={"status": "success", "data": {"resultType": "vector", "result": [{"x": 1}]}}
            ),
            "malformed result item",
            id="malformed item",
        ),
        pytest.param(httpx.ConnectError("refused"), f"Prometheus at {URL}: ConnectError: refused", id="down"),
        pytest.param(httpx.ReadTimeout("slow"), "did not answer in time", id="timeout"),
    ],
)
@respx.mock
async def test_errors_are_clear(
    source: PrometheusSource, response: httpx.Response | Exception, message: str
) -> None:
    route = respx.post(QUERY_URL)
    if isinstance(response, Exception):
        route.side_effect = response
    else:
        route.return_value = response
    with pytest.raises(SourceError) as info:
        await source.read(None, "sum by (queue) (x", "ns", 100.0, 30.0)
    assert message in str(info.value)


@respx.mock
async def test_errors_are_not_cached_and_are_counted() -> None:
    telemetry = Telemetry()
    async with PrometheusSource(get_preset("vllm"), PrometheusSettings(url=URL), telemetry) as source:
        route = respx.post(QUERY_URL)
        route.side_effect = httpx.ConnectError("refused")
        with pytest.raises(SourceError):
            await source.read(Signal.QUEUE_SIZE, None, "ns", 100.0, 30.0)
        route.side_effect = None
        route.return_value = httpx.Response(200, json=vector(({"namespace": "ns"}, "2")))
        reading = await source.read(Signal.QUEUE_SIZE, None, "ns", 100.5, 30.0)
    assert [v.value for v in reading.values] == [2.0]
    errors = telemetry.registry.get_sample_value(
        "infscale_adapter_scrape_errors_total", {"source": "prometheus", "reason": "connect"}
    )
    assert errors == 1


@respx.mock
async def test_bearer_token_file_is_sent(tmp_path: Any) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    route = respx.post(QUERY_URL).respond(json=vector())
    settings = PrometheusSettings(url=URL + "/", bearer_token_file=str(token))
    async with PrometheusSource(get_preset("vllm"), settings, Telemetry()) as source:
        reading = await source.read(Signal.QUEUE_SIZE, None, "ns", 100.0, 30.0)
    assert reading.values == ()
    assert route.calls.last.request.headers["Authorization"] == "Bearer s3cret"


@respx.mock
async def test_a_rotated_bearer_token_is_sent_and_an_unreadable_one_is_a_source_error(tmp_path: Any) -> None:
    """Projected service-account tokens rotate: the file is read for every query, not once."""
    token = tmp_path / "token"
    token.write_text("first\n")
    route = respx.post(QUERY_URL).respond(json=vector())
    settings = PrometheusSettings(url=URL, bearer_token_file=str(token), cache_ttl_s=0)
    async with PrometheusSource(get_preset("vllm"), settings, Telemetry()) as source:
        await source.read(Signal.QUEUE_SIZE, None, "ns", 100.0, 30.0)
        token.write_text("rotated\n")
        await source.read(Signal.QUEUE_SIZE, None, "ns", 101.0, 30.0)
        token.unlink()
        with pytest.raises(SourceError, match="cannot read Prometheus bearer token file"):
            await source.read(Signal.QUEUE_SIZE, None, "ns", 102.0, 30.0)
    assert [c.request.headers["Authorization"] for c in route.calls] == ["Bearer first", "Bearer rotated"]


def pod(name: str, le: str | None, namespace: str = "serving") -> dict[str, str]:
    labels = {"namespace": namespace, "pod": name, "app": "llama", "model_name": "m"}
    return labels if le is None else {**labels, "le": le}


@respx.mock
async def test_bucket_rates_are_checked_pod_by_pod_and_carry_the_window(source: PrometheusSource) -> None:
    """Each hostile pod is refused whole with its reason; the healthy one is served with its
    bounds as Prometheus holds them and the rate window; a pod in another namespace is not counted."""
    respx.post(QUERY_URL).respond(
        json=vector(
            (pod("ok", "0.3"), "0.5"),
            (pod("ok", "+Inf"), "0.75"),
            (pod("ok", "2.5"), "0.5"),
            (pod("decreasing", "0.3"), "2"),
            (pod("decreasing", "+Inf"), "1"),
            (pod("no-inf", "0.3"), "1"),
            (pod("word", "slow"), "1"),
            (pod("word", "+Inf"), "1"),
            (pod("no-le", None), "1"),
            (pod("nan", "0.3"), "NaN"),
            (pod("nan", "+Inf"), "1"),
            (pod("elsewhere", "0.3", namespace="batch"), "5"),
        )
    )
    reading = await source.read(Signal.PREFILL_TIME_BUCKET_RATE, None, "serving", 100.0, 30.0)
    assert sorted((v.labels["pod"], v.labels["le"], v.value, v.window_s) for v in reading.values) == [
        ("ok", "+Inf", 0.75, 60),
        ("ok", "0.3", 0.5, 60),
        ("ok", "2.5", 0.5, 60),
    ]
    assert reading.invalid == {
        "not_cumulative": 1,
        "no_inf_bucket": 1,
        "le_not_numeric": 1,
        "le_missing": 1,
        "not_finite": 1,
    }
    assert reading.targets == 6
