"""Knative's autoscaler settings (the `config-autoscaler` ConfigMap, knative/serving
pkg/autoscaler/config/config.go) with upstream's defaults and validation, and how a revision's
decider and metric windows are derived from them (pkg/reconciler/autoscaling/kpa/resources,
pkg/reconciler/autoscaling/resources)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from replay.policies.kpa.decider import DeciderSpec

BUCKET_SIZE_S = 1  # config.BucketSize: metric buckets of one second
TARGET_MIN = 0.01  # autoscaling.TargetMin
WINDOW_MIN_S, WINDOW_MAX_S = 6.0, 3600.0  # the stable window's allowed range
PANIC_WINDOW_PERCENTAGE_MIN, PANIC_WINDOW_PERCENTAGE_MAX = 1.0, 100.0
PROGRESS_DEADLINE_S = 600.0  # config-deployment progress-deadline
ACTIVATION_TIMEOUT_BUFFER_S = 30.0  # kpa/scaler.go activationTimeoutBuffer


class Aggregation(StrEnum):
    LINEAR = "linear"  # the default: the mean of the window's buckets
    WEIGHTED_EXPONENTIAL = "weightedExponential"  # autoscaling.knative.dev/metric-aggregation-algorithm


class KpaConfigError(ValueError):
    """A setting upstream's validate() refuses; the message is upstream's."""


@dataclass(frozen=True, slots=True)
class KpaConfig:
    """config-autoscaler, defaults as upstream's defaultConfig() (field names are the ConfigMap keys
    in snake case). Note upstream's default target-burst-capacity is 211, not 200."""

    enable_scale_to_zero: bool = True
    container_concurrency_target_percentage: float = 0.7  # a fraction (70 %)
    container_concurrency_target_default: float = 100.0
    max_scale_up_rate: float = 1000.0
    max_scale_down_rate: float = 2.0
    target_burst_capacity: float = 211.0
    panic_window_percentage: float = 10.0
    activator_capacity: float = 100.0
    panic_threshold_percentage: float = 200.0
    stable_window_s: float = 60.0
    scale_to_zero_grace_period_s: float = 30.0
    scale_to_zero_pod_retention_period_s: float = 0.0
    scale_down_delay_s: float = 0.0
    allow_zero_initial_scale: bool = False
    initial_scale: int = 1
    min_scale: int = 0
    max_scale: int = 0  # 0: unbounded
    activation_scale: int = 0  # the autoscaling.knative.dev/activation-scale annotation; 0: unset
    aggregation: Aggregation = Aggregation.LINEAR
    progress_deadline_s: float = PROGRESS_DEADLINE_S

    def __post_init__(self) -> None:
        def bad(message: str) -> KpaConfigError:
            return KpaConfigError(message)

        if self.scale_to_zero_grace_period_s <= 0:
            raise bad(
                f"scale-to-zero-grace-period must be positive, was: {self.scale_to_zero_grace_period_s}s"
            )
        if self.scale_down_delay_s < 0:
            raise bad(f"scale-down-delay cannot be negative, was: {self.scale_down_delay_s}s")
        if self.scale_down_delay_s != round(self.scale_down_delay_s):
            raise bad(
                f"scale-down-delay = {self.scale_down_delay_s}s, "
                "must be specified with at most second precision"
            )
        if self.scale_to_zero_pod_retention_period_s < 0:
            raise bad("scale-to-zero-pod-retention-period cannot be negative")
        if self.target_burst_capacity < 0 and self.target_burst_capacity != -1:
            raise bad(
                "target-burst-capacity must be either non-negative or -1 (for unlimited), "
                f"was: {self.target_burst_capacity:f}"
            )
        fraction = self.container_concurrency_target_percentage
        if fraction <= 0 or fraction > 1:
            raise bad(
                f"container-concurrency-target-percentage = {fraction:f} "
                "is outside of valid range of (0, 100]"
            )
        if fraction * self.container_concurrency_target_default < TARGET_MIN:
            raise bad(
                "container-concurrency-target-percentage and container-concurrency-target-default yield "
                f"target concurrency below {TARGET_MIN}"
            )
        if self.activator_capacity < 1:
            raise bad(f"activator-capacity = {self.activator_capacity}, must be at least 1")
        if self.max_scale_up_rate <= 1.0:
            raise bad(f"max-scale-up-rate = {self.max_scale_up_rate}, must be greater than 1.0")
        if self.max_scale_down_rate <= 1.0:
            raise bad(f"max-scale-down-rate = {self.max_scale_down_rate}, must be greater than 1.0")
        if not WINDOW_MIN_S <= self.stable_window_s <= WINDOW_MAX_S:
            raise bad(f"stable-window = {self.stable_window_s}s, must be in [6s; 1h0m0s] range")
        if self.stable_window_s != round(self.stable_window_s):
            raise bad(
                f"stable-window = {self.stable_window_s}s, must be specified with at most second precision"
            )
        pct = self.panic_window_percentage
        if not PANIC_WINDOW_PERCENTAGE_MIN <= pct <= PANIC_WINDOW_PERCENTAGE_MAX:
            raise bad(f"panic-window-percentage = {pct}, must be in [1, 100] interval")
        if self.initial_scale < 0 or (self.initial_scale == 0 and not self.allow_zero_initial_scale):
            raise bad(
                f"initial-scale = {self.initial_scale}, must be at least 0 "
                "(or at least 1 when allow-zero-initial-scale is false)"
            )
        if self.min_scale < 0:
            raise bad(f"min-scale = {self.min_scale}, must be at least 0")
        if self.max_scale < 0:
            raise bad(f"max-scale = {self.max_scale}, must be at least 0")
        if self.min_scale > self.max_scale > 0:
            raise bad(f"min-scale ({self.min_scale}) must be less than max-scale ({self.max_scale})")
        if self.activation_scale == 1 or self.activation_scale < 0:
            raise bad(f"activation-scale = {self.activation_scale}, must be >= 2 (or unset)")

    @property
    def panic_window_s(self) -> float:
        """MakeMetric: stable window x percentage, rounded to the second, at least one bucket."""
        window = float(round_half_away(self.stable_window_s * self.panic_window_percentage / 100.0))
        return max(window, float(BUCKET_SIZE_S))

    @property
    def activation_timeout_s(self) -> float:
        return self.progress_deadline_s + ACTIVATION_TIMEOUT_BUFFER_S

    def decider_spec(self, target: float | None, container_concurrency: int = 0) -> DeciderSpec:
        """MakeDecider with ResolveMetricTarget (concurrency): `target` is the
        autoscaling.knative.dev/target annotation (None: unset), the per-pod target is
        total x container-concurrency-target-percentage."""
        total = float(container_concurrency) or self.container_concurrency_target_default
        if target is not None:
            total = min(target, float(container_concurrency)) if container_concurrency else target
        return DeciderSpec(
            target_value=max(TARGET_MIN, total * self.container_concurrency_target_percentage),
            total_value=total,
            target_burst_capacity=self.target_burst_capacity,
            panic_threshold=self.panic_threshold_percentage / 100.0,
            stable_window_s=self.stable_window_s,
            max_scale_up_rate=self.max_scale_up_rate,
            max_scale_down_rate=self.max_scale_down_rate,
            scale_down_delay_s=self.scale_down_delay_s,
            activation_scale=self.activation_scale,
        )


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATIONS = {
    "stable-window": "stable_window_s",
    "scale-down-delay": "scale_down_delay_s",
    "scale-to-zero-grace-period": "scale_to_zero_grace_period_s",
    "scale-to-zero-pod-retention-period": "scale_to_zero_pod_retention_period_s",
}
_FLOATS = {
    "max-scale-up-rate": "max_scale_up_rate",
    "max-scale-down-rate": "max_scale_down_rate",
    "container-concurrency-target-percentage": "container_concurrency_target_percentage",
    "container-concurrency-target-default": "container_concurrency_target_default",
    "target-burst-capacity": "target_burst_capacity",
    "panic-window-percentage": "panic_window_percentage",
    "activator-capacity": "activator_capacity",
    "panic-threshold-percentage": "panic_threshold_percentage",
}
_INTS = {"initial-scale": "initial_scale", "min-scale": "min_scale", "max-scale": "max_scale"}
_BOOLS = {
    "enable-scale-to-zero": "enable_scale_to_zero",
    "allow-zero-initial-scale": "allow_zero_initial_scale",
}


