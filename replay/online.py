"""`infscale replay online`: a recorded trace against live OpenAI-compatible endpoints.

    infscale replay online --endpoint http://127.0.0.1:8000 --trace azure_llm_2023_conv.csv \\
        --format azure --end-s 60 --out online-out/

Sits beside the offline replay (replay/cli.py, replay/simulate.py) and writes the same report
(replay/report.py, policy name `online`) plus DIR/requests.jsonl, one line per request, which
`infscale replay calibrate` reads.

Each request is sent at its trace time divided by `--speedup` (after the loader's `--rate-scale`),
with a prompt of the trace's input length (that many words, or token ids with `--prompt token-ids`)
and max_tokens = its output length, streamed; TTFT is the time from sending to the first chunk
that carries text, e2e the time to the end of the stream. Several endpoints share the load as the
offline router does: each request goes to the endpoint with the fewest requests outstanding from
this client (ties to the first listed). In-flight requests are bounded (`--max-in-flight`; a send
that would exceed it waits, and its lag is reported) and so is the run (`--max-duration-s`;
requests not sent by then are counted as dropped, those in flight are cancelled).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from replay.engine import RequestResults
from replay.profiles import ProfileError, Scenario, get_scenario
from replay.simulate import ReplicaSpan, RunResult, TimelinePoint
from replay.trace import Trace

POLICY = "online"


class Api(StrEnum):
    COMPLETIONS = "completions"
    CHAT = "chat"


class PromptStyle(StrEnum):
    WORDS = "words"  # "hi hi hi ...": one token per word for most tokenizers, exactly one for the emulator
    TOKEN_IDS = "token-ids"  # a list of token ids (vLLM and SGLang completions only): exact for any model


class Status(StrEnum):
    OK = "ok"
    ERROR = "error"  # the server refused or failed it (HTTP status >= 400, or an error in the stream)
    TRANSPORT = "transport"  # connection refused, reset, timed out
    CANCELLED = "cancelled"  # in flight when --max-duration-s ran out
    NOT_SENT = "not-sent"  # its send time was after --max-duration-s


@dataclass(frozen=True, slots=True)
class OnlineConfig:
    endpoints: tuple[str, ...]  # base URLs, e.g. http://127.0.0.1:8000 (the /v1/... path is added)
    model: str | None = None  # None: the first model the first endpoint's /v1/models lists
    api: Api = Api.COMPLETIONS
    prompt: PromptStyle = PromptStyle.WORDS
    speedup: float = 1.0  # trace seconds per wall second
    max_in_flight: int = 256
    max_duration_s: float | None = None  # wall seconds from the first send
    timeout_s: float = 600.0  # per request
    ignore_eos: bool = True  # vLLM/SGLang extension: generate exactly max_tokens
    api_key: str | None = None

    def __post_init__(self) -> None:
        if not self.endpoints:
            raise ValueError("--endpoint: give at least one endpoint URL")
        for url in self.endpoints:
            u = httpx.URL(url)
            if u.scheme not in ("http", "https") or not u.host:
                raise ValueError(f"--endpoint {url!r}: expected http(s)://host[:port]")
            if u.path.rstrip("/").endswith("/v1"):
                raise ValueError(
                    f"--endpoint {url!r}: give the server's base URL without /v1"
                    f" ({url.rstrip('/').removesuffix('/v1')}); the /v1/... paths are added"
                )
        if not (math.isfinite(self.speedup) and self.speedup > 0):
            raise ValueError(f"--speedup must be a finite number > 0, got {self.speedup!r}")
        if self.max_in_flight < 1:
            raise ValueError(f"--max-in-flight must be >= 1, got {self.max_in_flight}")
        if self.max_duration_s is not None and not self.max_duration_s > 0:
            raise ValueError(f"--max-duration-s must be > 0, got {self.max_duration_s!r}")
        if not self.timeout_s > 0:
            raise ValueError(f"--timeout-s must be > 0, got {self.timeout_s!r}")
        if self.prompt is PromptStyle.TOKEN_IDS and self.api is Api.CHAT:
            raise ValueError("--prompt token-ids needs --api completions (chat messages are text)")


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One trace request as it went; times in seconds from the run's start, NaN when it did not happen."""

    index: int  # in the trace
    endpoint: int  # index into the endpoints; -1 when not sent
    scheduled_s: float  # trace time / speedup
    sent_s: float
    first_token_s: float
    finished_s: float
    input_tokens: int
    output_tokens: int  # max_tokens asked
    generated_tokens: int  # per the usage block when the server sends one, else text chunks counted
    status: Status
    error: str = ""
    itl_s: tuple[float, ...] = ()  # gaps between successive chunks with text, as vLLM's benchmarks count ITL

    @property
    def ttft_s(self) -> float:
        return self.first_token_s - self.sent_s

    @property
    def e2e_s(self) -> float:
        return self.finished_s - self.sent_s


