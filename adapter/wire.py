"""The External Metrics API wire format: Quantity strings, value lists, Status errors, discovery,
the names a path may carry.

Pure functions from values to JSON-ready dicts (and the Accept-header negotiation), used by
adapter/server.py. Shapes follow k8s.io/metrics `external_metrics/v1beta1` and apimachinery
`metav1`; see ../shared/external_metrics_api.md sections 1-2.
"""

from __future__ import annotations

import enum
import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from adapter.backend import MetricSample
from common.status import status_body

GROUP = "external.metrics.k8s.io"
VERSION = "v1beta1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
LIST_KIND = "ExternalMetricValueList"
PLACEHOLDER_RESOURCE = "externalmetrics"  # what discovery lists when names are too many to list
DISCOVERY_MAX_LISTED = 200

JSON = "application/json"
# The HPA computes value × 1000 in int64 (MilliValue), so larger magnitudes would overflow there.
QUANTITY_MAX_ABS = 9_223_372_036_854_775

_MILLI = Decimal("0.001")
_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


# --- names in request paths ----------------------------------------------------------------------

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def namespace_problem(name: str) -> str | None:
    """Why `name` cannot be a namespace (a DNS-1123 label, as the apiserver demands); None if it can."""
    if len(name) > 63 or not _DNS1123_LABEL.fullmatch(name):
        return (
            f"namespace {name!r} is not a valid namespace name "
            "(a DNS-1123 label: lower-case a-z, 0-9, '-'; ≤ 63)"
        )
    return None


def metric_name_problem(name: str) -> str | None:
    """Why `name` cannot be a metric name in a path (Go's IsValidPathSegmentName); None if it can.
    The server checks it itself: aiohttp hands `a%2Fb` and `%2e%2e` to handlers already decoded."""
    if name in (".", "..") or "/" in name or "%" in name:
        return f"metric name {name!r} may not be '.' or '..' and may not contain '/' or '%'"
    return None


# --- quantities ----------------------------------------------------------------------------------


class QuantityError(ValueError):
    """A value that has no Quantity form (NaN, ±Inf, or beyond what the HPA can hold)."""


def format_quantity(value: float) -> str:
    """The canonical DecimalSI Quantity string Go would emit for `value`, at milli precision.

    Milli because the HPA reads `MilliValue()`. Rounding is half-even on the float's shortest
    decimal form, so float noise never rounds up: 0.1 + 0.2 = 0.30000000000000004 -> "300m", not
    "301m". Then the largest exponent in {-3, 0, 3, …, 18} that keeps the mantissa an integer:
    1.5 -> 1500 × 10^-3 -> "1500m"; 1500 -> "1500" (1.5k is not an integer); 2000 -> "2k".
    """
    if not math.isfinite(value):
        raise QuantityError(f"value {value!r} has no Quantity form")
    if abs(value) > QUANTITY_MAX_ABS:
        raise QuantityError(f"value {value!r} exceeds the HPA's range (|v| ≤ {QUANTITY_MAX_ABS})")
    if value == int(value):  # queue and batch sizes: whole numbers, no Decimal needed
        mantissa, exponent = int(value), 0
    else:
        mantissa, exponent = (
            int(Decimal(repr(value)).quantize(_MILLI, rounding=ROUND_HALF_EVEN).scaleb(3)),
            -3,
        )
    if mantissa == 0:
        return "0"
    while mantissa % 10 == 0 and exponent < 18:
        mantissa //= 10
        exponent += 1
    # back down to a multiple of 3: 15 × 10^2 -> 1500 × 10^0
    shift = exponent % 3
    return f"{mantissa * 10**shift}{_SUFFIXES[exponent - shift]}"


def milli_round(value: float) -> float:
    """`value` at the precision `format_quantity` sends (half-even at milli), as a float."""
    return float(Decimal(repr(value)).quantize(_MILLI, rounding=ROUND_HALF_EVEN))


