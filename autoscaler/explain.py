"""`infscale explain`: an HPA in, the decision and its stages out.

Reads, as JSON or YAML, one document or many (a JSON array, a YAML stream, a List):
- HorizontalPodAutoscaler objects as `kubectl get hpa -o json|yaml` prints them (autoscaling/v2,
  or v1 converted): autoscaler/hpaobject.py turns each into the document below, its metric values
  taken from status.currentMetrics;
- infscale's HPA-shaped document (README "infscale explain"):
  {"spec": {...HPA spec + coldStart/prediction/floors...},
   "status": {"currentReplicas": 4, "readyReplicas": 4, "replicas": 4},
   "metricValues": {"<metric>": [30, "1500m", ...]},     # items the metrics API returned
   "recommendations": [{"ageSeconds": 60, "replicas": 8}],  # omitted: first sight; []: none kept
   "scaleEvents": [{"ageSeconds": 10, "change": 2}],       # > 0 up, < 0 down
   "tolerance": 0.1, "downscaleStabilizationSeconds": 300,  # cluster flags (optional)
   "now": "2026-11-29T10:00:00Z", "startingReadyInSeconds": [40, 90], "leadTimeSeconds": 120,
   "metricHistory": {"<metric>": [{"ageSeconds": 60, "value": 80}, ...]}}  # feeds the forecaster
Several documents give several decisions (what-if tables). Errors exit with code 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import yaml
from pydantic import Field, ValidationError

from autoscaler import hpaobject, planview, quantity
from autoscaler.hpaspec import HpaSpecModel, describe_validation_error
from autoscaler.policy import forecast
from autoscaler.policy.decide import Decision, decide
from autoscaler.policy.hpa import Condition
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.spec import DEFAULT_DOWNSCALE_STABILIZATION_S, DEFAULT_TOLERANCE
from autoscaler.policy.state import PolicyState, Recommendation, ScaleEvent
from autoscaler.specbase import QuantityValue, StrictModel


class StatusModel(StrictModel):
    current_replicas: Annotated[int, Field(ge=0, alias="currentReplicas")]
    ready_replicas: Annotated[int | None, Field(ge=0, alias="readyReplicas")] = None
    replicas: Annotated[int | None, Field(ge=0)] = None  # scale.status.replicas; default currentReplicas


class AgedRecommendation(StrictModel):
    age_seconds: Annotated[float, Field(ge=0, alias="ageSeconds")]
    replicas: Annotated[int, Field(ge=0)]


class AgedScaleEvent(StrictModel):
    age_seconds: Annotated[float, Field(ge=0, alias="ageSeconds")]
    change: int


class AgedValue(StrictModel):
    age_seconds: Annotated[float, Field(gt=0, alias="ageSeconds")]
    value: float


class ExplainDocument(StrictModel):
    description: str = ""
    spec: HpaSpecModel
    status: StatusModel
    metric_values: dict[str, list[QuantityValue] | None] = Field(default_factory=dict, alias="metricValues")
    # None (omitted): the HPA controller has never seen this HPA and seeds the history with the
    # current count (upstream's recordInitialRecommendation); []: a history that holds nothing
    recommendations: list[AgedRecommendation] | None = None
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


# An existing history that holds nothing: one entry older than every window, so it never counts
# and is the slot the next recommendation overwrites (upstream appends to its empty slice; the
# result is the same one-entry history). An empty tuple would mean first sight to decide().
_EXISTING_EMPTY_HISTORY = (Recommendation(-math.inf, 0),)


def evaluate(raw: Any, *, wall_now: float, where: str = "") -> tuple[str, Decision]:
    """Validate one document and run the policy on it: (its description, the decision)."""
    at = f"{where}." if where else ""
    spec_raw = raw.get("spec") if isinstance(raw, dict) else None
    if isinstance(spec_raw, dict) and (
        refused := hpaobject.refusals(spec_raw.get("metrics"), f"{at}spec.metrics")
    ):
        raise DocumentError("\n".join(refused))  # one line each, not pydantic's "expected tags"
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
        raise DocumentError(f"{at}spec: {exc}") from None
    kinds = {m.metric_name: m.type for m in doc.spec.metrics}
    metrics: dict[str, MetricReading] = {}
    for name, values in doc.metric_values.items():
        if values is None:
            metrics[name] = MetricReading.failed("the metrics API returned an error")
            continue
        try:
            items = tuple(quantity.to_milli(v) for v in values)
        except quantity.QuantityError as exc:
            raise DocumentError(f"{at}metricValues.{name}: {exc}") from None
        if kinds.get(name) == "Pods" and items:  # upstream's GetMetricUsageRatio: the integer mean
            items = (sum(items) // len(items),)
        metrics[name] = MetricReading(items)
    demand = set(spec.capacity.metric_names) if spec.capacity is not None else set()
    unknown = sorted(set(metrics) - set(kinds) - demand)
    if unknown:
        raise DocumentError(f"{at}metricValues: no metric in spec named {unknown}")
    up = tuple(ScaleEvent(now - e.age_seconds, e.change) for e in doc.scale_events if e.change > 0)
    down = tuple(ScaleEvent(now - e.age_seconds, -e.change) for e in doc.scale_events if e.change < 0)
    if doc.recommendations is None:
        history: tuple[Recommendation, ...] = ()  # decide() seeds it
    elif doc.recommendations:
        history = tuple(Recommendation(now - r.age_seconds, r.replicas) for r in doc.recommendations)
    else:
        history = _EXISTING_EMPTY_HISTORY
    state = PolicyState(recommendations=history, scale_up_events=up, scale_down_events=down)
    if doc.metric_history and spec.prediction is None:
        raise DocumentError(f"{at}metricHistory: needs spec.prediction to be set")
    forecasters: dict[str, Any] = {}
    for name, samples in doc.metric_history.items():
        if name not in kinds:
            raise DocumentError(f"{at}metricHistory: no metric in spec named {name!r}")
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


def condition_status(status: bool) -> str:
    """Kubernetes writes a condition's status as the string "True" or "False"."""
    return "True" if status else "False"


