"""Parity: one time-line of cluster facts given to the replay and to the live controller.

The replay runs a policy over a trace; at each of its decisions the test records what its fleet
showed (the count asked for, the replicas counted, which pods serve, which are starting and since
when, the metric values its pipeline read). The same facts are then written, decision by
decision, into the fake kube-apiserver (the Deployment's spec and status replicas, the pods with
their creation, scheduling and readiness times, the External metric's items) and the controller
reconciles at the same instants. Each of its decisions must be the replay's: the desired count
and every stage's before/after/reason. What differs between the two is all in the path from facts
to an Observation (pods and metrics through the API, parsing, the caches, ClusterFacts), which is
what this compares; decide() is the same function on both sides.

Replicas the fleet counts but does not serve yet are starting pods, draining ones are still ready
(they serve until their last request). The time-line has scale-ups held by the legacy limit,
scale-downs held by the window, replicas starting and draining, and (a Holt forecast over a fixed
10 s lead) forecasts above the current value. What it cannot compare: the replay projects starting
replicas' ready times with its start-up machine, which pods do not show (the controller estimates
scheduled time + a typical load); they would differ only where a starting replica falls inside
the lead time on one side and not the other (CapacityArriving), which this time-line never has.
The replay's `predictive` policy (the capacity stages: demand from engine counters, the start-up
machine's upcoming loads) is not compared here yet: its observation holds loads only the replay
knows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pytest
from controller_harness import NS, T0, environment, only

from autoscaler.controller.kubetime import rfc3339
from autoscaler.policy.decide import Decision
from autoscaler.policy.observation import Observation
from autoscaler.policy.spec import ColdStartSpec, ForecasterKind, PredictionSpec
from replay.fleet import Fleet
from replay.policies import METRIC, DecidePolicy, PolicyParams, build_policy
from replay.profiles import REFERENCE_70B
from replay.simulate import simulate
from replay.trace import Trace

NAME = "model"
LABELS = {"app": NAME}
COLD = ColdStartSpec(
    weights_gb=14.0,
    storage_gbps=10.0,
    image_pull_s=5.0,
    warmup_s=5.0,
    node_provision_s=20.0,
    gpus_per_replica=4,
    gpus_per_node=8,
)
SCENARIO = replace(REFERENCE_70B, name="parity", cold_start=COLD, node_idle_remove_s=120.0)
PARAMS = PolicyParams(target=8.0, downscale_window_s=60)


def trace() -> Trace:
    """3 req/s, 12 req/s for 4 minutes, 3 req/s: scale-ups, starting replicas, drains, scale-downs."""
    rng = np.random.default_rng(11)
    parts = [rng.uniform(a, b, int((b - a) * r)) for a, b, r in ((0, 150, 3), (150, 390, 12), (390, 720, 3))]
    arrival = np.sort(np.concatenate(parts))
    n = len(arrival)
    return Trace("parity", arrival - arrival[0], rng.integers(50, 3_000, n), rng.integers(5, 400, n))


@dataclass(frozen=True)
class Pod:
    created_s: float
    scheduled_s: float | None
    ready_s: float | None


@dataclass(frozen=True)
class Facts:
    """What the fleet showed at one decision, in the cluster's terms."""

    now: float
    spec_replicas: int
    status_replicas: int
    pods: dict[str, Pod]
    values_milli: tuple[int, ...] | None


@dataclass(slots=True)
class Recording(DecidePolicy):
    """The replay's DecidePolicy, noting its fleet's facts before each decision."""

    fleet: Fleet | None = None
    facts: list[Facts] = field(default_factory=list)

    def desired(self, now: float, obs: Observation) -> int:
        assert self.fleet is not None
        pods: dict[str, Pod] = {}
        for r in self.fleet.replicas:
            if r.id in self.fleet.draining_ids or r.id in set(self.fleet.ready_ids.tolist()):
                pods[f"{NAME}-{r.id}"] = Pod(r.requested_s, r.scheduled_s, r.ready_s)
        for r in self.fleet.starting():
            scheduled = r.scheduled_s if math.isfinite(r.scheduled_s) else None
            pods[f"{NAME}-{r.id}"] = Pod(r.requested_s, scheduled, None)
        # the count asked for is the one the fleet counts (the replay's scale_to makes it so)
        counted = self.fleet.active_count
        values = obs.metrics[METRIC].values_milli  # what the adapter would serve: the pipeline's read
        self.facts.append(Facts(now, counted, counted, pods, values))
        return DecidePolicy.desired(self, now, obs)


def cold_start_spec() -> dict[str, Any]:
    return {
        "weightsGB": COLD.weights_gb,
        "storageGBps": COLD.storage_gbps,
        "imagePullSeconds": COLD.image_pull_s,
        "warmupSeconds": COLD.warmup_s,
        "nodeProvisionSeconds": COLD.node_provision_s,
        "gpusPerReplica": COLD.gpus_per_replica,
        "gpusPerNode": COLD.gpus_per_node,
    }