def format_time(unix_s: float) -> str:
    """RFC 3339 in UTC with whole seconds and a `Z`, as Go's metav1.Time marshals."""
    return _format_second(math.floor(unix_s))


@functools.lru_cache(maxsize=1024)  # samples of one scrape round share their second
def _format_second(second: int) -> str:
    return datetime.fromtimestamp(second, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def metric_value_list(metric: str, samples: Sequence[MetricSample]) -> dict[str, Any]:
    """An ExternalMetricValueList; raises QuantityError if a value cannot be sent."""
    items = []
    for s in samples:
        item: dict[str, Any] = {
            "metricName": metric,
            "metricLabels": dict(s.labels),
            "timestamp": format_time(s.timestamp),
        }
        if s.window_s is not None:
            item["window"] = int(s.window_s)  # must be a JSON integer or the whole decode fails
        item["value"] = format_quantity(s.value)
        items.append(item)
    return {"kind": LIST_KIND, "apiVersion": GROUP_VERSION, "metadata": {}, "items": items}


# --- metav1.Status -----------------------------------------------------------------------------


class Reason(enum.StrEnum):
    BAD_REQUEST = "BadRequest"
    UNAUTHORIZED = "Unauthorized"
    FORBIDDEN = "Forbidden"
    NOT_FOUND = "NotFound"
    METHOD_NOT_ALLOWED = "MethodNotAllowed"
    NOT_ACCEPTABLE = "NotAcceptable"
    TOO_MANY_REQUESTS = "TooManyRequests"
    INTERNAL_ERROR = "InternalError"
    SERVICE_UNAVAILABLE = "ServiceUnavailable"


REASON_CODES: Mapping[Reason, int] = {
    Reason.BAD_REQUEST: 400,
    Reason.UNAUTHORIZED: 401,
    Reason.FORBIDDEN: 403,
    Reason.NOT_FOUND: 404,
    Reason.METHOD_NOT_ALLOWED: 405,
    Reason.NOT_ACCEPTABLE: 406,
    Reason.TOO_MANY_REQUESTS: 429,
    Reason.INTERNAL_ERROR: 500,
    Reason.SERVICE_UNAVAILABLE: 503,
}


class StatusError(Exception):
    """An error answer; the server renders it as a metav1.Status with `code` = HTTP status."""

    def __init__(self, reason: Reason, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(reason, message)
        self.reason = reason
        self.message = message
        self.details = details

    @property
    def code(self) -> int:
        return REASON_CODES[self.reason]

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"


def status(error: StatusError) -> dict[str, Any]:
    return status_body(error.code, error.reason.value, error.message, error.details)


def not_found_route() -> StatusError:
    return StatusError(Reason.NOT_FOUND, "the server could not find the requested resource", {})


def metric_details(metric: str) -> dict[str, str]:
    return {"name": metric, "group": GROUP, "kind": metric}


# --- discovery ---------------------------------------------------------------------------------

_GROUP_VERSION_REF = {"groupVersion": GROUP_VERSION, "version": VERSION}
_GROUP = {"name": GROUP, "versions": [_GROUP_VERSION_REF], "preferredVersion": _GROUP_VERSION_REF}


def listed_resources(metric_names: Sequence[str]) -> list[str]:
    """The names discovery lists: the metrics when few, else (or when none) one placeholder.

    Never empty: client-go ≥ 0.26 warns `Got empty response` on every kubectl call otherwise.
    """
    names = sorted(set(metric_names))
    if not names or len(names) > DISCOVERY_MAX_LISTED:
        return [PLACEHOLDER_RESOURCE]
    return names


def api_resource_list(metric_names: Sequence[str]) -> dict[str, Any]:
    resources = [
        {"name": name, "singularName": "", "namespaced": True, "kind": LIST_KIND, "verbs": ["get"]}
        for name in listed_resources(metric_names)
    ]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": GROUP_VERSION,
        "resources": resources,
    }


def api_group() -> dict[str, Any]:
    return {"kind": "APIGroup", "apiVersion": "v1", **_GROUP}


def api_group_list() -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_GROUP]}