def condition_json(c: Condition) -> dict[str, Any]:
    return {"type": c.type, "status": condition_status(c.status), "reason": c.reason, "message": c.message}


def decision_json(decision: Decision) -> dict[str, Any]:
    return {
        "currentReplicas": decision.current_replicas,
        "desiredReplicas": decision.desired_replicas,
        "stages": [s.to_dict() for s in decision.stages],
        "conditions": [condition_json(c) for c in decision.conditions],
        "leadTimeSeconds": decision.lead_time_s,
        "forecasts": [f._asdict() for f in decision.forecasts],
        "predictedReadySeconds": list(decision.predicted_ready_s),
        **({"plan": planview.plan_json(decision.plan)} if decision.plan is not None else {}),
    }


def observed_json(observed: hpaobject.Observed) -> dict[str, Any]:
    return {
        "name": observed.name,
        "apiVersion": observed.api_version,
        "desiredReplicas": observed.desired_replicas,
        "lastScaleTime": observed.last_scale_time,
        "conditions": [dict(c) for c in observed.conditions],
        "notes": list(observed.notes),
    }


def render_table(decision: Decision) -> str:
    lines = planview.stage_table(decision.stages)
    verdict = (
        f"scale {decision.current_replicas} -> {decision.desired_replicas}"
        if decision.scale
        else f"hold at {decision.current_replicas}"
    )
    lines.append("")
    lines.append(f"desired replicas: {decision.desired_replicas} ({verdict})")
    for c in decision.conditions:
        lines.append(f"  {c.type}={condition_status(c.status)} {c.reason}: {c.message}")
    if decision.lead_time_s:
        lines.append(f"lead time: {decision.lead_time_s:.1f} s")
    if decision.predicted_ready_s:
        ready = ", ".join(f"{t:.1f}" for t in decision.predicted_ready_s)
        lines.append(f"new replicas predicted ready in (s): {ready}")
    if decision.plan is not None:
        lines += planview.plan_lines(planview.plan_json(decision.plan))
    return "\n".join(lines)