def parse_go_duration(text: str) -> float:
    """Go's time.ParseDuration, in seconds ("1h1s", "61984ms", "-1m23s")."""
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    if body == "0":
        return 0.0
    parts = _DURATION_PART.findall(body)
    if not body or "".join(n + u for n, u in parts) != body:
        raise KpaConfigError(f"time: invalid duration {text!r}")
    return sign * sum(float(n) * _UNIT_S[u] for n, u in parts)


def config_from_map(data: Mapping[str, str]) -> KpaConfig:
    """NewConfigFromMap: the config-autoscaler ConfigMap's data over the defaults; a
    container-concurrency-target-percentage above 1 is a percentage (legacy values in (0, 1] are
    fractions)."""
    changes: dict[str, object] = {}
    for key, text in data.items():
        try:
            if key in _DURATIONS:
                changes[_DURATIONS[key]] = parse_go_duration(text)
            elif key in _FLOATS:
                changes[_FLOATS[key]] = float(text)
            elif key in _INTS:
                changes[_INTS[key]] = int(text)
            elif key in _BOOLS:
                changes[_BOOLS[key]] = text.strip().lower() == "true"  # strconv-like, case-insensitive
        except ValueError as e:
            raise KpaConfigError(f"failed to parse data: {key}: {e}") from e
    fraction = changes.get("container_concurrency_target_percentage")
    if isinstance(fraction, float) and fraction > 1.0:
        changes["container_concurrency_target_percentage"] = fraction / 100.0
    return replace(KpaConfig(), **changes)  # type: ignore[arg-type]


def round_half_away(x: float) -> int:
    """time.Duration.Round(time.Second) for positive durations: halves away from zero."""
    return math.floor(x + 0.5)
