"""KEDA's Prometheus scaler, transcribed from kedacore/keda pkg/scalers/prometheus_scaler.go:
the value of an instant query's result and the trigger's activity."""

from __future__ import annotations

import json
import math
from typing import Any


class ScalerError(Exception):
    """The scaler failed: the metric is unavailable this time (upstream's error text)."""


def query_value(status: int, body: str, *, ignore_null_values: bool = True) -> float:
    """ExecutePromQuery after the HTTP round trip: the one element's value; an empty result, an
    empty value list or ±Inf/NaN are 0 with ignoreNullValues, else errors; several elements are
    an error."""
    if status < 200 or status > 299:
        raise ScalerError(f"prometheus query api returned error. status: {status}")
    try:
        doc = json.loads(body)
    except json.JSONDecodeError as e:
        raise ScalerError(str(e)) from e
    result: list[Any] = ((doc or {}).get("data") or {}).get("result") or []
    if not result:
        if ignore_null_values:
            return 0.0
        raise ScalerError("prometheus metrics 'prometheus' target may be lost, the result is empty")
    if len(result) > 1:
        raise ScalerError("prometheus query returned multiple elements")
    value = (result[0] or {}).get("value") or []
    if not value:
        if ignore_null_values:
            return 0.0
        raise ScalerError("prometheus metrics 'prometheus' target may be lost, the value list is empty")
    if len(value) < 2:
        raise ScalerError("prometheus query didn't return enough values")
    v = -1.0
    if value[1] is not None:
        try:
            v = float(value[1])  # strconv.ParseFloat takes "+Inf", "-Inf", "NaN"
        except (TypeError, ValueError) as e:
            raise ScalerError(f"cannot parse {value[1]!r}") from e
    if math.isinf(v) or math.isnan(v):
        if ignore_null_values:
            return 0.0
        raise ScalerError(f"prometheus query returns {v:f}")
    return v


def metric_milli(value: float) -> int:
    """GenerateMetricInMili: int64(value x 1000), truncated as Go's conversion does."""
    return int(value * 1000)


def is_active(value: float, activation_threshold: float) -> bool:
    """GetMetricsAndActivity: the trigger is active strictly above its activationThreshold."""
    return value > activation_threshold


def instant_vector_body(value: float | None, at_s: float) -> str:
    """An /api/v1/query response holding `value` as the single element (None: no element)."""
    result = [] if value is None else [{"metric": {}, "value": [at_s, repr(float(value))]}]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})
