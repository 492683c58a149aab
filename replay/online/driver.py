"""The online run's driver: each request of a trace sent at its (scaled) time as one streamed
OpenAI request, its stream read for the first text chunk, the gaps between chunks and the usage."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from replay.online.records import Api, OnlineConfig, OnlineResult, PromptStyle, RequestRecord, Status
from replay.trace import Trace

# --- the request body and the stream -------------------------------------------------------------


def request_body(
    config: OnlineConfig, model: str, input_tokens: int, output_tokens: int
) -> tuple[str, dict[str, Any]]:
    """(path, JSON body) of one streamed request."""
    if config.prompt is PromptStyle.TOKEN_IDS:
        prompt: Any = [100] * input_tokens  # one id repeated: any vocabulary has it
    else:
        prompt = " ".join(["hi"] * input_tokens)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
    }
    if config.ignore_eos:
        body["ignore_eos"] = True
    if config.api is Api.CHAT:  # with a text prompt: OnlineConfig refuses token ids for chat
        body["messages"] = [{"role": "user", "content": prompt}]
        return "/v1/chat/completions", body
    body["prompt"] = prompt
    return "/v1/completions", body


@dataclass(slots=True)
class StreamTally:
    """What one SSE stream said: the first text chunk's time, chunks with text, the usage block."""

    first_text_at: float = math.nan
    text_chunks: int = 0
    completion_tokens: int | None = None
    error: str = ""
    done: bool = False
    last_text_at: float = math.nan
    gaps: list[float] = field(default_factory=list)  # between successive chunks with text (ITL)

    def feed(self, line: str, now: float) -> None:
        if not line.startswith("data:"):
            return  # blank separators, comments, event: lines
        data = line[5:].strip()
        if data == "[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError:
            self.error = f"unparseable stream chunk {data[:200]!r}"
            return
        if not isinstance(chunk, dict):
            return
        if "error" in chunk or chunk.get("object") == "error":
            err = chunk.get("error", chunk)
            self.error = str(err.get("message", err) if isinstance(err, dict) else err)
            return
        usage = chunk.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self.completion_tokens = usage["completion_tokens"]
        texts = _choice_texts(chunk.get("choices") or [])
        if texts is None:  # not the OpenAI shape: an error of this request (raising would lose its record)
            self.error = f"malformed stream chunk {data[:200]!r}"
            return
        if any(texts):  # a chunk with text: its gap to the previous one is an inter-token latency
            if not math.isnan(self.last_text_at):
                self.gaps.append(now - self.last_text_at)
            self.last_text_at = now
        for text in texts:
            if text:
                self.text_chunks += 1
                if math.isnan(self.first_text_at):
                    self.first_text_at = now


def _choice_texts(choices: object) -> list[object] | None:
    """Each choice's text (completions) or delta content (chat); None when the shape is not OpenAI's."""
    if not isinstance(choices, list):
        return None
    texts = []
    for choice in choices:
        if not isinstance(choice, dict):
            return None
        text = choice.get("text")
        if text is None:
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                return None
            text = delta.get("content")
        texts.append(text)
    return texts


# --- the driver -----------------------------------------------------------------------------------


async def discover_model(client: httpx.AsyncClient, endpoint: str) -> str:
    """The first model /v1/models lists; each failure says what to do about it."""
    url = endpoint.rstrip("/") + "/v1/models"
    try:
        response = await client.get(url)
    except httpx.TransportError as e:  # nothing answers: --model would not help
        raise ValueError(
            f"nothing answers at {endpoint} ({type(e).__name__}: {e}): is the server running, and is the"
            " URL its base URL (scheme, host, port)?"
        ) from e
    if response.status_code in (401, 403):
        raise ValueError(f"{url} refused the request (HTTP {response.status_code}): pass --api-key") from None
    if response.status_code >= 400:
        raise ValueError(
            f"{url} answered HTTP {response.status_code}: the server lists no models there; pass --model NAME"
        ) from None
    try:
        return str(response.json()["data"][0]["id"])
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise ValueError(f"{url} did not list a model ({type(e).__name__}: {e}); pass --model NAME") from e