def render_observed(observed: hpaobject.Observed) -> str:
    """What the HPA itself reported, to read beside the decision."""
    desired = "?" if observed.desired_replicas is None else observed.desired_replicas
    lines = [f"the HPA reported: desired replicas {desired}"
             + (f", last scaled {observed.last_scale_time}" if observed.last_scale_time else "")]  # fmt: skip
    for c in observed.conditions:
        lines.append(f"  {c.get('type')}={c.get('status')} {c.get('reason', '')}: {c.get('message', '')}")
    lines += [f"  note: {n}" for n in observed.notes]
    return "\n".join(lines)


OUTPUTS = ("table", "json", "yaml")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "document",
        help="JSON or YAML file, or - for standard input: `kubectl get hpa NAME -o yaml`, a List,"
        " or infscale's HPA-shaped document; several give what-if tables",
    )
    parser.add_argument(
        "--output", "-o", choices=OUTPUTS, default="table", help="output format (default table)"
    )
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # = --output json (older flag)


class _Result(NamedTuple):
    description: str
    decision: Decision
    observed: hpaobject.Observed | None


def parse(text: str) -> tuple[list[Any], bool]:
    """The documents in a JSON or YAML text, and whether there were several (an array or stream)."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as json_error:
        if text.lstrip()[:1] in ("{", "["):  # meant as JSON: its error is the useful one
            raise DocumentError(f"invalid JSON: {json_error}") from None
        try:
            stream = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as exc:
            raise DocumentError(f"invalid YAML: {' '.join(str(exc).split())}") from None
        if len(stream) != 1:
            return stream, True
        raw = stream[0]
    return (raw, True) if isinstance(raw, list) else ([raw], False)


def explain(text: str, *, wall_now: float) -> tuple[list[_Result], bool]:
    documents, several = parse(text)
    items: list[tuple[str, Any]] = []
    for i, doc in enumerate(documents):
        items += hpaobject.expand(doc, f"[{i}]" if several else "")
    results = []
    for where, item in items:
        observed = None
        if hpaobject.is_object(item):
            item, observed = hpaobject.to_document(item, where)
        description, decision = evaluate(item, wall_now=wall_now, where=where)
        results.append(_Result(description, decision, observed))
    return results, several or len(items) != 1


def run(args: argparse.Namespace) -> int:
    output = "json" if args.json else args.output
    try:
        text = sys.stdin.read() if args.document == "-" else Path(args.document).read_text(encoding="utf-8")
    except OSError as exc:
        print(f"infscale explain: cannot read {args.document}: {exc.strerror}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:
        print(f"infscale explain: {args.document}: not UTF-8 text ({exc.reason})", file=sys.stderr)
        return 2
    try:
        results, several = explain(text, wall_now=datetime.now(UTC).timestamp())
    except (DocumentError, hpaobject.ObjectError) as exc:
        for line in str(exc).splitlines():
            print(f"infscale explain: {args.document}: {line}", file=sys.stderr)
        return 2
    if output != "table":
        out = []
        for r in results:
            entry = {"description": r.description, **decision_json(r.decision)}
            if r.observed is not None:
                entry["hpa"] = observed_json(r.observed)
            out.append(entry)
        data: Any = out if several else out[0]
        sys.stdout.write(
            json.dumps(data, indent=2) + "\n" if output == "json" else yaml.safe_dump(data, sort_keys=False)
        )
        return 0
    for i, r in enumerate(results):
        if several:
            print(f"{'' if i == 0 else chr(10)}== document {i} ==")
        if r.description:
            print(r.description)
        print(render_table(r.decision))
        if r.observed is not None:
            print(render_observed(r.observed))
    return 0
