"""The OpenAI-compatible request bodies the emulator accepts, validated as the engines do, and the
error each engine words its own way (replay/emulate/server.py serves them; JetStream's own
/v1/generate body is jetstreamapi.py's)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class ApiError(Exception):
    """A refused request; each engine words and shapes it its own way (see `error_body`). `detail`:
    a structured detail where the engine gives one (FastAPI's validation errors, JetStream)."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "BadRequestError",
        param: str | None = None,
        detail: object = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.detail = detail


def error_body(engine: str, e: ApiError) -> tuple[int, dict[str, Any] | str]:
    """The status and body of the engine's answer: a JSON object, or plain text."""
    if engine == "vllm":  # vllm/entrypoints/openai/protocol.py ErrorResponse(error=ErrorInfo(...))
        return e.status, {"error": {"message": e.message, "type": e.kind, "param": e.param, "code": e.status}}
    if engine == "sglang":  # sglang/srt/entrypoints/openai/protocol.py ErrorResponse (flat)
        return e.status, {
            "object": "error",
            "message": e.message,
            "type": e.kind,
            "param": e.param,
            "code": e.status,
        }
    if engine == "jetstream":  # FastAPI: {"detail": ...}; an unhandled exception, Starlette's plain 500
        if e.status == 500:
            return 500, "Internal Server Error"
        return e.status, {"detail": e.message if e.detail is None else e.detail}
    # TGI (router/src/lib.rs ErrorResponse): validation failures are 422 with error_type "validation"
    kind = {400: "validation", 404: "validation", 503: "unhealthy", 429: "overloaded"}.get(
        e.status, "generation"
    )
    return (422 if kind == "validation" else e.status), {"error": e.message, "error_type": kind}


@dataclass(frozen=True, slots=True)
class Generation:
    """One validated completions or chat completions request."""

    chat: bool
    input_tokens: int
    max_tokens: int
    stream: bool
    include_usage: bool


def count_tokens(text: str) -> int:
    """The emulator's tokenizer: one token per whitespace-separated word."""
    return len(text.split())


def parse_generation(body: Mapping[str, Any], *, chat: bool, model: str, max_model_len: int) -> Generation:
    """Validate a completions / chat completions body as the engines do; ApiError names the field."""
    asked = body.get("model")
    if asked is not None and asked != model:
        raise ApiError(404, f"The model `{asked}` does not exist.", "NotFoundError", "model")
    if chat:
        input_tokens = _chat_tokens(body.get("messages"))
        max_tokens = _int_field(body, "max_completion_tokens")
        if max_tokens is None:
            max_tokens = _int_field(body, "max_tokens")
        if max_tokens is None:  # as vLLM: whatever the context leaves; none left is the context error below
            max_tokens = max(1, max_model_len - input_tokens)
    else:
        input_tokens = _prompt_tokens(body.get("prompt"))
        max_tokens = _int_field(body, "max_tokens")
        if max_tokens is None:
            max_tokens = 16  # the OpenAI completions default
    if max_tokens < 1:
        raise ApiError(400, f"max_tokens must be at least 1, got {max_tokens}", param="max_tokens")
    n = body.get("n", 1)
    if n != 1:
        raise ApiError(400, f"n must be 1 (the emulator generates one choice), got {n!r}", param="n")
    if input_tokens + max_tokens > max_model_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {max_model_len} tokens. However, you requested "
            f"{input_tokens + max_tokens} tokens ({input_tokens} in the messages, {max_tokens} in the "
            "completion). Please reduce the length of the messages or completion.",
            param="max_tokens",
        )
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(400, f"stream must be a boolean, got {stream!r}", param="stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError(400, f"stream_options must be an object, got {options!r}", param="stream_options")
    if options and not stream:
        raise ApiError(400, "Stream options can only be defined when `stream=True`.", param="stream_options")
    return Generation(chat, input_tokens, max_tokens, stream, bool(options.get("include_usage", False)))


def _int_field(body: Mapping[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"{name} must be an integer, got {value!r}", param=name)
    return value


def _prompt_tokens(prompt: object) -> int:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        tokens = count_tokens(prompt)
    elif (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)
    ):
        tokens = len(prompt)
    elif prompt is None:
        raise ApiError(400, "prompt is required", param="prompt")
    else:
        raise ApiError(
            400, "prompt must be a string, a list of token ids, or a batch of one of them", param="prompt"
        )
    if tokens < 1:
        raise ApiError(400, "prompt must not be empty", param="prompt")
    return tokens


def _chat_tokens(messages: object) -> int:
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list", param="messages")
    total = 0
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m:
            raise ApiError(400, f"messages[{i}] must be an object with a role", param="messages")
        content = m.get("content")
        if isinstance(content, str):
            total += count_tokens(content)
        elif isinstance(content, list):
            for part in content:
                if (
                    isinstance(part, dict)
                    and part.get("type") == "text"
                    and isinstance(part.get("text"), str)
                ):
                    total += count_tokens(part["text"])
        elif content is not None:
            raise ApiError(
                400, f"messages[{i}].content must be a string or a list of parts", param="messages"
            )
    if total < 1:
        raise ApiError(400, "messages hold no text", param="messages")
    return total
