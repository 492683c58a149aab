"""JetStream's HTTP API for the emulator (server.py routes the "jetstream" engine here): `POST
/v1/generate`, `GET /v1/health` and `GET /`, with its request schema and its errors.

Upstream, AI-Hypercomputer/JetStream (formerly google/JetStream; read at acd4f5a):
- jetstream/entrypoints/http/api_server.py: the three paths (a FastAPI app, `--port` 8080 by
  default), /v1/generate streaming `MessageToJson` of each `DecodeResponse` as it comes
  (utils.py), media type text/event-stream, chunks with no separator;
- jetstream/entrypoints/http/protocol.py: `DecodeRequest`, the body's schema (pydantic, unknown
  fields forbidden), mirrored by `_DecodeRequest` below;
- jetstream/core/proto/jetstream.proto: `DecodeResponse.StreamContent.Sample{text, token_ids}`;
- jetstream/core/orchestrator.py, `LLMOrchestrator.Decode`: text comes back as text and token ids,
  token ids (client-side tokenization) as token ids only.
FastAPI (fastapi/fastapi: routing.py, exception_handlers.py, _compat/v2.py) answers a body that
fails the schema 422 `{"detail": [pydantic's errors, url left out, loc from "body"]}`, JSON that
does not parse likewise (`json_invalid`), an unknown path 404 `{"detail": "Not Found"}`; Starlette
(starlette/middleware/errors.py, `error_response`) an unhandled exception 500 `Internal Server
Error` as plain text.

Tokens are words, as for the other engines (JetStream's true length also counts the BOS it
prepends; the emulator's tokenizer has none). Every request generates exactly max_tokens, one chunk
each (upstream's own test sees max_tokens + 1 chunks, its stop token's included; not modelled).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, ValidationError

from replay.emulate.batching import EngineLoop, RequestRejected
from replay.emulate.requests import ApiError, count_tokens

TOKEN_TEXT = " tok"  # each generated token is this word, as for the other engines
TOKEN_ID = 4  # and this id (any id: the emulator has no vocabulary)


def loading() -> ApiError:
    """While the weights load; JetStream has no listener yet then: the 503 stands for the refusal."""
    return ApiError(503, "the model is still loading", "ServiceUnavailableError")


class _TextContent(BaseModel):
    text: str


class _TokenContent(BaseModel):
    token_ids: list[int]


class _Metadata(BaseModel):
    start_time: float


class _DecodeRequest(BaseModel):
    """protocol.py's DecodeRequest (its pydantic v1 `anystr_strip_whitespace` is v2's name here)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    max_tokens: int
    text_content: _TextContent | None = None
    token_content: _TokenContent | None = None
    metadata: _Metadata | None = None


@dataclass(frozen=True, slots=True)
class Decode:
    """One validated /v1/generate request."""

    input_tokens: int
    max_tokens: int
    token_ids: bool  # asked with token ids: answered with token ids only


def parse_decode(raw: bytes, max_model_len: int) -> Decode:
    """The body as FastAPI and JetStream take it; ApiError with FastAPI's `detail` when refused."""
    body: Any = None
    if raw:
        try:
            body = json.loads(raw)
        except json.JSONDecodeError as e:
            error = {"type": "json_invalid", "loc": ["body", e.pos], "msg": "JSON decode error", "input": {}}
            raise ApiError(422, "JSON decode error", detail=[{**error, "ctx": {"error": e.msg}}]) from e
    if body is None:  # no body, or `null`: FastAPI's missing-field error, before any validation
        missing = {"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}
        raise ApiError(422, "Field required", detail=[missing])
    try:
        request = _DecodeRequest.model_validate(body)
    except ValidationError as e:
        errors = [{**err, "loc": ["body", *err["loc"]]} for err in e.errors(include_url=False)]
        detail = json.loads(json.dumps(errors, default=str))  # FastAPI's jsonable_encoder, for these
        raise ApiError(422, str(e), detail=detail) from e
    text, ids = request.text_content, request.token_content
    if text is not None and ids is None:
        tokens = count_tokens(text.text)
    elif ids is not None and text is None:
        tokens = len(ids.token_ids)
    else:
        # both: protobuf's json_format.Parse refuses two fields of one oneof before the stream
        # starts, a 500; neither: Decode fails reading the missing content after the 200 header,
        # and the stream breaks (the emulator answers 500 there too)
        which = "both text_content and token_content" if ids else "neither text_content nor token_content"
        raise ApiError(500, f"the request has {which}", "InternalServerError")
    # the emulator's own refusals (JetStream has none: it prefills an empty prompt's BOS, cuts a long
    # prompt to its longest prefill bucket and has no minimum output): its engine cannot run these
    if tokens < 1:
        raise ApiError(400, "the prompt is empty", param="text_content")
    if request.max_tokens < 1:
        raise ApiError(400, f"max_tokens must be at least 1, got {request.max_tokens}", param="max_tokens")
    needs = tokens + request.max_tokens
    if needs > max_model_len:
        raise ApiError(
            400,
            f"the emulated engine holds {max_model_len} tokens; the request needs {needs} "
            f"({tokens} in the prompt, {request.max_tokens} to generate)",
            param="max_tokens",
        )
    return Decode(tokens, request.max_tokens, token_ids=ids is not None)


def chunk(token_ids: bool) -> bytes:
    """One token's DecodeResponse as json_format.MessageToJson writes it (2-space indent,
    camelCase names, default values left out)."""
    sample: dict[str, Any] = (
        {"tokenIds": [TOKEN_ID]} if token_ids else {"text": TOKEN_TEXT, "tokenIds": [TOKEN_ID]}
    )
    return json.dumps({"streamContent": {"samples": [sample]}}, indent=2).encode()


async def generate(request: web.Request, engine: EngineLoop, max_model_len: int) -> web.StreamResponse:
    """POST /v1/generate: one chunk per token, as they are decoded."""
    decode = parse_decode(await request.read(), max_model_len)
    try:
        stream = engine.open(decode.input_tokens, decode.max_tokens)
    except RequestRejected as e:  # parse_decode checks the same limit; kept for safety
        raise ApiError(400, str(e), param="max_tokens") from e
    piece = chunk(decode.token_ids)
    async with stream:
        # Starlette adds the charset to a text/ media type
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await response.prepare(request)
        async for _ in stream:
            await response.write(piece)
    await response.write_eof()
    return response


def json_response(
    content: object, status: int = 200, *, indent: int | None = None, headers: dict[str, str] | None = None
) -> web.Response:
    """As Starlette writes JSON: compact unless indented, content type without a charset."""
    text = json.dumps(content, ensure_ascii=False, indent=indent, separators=None if indent else (",", ":"))
    return web.Response(
        body=text.encode(), status=status, headers={"Content-Type": "application/json", **(headers or {})}
    )


def health() -> web.Response:
    """GET /v1/health once loaded: the driver is live (JetStream writes the bool as a string)."""
    return json_response({"is_live": "True"}, indent=4)


def root() -> web.Response:
    """GET /: the server's name."""
    return json_response({"message": "JetStream HTTP Server"}, indent=4)
