"""The engine emulator's HTTP face: an aiohttp app that answers like vLLM, TGI, SGLang or JetStream.

Sits on top of replay/emulate/batching.py (the engine), replay/emulate/metrics.py (/metrics) and
replay/emulate/requests.py (request bodies and error shapes).
One route table per engine: the OpenAI-compatible API (`/v1/completions`, `/v1/chat/completions`,
streaming SSE one token per chunk or a whole response, `/v1/models`; JetStream has none, but its
own `/v1/generate`, jetstreamapi.py), the engine's readiness paths, `/metrics`, and
`/emulator/history` (the emulator's own gauge history, for tests).

Tokens are words: a string prompt of N whitespace-separated words is N prompt tokens (a list of
token ids counts its ids), and each generated token is one word. The emulator has no EOS: every
request generates exactly max_tokens. Until `startup_s` has passed (weights loading), readiness
paths and the API answer 503; /metrics answers from the start (gauges at 0).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from replay.emulate import jetstreamapi
from replay.emulate.batching import (
    Clock,
    EngineLoop,
    Gauges,
    LoopClock,
    Request,
    RequestRejected,
    Step,
    TokenStream,
)
from replay.emulate.metrics import FLAVORS, new_stats
from replay.emulate.requests import ApiError, Generation, error_body, parse_generation
from replay.emulate.stats import EngineStats
from replay.profiles import EngineProfile
from replay.scheduler import context_limit

log = logging.getLogger("infscale.emulate")

ENGINES = ("vllm", "tgi", "sglang", "jetstream")
# JetStream: its HTTP server's --port (its /metrics is a listener of its own upstream, --prometheus_port)
DEFAULT_PORTS = {"vllm": 8000, "tgi": 3000, "sglang": 30000, "jetstream": 8080}


@dataclass(frozen=True, slots=True)
class EmulatorConfig:
    engine: str = "vllm"
    profile: EngineProfile = field(default_factory=EngineProfile)
    model: str = "emulated-model"
    startup_s: float = 0.0  # stands for weight loading: not ready before

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if not (math.isfinite(self.startup_s) and self.startup_s >= 0):
            raise ValueError(f"startup_s must be a finite number >= 0, got {self.startup_s!r}")
        if not self.model:
            raise ValueError("model must be a non-empty name")

    @property
    def max_model_len(self) -> int:
        """The context limit a request is checked against: a request over the KV cache never runs."""
        return context_limit(self.profile)


class GaugeHistory:
    """Every change of the gauges with its wall-clock time (an Observer), so a test can tell what a
    scrape taken at a given moment must have seen."""

    def __init__(self, maxlen: int = 200_000) -> None:
        self.points: deque[tuple[float, int, int, int]] = deque(maxlen=maxlen)

    def on_gauges(self, gauges: Gauges) -> None:
        point = (gauges.waiting, gauges.running, gauges.kv_used_tokens)
        if not self.points or self.points[-1][1:] != point:
            self.points.append((time.time(), *point))

    def on_submit(self, request: Request) -> None:
        pass

    def on_work(self, step: Step, emitted: Sequence[Request]) -> None:
        pass

    def on_abort(self, request: Request) -> None:
        pass


@dataclass(eq=False)
class Emulator:
    """Everything one app serves from."""

    config: EmulatorConfig
    engine: EngineLoop
    stats: EngineStats
    history: GaugeHistory
    clock: Clock
    ready_at: float = math.inf

    @property
    def ready(self) -> bool:
        return self.clock.now() >= self.ready_at


EMULATOR = web.AppKey("emulator", Emulator)


def create_app(config: EmulatorConfig, clock: Clock | None = None) -> web.Application:
    """The emulator app; the engine loop starts with the app and stops with it."""
    app = web.Application(middlewares=[_errors])
    app[EMULATOR] = _placeholder(config, clock)
    app.cleanup_ctx.append(_engine_task)
    app.router.add_routes(_routes(config.engine))
    return app


def _placeholder(config: EmulatorConfig, clock: Clock | None) -> Emulator:
    """Built outside a running loop; the engine loop binds to the loop lazily (asyncio.Event)."""
    clock = clock or LoopClock()
    stats = new_stats(config.engine, config.max_model_len, slots=config.profile.max_num_seqs)
    history = GaugeHistory()
    engine = EngineLoop(config.profile, clock, observers=(stats, history))
    return Emulator(config, engine, stats, history, clock)


async def _engine_task(app: web.Application) -> AsyncIterator[None]:
    emu = app[EMULATOR]
    emu.ready_at = emu.clock.now() + emu.config.startup_s
    task = asyncio.create_task(emu.engine.run(), name="emulator-engine")
    task.add_done_callback(_engine_died)
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _engine_died(task: asyncio.Task[None]) -> None:
    """The engine loop never returns; if it raised, every request would hang: say so loudly."""
    if not task.cancelled() and task.exception() is not None:
        log.error("the emulated engine stopped", exc_info=task.exception())


def _routes(engine: str) -> list[web.RouteDef]:
    own = [web.get("/metrics", metrics), web.get("/emulator/history", history)]
    if engine == "jetstream":  # no OpenAI API (jetstream/entrypoints/http/api_server.py)
        return [
            *own,
            web.post("/v1/generate", generate),
            web.get("/v1/health", jetstream_health),
            web.get("/", jetstream_root),
        ]
    openai = [
        web.post("/v1/completions", completions),
        web.post("/v1/chat/completions", chat_completions),
        web.get("/v1/models", models),
        web.get("/health", health),
    ]
    extra: Mapping[str, list[web.RouteDef]] = {
        "vllm": [web.get("/ping", health), web.post("/ping", health), web.get("/version", version)],
        "tgi": [web.get("/info", info)],
        "sglang": [web.get("/health_generate", health), web.get("/get_model_info", model_info)],
    }
    return own + openai + extra[engine]


@web.middleware
async def _errors(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    emu = request.app[EMULATOR]
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except ApiError as e:
        if e.status < 500:
            emu.stats.requests_rejected += 1
        status, body = error_body(emu.config.engine, e)
        if isinstance(body, str):
            return web.Response(text=body, status=status)
        if emu.config.engine == "jetstream":
            return jetstreamapi.json_response(body, status)
        return web.json_response(body, status=status)
    except (web.HTTPNotFound, web.HTTPMethodNotAllowed) as e:
        if emu.config.engine != "jetstream":
            raise
        # Starlette's router, through FastAPI's handler: {"detail": "Not Found"}, and 405 with Allow
        allow = {"Allow": e.headers["Allow"]} if "Allow" in e.headers else None
        return jetstreamapi.json_response({"detail": e.reason}, e.status, headers=allow)


# --- readiness and information ---------------------------------------------------------------------


async def health(request: web.Request) -> web.Response:
    emu = request.app[EMULATOR]
    if not emu.ready:
        raise ApiError(503, "the model is still loading", "ServiceUnavailableError")
    return web.Response(status=200)


async def version(request: web.Request) -> web.Response:
    return web.json_response({"version": "0.0.0-infscale-emulator"})


async def info(request: web.Request) -> web.Response:
    emu = request.app[EMULATOR]
    limit = emu.config.max_model_len
    return web.json_response(
        {
            "model_id": emu.config.model,
            "max_concurrent_requests": emu.config.profile.max_num_seqs,
            "max_input_tokens": limit - 1,
            "max_total_tokens": limit,
            "router": "text-generation-router",
            "version": "0.0.0-infscale-emulator",
        }
    )


async def model_info(request: web.Request) -> web.Response:
    emu = request.app[EMULATOR]
    return web.json_response(
        {"model_path": emu.config.model, "tokenizer_path": emu.config.model, "is_generation": True}
    )


async def models(request: web.Request) -> web.Response:
    emu = request.app[EMULATOR]
    return web.json_response(
        {
            "object": "list",
            "data": [
                {
                    "id": emu.config.model,
                    "object": "model",
                    "created": int(time.time()),
                    "owned_by": emu.config.engine,
                    "root": emu.config.model,
                    "parent": None,
                    "max_model_len": emu.config.max_model_len,
                }
            ],
        }
    )


async def metrics(request: web.Request) -> web.Response:
    emu = request.app[EMULATOR]
    flavor = FLAVORS[emu.config.engine]
    text = flavor.render(emu.stats, emu.engine.core.gauges(), emu.config.model)
    response = web.Response(text=text)
    response.headers["Content-Type"] = flavor.content_type
    return response


async def history(request: web.Request) -> web.Response:
    """[[wall time, waiting, running, kv tokens], ...] since `?since=` (wall seconds)."""
    emu = request.app[EMULATOR]
    since = _float_query(request, "since", 0.0)
    return web.json_response([list(p) for p in emu.history.points if p[0] >= since])


def _float_query(request: web.Request, name: str, default: float) -> float:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ApiError(400, f"query parameter {name}={raw!r} is not a number", param=name) from None


# --- JetStream (jetstreamapi.py) ------------------------------------------------------------------


async def generate(request: web.Request) -> web.StreamResponse:
    emu = request.app[EMULATOR]
    if not emu.ready:
        raise jetstreamapi.loading()
    return await jetstreamapi.generate(request, emu.engine, emu.config.max_model_len)


async def jetstream_health(request: web.Request) -> web.Response:
    if not request.app[EMULATOR].ready:
        raise jetstreamapi.loading()
    return jetstreamapi.health()


async def jetstream_root(request: web.Request) -> web.Response:
    return jetstreamapi.root()


# --- the OpenAI-compatible API ---------------------------------------------------------------------


async def completions(request: web.Request) -> web.StreamResponse:
    return await _serve(request, chat=False)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await _serve(request, chat=True)


async def _serve(request: web.Request, *, chat: bool) -> web.StreamResponse:
    emu = request.app[EMULATOR]
    if not emu.ready:
        raise ApiError(503, "the model is still loading", "ServiceUnavailableError")
    body = await _json_body(request)
    gen = parse_generation(body, chat=chat, model=emu.config.model, max_model_len=emu.config.max_model_len)
    try:
        stream = emu.engine.open(gen.input_tokens, gen.max_tokens)
    except RequestRejected as e:  # parse_generation checks the same limit; kept for safety
        raise ApiError(400, str(e), param="max_tokens") from e
    ids = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
    created = int(time.time())
    async with stream:
        if gen.stream:
            return await _stream(request, emu, gen, stream, ids, created)
        async for _ in stream:
            pass
    text = _TOKEN * gen.max_tokens
    usage = _usage(gen.input_tokens, gen.max_tokens)
    if chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": "length",
        }
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length", "stop_reason": None}
    return web.json_response(
        {
            "id": ids,
            "object": "chat.completion" if chat else "text_completion",
            "created": created,
            "model": emu.config.model,
            "choices": [choice],
            "usage": usage,
        }
    )


_TOKEN = " tok"  # each generated token is this word


async def _stream(
    request: web.Request, emu: Emulator, gen: Generation, stream: TokenStream, ids: str, created: int
) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    model = json.dumps(emu.config.model)
    obj = "chat.completion.chunk" if gen.chat else "text_completion"
    head = (
        f'data: {{"id":"{ids}","object":"{obj}","created":{created},"model":{model},"choices":[{{"index":0,'
    )
    if gen.chat:
        first = head + '"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
        token = head + f'"delta":{{"content":"{_TOKEN}"}},"logprobs":null,"finish_reason":null}}]}}\n\n'
        last = head + f'"delta":{{"content":"{_TOKEN}"}},"logprobs":null,"finish_reason":"length"}}]}}\n\n'
    else:
        first = ""
        token = head + f'"text":"{_TOKEN}","logprobs":null,"finish_reason":null,"stop_reason":null}}]}}\n\n'
        last = (
            head + f'"text":"{_TOKEN}","logprobs":null,"finish_reason":"length","stop_reason":null}}]}}\n\n'
        )
    async for count in stream:
        chunk = last if count >= gen.max_tokens else token
        if count == 1 and first:
            chunk = first + chunk
        await response.write(chunk.encode())
    if gen.include_usage:
        usage = json.dumps(_usage(gen.input_tokens, gen.max_tokens), separators=(",", ":"))
        tail = f'data: {{"id":"{ids}","object":"{obj}","created":{created},"model":{model},'
        await response.write(f'{tail}"choices":[],"usage":{usage}}}\n\n'.encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion}


async def _json_body(request: web.Request) -> Mapping[str, Any]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ApiError(400, f"request body is not valid JSON: {e}") from e
    if not isinstance(body, dict):
        raise ApiError(400, f"request body must be a JSON object, got {type(body).__name__}")
    return body