@dataclass(frozen=True, slots=True)
class OnlineResult:
    config: OnlineConfig
    model: str
    records: tuple[RequestRecord, ...]
    wall_seconds: float
    started_unix_s: float = math.nan  # wall-clock time of the run's t = 0 (to line it up with others)


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


# --- results in the offline report's shape --------------------------------------------------------


def to_run_result(
    result: OnlineResult,
    trace_name: str,
    scenario: Scenario,
    period_s: float = 1.0,
    *,
    gpus_per_endpoint: int | None = None,
) -> RunResult:
    """The online run as a RunResult, so replay/report.py writes it in the offline schema.

    Per request: arrival = when it was sent, first token and finish as measured, dropped = not
    completed; no admission time is visible from outside (queue-wait percentiles are null). The fleet
    is the endpoints, ready for the whole run: GPU-hours count `gpus_per_endpoint` per endpoint,
    and are unknown (NaN, null in report.json) without it: the endpoints' GPUs are not visible."""
    recs = result.records
    n_ep = len(result.config.endpoints)
    ok = np.array([r.status is Status.OK for r in recs], dtype=bool)
    sent = np.array([r.sent_s if math.isfinite(r.sent_s) else r.scheduled_s for r in recs])
    first = np.array([r.first_token_s for r in recs])
    finished = np.array([r.finished_s for r in recs])
    first[~ok] = math.nan
    finished[~ok] = math.nan
    requests = RequestResults(
        replica=np.array([r.endpoint for r in recs], dtype=np.int64),
        admitted_s=np.full(len(recs), math.nan),
        first_token_s=first,
        finished_s=finished,
        dropped=~ok,
        preemptions=np.zeros(len(recs), dtype=np.int64),  # not observable from the client
        prefix_hit_tokens=np.zeros(len(recs), dtype=np.int64),
    )
    # the run's own length (until its last finish, or until --max-duration-s cancelled what was in
    # flight): the trace times of requests never sent do not extend it
    last = max((t for r in recs for t in (r.sent_s, r.finished_s) if math.isfinite(t)), default=0.0)
    end_s = max(last, result.wall_seconds)
    timeline = timeline_of(sent, finished, n_ep, period_s, end_s)
    replicas = tuple(ReplicaSpan(e, 0.0, 0.0, 0.0, math.nan, end_s, False) for e in range(n_ep))
    gpus = math.nan if gpus_per_endpoint is None else gpus_per_endpoint
    return RunResult(
        policy=POLICY,
        scenario=scenario,
        trace_name=trace_name,
        arrival_s=sent,
        input_tokens=np.array([r.input_tokens for r in recs], dtype=np.int64),
        # what came back (TPOT divides by it), the asked count where nothing did
        output_tokens=np.array(
            [r.generated_tokens if r.generated_tokens > 0 else r.output_tokens for r in recs], dtype=np.int64
        ),
        requests=requests,
        timeline=timeline,
        replicas=replicas,
        end_s=end_s,
        gpu_seconds=n_ep * gpus * end_s,
        replica_seconds=n_ep * end_s,
        scale_events=0,
        cold_starts=0,
        wall_seconds=result.wall_seconds,
    )


