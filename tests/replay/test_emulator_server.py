"""The emulator over real HTTP on loopback: the OpenAI-compatible API, streaming, error formats of
each engine, readiness after the startup delay, and /metrics read by the adapter's presets."""

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
from replay.emulate.requests import parse_generation
from replay.emulate.server import EMULATOR, EmulatorConfig, create_app


def sse_data(text: str) -> list[Any]:
    out: list[Any] = []
    for block in text.split("\n\n"):
        if block.startswith("data: "):
            data = block[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


@pytest.mark.parametrize("engine", ["vllm", "tgi", "sglang"])
async def test_streamed_completion_sends_one_chunk_per_token_then_usage(engine: str) -> None:
    async with emulator(engine) as (url, _), httpx.AsyncClient(base_url=url) as client:
        r = await client.post(
            "/v1/completions",
            json={
                "prompt": "one two three",
                "max_tokens": 5,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        )
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = sse_data(r.text)
    assert events[-1] == "[DONE]"
    *tokens, usage, _ = events
    assert [c["choices"][0]["text"] for c in tokens] == [" tok"] * 5
    assert [c["choices"][0]["finish_reason"] for c in tokens] == [None] * 4 + ["length"]
    assert usage["choices"] == [] and usage["usage"] == {
        "prompt_tokens": 3,
        "total_tokens": 8,
        "completion_tokens": 5,
    }
    assert {c["id"] for c in events[:-1]} == {tokens[0]["id"]}


async def test_streamed_chat_opens_with_the_assistant_role() -> None:
    async with emulator() as (url, _), httpx.AsyncClient(base_url=url) as client:
        r = await client.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 3, "stream": True},
        )
    events = sse_data(r.text)
    assert events[0]["object"] == "chat.completion.chunk"
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [e["choices"][0]["delta"].get("content") for e in events[1:-1]] == [" tok"] * 3
    assert events[-2]["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize(
    ("path", "body", "text_of"),
    [
        pytest.param(
            "/v1/completions",
            {"prompt": [1, 2, 3, 4], "max_tokens": 4},
            lambda c: c["text"],
            id="completions, token ids",
        ),
        pytest.param(
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": [{"type": "text", "text": "a b c d"}]}],
                "max_tokens": 4,
            },
            lambda c: c["message"]["content"],
            id="chat, content parts",
        ),
    ],
)
async def test_whole_responses_carry_text_and_usage(path: str, body: dict[str, Any], text_of: Any) -> None:
    async with emulator() as (url, _), httpx.AsyncClient(base_url=url) as client:
        r = await client.post(path, json=body)
    doc = r.json()
    assert r.status_code == 200
    assert text_of(doc["choices"][0]) == " tok" * 4
    assert doc["usage"] == {"prompt_tokens": 4, "total_tokens": 8, "completion_tokens": 4}
    assert doc["model"] == "emulated-model"


LONG = {"prompt": "x " * 4_000, "max_tokens": 200}
CONTEXT = "maximum context length is 4096 tokens. However, you requested 4200 tokens"


@pytest.mark.parametrize(
    ("engine", "body", "status", "shape"),
    [
        pytest.param(
            "vllm",
            LONG,
            400,
            {"error": {"type": "BadRequestError", "param": "max_tokens", "code": 400}},
            id="vllm: context length, nested error",
        ),
        pytest.param(
            "sglang",
            LONG,
            400,
            {"object": "error", "type": "BadRequestError", "param": "max_tokens", "code": 400},
            id="sglang: context length, flat error",
        ),
        pytest.param(
            "tgi", LONG, 422, {"error_type": "validation"}, id="tgi: context length, 422 validation"
        ),
        pytest.param(
            "vllm",
            {"prompt": "a", "model": "gpt-5"},
            404,
            {"error": {"type": "NotFoundError", "message": "The model `gpt-5` does not exist.", "code": 404}},
            id="vllm: unknown model",
        ),
        pytest.param(
            "vllm",
            {"prompt": "a", "max_tokens": "ten"},
            400,
            {"error": {"message": "max_tokens must be an integer, got 'ten'", "param": "max_tokens"}},
            id="vllm: max_tokens not an integer",
        ),
        pytest.param(
            "vllm",
            {"prompt": "a", "n": 2},
            400,
            {"error": {"param": "n"}},
            id="vllm: n > 1",
        ),
        pytest.param(
            "sglang",
            {"max_tokens": 3},
            400,
            {"message": "prompt is required", "param": "prompt"},
            id="sglang: no prompt",
        ),
        pytest.param(
            "vllm",
            {"prompt": "a", "stream_options": {"include_usage": True}},
            400,
            {"error": {"param": "stream_options"}},
            id="vllm: stream options without streaming",
        ),
    ],
)
async def test_bad_requests_get_the_engines_error_format(
    engine: str, body: dict[str, Any], status: int, shape: dict[str, Any]
) -> None:
    async with emulator(engine) as (url, app), httpx.AsyncClient(base_url=url) as client:
        r = await client.post("/v1/completions", json=body)
        metrics = (await client.get("/metrics")).text
    assert r.status_code == status
    assert_contains(r.json(), shape)
    if body is LONG:
        message = (
            r.json()["error"] if engine == "tgi" else r.json().get("message") or r.json()["error"]["message"]
        )
        assert CONTEXT in message
    assert app[EMULATOR].stats.requests_rejected == 1
    if engine == "tgi":
        assert 'tgi_request_failure{err="validation"} 1' in metrics


