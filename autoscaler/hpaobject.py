"""HorizontalPodAutoscaler objects as `kubectl get hpa -o json|yaml` prints them, read into
`infscale explain` documents.

- autoscaling/v2 (and v2beta2, the same shape) is read as it is; autoscaling/v1 is converted first,
  as the apiserver converts it (kubernetes `pkg/apis/autoscaling/v1/conversion.go`): the metrics,
  behavior, tolerances, current metrics and conditions v1 cannot express travel in the
  `autoscaling.alpha.kubernetes.io/*` annotations; `targetCPUUtilizationPercentage` is a CPU
  Resource metric, appended last; no metric at all means the implicit CPU 80 %.
- The metric values are the HPA's own `status.currentMetrics`. A status carries what the HPA
  computed, not the items it read: a Value target's `current.value` is the sum (exact), an
  AverageValue target's `current.averageValue` is ceil(sum / replicas) in milli-units, and a Pods
  metric's is the mean over the pods. Explain hands the policy `currentReplicas` items of that
  average, which sum to what the HPA saw up to the rounding.
- `status.currentReplicas` is the target's replica count; the HPA object does not say how many of
  those pods are ready or how many the scale's status counts, so both are taken as equal to it
  (add `status.readyReplicas` to say otherwise).
- Resource and ContainerResource metrics are refused, one line each: their replica count depends
  on each pod's resource requests and readiness, which an HPA object does not carry.
- Keys beside apiVersion/kind/metadata/spec/status are explain's own fields (`recommendations`,
  `scaleEvents`, `metricValues`, `now`, `tolerance`, ...) and override what the object says.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

HPA_KIND = "HorizontalPodAutoscaler"
V2_VERSIONS = ("autoscaling/v2", "autoscaling/v2beta2")
V1_VERSION = "autoscaling/v1"
_ANNOTATION = "autoscaling.alpha.kubernetes.io/"
METRICS_ANNOTATION = _ANNOTATION + "metrics"
CURRENT_METRICS_ANNOTATION = _ANNOTATION + "current-metrics"
CONDITIONS_ANNOTATION = _ANNOTATION + "conditions"
BEHAVIOR_ANNOTATION = _ANNOTATION + "behavior"
SCALE_DOWN_TOLERANCE_ANNOTATION = _ANNOTATION + "scale-down-tolerance"
SCALE_UP_TOLERANCE_ANNOTATION = _ANNOTATION + "scale-up-tolerance"
DEFAULT_CPU_UTILIZATION = 80  # the implicit v1 target
_OBJECT_KEYS = {"apiVersion", "kind", "metadata", "spec", "status"}
_REFUSED = ("Resource", "ContainerResource")


class ObjectError(ValueError):
    """One or more problems, one line each, every line naming its field."""


class Observed(NamedTuple):
    """What the HPA itself reported, printed beside infscale's decision."""

    name: str  # namespace/name
    api_version: str
    desired_replicas: int | None
    conditions: tuple[Mapping[str, Any], ...]
    last_scale_time: str | None
    notes: tuple[str, ...]  # e.g. a metric with no current value


def is_object(raw: Any) -> bool:
    """A Kubernetes object (or List) rather than infscale's HPA-shaped document: it has a kind."""
    return isinstance(raw, Mapping) and "kind" in raw


def expand(raw: Any, where: str = "") -> list[tuple[str, Any]]:
    """A List (kind List or HorizontalPodAutoscalerList) as its items, each with its path."""
    if is_object(raw) and str(raw.get("kind", "")).endswith("List"):
        items = raw.get("items")
        if not isinstance(items, list):
            raise ObjectError(f"{_at(where, 'items')}: a List needs a list of items")
        return [(_at(where, f"items[{i}]"), item) for i, item in enumerate(items)]
    return [(where, raw)]