def timeline_of(
    sent: np.ndarray[Any, Any], finished: np.ndarray[Any, Any], replicas: int, period_s: float, end_s: float
) -> tuple[TimelinePoint, ...]:
    """Every period: arrivals per second over the last period and requests in flight (sent, not done;
    a failed request counts as done when sent)."""
    done = np.where(np.isfinite(finished), finished, sent)
    s_sorted, d_sorted = np.sort(sent), np.sort(done)
    points = []
    steps = math.floor(end_s / period_s) + 1
    for k in range(steps):
        t = k * period_s
        started = int(np.searchsorted(s_sorted, t, side="right"))
        ended = int(np.searchsorted(d_sorted, t, side="right"))
        before = int(np.searchsorted(s_sorted, t - period_s, side="right"))
        rate = (started - before) / period_s if k > 0 else 0.0
        points.append(TimelinePoint(t, replicas, replicas, 0, 0, rate, started - ended))
    return tuple(points)


def online_section(result: OnlineResult) -> dict[str, Any]:
    """What only an online run has: the endpoints, the send lag, the failures by message."""
    recs = result.records
    sent = [r for r in recs if math.isfinite(r.sent_s)]
    lag = np.array([r.sent_s - r.scheduled_s for r in sent]) if sent else np.zeros(0)
    by_status = Counter(r.status.value for r in recs)
    errors = Counter(r.error for r in recs if r.error and r.status in (Status.ERROR, Status.TRANSPORT))
    ok = [r for r in recs if r.status is Status.OK]
    c = result.config
    return {
        "endpoints": list(c.endpoints),
        "model": result.model,
        "started_unix_s": result.started_unix_s,
        "api": c.api.value,
        "prompt": c.prompt.value,
        "speedup": c.speedup,
        "max_in_flight": c.max_in_flight,
        "max_duration_s": c.max_duration_s,
        "requests_by_status": dict(by_status),
        "errors": dict(errors.most_common(20)),
        "send_lag_p50_s": float(np.percentile(lag, 50)) if len(lag) else math.nan,
        "send_lag_p99_s": float(np.percentile(lag, 99)) if len(lag) else math.nan,
        "send_lag_max_s": float(lag.max()) if len(lag) else math.nan,
        "generated_tokens_short": sum(1 for r in ok if r.generated_tokens < r.output_tokens),
        "requests_per_endpoint": [sum(1 for r in sent if r.endpoint == e) for e in range(len(c.endpoints))],
    }


def serving_metrics(result: OnlineResult) -> dict[str, Any]:
    """What vLLM's benchmark_serving reports, by its definitions, over the completed requests:
    throughputs over the run's wall time; TTFT; TPOT = (e2e - TTFT) / (output tokens - 1) per
    request with more than one token; ITL = every gap between successive chunks with text; E2E.
    Latencies in milliseconds (mean, median, p99), as it prints them."""
    ok = [r for r in result.records if r.status is Status.OK]
    duration = result.wall_seconds
    inputs = sum(r.input_tokens for r in ok)
    outputs = sum(r.generated_tokens for r in ok)

    def stats(name: str, values: Sequence[float]) -> dict[str, float]:
        arr = np.asarray(values, dtype=float) * 1000.0
        if not len(arr):
            return {f"mean_{name}_ms": math.nan, f"median_{name}_ms": math.nan, f"p99_{name}_ms": math.nan}
        return {
            f"mean_{name}_ms": float(arr.mean()),
            f"median_{name}_ms": float(np.median(arr)),
            f"p99_{name}_ms": float(np.percentile(arr, 99)),
        }

    tpot = [(r.e2e_s - r.ttft_s) / (r.generated_tokens - 1) for r in ok if r.generated_tokens > 1]
    return {
        "completed": len(ok),
        "duration_s": duration,
        "total_input_tokens": inputs,
        "total_output_tokens": outputs,
        "request_throughput": len(ok) / duration if duration > 0 else math.nan,
        "output_throughput": outputs / duration if duration > 0 else math.nan,
        "total_token_throughput": (inputs + outputs) / duration if duration > 0 else math.nan,
        **stats("ttft", [r.ttft_s for r in ok]),
        **stats("tpot", tpot),
        **stats("itl", [gap for r in ok for gap in r.itl_s]),
        **stats("e2el", [r.e2e_s for r in ok]),
    }


