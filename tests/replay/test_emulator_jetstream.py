"""The emulator as JetStream over real HTTP on loopback: /v1/generate's stream, the FastAPI errors,
readiness, and /metrics against the families upstream defines.

The expected names, types, HELP strings, labels and bucket bounds are written out here from
AI-Hypercomputer/JetStream's jetstream/core/metrics/prometheus.py (and token_utils.py's
DEFAULT_PREFILL_BUCKETS), spelled as prometheus_client spells them; the expected values come from
the requests sent, not from the emulator's histograms.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import httpx
import pytest
from emulator_fixtures import TINY, assert_every_signal_read, emulator, serve, until
from prometheus_client.parser import text_string_to_metric_families

from adapter.exposition import parse_exposition
from adapter.presetread import gauge_value, wanted_names
from adapter.presets import Signal, get_preset
from common.clock import ManualClock
from replay.emulate.server import EMULATOR, EmulatorConfig, create_app

ENQUEUED = ["0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0"]
# (type, HELP, extra label, bucket bounds without +Inf), in upstream's order of definition
FAMILIES: dict[str, tuple[str, str, str | None, list[str] | None]] = {
    "jetstream_prefill_backlog_size": ("gauge", "Size of prefill queue", None, None),
    "jetstream_transfer_backlog_size": ("gauge", "Size of transfer queue", "idx", None),
    "jetstream_generate_backlog_size": ("gauge", "Size of generate queue", "idx", None),
    "jetstream_queue_duration": (
        "histogram", "The total time each request spends enqueued in seconds", None, ENQUEUED,
    ),
    "jetstream_slots_used_percentage": (
        "gauge", "The percentage of decode slots currently being used", "idx", None,
    ),
    "jetstream_request_input_length": (
        "histogram", "Number of input tokens per request", None,
        ["16.0", "32.0", "64.0", "128.0", "256.0", "512.0", "1024.0", "2048.0", "4096.0", "8192.0",
         "16384.0", "32768.0"],
    ),
    "jetstream_request_output_length": (
        "histogram", "Number of output tokens per request", None,
        ["1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "1000.0", "2000.0",
         "5000.0", "10000.0", "20000.0", "50000.0", "100000.0", "200000.0", "500000.0", "1e+06",
         "2e+06"],
    ),
    "jetstream_request_success_count": ("counter", "Number of requests successfully completed", None, None),
    "jetstream_time_to_first_token": (
        "histogram", "Time to first token per request in seconds", None,
        ["0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75", "1.0",
         "2.5", "5.0", "7.5", "10.0"],
    ),
    "jetstream_time_per_output_token": (
        "histogram", "Average time per output token per request in seconds", None,
        ["0.01", "0.025", "0.05", "0.075", "0.1", "0.15", "0.2", "0.3", "0.4", "0.5", "0.75", "1.0", "2.5"],
    ),
    "jetstream_time_per_prefill_token": (
        "histogram", "Prefill time per token per request in seconds", None,
        ["1e-05", "2e-05", "5e-05", "0.0001", "0.0002", "0.0005", "0.001", "0.002", "0.005", "0.01",
         "0.02", "0.05", "0.1"],
    ),
    "jetstream_time_per_request": (
        "histogram", "End to end request latency in seconds", None,
        ["1.0", "2.5", "5.0", "10.0", "15.0", "20.0", "30.0", "40.0", "50.0", "60.0"],
    ),
    "jetstream_wait_time_per_request": (
        "histogram", "Time each request is not being prefilled or decoded", None, ENQUEUED,
    ),
    "num_requests_waiting": ("gauge", "Requests count waiting to be processed for inference.", None, None),
    "kv_cache_utilization_perc": (
        "gauge", "kv-cache utilization by the requests under processing.", None, None,
    ),
}  # fmt: skip
MODEL_NAME = "emulated_model"  # the model's "-" as "_", as prometheus.py labels it


def decoded(text: str) -> list[Any]:
    """The JSON objects of a /v1/generate stream, written back to back."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while i < len(text):
        obj, i = decoder.raw_decode(text, i)
        out.append(obj)
    return out


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, its labels but `id`) -> value."""
    return {
        (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "id"))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_metrics_are_upstreams_families_with_their_labels_and_buckets() -> None:
    async with emulator("jetstream") as (url, _), httpx.AsyncClient(base_url=url) as client:
        text = (await client.get("/metrics")).text
    families = list(text_string_to_metric_families(text))
    assert [f.name for f in families] == list(FAMILIES)
    ids = {s.labels["id"] for f in families for s in f.samples}
    assert len(ids) == 1 and ids != {""}  # the host's name, one per process
    for family in families:
        kind, doc, extra, bounds = FAMILIES[family.name]
        assert (family.type, family.documentation) == (kind, doc), family.name
        for sample in family.samples:
            names = {"id", "model_name"} | ({extra} if extra else set())
            names |= {"le"} if sample.name.endswith("_bucket") else set()
            assert set(sample.labels) == names, sample
            assert sample.labels["model_name"] == MODEL_NAME
        if bounds is not None:
            les = [s.labels["le"] for s in family.samples if s.name.endswith("_bucket")]
            assert les == [*bounds, "+Inf"], family.name
    assert f'jetstream_request_success_count_total{{id="{ids.pop()}",model_name="{MODEL_NAME}"}} 0.0' in text


@pytest.mark.parametrize(
    ("model", "label"),
    [
        pytest.param("llama-3-8b", "llama_3_8b", id="dashes become underscores"),
        pytest.param("meta/llama", None, id="no valid label value: left out"),
    ],
)
async def test_the_model_name_label_follows_upstreams_sanitizing(model: str, label: str | None) -> None:
    async with emulator("jetstream", model=model) as (url, _), httpx.AsyncClient(base_url=url) as client:
        text = (await client.get("/metrics")).text
    labels = next(iter(text_string_to_metric_families(text))).samples[0].labels
    assert labels.get("model_name") == label


REQUESTS = [(3, 5), (20, 1), (40, 12)]  # (prompt words, max_tokens)


async def test_generate_streams_one_chunk_per_token_and_the_counters_count_what_was_sent() -> None:
    async with emulator("jetstream") as (url, _), httpx.AsyncClient(base_url=url) as client:
        streams = []
        for words, max_tokens in REQUESTS:
            body = {"max_tokens": max_tokens, "text_content": {"text": " ".join(["w"] * words)}}
            r = await client.post("/v1/generate", json=body)
            assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream; charset=utf-8"
            streams.append(decoded(r.text))
        ids = await client.post(
            "/v1/generate", json={"max_tokens": 2, "token_content": {"token_ids": [7, 8]}}
        )
        text = (await client.get("/metrics")).text
    assert [len(s) for s in streams] == [5, 1, 12]
    sample = {"streamContent": {"samples": [{"text": " tok", "tokenIds": [4]}]}}
    assert all(chunk == sample for s in streams for chunk in s)
    # asked with token ids (client-side tokenization): answered with token ids only
    assert decoded(ids.text) == [{"streamContent": {"samples": [{"tokenIds": [4]}]}}] * 2
    got = samples(text)
    base = (("model_name", MODEL_NAME),)
    sent = [*REQUESTS, (2, 2)]
    assert got[("jetstream_request_success_count_total", base)] == 4
    assert got[("jetstream_request_input_length_sum", base)] == 3 + 20 + 40 + 2
    assert got[("jetstream_request_output_length_sum", base)] == 5 + 1 + 12 + 2
    for le in ("1.0", "2.0", "5.0", "10.0", "20.0", "+Inf"):
        below = sum(1 for _, out in sent if le == "+Inf" or out <= float(le))
        assert got[("jetstream_request_output_length_bucket", (("le", le), *base))] == below, le
    for le, below in (("16.0", 2), ("32.0", 3), ("64.0", 4)):  # prompts of 2, 3, 20 and 40 tokens
        assert got[("jetstream_request_input_length_bucket", (("le", le), *base))] == below
    for family in ("queue_duration", "time_to_first_token", "time_per_output_token", "time_per_prefill_token",
                   "time_per_request", "wait_time_per_request"):  # fmt: skip
        assert got[(f"jetstream_{family}_count", base)] == 4, family
    idle = (("idx", "0"), *base)
    assert got[("jetstream_slots_used_percentage", idle)] == got[("kv_cache_utilization_perc", base)] == 0


async def test_backlog_and_slots_while_requests_wait_and_run() -> None:
    """One request on two slots, then five: the prefill backlog holds what the slots cannot, and the
    adapter's preset reads it and the slots' share; every JetStream signal it knows is there."""
    slow = replace(TINY, max_num_seqs=2, step_base_s=0.05, decode_request_s=0.0)
    body = {"max_tokens": 200, "text_content": {"text": "a b c d"}}
    async with (
        emulator("jetstream", profile=slow) as (url, app),
        httpx.AsyncClient(base_url=url, timeout=30) as client,
    ):
        core = app[EMULATOR].engine.core

        async def scrape_when(running: int, waiting: int) -> str:
            await until(lambda: (core.gauges().running, core.gauges().waiting) == (running, waiting))
            return (await client.get("/metrics")).text

        streams = [asyncio.create_task(client.post("/v1/generate", json=body))]
        one = await scrape_when(1, 0)
        streams += [asyncio.create_task(client.post("/v1/generate", json=body)) for _ in range(4)]
        five = await scrape_when(2, 3)
        for task in streams:
            task.cancel()
        await asyncio.gather(*streams, return_exceptions=True)
    base = (("model_name", MODEL_NAME),)
    engine = (("idx", "0"), *base)
    for text, waiting, used in ((one, 0, 0.5), (five, 3, 1.0)):
        got = samples(text)
        assert got[("jetstream_prefill_backlog_size", base)] == got[("num_requests_waiting", base)] == waiting
        assert got[("jetstream_generate_backlog_size", engine)] == 0  # upstream's is fixed at 0
        assert got[("jetstream_slots_used_percentage", engine)] == used
        assert got[("kv_cache_utilization_perc", base)] == used * 100  # a percentage of the slots
    preset = get_preset("jetstream")
    parsed = parse_exposition(five, wanted_names(preset))
    assert gauge_value(preset.rule(Signal.QUEUE_SIZE), parsed) == 3
    assert gauge_value(preset.rule(Signal.SLOT_USAGE), parsed) == 1.0
    assert_every_signal_read(preset, five)


TEXT = {"text_content": {"text": "a b"}}


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "answer"),
    [
        pytest.param("GET", "/", None, 200, {"message": "JetStream HTTP Server"}, id="root"),
        pytest.param("GET", "/v1/health", None, 200, {"is_live": "True"}, id="health"),
        pytest.param(
            "POST", "/v1/generate", TEXT, 422,
            {"detail": [{"type": "missing", "loc": ["body", "max_tokens"], "msg": "Field required",
                         "input": TEXT}]},
            id="no max_tokens",
        ),
        pytest.param(
            "POST", "/v1/generate", {**TEXT, "max_tokens": "ten", "stream": True}, 422,
            {"detail": [
                {"type": "int_parsing", "loc": ["body", "max_tokens"], "input": "ten",
                 "msg": "Input should be a valid integer, unable to parse string as an integer"},
                {"type": "extra_forbidden", "loc": ["body", "stream"], "input": True,
                 "msg": "Extra inputs are not permitted"},
            ]},
            id="max_tokens not an integer, unknown field",
        ),
        pytest.param(
            "POST", "/v1/generate", b"{max_tokens: 3}", 422,
            {"detail": [{"type": "json_invalid", "loc": ["body", 1], "msg": "JSON decode error", "input": {},
                         "ctx": {"error": "Expecting property name enclosed in double quotes"}}]},
            id="not JSON",
        ),
        pytest.param(
            "POST", "/v1/generate", b"", 422,
            {"detail": [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]},
            id="no body",
        ),
        pytest.param(
            "POST", "/v1/generate", {**TEXT, "max_tokens": 2, "token_content": {"token_ids": [1]}}, 500,
            "Internal Server Error", id="both contents: protobuf refuses the oneof",
        ),
        pytest.param(
            "POST", "/v1/generate", {"max_tokens": 2}, 500, "Internal Server Error", id="no content",
        ),
        pytest.param(
            "POST", "/v1/generate", {**TEXT, "max_tokens": 4_095}, 400,
            {"detail": "the emulated engine holds 4096 tokens; the request needs 4097 (2 in the prompt, "
                       "4095 to generate)"},
            id="over the emulated context",
        ),
        pytest.param(
            "POST", "/v1/completions", {"prompt": "a"}, 404, {"detail": "Not Found"}, id="no OpenAI API",
        ),
        pytest.param("GET", "/health", None, 404, {"detail": "Not Found"}, id="not vLLM's health path"),
        pytest.param("GET", "/v1/generate", None, 405, {"detail": "Method Not Allowed"}, id="wrong method"),
    ],
)  # fmt: skip
async def test_paths_and_errors_answer_as_jetstreams_fastapi_server(
    method: str, path: str, body: Any, status: int, answer: Any
) -> None:
    raw = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if raw is not None else {}
    async with emulator("jetstream") as (url, app), httpx.AsyncClient(base_url=url) as client:
        r = await client.request(method, path, content=raw, headers=headers)
    assert r.status_code == status
    if isinstance(answer, str):
        assert r.headers["content-type"].startswith("text/plain") and r.text == answer
    else:
        assert r.headers["content-type"] == "application/json" and r.json() == answer
    if status == 405:
        assert r.headers["allow"] == "POST"
    assert app[EMULATOR].engine.core.idle  # nothing refused reached the engine


async def test_ready_only_after_the_startup_delay() -> None:
    """JetStream listens only once loaded; the emulator's 503 stands for the refused connection."""
    clock = ManualClock(t=100.0)
    app = create_app(EmulatorConfig(engine="jetstream", profile=TINY, startup_s=30.0), clock=clock)
    generate = {"max_tokens": 1, "text_content": {"text": "a"}}
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        health = await client.get("/v1/health")
        refused = await client.post("/v1/generate", json=generate)
        metrics = await client.get("/metrics")
        await clock.advance_to(130.0)
        after = await client.get("/v1/health")
    assert (health.status_code, refused.status_code) == (503, 503)
    assert health.json() == refused.json() == {"detail": "the model is still loading"}
    assert metrics.status_code == 200 and "jetstream_prefill_backlog_size" in metrics.text
    assert (after.status_code, after.json()) == (200, {"is_live": "True"})


async def test_a_client_that_goes_away_frees_its_slot() -> None:
    async with emulator("jetstream") as (url, app), httpx.AsyncClient(base_url=url) as client:
        body = {"max_tokens": 3_000, "text_content": {"text": "a"}}
        async with client.stream("POST", "/v1/generate", json=body) as r:
            async for _ in r.aiter_bytes():
                break  # one chunk, then hang up
        core = app[EMULATOR].engine.core
        await until(lambda: core.idle)
        text = (await client.get("/metrics")).text
    assert core.idle and app[EMULATOR].stats.requests_aborted == 1
    assert samples(text)[("jetstream_request_success_count_total", (("model_name", MODEL_NAME),))] == 0