async def run_online(
    trace: Trace,
    config: OnlineConfig,
    *,
    clock: Callable[[], float] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> OnlineResult:
    """Send every request of `trace` at its (scaled) time; gather what happened to each."""
    now = clock or asyncio.get_running_loop().time
    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
    limits = httpx.Limits(
        max_connections=config.max_in_flight, max_keepalive_connections=config.max_in_flight
    )
    timeout = httpx.Timeout(config.timeout_s, connect=min(config.timeout_s, 10.0))
    async with httpx.AsyncClient(
        limits=limits, timeout=timeout, headers=headers, transport=transport
    ) as client:
        model = config.model or await discover_model(client, config.endpoints[0])
        return await _drive(client, trace, config, model, now)


async def _drive(
    client: httpx.AsyncClient,
    trace: Trace,
    config: OnlineConfig,
    model: str,
    now: Callable[[], float],
) -> OnlineResult:
    n = len(trace)
    scheduled = trace.arrival_s / config.speedup
    records: list[RequestRecord | None] = [None] * n
    outstanding = [0] * len(config.endpoints)
    slots = asyncio.Semaphore(config.max_in_flight)
    tasks: set[asyncio.Task[None]] = set()
    t0 = now()
    started_unix = time.time()
    deadline = math.inf if config.max_duration_s is None else t0 + config.max_duration_s

    async def one(i: int, endpoint: int, sent: float) -> None:
        try:
            records[i] = await _send(
                client, config, model, trace, i, endpoint, float(scheduled[i]), sent, t0, now
            )
        finally:
            outstanding[endpoint] -= 1
            slots.release()

    wall_start = time.perf_counter()
    stopped_at = n
    for i in range(n):
        at = t0 + float(scheduled[i])
        if at >= deadline:
            stopped_at = i
            break
        delay = at - now()
        if delay > 0:
            await asyncio.sleep(delay)
        try:  # a full window waits for a slot, but never past the deadline
            await asyncio.wait_for(
                slots.acquire(), None if math.isinf(deadline) else max(0.0, deadline - now())
            )
        except TimeoutError:
            stopped_at = i
            break
        if now() >= deadline:
            slots.release()
            stopped_at = i
            break
        endpoint = min(range(len(outstanding)), key=lambda e: (outstanding[e], e))
        outstanding[endpoint] += 1
        task = asyncio.create_task(one(i, endpoint, now() - t0))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        remaining = deadline - now()
        _, pending = await asyncio.wait(
            set(tasks), timeout=None if math.isinf(remaining) else max(0, remaining)
        )
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
    for i in range(n):
        if records[i] is None:
            records[i] = RequestRecord(
                i,
                -1,
                float(scheduled[i]),
                math.nan,
                math.nan,
                math.nan,
                int(trace.input_tokens[i]),
                int(trace.output_tokens[i]),
                0,
                Status.NOT_SENT if i >= stopped_at else Status.CANCELLED,
                "not sent before --max-duration-s" if i >= stopped_at else "cancelled at --max-duration-s",
            )
    done = tuple(r for r in records if r is not None)
    return OnlineResult(config, model, done, time.perf_counter() - wall_start, started_unix)


async def _send(
    client: httpx.AsyncClient,
    config: OnlineConfig,
    model: str,
    trace: Trace,
    i: int,
    endpoint: int,
    scheduled_s: float,
    sent_s: float,
    t0: float,
    now: Callable[[], float],
) -> RequestRecord:
    inp, out = int(trace.input_tokens[i]), int(trace.output_tokens[i])
    path, body = request_body(config, model, inp, out)
    url = config.endpoints[endpoint].rstrip("/") + path
    tally = StreamTally()
    base = RequestRecord(i, endpoint, scheduled_s, sent_s, math.nan, math.nan, inp, out, 0, Status.OK)
    try:
        async with client.stream("POST", url, json=body) as response:
            if response.status_code >= 400:
                text = (await response.aread()).decode(errors="replace")
                return replace(
                    base, status=Status.ERROR, error=f"HTTP {response.status_code}: {_message(text)}"
                )
            async for line in response.aiter_lines():
                tally.feed(line, now() - t0)
        finished = now() - t0
    except asyncio.CancelledError:
        return replace(base, status=Status.CANCELLED, error="cancelled at --max-duration-s")
    except httpx.HTTPError as e:
        return replace(base, status=Status.TRANSPORT, error=f"{type(e).__name__}: {e}")
    generated = tally.completion_tokens if tally.completion_tokens is not None else tally.text_chunks
    if tally.error or not tally.text_chunks:
        error = tally.error or "the stream ended without any text"
        return replace(base, status=Status.ERROR, error=error, generated_tokens=generated)
    return replace(
        base,
        first_token_s=tally.first_text_at,
        finished_s=finished,
        generated_tokens=generated,
        status=Status.OK,
        itl_s=tuple(tally.gaps),
    )


def _message(text: str) -> str:
    """The message of an engine's error body (vLLM, SGLang, TGI shapes), else the text itself."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return text[:300]
    if isinstance(doc, dict):
        err = doc.get("error", doc)
        if isinstance(err, dict):
            return str(err.get("message", err))[:300]
        return str(err)[:300]
    return text[:300]
