"""What a sweep's winner looks like in a cluster: the chosen configuration as a complete HPA and as
InferenceAutoscaler settings, for `--target-ref` and `--selector` (replay/sweep.py runs the grid)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autoscaler.policy.capacityspec import Router
from autoscaler.specsections import CapacityModel, ColdStartModel
from common.selector import Operator, SelectorError, parse_selector
from replay.policies import METRIC, PolicyParams
from replay.profiles import Scenario


class SweepError(ValueError):
    """A sweep's input (--grid, --target-ref, --selector) that cannot be used; the message names it."""


_KINDS = {"deployment": "Deployment", "statefulset": "StatefulSet", "replicaset": "ReplicaSet"}


@dataclass(frozen=True)
class TargetRef:
    """`--target-ref KIND/NAME`; without it a placeholder name the apiserver accepts and kubectl
    apply fails on loudly (no such Deployment), never an HPA that scales nothing."""

    kind: str
    name: str
    given: bool

    @classmethod
    def parse(cls, text: str | None) -> TargetRef:
        if text is None:
            return cls("Deployment", "my-llm", given=False)
        kind, sep, name = text.partition("/")
        kind_name = _KINDS.get(kind.strip().lower())
        if not sep or kind_name is None or not name.strip():
            raise SweepError(
                f"--target-ref {text!r}: expected KIND/NAME with KIND one of {', '.join(_KINDS.values())}"
            )
        name = name.strip()
        try:  # a name is a DNS-1123 subdomain: the selector's value rules are close and at hand
            parse_selector(f"x={name}")
        except SelectorError:
            raise SweepError(f"--target-ref {text!r}: {name!r} is not a valid object name") from None
        return cls(kind_name, name, given=True)


def match_selector(text: str) -> dict[str, Any]:
    """A label selector string as the metric's `selector` (matchLabels and matchExpressions)."""
    try:
        selector = parse_selector(text)
    except SelectorError as exc:
        raise SweepError(f"--selector {text!r}: {exc}") from None
    labels: dict[str, str] = {}
    expressions: list[dict[str, Any]] = []
    for r in selector.requirements:
        op = r.operator
        if op in (Operator.EQUALS, Operator.DOUBLE_EQUALS):
            labels[r.key] = r.values[0]
        elif op in (Operator.IN, Operator.NOT_IN, Operator.NOT_EQUALS):
            kind = "In" if op is Operator.IN else "NotIn"
            expressions.append({"key": r.key, "operator": kind, "values": list(r.values)})
        elif op is Operator.EXISTS:
            expressions.append({"key": r.key, "operator": "Exists"})
        elif op is Operator.DOES_NOT_EXIST:
            expressions.append({"key": r.key, "operator": "DoesNotExist"})
        else:
            raise SweepError(f"--selector {text!r}: {op.value} cannot be written as a LabelSelector")
    if not labels and not expressions:
        raise SweepError("--selector: an empty selector would sum the metric over every deployment")
    out: dict[str, Any] = {}
    if labels:
        out["matchLabels"] = labels
    if expressions:
        out["matchExpressions"] = expressions
    return out


def _selector_yaml(selector: dict[str, Any], indent: str) -> str:
    import yaml

    body = yaml.safe_dump({"selector": selector}, sort_keys=False, default_flow_style=False).rstrip()
    return "\n".join(indent + line for line in body.splitlines())


def _spec_head(scenario: Scenario, p: PolicyParams, selector: dict[str, Any]) -> str:
    """The replica bounds and the metric, as both the HPA and the InferenceAutoscaler spell them."""
    target = f'"{p.target:g}"'  # a Quantity string
    return f"""  minReplicas: {scenario.min_replicas}
  maxReplicas: {scenario.max_replicas}
  metrics:
  - type: External
    external:
      metric:
        name: {METRIC}
{_selector_yaml(selector, "        ")}
      target:
        type: AverageValue
        averageValue: {target}"""


