"""metav1.Status: the error body every Kubernetes API server answers with, built and read in one place.

`{"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message", "reason",
"details", "code"}`; `code` equals the HTTP status. 422 answers name the fields in `details.causes`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# HTTP status -> the StatusReason the apiserver pairs with it (k8s.io/apimachinery metav1 types.go)
REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_body(
    code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A Failure Status; `reason` "" takes the usual one for `code`."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or REASONS.get(code, ""),
    }
    if details is not None:
        body["details"] = dict(details)
    body["code"] = code
    return body


@dataclass(frozen=True, slots=True)
class Status:
    """A Status as read from an answer."""

    code: int
    reason: str
    message: str
    causes: tuple[Mapping[str, Any], ...] = field(default=())


def parse_status(body: Any) -> Status | None:
    """The Status in `body` (bytes, text or parsed JSON); None when it is not one."""
    if isinstance(body, bytes | bytearray):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body) if body else None
        except ValueError:
            return None
    if not isinstance(body, Mapping) or body.get("kind") != "Status":
        return None
    code = body.get("code")
    details = body.get("details")
    causes = details.get("causes") if isinstance(details, Mapping) else None
    return Status(
        code=code if isinstance(code, int) and not isinstance(code, bool) else 0,
        reason=str(body.get("reason") or ""),
        message=str(body.get("message") or ""),
        causes=tuple(c for c in causes or () if isinstance(c, Mapping)),
    )
