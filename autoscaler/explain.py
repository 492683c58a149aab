"""`infscale explain`: one HPA-shaped JSON document in, the decision and its stages out.

The document (README "infscale explain" has examples):
  {"spec": {...HPA spec + coldStart/prediction/floors...},
   "status": {"currentReplicas": 4, "readyReplicas": 4, "replicas": 4},
   "metricValues": {"<metric>": [30, "1500m", ...]},     # items the External Metrics API returned
   "recommendations": [{"ageSeconds": 60, "replicas": 8}],
   "scaleEvents": [{"ageSeconds": 10, "change": 2}],       # > 0 up, < 0 down
   "tolerance": 0.1, "downscaleStabilizationSeconds": 300,  # cluster flags (optional)
   "now": "2026-11-29T10:00:00Z", "startingReadyInSeconds": [40, 90], "leadTimeSeconds": 120,
   "metricHistory": {"<metric>": [{"ageSeconds": 60, "value": 80}, ...]}}  # feeds the forecaster
A JSON array of documents gives an array of decisions (what-if tables). Errors exit with code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError

from autoscaler import quantity
from autoscaler.hpaspec import AutoscalerSpecModel, QuantityValue, _Model, describe_validation_error
from autoscaler.policy import forecast
from autoscaler.policy.decide import Decision, decide
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.spec import DEFAULT_DOWNSCALE_STABILIZATION_S, DEFAULT_TOLERANCE
from autoscaler.policy.state import PolicyState, Recommendation, ScaleEvent


class StatusModel(_Model):
    current_replicas: Annotated[int, Field(ge=0, alias="currentReplicas")]
    ready_replicas: Annotated[int | None, Field(ge=0, alias="readyReplicas")] = None
    replicas: Annotated[int | None, Field(ge=0)] = None  # scale.status.replicas; default currentReplicas


class AgedRecommendation(_Model):
    age_seconds: Annotated[float, Field(ge=0, alias="ageSeconds")]
    replicas: Annotated[int, Field(ge=0)]


class AgedScaleEvent(_Model):
    age_seconds: Annotated[float, Field(ge=0, alias="ageSeconds")]
    change: int


class AgedValue(_Model):
    age_seconds: Annotated[float, Field(gt=0, alias="ageSeconds")]
    value: float


class ExplainDocument(_Model):
    description: str = ""
    spec: AutoscalerSpecModel
    status: StatusModel
    metric_values: dict[str, list[QuantityValue] | None] = Field(default_factory=dict, alias="metricValues")
    recommendations: list[AgedRecommendation] = Field(default_factory=list)
    scale_events: list[AgedScaleEvent] = Field(default_factory=list, alias="scaleEvents")
    tolerance: Annotated[float, Field(ge=0)] = DEFAULT_TOLERANCE
    downscale_stabilization_seconds: Annotated[int, Field(ge=0, alias="downscaleStabilizationSeconds")] = (
        DEFAULT_DOWNSCALE_STABILIZATION_S
    )
    now: datetime | None = None
    starting_ready_in_seconds: list[Annotated[float, Field(ge=0)]] = Field(
        default_factory=list, alias="startingReadyInSeconds"
    )
    lead_time_seconds: Annotated[float | None, Field(ge=0, alias="leadTimeSeconds")] = None
    metric_history: dict[str, list[AgedValue]] = Field(default_factory=dict, alias="metricHistory")
    free_gpus_per_node: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=list, alias="freeGpusPerNode"
    )
    image_cached_nodes: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=list, alias="imageCachedNodes"
    )
    weights_cached_nodes: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=list, alias="weightsCachedNodes"
    )
    loading_remaining_gb: list[Annotated[float, Field(ge=0)]] = Field(
        default_factory=list, alias="loadingRemainingGB"
    )


class DocumentError(ValueError):
    pass


def evaluate(raw: Any, *, wall_now: float, where: str = "") -> tuple[str, Decision]:
    """Validate one document and run the policy on it: (its description, the decision)."""
    try:
        doc = ExplainDocument.model_validate(raw)
    except ValidationError as exc:
        raise DocumentError(describe_validation_error(exc, where)) from None
    now = doc.now.timestamp() if doc.now else wall_now
    try:
        spec = doc.spec.to_spec(
            tolerance=doc.tolerance, downscale_stabilization_s=doc.downscale_stabilization_seconds
        )
    except ValueError as exc:
        raise DocumentError(f"{where}{'.' if where else ''}spec: {exc}") from None
    metrics: dict[str, MetricReading] = {}
    for name, values in doc.metric_values.items():
        if values is None:
            metrics[name] = MetricReading.failed("the External Metrics API returned an error")
            continue
        try:
            metrics[name] = MetricReading(tuple(quantity.to_milli(v) for v in values))
        except quantity.QuantityError as exc:
            raise DocumentError(f"{where}{'.' if where else ''}metricValues.{name}: {exc}") from None
    unknown = sorted(set(metrics) - {m.name for m in spec.metrics})
    if unknown:
        raise DocumentError(f"{where}{'.' if where else ''}metricValues: no metric in spec named {unknown}")
    up = tuple(ScaleEvent(now - e.age_seconds, e.change) for e in doc.scale_events if e.change > 0)
    down = tuple(ScaleEvent(now - e.age_seconds, -e.change) for e in doc.scale_events if e.change < 0)
    state = PolicyState(
        recommendations=tuple(Recommendation(now - r.age_seconds, r.replicas) for r in doc.recommendations),
        scale_up_events=up,
        scale_down_events=down,
    )
    if doc.metric_history and spec.prediction is None:
        raise DocumentError(f"{where}{'.' if where else ''}metricHistory: needs spec.prediction to be set")
    forecasters: dict[str, Any] = {}
    for name, samples in doc.metric_history.items():
        if name not in {m.name for m in spec.metrics}:
            raise DocumentError(
                f"{where}{'.' if where else ''}metricHistory: no metric in spec named {name!r}"
            )
        assert spec.prediction is not None
        for sample in sorted(samples, key=lambda s: -s.age_seconds):
            forecasters[name] = forecast.observe(
                spec.prediction, forecasters.get(name), now - sample.age_seconds, sample.value
            )
    state = replace(state, forecasters=forecasters)
    status = doc.status
    obs = Observation(
        spec_replicas=status.current_replicas,
        status_replicas=status.current_replicas if status.replicas is None else status.replicas,
        ready_pods=status.current_replicas if status.ready_replicas is None else status.ready_replicas,
        metrics=metrics,
        starting_ready_at=tuple(now + s for s in doc.starting_ready_in_seconds),
        lead_time_s=doc.lead_time_seconds,
        free_gpus_per_node=tuple(doc.free_gpus_per_node),
        image_cached_nodes=tuple(doc.image_cached_nodes),
        weights_cached_nodes=tuple(doc.weights_cached_nodes),
        loading_remaining_gb=tuple(doc.loading_remaining_gb),
    )
    decision, _ = decide(spec, state, obs, now)
    return doc.description, decision


def decision_json(decision: Decision) -> dict[str, Any]:
    return {
        "currentReplicas": decision.current_replicas,
        "desiredReplicas": decision.desired_replicas,
        "stages": [s._asdict() for s in decision.stages],
        "conditions": [c._asdict() for c in decision.conditions],
        "leadTimeSeconds": decision.lead_time_s,
        "forecasts": [f._asdict() for f in decision.forecasts],
        "predictedReadySeconds": list(decision.predicted_ready_s),
    }


def render_table(decision: Decision) -> str:
    rows = [("stage", "before", "after", "reason", "detail")]
    rows += [(s.name, str(s.before), str(s.after), s.reason, s.message) for s in decision.stages]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [
        "  ".join(cell.ljust(widths[i]) if i < 4 else cell for i, cell in enumerate(r)).rstrip() for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths) + "  ------")
    verdict = (
        f"scale {decision.current_replicas} -> {decision.desired_replicas}"
        if decision.scale
        else f"hold at {decision.current_replicas}"
    )
    lines.append("")
    lines.append(f"desired replicas: {decision.desired_replicas} ({verdict})")
    for c in decision.conditions:
        lines.append(f"  {c.type}={c.status} {c.reason}: {c.message}")
    if decision.lead_time_s:
        lines.append(f"lead time: {decision.lead_time_s:.1f} s")
    if decision.predicted_ready_s:
        ready = ", ".join(f"{t:.1f}" for t in decision.predicted_ready_s)
        lines.append(f"new replicas predicted ready in (s): {ready}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("document", help="JSON file, or - for standard input; an array gives what-if tables")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    try:
        text = sys.stdin.read() if args.document == "-" else Path(args.document).read_text(encoding="utf-8")
    except OSError as exc:
        print(f"infscale explain: cannot read {args.document}: {exc.strerror}", file=sys.stderr)
        return 2
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        print(f"infscale explain: {args.document}: invalid JSON: {exc}", file=sys.stderr)
        return 2
    wall_now = datetime.now(UTC).timestamp()
    documents = raw if isinstance(raw, list) else [raw]
    try:
        results = [
            evaluate(d, wall_now=wall_now, where=f"[{i}]" if isinstance(raw, list) else "")
            for i, d in enumerate(documents)
        ]
    except DocumentError as exc:
        print(f"infscale explain: {args.document}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        out = [decision_json(d) for _, d in results]
        print(json.dumps(out if isinstance(raw, list) else out[0], indent=2))
        return 0
    for i, (description, decision) in enumerate(results):
        if isinstance(raw, list):
            print(f"{'' if i == 0 else chr(10)}== document {i} ==")
        if description:
            print(description)
        print(render_table(decision))
    return 0