def assert_contains(doc: Any, shape: Any) -> None:
    """Every key of `shape` is in `doc` with that value (recursively)."""
    if isinstance(shape, dict):
        assert isinstance(doc, dict), doc
        for k, v in shape.items():
            assert k in doc, (k, doc)
            assert_contains(doc[k], v)
    else:
        assert doc == shape


async def test_invalid_json_is_a_400() -> None:
    async with emulator() as (url, _), httpx.AsyncClient(base_url=url) as client:
        r = await client.post("/v1/completions", content=b"{not json")
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    ("engine", "paths"),
    [
        pytest.param("vllm", ["/health", "/ping"], id="vllm"),
        pytest.param("tgi", ["/health"], id="tgi"),
        pytest.param("sglang", ["/health", "/health_generate"], id="sglang"),
    ],
)
async def test_ready_only_after_the_startup_delay(engine: str, paths: list[str]) -> None:
    clock = ManualClock(t=100.0)
    app = create_app(EmulatorConfig(engine=engine, profile=TINY, startup_s=30.0), clock=clock)
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        before = [(await client.get(p)).status_code for p in paths]
        refused = await client.post("/v1/completions", json={"prompt": "a", "max_tokens": 1})
        metrics_early = await client.get("/metrics")
        await clock.advance_to(129.9)
        still = [(await client.get(p)).status_code for p in paths]
        await clock.advance_to(130.0)
        after = [(await client.get(p)).status_code for p in paths]
    assert before == still == [503] * len(paths)
    assert refused.status_code == 503
    assert metrics_early.status_code == 200  # scrapeable while loading, gauges at 0
    assert after == [200] * len(paths)


@pytest.mark.parametrize(
    ("engine", "path", "key"),
    [
        pytest.param("vllm", "/version", "version", id="vllm version"),
        pytest.param("tgi", "/info", "max_total_tokens", id="tgi info"),
        pytest.param("sglang", "/get_model_info", "model_path", id="sglang model info"),
    ],
)
async def test_engine_information_paths(engine: str, path: str, key: str) -> None:
    async with emulator(engine) as (url, _), httpx.AsyncClient(base_url=url) as client:
        r = await client.get(path)
        models = (await client.get("/v1/models")).json()
    assert r.status_code == 200 and key in r.json()
    assert [m["id"] for m in models["data"]] == ["emulated-model"]


@pytest.mark.parametrize(
    ("engine", "ttft_family"),
    [
        pytest.param("vllm", "vllm:time_to_first_token_seconds", id="vllm"),
        pytest.param("sglang", "sglang:time_to_first_token_seconds", id="sglang"),
        pytest.param("tgi", "tgi_request_queue_duration", id="tgi (no TTFT histogram: queue time)"),
    ],
)
async def test_metrics_parse_and_satisfy_the_adapter_presets(engine: str, ttft_family: str) -> None:
    """While requests wait and run, the adapter's preset reads the emulator's own gauges."""
    slow = replace(TINY, max_num_seqs=2, step_base_s=0.05, prefill_token_s=1e-6, decode_request_s=0.0)
    async with (
        emulator(engine, profile=slow) as (url, app),
        httpx.AsyncClient(base_url=url, timeout=30) as client,
    ):
        body = {"prompt": "a b c d", "max_tokens": 200, "stream": True}
        streams = [asyncio.create_task(client.post("/v1/completions", json=body)) for _ in range(5)]
        core = app[EMULATOR].engine.core
        await until(lambda: core.gauges().running == 2 and core.gauges().waiting == 3)
        text = (await client.get("/metrics")).text
        gauges = core.gauges()
        for task in streams:
            task.cancel()
        await asyncio.gather(*streams, return_exceptions=True)
    preset = get_preset(engine)
    samples = parse_exposition(text, wanted_names(preset))
    assert gauge_value(preset.rule(Signal.QUEUE_SIZE), samples) == gauges.waiting == 3
    assert gauge_value(preset.rule(Signal.BATCH_SIZE), samples) == gauges.running == 2
    assert gauge_value(preset.rule(Signal.KV_CACHE_USAGE), samples) == pytest.approx(
        gauges.kv_used_tokens / gauges.kv_budget_tokens
    )
    assert_every_signal_read(preset, text)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    hist = families[ttft_family]
    assert hist.type == "histogram"
    buckets = [s for s in hist.samples if s.name.endswith("_bucket")]
    count = next(s.value for s in hist.samples if s.name.endswith("_count"))
    assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == count
    assert [b.value for b in buckets] == sorted(b.value for b in buckets)  # cumulative