def autoscaler(policy: DecidePolicy) -> dict[str, Any]:
    """The replay policy's spec as an InferenceAutoscaler (the cluster flags go to the controller)."""
    spec = policy.spec
    (metric,) = spec.metrics
    doc: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": NAME},
        "minReplicas": spec.min_replicas,
        "maxReplicas": spec.max_replicas,
        "metrics": [
            {
                "type": "External",
                "external": {
                    "metric": {"name": METRIC, "selector": {"matchLabels": {"deployment": NAME}}},
                    "target": {"type": "AverageValue", "averageValue": f"{metric.target_milli}m"},
                },
            }
        ],
    }
    if spec.prediction is not None:
        doc["coldStart"] = cold_start_spec()
        doc["prediction"] = {
            "forecaster": str(spec.prediction.forecaster),
            "leadTimeSeconds": spec.prediction.lead_time_s,
        }
    return {
        "apiVersion": "infscale.io/v1alpha1",
        "kind": "InferenceAutoscaler",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": doc,
    }


def stages(decision: Decision) -> list[tuple[str, int, int, str]]:
    return [(s.name, s.before, s.after, s.reason) for s in decision.stages]


def forecasting() -> DecidePolicy:
    """The HPA with a Holt forecast over a fixed 10 s lead and the cold-start model."""
    hpa = build_policy("hpa", SCENARIO, trace(), PARAMS, lambda: 0.0)
    assert isinstance(hpa, DecidePolicy)
    spec = replace(
        hpa.spec, cold_start=COLD, prediction=PredictionSpec(ForecasterKind.HOLT, lead_time_s=10.0)
    )
    return replace(hpa, name="holt", spec=spec, cluster_lead_time=False)


@pytest.mark.parametrize("policy", ["hpa", "holt"])
async def test_the_controller_decides_as_the_replay_on_the_same_facts(policy: str) -> None:
    built = build_policy(policy, SCENARIO, trace(), PARAMS, lambda: 0.0) if policy == "hpa" else forecasting()
    assert isinstance(built, DecidePolicy)
    fleet = Fleet(SCENARIO.cold_start, initial_ready=built.initial_replicas, node_idle_remove_s=120.0)
    fields = {f: getattr(built, f) for f in DecidePolicy.__dataclass_fields__ if f != "decisions"}
    fields["epoch_s"] = T0  # replay time 0 on the harness clock's start
    recording = Recording(**fields, fleet=fleet)
    simulate(trace(), SCENARIO, recording, fleet=fleet)
    decisions = [d for _, _, d in recording.decisions]
    assert len(decisions) == len(recording.facts) > 40
    # the time-line exercises what differs: scale-ups, replicas starting, drains, scale-downs
    assert any(d.desired_replicas > d.current_replicas for d in decisions)
    assert any(d.desired_replicas < d.current_replicas for d in decisions)
    assert any(
        f.status_replicas > sum(p.ready_s is not None for p in f.pods.values()) for f in recording.facts
    )

    epoch = recording.epoch_s
    async with environment() as env:
        env.fake.add_deployment(NS, NAME, recording.facts[0].spec_replicas, labels=LABELS)
        env.fake.add_autoscaler(autoscaler(built))
        controller = env.controller(
            max_metric_age_s=None,
            tolerance=built.spec.tolerance,
            downscale_stabilization_s=built.spec.downscale_stabilization_s,
            status_interval_s=0.0,
        )
        shown: dict[str, Pod] = {}
        for i, (facts, expected) in enumerate(zip(recording.facts, decisions, strict=True)):
            env.clock.set(epoch + facts.now)
            show(env.fake, shown, facts, epoch)
            env.fake.set_replicas(NS, NAME, facts.spec_replicas, status_replicas=facts.status_replicas)
            if facts.values_milli is None:
                env.fake.set_metric(NS, METRIC, labels={"deployment": NAME})  # an empty list
            else:
                env.fake.set_metric(
                    NS,
                    METRIC,
                    *(f"{v}m" for v in facts.values_milli),
                    labels={"deployment": NAME},
                    timestamp=rfc3339(env.clock()),
                )
            out = only(await controller.step())
            assert out.decision is not None, f"decision {i} at {facts.now:.0f} s: {out.error}"
            got = out.decision
            at = f"decision {i} at {facts.now:.0f} s"
            assert got.current_replicas == expected.current_replicas, at
            assert stages(got) == stages(expected), at
            assert got.desired_replicas == expected.desired_replicas, at


def show(fake: Any, shown: dict[str, Pod], facts: Facts, epoch: float) -> None:
    """The fake's pods become the fleet's: new ones created, changed ones replaced, gone ones deleted."""
    for name in [n for n in shown if n not in facts.pods]:
        fake.delete_pod(NS, name)
        del shown[name]
    for name, pod in facts.pods.items():
        if shown.get(name) == pod:
            continue
        if name in shown:
            fake.delete_pod(NS, name)
        fake.add_pod(
            NS,
            name,
            labels=LABELS,
            created=rfc3339(epoch + pod.created_s),
            scheduled_at=rfc3339(epoch + pod.scheduled_s) if pod.scheduled_s is not None else None,
            ready_at=rfc3339(epoch + pod.ready_s) if pod.ready_s is not None else None,
            node="node-a" if pod.scheduled_s is not None else None,
        )
        shown[name] = pod
