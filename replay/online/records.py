"""An online run's configuration and records: what was asked, what happened to each request, and
DIR/requests.jsonl (written by `infscale replay online`, read by `infscale replay calibrate`)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

import httpx
import numpy as np

from replay.trace import Trace


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