async def test_finished_requests_show_in_counters_and_the_ttft_histogram() -> None:
    async with emulator() as (url, _), httpx.AsyncClient(base_url=url) as client:
        for _ in range(3):
            await client.post("/v1/completions", json={"prompt": "a b", "max_tokens": 4})
        text = (await client.get("/metrics")).text
    families = {f.name: f for f in text_string_to_metric_families(text)}

    def value(family: str, sample: str, **labels: str) -> float:
        return next(
            s.value
            for s in families[family].samples
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
        )

    assert value("vllm:request_success", "vllm:request_success_total", finished_reason="length") == 3
    assert value("vllm:generation_tokens", "vllm:generation_tokens_total") == 12
    assert value("vllm:prompt_tokens", "vllm:prompt_tokens_total") == 6
    assert value("vllm:time_to_first_token_seconds", "vllm:time_to_first_token_seconds_count") == 3
    assert value("vllm:inter_token_latency_seconds", "vllm:inter_token_latency_seconds_count") == 9


async def test_a_client_that_goes_away_frees_its_slot() -> None:
    async with emulator() as (url, app), httpx.AsyncClient(base_url=url) as client:
        async with client.stream(
            "POST", "/v1/completions", json={"prompt": "a", "max_tokens": 3_000, "stream": True}
        ) as r:
            async for _ in r.aiter_lines():
                break  # one chunk, then hang up
        core = app[EMULATOR].engine.core
        await until(lambda: core.idle)
        assert core.idle and core.gauges().kv_used_tokens == 0
        assert app[EMULATOR].stats.requests_aborted == 1


@pytest.mark.parametrize(
    ("body", "chat", "message"),
    [
        pytest.param({"messages": []}, True, "messages must be a non-empty list", id="no messages"),
        pytest.param(
            {"messages": [{"content": "x"}]},
            True,
            r"messages\[0\] must be an object with a role",
            id="no role",
        ),
        pytest.param({"prompt": ""}, False, "prompt must not be empty", id="empty prompt"),
        pytest.param({"prompt": {"a": 1}}, False, "prompt must be a string", id="prompt object"),
        pytest.param(
            {"prompt": "a", "max_tokens": 0}, False, "max_tokens must be at least 1, got 0", id="zero tokens"
        ),
        pytest.param(
            {"prompt": "a", "stream": "yes"}, False, "stream must be a boolean", id="stream not bool"
        ),
    ],
)
def test_parse_generation_names_the_field(body: dict[str, Any], chat: bool, message: str) -> None:
    from replay.emulate.requests import ApiError

    with pytest.raises(ApiError, match=message):
        parse_generation(body, chat=chat, model="m", max_model_len=100)


def test_chat_without_max_tokens_gets_the_rest_of_the_context() -> None:
    gen = parse_generation(
        {"messages": [{"role": "user", "content": "a b c"}]}, chat=True, model="m", max_model_len=100
    )
    assert (gen.input_tokens, gen.max_tokens) == (3, 97)


def test_chat_without_max_tokens_and_a_prompt_filling_the_context_is_a_context_error() -> None:
    """The client asked for no max_tokens: the error is about the messages, not about max_tokens."""
    from replay.emulate.requests import ApiError

    body = {"messages": [{"role": "user", "content": "a " * 100}]}
    with pytest.raises(ApiError, match=r"context length is 100 tokens\..*\(100 in the messages, 1 in the"):
        parse_generation(body, chat=True, model="m", max_model_len=100)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param(
            {"engine": "triton"},
            "engine must be one of vllm, tgi, sglang, jetstream, got 'triton'",
            id="engine",
        ),
        pytest.param({"startup_s": -1.0}, "startup_s must be a finite number >= 0, got -1.0", id="startup"),
        pytest.param({"model": ""}, "model must be a non-empty name", id="model"),
    ],
)
def test_config_errors_name_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EmulatorConfig(**fields)