def to_document(obj: Mapping[str, Any], where: str = "") -> tuple[dict[str, Any], Observed]:
    """One HPA object as an explain document, plus what the HPA reported about itself."""
    kind = obj.get("kind")
    if kind != HPA_KIND:
        raise ObjectError(f"{_at(where, 'kind')}: expected {HPA_KIND} (or a List of them), got {kind!r}")
    api_version = obj.get("apiVersion")
    if api_version == V1_VERSION:
        obj = v1_to_v2(obj, where)
    elif api_version not in V2_VERSIONS:
        raise ObjectError(
            f"{_at(where, 'apiVersion')}: expected one of {', '.join((*V2_VERSIONS, V1_VERSION))},"
            f" got {api_version!r}"
        )
    spec = _mapping(obj.get("spec"), _at(where, "spec"))
    status = _mapping(obj.get("status", {}), _at(where, "status"))
    metrics = spec.get("metrics") or []
    if not isinstance(metrics, list):
        raise ObjectError(f"{_at(where, 'spec.metrics')}: expected a list")
    refused = refusals(metrics, _at(where, "spec.metrics"))
    if refused:
        raise ObjectError("\n".join(refused))
    if "currentReplicas" not in status and "desiredReplicas" not in status:
        raise ObjectError(
            f"{_at(where, 'status')}: the HPA controller has not reported on this HPA yet;"
            " add status.currentReplicas (the target's replica count) to explain it"
        )
    current = status.get("currentReplicas", 0)  # omitempty: an absent count is 0
    metadata = obj.get("metadata") or {}
    name = f"{metadata.get('namespace', 'default')}/{metadata.get('name', '?')}"
    values, notes = _metric_values(metrics, status.get("currentMetrics") or [], current)
    doc_status: dict[str, Any] = {"currentReplicas": current}
    if "readyReplicas" in status:  # not an HPA field: the user's own addition
        doc_status["readyReplicas"] = status["readyReplicas"]
    converted = " (autoscaling/v1, converted)" if api_version == V1_VERSION else ""
    document: dict[str, Any] = {
        "description": f"{HPA_KIND} {name}{converted}",
        "spec": {k: v for k, v in spec.items() if k != "metrics"} | {"metrics": metrics},
        "status": doc_status,
        "metricValues": values,
    }
    for key, value in obj.items():  # explain's own fields beside the object win
        if key not in _OBJECT_KEYS:
            document[key] = value
    observed = Observed(
        name=name,
        api_version=str(api_version),
        desired_replicas=status.get("desiredReplicas"),
        conditions=tuple(c for c in status.get("conditions") or [] if isinstance(c, Mapping)),
        last_scale_time=status.get("lastScaleTime"),
        notes=tuple(notes),
    )
    return document, observed


# --- status.currentMetrics -> metric values --------------------------------------------------------


def _metric_values(
    metrics: list[Any], statuses: list[Any], replicas: int
) -> tuple[dict[str, list[Any] | None], list[str]]:
    values: dict[str, list[Any] | None] = {}
    notes: list[str] = []
    for metric in metrics:
        if not isinstance(metric, Mapping) or metric.get("type") not in ("External", "Pods", "Object"):
            continue  # the spec's validation names it
        kind = metric["type"]
        source = metric.get(kind.lower()) or {}
        name = (source.get("metric") or {}).get("name")
        if not isinstance(name, str):
            continue
        target = source.get("target") or {}
        current = _current(statuses, kind, name, source.get("describedObject"))
        if current is None:
            values[name] = None
            notes.append(
                f"{kind} metric {name}: no current value in status.currentMetrics (taken as unreadable)"
            )
            continue
        if kind == "Pods":
            average = True
        elif kind == "External":  # upstream picks the branch by the field set, averageValue first
            average = target.get("averageValue") is not None
        else:  # Object: by target.type
            average = target.get("type") == "AverageValue"
        key = "averageValue" if average else "value"
        if current.get(key) is None:
            values[name] = None
            notes.append(f"{kind} metric {name}: status has no current.{key} (taken as unreadable)")
        else:
            values[name] = [current[key]] * replicas if average else [current[key]]
    return values, notes


def _current(statuses: list[Any], kind: str, name: str, described: Any) -> Mapping[str, Any] | None:
    for status in statuses:
        if not isinstance(status, Mapping) or status.get("type") != kind:
            continue
        source = status.get(kind.lower()) or {}
        if (source.get("metric") or {}).get("name") != name:
            continue
        if kind == "Object" and not _same_object(source.get("describedObject"), described):
            continue
        current = source.get("current")
        return current if isinstance(current, Mapping) else None
    return None


