"""The InferenceAutoscaler custom resource: its spec parsed into the policy's frozen values, and the
policy state persisted in (and restored from) its status.

The spec is autoscaler/hpaspec.py's HPA-shaped model (reused, not re-written) plus the controller's
own fields: `scaleTargetRef` (required here), `mode`, and `prediction.horizon`. The CRD's
openAPIV3Schema in deploy/controller/crd.yaml describes the same document; a test checks both agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Self

from pydantic import Field, ValidationError, model_validator

from autoscaler.controller.kubetime import nano_time, parse_time
from autoscaler.hpaspec import AutoscalerSpecModel, describe_validation_error
from autoscaler.policy.forecast import ForecastState
from autoscaler.policy.observe import (
    DEFAULT_HORIZON_QUANTILE,
    DEFAULT_MIN_STARTUP_SAMPLES,
    Horizon,
    HorizonSource,
)
from autoscaler.policy.planstate import PlannerState
from autoscaler.policy.spec import AutoscalerSpec
from autoscaler.policy.state import PolicyState, Recommendation, ScaleEvent
from autoscaler.policy.statejson import TimeCodec
from autoscaler.specbase import StrictModel
from autoscaler.specsections import PredictionModel

GROUP = "infscale.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "InferenceAutoscaler"
PLURAL = "inferenceautoscalers"


class Mode(StrEnum):
    DIRECT = "direct"  # write /scale
    HPA = "hpa"  # publish infscale_desired_replicas for an HPA (AverageValue 1) that stays the actuator
    DRY_RUN = "dryRun"  # decide and report only


class HorizonModel(StrictModel):
    source: HorizonSource = HorizonSource.AUTO
    quantile: Annotated[float, Field(ge=0.5, le=0.99)] = DEFAULT_HORIZON_QUANTILE
    min_samples: Annotated[int, Field(ge=1, le=256, alias="minSamples")] = DEFAULT_MIN_STARTUP_SAMPLES


class ControllerPredictionModel(PredictionModel):
    horizon: HorizonModel = Field(default_factory=HorizonModel)


class InferenceAutoscalerSpecModel(AutoscalerSpecModel):
    prediction: ControllerPredictionModel | None = None
    mode: Mode = Mode.DIRECT

    @model_validator(mode="after")
    def _has_target(self) -> Self:
        ref = self.scale_target_ref
        if ref is None:
            raise ValueError("scaleTargetRef is required (apiVersion, kind, name)")
        missing = [k for k in ("apiVersion", "kind", "name") if not ref.get(k)]
        if missing:
            raise ValueError(f"scaleTargetRef: missing {missing}")
        unknown = sorted(set(ref) - {"apiVersion", "kind", "name"})
        if unknown:
            raise ValueError(f"scaleTargetRef: unknown field(s) {unknown}")
        return self


@dataclass(frozen=True, slots=True)
class TargetRef:
    api_version: str  # "apps/v1", "leaderworkerset.x-k8s.io/v1", "v1" for the core group
    kind: str
    name: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass(frozen=True, slots=True)
class Autoscaler:
    """One InferenceAutoscaler, parsed. `status` is the raw status as read (restart recovery)."""

    namespace: str
    name: str
    uid: str
    generation: int
    target: TargetRef
    mode: Mode
    spec: AutoscalerSpec
    horizon: Horizon
    status: Mapping[str, Any]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class SpecError(ValueError):
    """An InferenceAutoscaler whose spec does not validate; the message names the field path."""


def parse_autoscaler(
    obj: Mapping[str, Any],
    *,
    tolerance: float,
    downscale_stabilization_s: int,
    max_metric_age_s: float | None,
) -> Autoscaler:
    meta = obj.get("metadata") or {}
    where = f"{meta.get('namespace', '?')}/{meta.get('name', '?')}"
    try:
        model = InferenceAutoscalerSpecModel.model_validate(obj.get("spec") or {})
    except ValidationError as exc:
        raise SpecError(describe_validation_error(exc, "spec")) from None
    try:
        spec = model.to_spec(
            tolerance=tolerance,
            downscale_stabilization_s=downscale_stabilization_s,
            max_metric_age_s=max_metric_age_s,
        )
    except ValueError as exc:
        raise SpecError(f"spec: {exc}") from None
    ref = model.scale_target_ref
    assert ref is not None  # the validator required it
    horizon = model.prediction.horizon if model.prediction else HorizonModel()
    if (
        model.prediction is not None
        and horizon.source is HorizonSource.COLD_START_MODEL
        and not model.cold_start
    ):
        raise SpecError(f"{where}: spec.prediction.horizon.source ColdStartModel needs spec.coldStart")
    return Autoscaler(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        generation=int(meta.get("generation") or 0),
        target=TargetRef(ref["apiVersion"], ref["kind"], ref["name"]),
        mode=model.mode,
        spec=spec,
        horizon=Horizon(horizon.source, horizon.quantile, horizon.min_samples),
        status=obj.get("status") or {},
    )


# --- policy state <-> status.policyState ---------------------------------------------------------


def state_to_status(state: PolicyState) -> dict[str, Any]:
    """The PolicyState as JSON. Times are RFC 3339 with nanoseconds (a float time comes back exactly)
    on the controller's (wall) clock: `kubectl get -o yaml` shows 2026-11-29T10:00:05.250000000Z,
    not 1.79615e+09."""

    def forecaster(f: ForecastState) -> dict[str, Any]:
        out = f.to_dict()
        if isinstance(out.get("last_at"), int | float) and math.isfinite(out["last_at"]):
            out["last_at"] = nano_time(out["last_at"])
        return out

    return {
        "recommendations": [{"at": nano_time(r.at), "replicas": r.replicas} for r in state.recommendations],
        "scaleUpEvents": [{"at": nano_time(e.at), "change": e.change} for e in state.scale_up_events],
        "scaleDownEvents": [{"at": nano_time(e.at), "change": e.change} for e in state.scale_down_events],
        "forecasters": {name: forecaster(f) for name, f in state.forecasters.items()},
        "scaledToZero": state.scaled_to_zero,
        **({} if state.planner is None else {"planner": state.planner.to_dict(STATUS_TIMES)}),
    }


def _status_time(value: Any) -> float:
    if not isinstance(value, str):
        raise ValueError("expected an RFC 3339 timestamp")
    return parse_time(value)


# the planner's times in the status: RFC 3339 with nanoseconds, as the rest of policyState
STATUS_TIMES = TimeCodec(nano_time, _status_time)


def planner_from_status(data: Mapping[str, Any]) -> PlannerState | None:
    """status.policyState.planner (absent: None, the predictive stages start afresh); a malformed
    one raises ValueError naming its path (statejson.py's rules)."""
    raw = data.get("planner")
    if raw is None:
        return None
    return PlannerState.from_dict(raw, STATUS_TIMES, "status.policyState.planner")


def state_from_status(data: Mapping[str, Any], *, planner: bool = True) -> PolicyState:
    """Parse `state_to_status` output; a malformed entry raises ValueError naming its path and value.
    `planner` False leaves the planner out (restore reads it apart, so that a malformed one costs
    only the predictive stages' memory, not the windows)."""

    def number(entry: Any, key: str, path: str) -> float:
        value = entry.get(key) if isinstance(entry, Mapping) else None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"status.policyState.{path}.{key}: expected a finite number, got {value!r}")
        return float(value)

    def moment(entry: Any, key: str, path: str) -> float:
        """RFC 3339; Unix seconds as older controllers wrote them are read too."""
        value = entry.get(key) if isinstance(entry, Mapping) else None
        if isinstance(value, str):
            try:
                return parse_time(value)
            except ValueError as exc:
                raise ValueError(f"status.policyState.{path}.{key}: {exc}") from None
        return number(entry, key, path)

    def integer(entry: Any, key: str, path: str) -> int:
        value = number(entry, key, path)
        if value != int(value):
            raise ValueError(f"status.policyState.{path}.{key}: expected an integer, got {value!r}")
        return int(value)

    def items(key: str) -> list[Any]:
        value = data.get(key, [])
        if not isinstance(value, list):
            raise ValueError(f"status.policyState.{key}: expected a list, got {value!r}")
        return value

    recs = tuple(
        Recommendation(
            moment(e, "at", f"recommendations[{i}]"), integer(e, "replicas", f"recommendations[{i}]")
        )
        for i, e in enumerate(items("recommendations"))
    )
    events: dict[str, tuple[ScaleEvent, ...]] = {}
    for key in ("scaleUpEvents", "scaleDownEvents"):
        events[key] = tuple(
            ScaleEvent(moment(e, "at", f"{key}[{i}]"), integer(e, "change", f"{key}[{i}]"))
            for i, e in enumerate(items(key))
        )
    raw_forecasters = data.get("forecasters", {})
    if not isinstance(raw_forecasters, Mapping):
        raise ValueError(f"status.policyState.forecasters: expected a mapping, got {raw_forecasters!r}")
    forecasters: dict[str, ForecastState] = {}
    for name, raw in raw_forecasters.items():
        try:
            if isinstance(raw, Mapping) and isinstance(raw.get("last_at"), str):
                raw = {**raw, "last_at": parse_time(raw["last_at"])}
            forecasters[name] = ForecastState.from_dict(raw)
        except ValueError as exc:
            raise ValueError(f"status.policyState.forecasters.{name}: {exc}") from None
    scaled_to_zero = data.get("scaledToZero", False)
    if not isinstance(scaled_to_zero, bool):
        raise ValueError(f"status.policyState.scaledToZero: expected a boolean, got {scaled_to_zero!r}")
    return PolicyState(
        recs,
        events["scaleUpEvents"],
        events["scaleDownEvents"],
        forecasters,
        scaled_to_zero,
        planner_from_status(data) if planner else None,
    )
