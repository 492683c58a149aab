"""Kubernetes timestamps: `Time` (RFC 3339, whole seconds) and `MicroTime` (exactly six fractional
digits); and nine digits where a float time must come back exactly (the policy state in the status).

`datetime.isoformat()` drops the fraction when the microseconds are 0, which the kube-apiserver
rejects for MicroTime fields (400); these helpers always write the digits and always UTC with `Z`.
"""

from __future__ import annotations

import math
import re
import time
from datetime import UTC, datetime
from functools import lru_cache


def rfc3339(t: float) -> str:
    """metav1.Time: `2026-11-29T10:00:00Z` (the API truncates to seconds)."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(t: float) -> str:
    """metav1.MicroTime: `2026-11-29T10:00:00.000000Z`."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def nano_time(t: float) -> str:
    """RFC 3339 with nine fractional digits, UTC: `2026-11-29T10:00:00.250000000Z`. Nanoseconds are
    finer than a float's step at today's Unix times (~0.24 us), so parse_time(nano_time(t)) == t."""
    whole = math.floor(t)
    nanos = round((t - whole) * 1e9)
    if nanos >= 1_000_000_000:
        whole, nanos = whole + 1, nanos - 1_000_000_000
    return f"{_second(whole)}.{nanos:09d}Z"


@lru_cache(maxsize=4096)
def _second(whole: int) -> str:
    """`2026-11-29T10:00:00`: a status write formats ~100 times, most of them seconds the writes
    before formatted too (the forecasts awaiting scoring stay for minutes): 12 -> ~1 µs a time."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))


_FRACTION = re.compile(r"^(?P<head>[^.]+)\.(?P<digits>\d+)(?P<zone>Z|[+-]\d\d:\d\d)$")


def parse_time(text: str) -> float:
    """Unix seconds from an RFC 3339 timestamp (`Z` or an offset, any number of fractional digits)."""
    fraction = 0.0
    if isinstance(text, str) and (match := _FRACTION.match(text)):
        text, fraction = match["head"] + match["zone"], int(match["digits"]) / 10 ** len(match["digits"])
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}") from None
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without a zone: {text!r}")
    return parsed.timestamp() + fraction
