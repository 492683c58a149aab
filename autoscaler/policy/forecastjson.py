"""ForecastState <-> JSON: what a restarted controller resumes from its CRD status (forecast.py's
state; docs/forecasting.md). Parsing checks every field and names the one that is malformed."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from autoscaler.policy.forecast import (
    ForecastState,
    HoltState,
    LinearState,
    SeasonalState,
    linear_state,
)

STATE_VERSION = 1


def to_dict(state: ForecastState) -> dict[str, Any]:
    """A JSON-ready dict of `state` (ForecastState.to_dict)."""
    out: dict[str, Any] = {
        "version": STATE_VERSION,
        "last_at": state.last_at,
        "last_value": state.last_value,
    }
    if state.holt is not None:
        h = state.holt
        out["holt"] = {"level": h.level, "trend": h.trend, "primed": h.primed}
    if state.linear is not None:
        lin = state.linear
        out["linear"] = {
            "samples": [[t, v] for t, v in lin.samples],
            "origin": lin.origin,
            "front": len(lin.front_sums),
        }
    if state.seasonal is not None:
        s = state.seasonal
        out["seasonal"] = {
            "bucket_s": s.bucket_s,
            "bucket": s.bucket,
            "open_sum": s.open_sum,
            "open_count": s.open_count,
            "means": list(s.means),
        }
    return out


def from_dict(data: Mapping[str, Any]) -> ForecastState:
    """Parse `to_dict` output; a malformed field raises ValueError naming it and its value."""
    return _parse_state(data)


def _field(data: Mapping[str, Any], key: str, path: str) -> Any:
    if not isinstance(data, Mapping):
        raise ValueError(f"forecaster state: {path} must be an object, got {data!r}")
    if key not in data:
        raise ValueError(f"forecaster state: {path}.{key} is missing")
    return data[key]


def _finite(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"forecaster state: {path} must be a finite number, got {value!r}")
    return float(value)


def _number(data: Mapping[str, Any], key: str, path: str) -> float:
    return _finite(_field(data, key, path), f"{path}.{key}")


def _integer(data: Mapping[str, Any], key: str, path: str, minimum: int) -> int:
    value = _field(data, key, path)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"forecaster state: {path}.{key} must be an integer >= {minimum}, got {value!r}")
    return value


def _list(data: Mapping[str, Any], key: str, path: str) -> Sequence[Any]:
    value = _field(data, key, path)
    if not isinstance(value, list | tuple) or not value:
        raise ValueError(f"forecaster state: {path}.{key} must be a non-empty list, got {value!r}")
    return value


def _parse_state(data: Mapping[str, Any]) -> ForecastState:
    root = "state"
    version = _field(data, "version", root)
    if version != STATE_VERSION:
        raise ValueError(f"forecaster state: {root}.version must be {STATE_VERSION}, got {version!r}")
    last_at = _number(data, "last_at", root)
    last_value = _number(data, "last_value", root)
    holt = linear = seasonal = None
    if data.get("holt") is not None:
        h = data["holt"]
        primed = _field(h, "primed", "state.holt")
        if not isinstance(primed, bool):
            raise ValueError(f"forecaster state: state.holt.primed must be true or false, got {primed!r}")
        holt = HoltState(_number(h, "level", "state.holt"), _number(h, "trend", "state.holt"), primed)
    if data.get("linear") is not None:
        linear = _parse_linear(data["linear"], last_at)
    if data.get("seasonal") is not None:
        seasonal = _parse_seasonal(data["seasonal"], last_at)
    return ForecastState(last_at, last_value, holt, linear, seasonal)


def _parse_linear(data: Mapping[str, Any], last_at: float) -> LinearState:
    path = "state.linear"
    samples: list[tuple[float, float]] = []
    for i, pair in enumerate(_list(data, "samples", path)):
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise ValueError(f"forecaster state: {path}.samples[{i}] must be [at, value], got {pair!r}")
        t, v = _finite(pair[0], f"{path}.samples[{i}][0]"), _finite(pair[1], f"{path}.samples[{i}][1]")
        if samples and t < samples[-1][0]:
            raise ValueError(f"forecaster state: {path}.samples[{i}] at {t!r} is out of time order")
        samples.append((t, v))
    if samples[-1][0] != last_at:
        raise ValueError(
            f"forecaster state: {path}.samples must end at last_at={last_at!r}, got {samples[-1][0]!r}"
        )
    origin = _number(data, "origin", path)
    if origin > samples[0][0]:
        raise ValueError(
            f"forecaster state: {path}.origin {origin!r} is after samples[0] at {samples[0][0]!r}"
        )
    front = _integer(data, "front", path, 0)
    if front > len(samples):
        raise ValueError(f"forecaster state: {path}.front must be <= {len(samples)} samples, got {front}")
    return linear_state(tuple(samples), origin, front)


def _parse_seasonal(data: Mapping[str, Any], last_at: float) -> SeasonalState:
    path = "state.seasonal"
    bucket_s = _number(data, "bucket_s", path)
    if bucket_s <= 0.0:
        raise ValueError(f"forecaster state: {path}.bucket_s must be > 0, got {bucket_s!r}")
    bucket = _field(data, "bucket", path)
    if isinstance(bucket, bool) or not isinstance(bucket, int) or bucket != math.floor(last_at / bucket_s):
        raise ValueError(
            f"forecaster state: {path}.bucket must be the last sample's bucket "
            f"{math.floor(last_at / bucket_s)}, got {bucket!r}"
        )
    means: list[float | None] = []
    for i, mean in enumerate(_list(data, "means", path)):
        means.append(None if mean is None else _finite(mean, f"{path}.means[{i}]"))
    return SeasonalState(
        bucket_s,
        bucket,
        _number(data, "open_sum", path),
        _integer(data, "open_count", path, 1),
        tuple(means),
    )