def _same_object(a: Any, b: Any) -> bool:
    a, b = a or {}, b or {}
    return bool(a.get("kind") == b.get("kind") and a.get("name") == b.get("name"))


def refusals(metrics: Any, where: str) -> list[str]:
    """One line per Resource or ContainerResource metric in a spec's metric list."""
    if not isinstance(metrics, list):
        return []
    return [
        f"{where}[{i}]: {_refusal(m)}"
        for i, m in enumerate(metrics)
        if isinstance(m, Mapping) and m.get("type") in _REFUSED
    ]


def _refusal(metric: Mapping[str, Any]) -> str:
    kind = metric["type"]
    source = metric.get("resource" if kind == "Resource" else "containerResource") or {}
    what = source.get("name", "?")
    if kind == "ContainerResource":
        what = f"{what} of container {source.get('container', '?')}"
    return (
        f"a {kind} metric ({what}) cannot be explained: its replica count depends on each pod's"
        " resource requests and readiness, which an HPA object does not carry"
        " (explain reads External, Pods and Object metrics)"
    )


# --- autoscaling/v1 -> v2 ------------------------------------------------------------------------------


def v1_to_v2(obj: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler, on JSON values."""
    metadata = dict(obj.get("metadata") or {})
    annotations = dict(metadata.get("annotations") or {})
    spec1 = _mapping(obj.get("spec"), _at(where, "spec"))
    status1 = _mapping(obj.get("status", {}), _at(where, "status"))

    def annotation(key: str) -> Any:
        raw = annotations.pop(key, None)
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except (TypeError, json.JSONDecodeError) as exc:
            raise ObjectError(f"{_at(where, 'metadata.annotations')}[{key}]: invalid JSON: {exc}") from None

    metrics = [_v1_metric_spec(m) for m in annotation(METRICS_ANNOTATION) or []]
    if spec1.get("targetCPUUtilizationPercentage") is not None:  # the normal conversion's one metric
        metrics.append(_cpu_metric(spec1["targetCPUUtilizationPercentage"]))
    if not metrics:  # v1's implicit default, made explicit as upstream does
        metrics.append(_cpu_metric(DEFAULT_CPU_UTILIZATION))
    spec: dict[str, Any] = {
        "scaleTargetRef": spec1.get("scaleTargetRef", {}),
        "minReplicas": spec1.get("minReplicas", 1),  # SetDefaults_HorizontalPodAutoscaler
        "maxReplicas": spec1.get("maxReplicas"),
        "metrics": metrics,
    }
    behavior = _v1_behavior(annotation(BEHAVIOR_ANNOTATION))
    for key, direction in (
        (SCALE_DOWN_TOLERANCE_ANNOTATION, "scaleDown"),
        (SCALE_UP_TOLERANCE_ANNOTATION, "scaleUp"),
    ):
        tolerance = annotations.pop(key, None)
        if tolerance is not None:
            behavior = behavior or {}
            behavior.setdefault(direction, {})["tolerance"] = tolerance
    if behavior:
        spec["behavior"] = behavior

    status: dict[str, Any] = {
        k: status1[k]
        for k in ("observedGeneration", "lastScaleTime", "currentReplicas", "desiredReplicas")
        if k in status1
    }
    current = annotation(CURRENT_METRICS_ANNOTATION)
    if current is not None:  # "the ones here have more information" than the CPU percentage
        status["currentMetrics"] = [_v1_metric_status(m) for m in current]
    elif status1.get("currentCPUUtilizationPercentage") is not None:
        pct = status1["currentCPUUtilizationPercentage"]
        status["currentMetrics"] = [
            {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": pct}}}
        ]
    conditions = annotation(CONDITIONS_ANNOTATION)
    if conditions is not None:
        status["conditions"] = conditions
    metadata["annotations"] = annotations
    extra = {k: v for k, v in obj.items() if k not in _OBJECT_KEYS}
    return {"apiVersion": "autoscaling/v2", "kind": HPA_KIND, "metadata": metadata, "spec": spec,
            "status": status, **extra}  # fmt: skip


def _cpu_metric(percent: Any) -> dict[str, Any]:
    return {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": percent}},
    }


def _identifier(src: Mapping[str, Any], selector_key: str) -> dict[str, Any]:
    ident: dict[str, Any] = {"name": src.get("metricName", "")}
    if src.get(selector_key) is not None:
        ident["selector"] = src[selector_key]
    return ident


def _present(src: Mapping[str, Any], **keys: str) -> dict[str, Any]:
    """{new: src[old]} for the keys src has (Go's nil pointers are absent)."""
    return {new: src[old] for new, old in keys.items() if src.get(old) is not None}


def _v1_metric_spec(m: Mapping[str, Any]) -> dict[str, Any]:
    kind = m.get("type", "")
    out: dict[str, Any] = {"type": kind}
    if (e := m.get("external")) is not None:
        target_type = "AverageValue" if e.get("targetValue") is None else "Value"
        out["external"] = {
            "metric": _identifier(e, "metricSelector"),
            "target": {
                "type": target_type,
                **_present(e, value="targetValue", averageValue="targetAverageValue"),
            },
        }
    if (p := m.get("pods")) is not None:
        out["pods"] = {
            "metric": _identifier(p, "selector"),
            "target": {"type": "AverageValue", "averageValue": p.get("targetAverageValue", "0")},
        }
    if (o := m.get("object")) is not None:
        target_type = "Value" if o.get("averageValue") is None else "AverageValue"
        out["object"] = {
            "describedObject": o.get("target", {}),
            "metric": _identifier(o, "selector"),
            "target": {
                "type": target_type,
                "value": o.get("targetValue", "0"),
                **_present(o, averageValue="averageValue"),
            },
        }
    for key in ("resource", "containerResource"):  # kept so that the refusal can name them
        if (r := m.get(key)) is not None:
            out[key] = {"name": r.get("name", ""), **_present(r, container="container")}
    return out


def _v1_metric_status(m: Mapping[str, Any]) -> dict[str, Any]:
    kind = m.get("type", "")
    out: dict[str, Any] = {"type": kind}
    if (e := m.get("external")) is not None:
        out["external"] = {
            "metric": _identifier(e, "metricSelector"),
            "current": {
                "value": e.get("currentValue", "0"),
                **_present(e, averageValue="currentAverageValue"),
            },
        }
    if (p := m.get("pods")) is not None:
        out["pods"] = {
            "metric": _identifier(p, "selector"),
            "current": {"averageValue": p.get("currentAverageValue", "0")},
        }
    if (o := m.get("object")) is not None:
        out["object"] = {
            "describedObject": o.get("target", {}),
            "metric": _identifier(o, "selector"),
            "current": {"value": o.get("currentValue", "0"), **_present(o, averageValue="averageValue")},
        }
    return out


def _v1_behavior(raw: Any) -> dict[str, Any] | None:
    """The behavior annotation holds Go's internal struct marshalled without json tags: Go field
    names (ScaleUp, StabilizationWindowSeconds, ...), which encoding/json reads case-insensitively."""
    if not isinstance(raw, Mapping):
        return None
    out: dict[str, Any] = {}
    for direction in ("scaleUp", "scaleDown"):
        rules = _get_ci(raw, direction)
        if not isinstance(rules, Mapping):
            continue
        converted: dict[str, Any] = {}
        for key in ("stabilizationWindowSeconds", "selectPolicy", "tolerance"):
            if (value := _get_ci(rules, key)) is not None:
                converted[key] = value
        policies = _get_ci(rules, "policies")
        if isinstance(policies, list):
            converted["policies"] = [
                {k: _get_ci(p, k) for k in ("type", "value", "periodSeconds")}
                for p in policies
                if isinstance(p, Mapping)
            ]
        out[direction] = converted
    return out or None


def _get_ci(src: Mapping[str, Any], key: str) -> Any:
    if key in src:
        return src[key]
    return next((v for k, v in src.items() if isinstance(k, str) and k.lower() == key.lower()), None)


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ObjectError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _at(where: str, field: str) -> str:
    return f"{where}.{field}" if where else field