def markdown(report: Mapping[str, Any]) -> str:
    """The online run in wall-clock terms (the offline report's header speaks of simulation)."""
    from replay.report import percent

    section, p = report["online"], report["policies"][POLICY]
    serving = section["serving"]
    gpu_hours = p["gpu_hours"]
    gpu = (
        "n/a (pass --gpus-per-endpoint)"
        if gpu_hours is None or not math.isfinite(gpu_hours)
        else f"{gpu_hours:.3f}"
    )

    def ms(key: str) -> str:
        value = serving[key]
        return "n/a" if value is None or not math.isfinite(value) else f"{value:,.1f}"

    lines = [
        f"# Online replay: {report['trace']['name']} against {len(section['endpoints'])} endpoint(s)",
        "",
        f"Model {section['model']}; {serving['completed']:,} of {p['requests_total']:,} requests completed"
        f" in {serving['duration_s']:.1f} s of wall time: {serving['request_throughput']:.2f} requests/s, "
        f"{serving['output_throughput']:,.1f} output tokens/s, {serving['total_token_throughput']:,.1f} "
        f"tokens/s in and out. SLO met: {percent(p['slo_attainment'], 2)}. GPU-hours: {gpu}.",
        "",
        "| metric (ms) | mean | median | p99 |",
        "|---|---:|---:|---:|",
    ]
    for name, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2E latency")):
        lines.append(
            f"| {label} | {ms(f'mean_{name}_ms')} | {ms(f'median_{name}_ms')} | {ms(f'p99_{name}_ms')} |"
        )
    lines += [
        "",
        "As vLLM's benchmark_serving defines them: TPOT per request excludes the first token; ITL is every",
        "gap between chunks with text; throughputs are over the run's wall time.",
        "",
    ]
    return "\n".join(lines)


def write_records(path: Path, records: Sequence[RequestRecord]) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for r in records:
            doc = asdict(r)
            doc["status"] = r.status.value
            f.write(
                json.dumps(
                    {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in doc.items()}
                )
                + "\n"
            )
    return path


def read_records(path: Path) -> list[RequestRecord]:
    """DIR/requests.jsonl back into records; errors name the line and field."""
    out: list[RequestRecord] = []
    names = [f for f in RequestRecord.__dataclass_fields__ if f != "itl_s"]  # itl_s: newer files only
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
                missing = [k for k in names if k not in doc]
                if missing:
                    raise ValueError(f"missing field(s) {', '.join(missing)}")
                out.append(
                    RequestRecord(
                        index=int(doc["index"]),
                        endpoint=int(doc["endpoint"]),
                        scheduled_s=_f(doc["scheduled_s"]),
                        sent_s=_f(doc["sent_s"]),
                        first_token_s=_f(doc["first_token_s"]),
                        finished_s=_f(doc["finished_s"]),
                        input_tokens=int(doc["input_tokens"]),
                        output_tokens=int(doc["output_tokens"]),
                        generated_tokens=int(doc["generated_tokens"]),
                        status=Status(doc["status"]),
                        error=str(doc["error"]),
                        itl_s=tuple(_f(x) for x in doc.get("itl_s") or ()),
                    )
                )
            except (ValueError, TypeError) as e:
                raise ValueError(f"{path}:{line_no}: {e}") from e
    if not out:
        raise ValueError(f"{path}: no request records")
    return out