def hpa_yaml(scenario: Scenario, p: PolicyParams, target: TargetRef, selector: dict[str, Any]) -> str:
    """The reactive part of a configuration as a complete autoscaling/v2 HPA with a `behavior`
    block (upstream's default rate policies written out, the swept windows and tolerances in)."""
    placeholder = "" if target.given else "  # set with --target-ref KIND/NAME"
    return f"""# HPA (autoscaling/v2): the reactive part; per-direction tolerance needs Kubernetes >= 1.33
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {target.name}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: {target.kind}
    name: {target.name}{placeholder}
{_spec_head(scenario, p, selector)}
  behavior:
    scaleUp:
      stabilizationWindowSeconds: 0
      tolerance: {p.tolerance:g}
      selectPolicy: Max
      policies:
      - {{type: Pods, value: 4, periodSeconds: 15}}
      - {{type: Percent, value: 100, periodSeconds: 15}}
    scaleDown:
      stabilizationWindowSeconds: {p.downscale_window_s}
      tolerance: {p.tolerance:g}
      selectPolicy: Max
      policies:
      - {{type: Percent, value: 100, periodSeconds: 15}}
"""


def settings_yaml(scenario: Scenario, p: PolicyParams, selector: dict[str, Any] | None = None) -> str:
    """The predictive configuration as the spec of an InferenceAutoscaler (deploy/controller/crd.yaml):
    replay/policies/predictive.py's spec written out, so the controller runs what the replay ran."""
    import yaml

    from replay.policies.predictive import predictive_spec

    spec = predictive_spec(scenario, p)
    metric = spec.metrics[0]
    up = spec.behavior.scale_up if spec.behavior else None
    down = spec.behavior.scale_down if spec.behavior else None
    assert up is not None and down is not None and spec.capacity is not None
    block = ColdStartModel.document_of(scenario.cold_start)  # the parser's inverse: every field
    if p.lead_time_s is not None:
        prediction: dict[str, Any] | None = {"leadTimeSeconds": p.lead_time_s}
    elif p.lead_quantile is not None:
        prediction = {"horizon": {"source": "Auto", "quantile": p.lead_quantile}}
    else:
        prediction = None
    doc: dict[str, Any] = {
        "minReplicas": spec.min_replicas,
        "maxReplicas": spec.max_replicas,
        "metrics": [
            {
                "type": "External",
                "external": {
                    "metric": {
                        "name": metric.name,
                        "selector": selector or {"matchLabels": {"deployment": "my-llm"}},
                    },
                    "target": {"type": "AverageValue", "averageValue": f"{metric.target_milli / 1000:g}"},
                },
            }
        ],
        "behavior": {
            "scaleUp": {
                "tolerance": p.tolerance,
                "stabilizationWindowSeconds": up.stabilization_window_s,
                "policies": [
                    {"type": r.type.value, "value": r.value, "periodSeconds": r.period_s} for r in up.policies
                ],
            },
            "scaleDown": {
                "stabilizationWindowSeconds": down.stabilization_window_s,
                "tolerance": p.tolerance,
            },
        },
        "coldStart": block,
        **({"prediction": prediction} if prediction else {}),
        "floors": {"warmMinReplicas": p.warm_floor},
        "capacity": CapacityModel.document_of(spec.capacity),
    }
    body = yaml.safe_dump({"spec": doc}, sort_keys=False, default_flow_style=None, width=100)
    head = "# infscale InferenceAutoscaler (infscale.io/v1alpha1): spec fields to merge into yours\n"
    if spec.capacity.router == Router.LEAST_REQUESTS:  # the replay's own router, not every cluster's
        head += (
            "# capacity.router: LeastRequests is the replay's router (a load-aware gateway);"
            " set Random behind a plain Service\n"
        )
    if spec.capacity.demand.arrival_rate_metric is not None:  # served by a gateway, not the engines
        head += (
            "# capacity.demand.arrivalRateMetric: a gateway's arrivals counter (the adapter's"
            " gateway-api-inference-extension preset); drop it without one\n"
        )
    return head + body