def api_group_discovery_list(metric_names: Sequence[str], version: str) -> dict[str, Any]:
    """Aggregated discovery (apidiscovery.k8s.io v2 or v2beta1), which the aggregator asks `/apis` for."""
    resources = [
        {
            "resource": name,
            "responseKind": {"group": "", "version": "", "kind": LIST_KIND},
            "scope": "Namespaced",
            "singularResource": "",
            "verbs": ["get"],
        }
        for name in listed_resources(metric_names)
    ]
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{version}",
        "metadata": {},
        "items": [
            {
                "metadata": {"name": GROUP},
                "versions": [{"version": VERSION, "resources": resources, "freshness": "Current"}],
            }
        ],
    }


def discovery_content_type(version: str) -> str:
    return f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"


def version_info(version: str) -> dict[str, str]:
    return {
        "major": "0",
        "minor": version.split(".")[1] if version.count(".") >= 1 else "0",
        "gitVersion": f"v{version}",
        "gitCommit": "",
        "gitTreeState": "",
        "buildDate": "",
        "goVersion": "n/a",
        "compiler": "n/a",
        "platform": "n/a",
    }


def dumps(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


# --- content negotiation -----------------------------------------------------------------------


class Answer(enum.Enum):
    JSON = "json"
    DISCOVERY_V2 = "v2"
    DISCOVERY_V2BETA1 = "v2beta1"


@dataclass(frozen=True, slots=True)
class _MediaRange:
    type: str
    subtype: str
    params: Mapping[str, str]
    q: float


def _parse_accept(header: str) -> list[_MediaRange]:
    ranges: list[_MediaRange] = []
    for part in header.split(","):
        pieces = [p.strip() for p in part.split(";")]
        if not pieces[0]:
            continue
        kind, _, sub = pieces[0].lower().partition("/")
        params: dict[str, str] = {}
        q = 1.0
        for piece in pieces[1:]:
            name, _, val = piece.partition("=")
            name, val = name.strip().lower(), val.strip().strip('"')
            if name == "q":
                try:
                    q = float(val)
                except ValueError:
                    q = 0.0  # a malformed weight never selects a type
                if not 0.0 <= q <= 1.0 or math.isnan(q):
                    q = 0.0
            elif name:
                params[name] = val
        ranges.append(_MediaRange(kind, sub, params, q))
    # highest weight first; ties keep the client's order (sorted is stable)
    return sorted(ranges, key=lambda r: -r.q)


@functools.lru_cache(maxsize=256)  # a cluster sends a handful of distinct Accept headers
def negotiate(accept: str | None, *, discovery: bool = False) -> Answer | None:
    """What to answer for this Accept header, or None for 406 (apiserver `NegotiateOutputMediaType`).

    JSON when Accept is absent or offers `application/json` (without a transform such as
    `as=Table`), `application/*` or `*/*`. With `discovery`, an aggregated-discovery request
    (`g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`) is answered in kind.
    """
    if accept is None or not accept.strip():
        return Answer.JSON
    for r in _parse_accept(accept):
        if r.q <= 0:
            continue
        if r.type == "*" and r.subtype == "*":
            return Answer.JSON
        if r.type != "application":
            continue
        if r.subtype == "*":
            return Answer.JSON
        if r.subtype != "json":
            continue
        transform = {k: r.params[k] for k in ("g", "v", "as") if k in r.params}
        if not transform:
            return Answer.JSON
        if (
            discovery
            and transform.get("g") == "apidiscovery.k8s.io"
            and transform.get("as") == "APIGroupDiscoveryList"
        ):
            if transform.get("v") == "v2":
                return Answer.DISCOVERY_V2
            if transform.get("v") == "v2beta1":
                return Answer.DISCOVERY_V2BETA1
    return None


def not_acceptable() -> StatusError:
    return StatusError(Reason.NOT_ACCEPTABLE, f"only the following media types are accepted: {JSON}")