def _f(value: object) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number or null, got {value!r}")
    return float(value)


def in_schedule_order(records: Iterable[RequestRecord]) -> list[RequestRecord]:
    """By scheduled time, then trace index: the order of `trace_of`'s requests."""
    return sorted(records, key=lambda r: (r.scheduled_s, r.index))


def trace_of(records: Iterable[RequestRecord], name: str) -> Trace:
    """The slice an online run replayed, at its sent-time scale (scheduled times, as sent)."""
    order = in_schedule_order(records)
    return Trace(
        name,
        np.array([r.scheduled_s for r in order], dtype=np.float64),
        np.array([r.input_tokens for r in order], dtype=np.int64),
        np.array([r.output_tokens for r in order], dtype=np.int64),
    )


# --- command line -----------------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--endpoint",
        action="append",
        required=True,
        metavar="URL",
        help="base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000 "
        "(repeatable, or comma-separated)",
    )
    p.add_argument("--trace", type=Path, help="trace file (default: the embedded synthetic trace)")
    p.add_argument("--format", help="trace format (required with --trace)")
    p.add_argument("--trace-option", action="append", default=[], metavar="KEY=VALUE", help="format option")
    p.add_argument("--start-s", type=float, default=0.0, help="keep the trace from this second")
    p.add_argument("--end-s", type=float, default=None, help="... to this second")
    p.add_argument("--rate-scale", type=float, default=1.0, help="multiply the arrival rate by K (loader)")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic trace and of rate scaling")
    p.add_argument("--max-input-tokens", type=int, default=None, help="cap each prompt at N tokens")
    p.add_argument("--max-output-tokens", type=int, default=None, help="cap each max_tokens at N")
    p.add_argument(
        "--no-ignore-eos", action="store_true", help="do not send ignore_eos (e.g. strict servers)"
    )
    # OnlineConfig's fields: only flags given reach it, so its defaults are the only ones
    for name, kind, help_text in _CONFIG_FLAGS:
        default = _config_default(name)
        choices = [m.value for m in kind] if isinstance(kind, type) and issubclass(kind, StrEnum) else None
        p.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            type=str if choices else kind,
            choices=choices,
            default=argparse.SUPPRESS,
            help=f"{help_text} (default {'none' if default is None else getattr(default, 'value', default)})",
        )
    p.add_argument("--scenario", default="reference-70b", help="scenario whose SLO judges the requests")
    p.add_argument(
        "--gpus-per-endpoint",
        type=int,
        default=None,
        metavar="N",
        help="GPUs behind each endpoint, for GPU-hours (default: unknown, reported as n/a)",
    )
    p.add_argument(
        "--out", type=Path, default=Path("online-out"), help="report directory (default online-out)"
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")


_CONFIG_FLAGS: tuple[tuple[str, Any, str], ...] = (
    ("speedup", float, "send at trace time / K"),
    ("model", str, "model name; none: the first one the first endpoint's /v1/models lists"),
    ("api", Api, "which OpenAI API"),
    ("prompt", PromptStyle, "prompt of N words, or N token ids (exact; vLLM/SGLang completions)"),
    ("max_in_flight", int, "requests in flight at most; a send past it waits"),
    ("max_duration_s", float, "stop sending after this many seconds, cancel what is in flight"),
    ("timeout_s", float, "per-request timeout"),
    ("api_key", str, "bearer token, if the server wants one"),
)


def _config_default(name: str) -> Any:
    return next(f.default for f in fields(OnlineConfig) if f.name == name)


def config_from_args(args: argparse.Namespace) -> OnlineConfig:
    endpoints = tuple(u.strip() for item in args.endpoint for u in item.split(",") if u.strip())
    given: dict[str, Any] = {name: getattr(args, name) for name, _, _ in _CONFIG_FLAGS if hasattr(args, name)}
    if "api" in given:
        given["api"] = Api(given["api"])
    if "prompt" in given:
        given["prompt"] = PromptStyle(given["prompt"])
    return OnlineConfig(endpoints=endpoints, ignore_eos=not args.no_ignore_eos, **given)


def cap_tokens(trace: Trace, max_input: int | None, max_output: int | None) -> Trace:
    for flag, cap in (("--max-input-tokens", max_input), ("--max-output-tokens", max_output)):
        if cap is not None and cap < 1:
            raise ValueError(f"{flag} must be >= 1, got {cap}")
    inp = trace.input_tokens if max_input is None else np.minimum(trace.input_tokens, max_input)
    out = trace.output_tokens if max_output is None else np.minimum(trace.output_tokens, max_output)
    return Trace(trace.name, trace.arrival_s, inp, out)


def run(args: argparse.Namespace) -> int:
    from replay import report as rep
    from replay.cli import REPORT_FILES, CliError, load
    from replay.outdir import check_out_dir, write_error
    from replay.traces import TraceError

    try:
        check_out_dir(args.out, files=(*REPORT_FILES, "requests.jsonl"))
        if args.gpus_per_endpoint is not None and args.gpus_per_endpoint < 1:
            raise ValueError(f"--gpus-per-endpoint must be >= 1, got {args.gpus_per_endpoint}")
        config = config_from_args(args)
        scenario = get_scenario(args.scenario)
        trace = cap_tokens(load(args), args.max_input_tokens, args.max_output_tokens)
    except (CliError, ProfileError, TraceError, ValueError) as e:
        print(f"infscale replay online: error: {e}", file=sys.stderr)
        return 2
    print(
        f"replaying {len(trace):,} requests over {trace.duration_s / config.speedup:.1f} s against "
        f"{len(config.endpoints)} endpoint(s)",
        file=sys.stderr,
    )
    try:
        result = asyncio.run(run_online(trace, config))
    except ValueError as e:
        print(f"infscale replay online: error: {e}", file=sys.stderr)
        return 2
    report = build_online_report(trace, result, scenario, gpus_per_endpoint=args.gpus_per_endpoint)
    try:
        written = rep.write_report(args.out, report, plots=not args.no_plots)
        (args.out / "report.md").write_text(markdown(report), encoding="utf-8")
        written.append(write_records(args.out / "requests.jsonl", result.records))
    except OSError as e:
        print(f"infscale replay online: error: {write_error(e)}", file=sys.stderr)
        return 1
    section = report["online"]
    if getattr(args, "output", "text") == "json":
        from replay.report import to_json

        print(to_json(report))
        print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
        return 0 if all(r.status is Status.OK for r in result.records) else 1
    print(markdown(report))
    print(
        f"requests by status: {section['requests_by_status']}; send lag p99 {section['send_lag_p99_s']:.3f} s"
    )
    print("wrote " + ", ".join(str(p) for p in written))
    for message, count in list(section["errors"].items())[:3]:  # e.g. an endpoint that refuses everything
        print(f"infscale replay online: {count} request(s) failed: {message}", file=sys.stderr)
    failed = sum(1 for r in result.records if r.status is not Status.OK)
    return 0 if failed == 0 else 1


def build_online_report(
    trace: Trace, result: OnlineResult, scenario: Scenario, *, gpus_per_endpoint: int | None = None
) -> dict[str, Any]:
    from replay import report as rep

    run_result = to_run_result(result, trace.name, scenario, gpus_per_endpoint=gpus_per_endpoint)
    report = rep.build_report(trace, [run_result], seed=None)
    report["online"] = {**online_section(result), "serving": serving_metrics(result)}
    return report
