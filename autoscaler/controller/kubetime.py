"""Kubernetes timestamps: `Time` (RFC 3339, whole seconds) and `MicroTime` (exactly six fractional digits).

`datetime.isoformat()` drops the fraction when the microseconds are 0, which the kube-apiserver
rejects for MicroTime fields (400); these helpers always write the digits and always UTC with `Z`.
"""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(t: float) -> str:
    """metav1.Time: `2026-11-29T10:00:00Z` (the API truncates to seconds)."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(t: float) -> str:
    """metav1.MicroTime: `2026-11-29T10:00:00.000000Z`."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> float:
    """Unix seconds from an RFC 3339 timestamp (`Z` or an offset, with or without a fraction)."""
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}") from None
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without a zone: {text!r}")
    return parsed.timestamp()
