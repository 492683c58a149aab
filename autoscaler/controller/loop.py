"""The control loop: per InferenceAutoscaler, every tick, read -> decide() -> act -> report.

One tick reads the clock once (`now`) and passes it down; tests drive `step()` with a manual clock.
Per object: the /scale subresource, the target's pods, the metrics; learned cold starts and GPU
capacity set the horizon and the replicas already starting; `decide()` (the pure policy core) picks
the count; then by mode:

  direct  write /scale only on a change, with the resourceVersion read; on 409 re-read and decide
          again from the same state; record the scale event only after the write succeeded; refuse
          while a foreign HPA targets the same object
  hpa     publish the recommendation (infscale_desired_replicas); the HPA writes /scale, and the
          changes it makes are recorded as scale events so rate limits see them
  dryRun  decide and report only

Every scale emits an Event with the stage chain; the status carries the decision, conditions,
learned cold starts and the PolicyState, so a restart or a failover resumes the windows. A
non-leader decides nothing and forgets its in-memory state (the new leader's is in the status).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from autoscaler.controller import capacity, crd
from autoscaler.controller.capacity import GpuNodes
from autoscaler.controller.coldstarts import ColdStartHistory
from autoscaler.controller.crd import Autoscaler, HorizonSource, Mode, SpecError, TargetRef
from autoscaler.controller.kube import KubeClient, KubeError, Scale
from autoscaler.controller.kubetime import micro_time, rfc3339
from autoscaler.controller.leader import LeaderElector
from autoscaler.controller.metrics import MetricsReader
from autoscaler.controller.podfacts import PodFacts, summarize
from autoscaler.controller.settings import ControllerSettings
from autoscaler.controller.telemetry import Telemetry
from autoscaler.policy import coldstart
from autoscaler.policy.decide import Decision, decide, record_rescale
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.spec import ColdStartSpec
from autoscaler.policy.state import PolicyState

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "infscale.io/controller"
NOTE_LIMIT = 1024  # events.k8s.io/v1 rejects longer notes


@dataclass(frozen=True, slots=True)
class Memory:
    """What the leader keeps per object between ticks (also in the status, for the next leader)."""

    state: PolicyState
    cold: ColdStartHistory
    last_spec_replicas: int | None = None
    last_scale_time: str | None = None
    written: Mapping[str, Any] | None = None  # the significant part of the last status written
    written_at: float = -float("inf")


@dataclass(frozen=True, slots=True)
class ConditionStatus:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """One object's tick, for tests and the benchmark."""

    key: str
    decision: Decision | None = None
    scaled_to: int | None = None  # the count written to /scale this tick
    refused: str = ""  # why a wanted scale was not written
    error: str = ""
    conditions: tuple[ConditionStatus, ...] = ()
    observation: Observation | None = None  # what decide() was given

    def condition(self, type_: str) -> ConditionStatus | None:
        return next((c for c in self.conditions if c.type == type_), None)


@dataclass(frozen=True, slots=True)
class ClusterView:
    """Read once per tick, shared by every object."""

    gpu: GpuNodes | None = None  # None: not read, or the read failed
    gpu_error: str = ""
    hpas: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)  # last good list
    hpa_errors: Mapping[str, str] = field(default_factory=dict)  # namespaces never listed: why
    # direct-mode autoscalers by (namespace, target): more than one on a target is ambiguous
    actuators: Mapping[tuple[str, TargetRef], tuple[str, ...]] = field(default_factory=dict)


def _targets(hpa: Mapping[str, Any], target: TargetRef) -> bool:
    ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
    group = str(ref.get("apiVersion") or "").rpartition("/")[0]
    return ref.get("kind") == target.kind and ref.get("name") == target.name and group == target.group


def _conditions_of(decision: Decision) -> list[ConditionStatus]:
    return [
        ConditionStatus(c.type, "True" if c.status else "False", c.reason, c.message)
        for c in decision.conditions
    ]


def _replace(conditions: list[ConditionStatus], new: ConditionStatus) -> list[ConditionStatus]:
    """`new` first, in place of the condition of its type (the actuator's verdict leads)."""
    return [new, *(c for c in conditions if c.type != new.type)]


def _stage_chain(decision: Decision) -> str:
    return "; ".join(f"{s.name} {s.before}->{s.after} {s.reason}" for s in decision.stages)


class Controller:
    def __init__(
        self,
        settings: ControllerSettings,
        kube: KubeClient,
        reader: MetricsReader,
        *,
        telemetry: Telemetry | None = None,
        elector: LeaderElector | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.kube = kube
        self.reader = reader
        self.telemetry = telemetry or Telemetry()
        self.elector = elector
        self.clock = clock
        self.memory: dict[str, Memory] = {}  # by uid
        self._hpa_cache: dict[str, Sequence[Mapping[str, Any]]] = {}  # last good list per namespace
        self._invalid: dict[str, str] = {}  # uid -> the spec error already reported

    # --- one tick ---------------------------------------------------------------------------

    async def step(self) -> list[Outcome]:
        now = self.clock()
        started = time.perf_counter()
        try:
            return await self._step(now)
        finally:
            self.telemetry.tick_seconds.observe(time.perf_counter() - started)
            self.telemetry.health.started = True
            self.telemetry.health.last_tick_at = now

    async def _step(self, now: float) -> list[Outcome]:
        if self.elector is not None and not self.elector.leading(now):
            if self.memory:
                log.info("not leading: forgetting the state of %d object(s)", len(self.memory))
            self.memory.clear()
            self.telemetry.forget_all()
            self.telemetry.leader.set(0)
            return []
        self.telemetry.leader.set(1)
        try:
            objects = await self.kube.list_autoscalers(self.settings.namespace)
        except KubeError as exc:
            log.warning("%s", exc)
            self.telemetry.errors.labels("list_autoscalers").inc()
            return []
        parsed: list[Autoscaler] = []
        outcomes: list[Outcome] = []
        for obj in objects:
            try:
                parsed.append(
                    crd.parse_autoscaler(
                        obj,
                        tolerance=self.settings.tolerance,
                        downscale_stabilization_s=self.settings.downscale_stabilization_s,
                        max_metric_age_s=self.settings.max_metric_age_s,
                    )
                )
            except SpecError as exc:
                outcomes.append(await self._report_invalid(obj, str(exc), now))
        cluster = await self._read_cluster(parsed)
        limit = asyncio.Semaphore(self.settings.concurrency)

        async def bounded(a: Autoscaler) -> Outcome:
            async with limit:
                begun = time.perf_counter()
                try:
                    return await self.reconcile(a, cluster, now)
                except Exception as exc:  # one object's bug must not stop the others
                    log.exception("%s: reconcile failed", a.key)
                    self.telemetry.errors.labels("reconcile").inc()
                    return Outcome(a.key, error=f"{type(exc).__name__}: {exc}")
                finally:
                    self.telemetry.reconcile_seconds.observe(time.perf_counter() - begun)

        outcomes += await asyncio.gather(*(bounded(a) for a in parsed))
        alive = {a.uid for a in parsed}
        for uid in set(self.memory) - alive:
            del self.memory[uid]
        listed = {str((o.get("metadata") or {}).get("uid", "")) for o in objects}
        for uid in set(self._invalid) - listed:  # deleted while invalid
            del self._invalid[uid]
        for key in self.telemetry.known() - {(a.namespace, a.name) for a in parsed}:
            self.telemetry.forget(key)
        return outcomes

    async def _read_cluster(self, autoscalers: Sequence[Autoscaler]) -> ClusterView:
        gpu, gpu_error = None, ""
        if any(a.spec.cold_start is not None for a in autoscalers):
            try:
                nodes, pods = await asyncio.gather(self.kube.list_nodes(), self.kube.list_assigned_pods())
                gpu = capacity.gpu_nodes(nodes, pods)
            except KubeError as exc:
                gpu_error = str(exc)
                self.telemetry.errors.labels("list_nodes").inc()
        namespaces = sorted({a.namespace for a in autoscalers if a.mode is Mode.DIRECT})
        results = await asyncio.gather(
            *(self.kube.list_hpas(ns) for ns in namespaces), return_exceptions=True
        )
        for ns in set(self._hpa_cache) - set(namespaces):  # unused lists would only go stale
            del self._hpa_cache[ns]
        hpa_errors: dict[str, str] = {}
        for ns, result in zip(namespaces, results, strict=True):
            if isinstance(result, KubeError):
                self.telemetry.errors.labels("list_hpas").inc()
                log.warning("%s", result)
                if ns not in self._hpa_cache:
                    hpa_errors[ns] = str(result)
            elif isinstance(result, BaseException):
                raise result
            else:
                self._hpa_cache[ns] = result
        actuators: dict[tuple[str, TargetRef], tuple[str, ...]] = {}
        for a in autoscalers:
            if a.mode is Mode.DIRECT:
                key = (a.namespace, a.target)
                actuators[key] = (*actuators.get(key, ()), a.name)
        return ClusterView(gpu, gpu_error, dict(self._hpa_cache), hpa_errors, actuators)

    # --- one object -------------------------------------------------------------------------

    def _restore(self, a: Autoscaler) -> Memory:
        """A restarted or new leader resumes from the status the previous one wrote."""
        state, cold = PolicyState(), ColdStartHistory()
        try:
            if "policyState" in a.status:
                state = crd.state_from_status(a.status["policyState"])
            if "coldStarts" in a.status:
                cold = ColdStartHistory.from_dict((a.status["coldStarts"] or {}).get("samples", []))
        except ValueError as exc:
            log.warning("%s: starting from a fresh state, the stored one is unusable: %s", a.key, exc)
            self.telemetry.errors.labels("restore_state").inc()
            state, cold = PolicyState(), ColdStartHistory()
        last = a.status.get("lastScaleTime")
        seen = a.status.get("currentReplicas")  # mode hpa books the HPA's changes against it
        return Memory(
            state,
            cold,
            last_spec_replicas=seen if isinstance(seen, int) and not isinstance(seen, bool) else None,
            last_scale_time=str(last) if last else None,
        )

    async def reconcile(self, a: Autoscaler, cluster: ClusterView, now: float) -> Outcome:
        self._invalid.pop(a.uid, None)
        mem = self.memory.get(a.uid) or self._restore(a)
        key = (a.namespace, a.name)
        try:
            scale = await self.kube.get_scale(a.namespace, a.target)
        except KubeError as exc:
            self.telemetry.errors.labels("get_scale").inc()
            cond = ConditionStatus(
                "AbleToScale",
                "False",
                "FailedGetScale",
                f"the controller was unable to get the target's current scale: {exc}",
            )
            status = self._status_without_decision(a, mem, cond)
            self.memory[a.uid] = await self._write_status(a, mem, now, status, force=False)
            return Outcome(a.key, error=str(exc), conditions=(cond,))

        facts = await self._pod_facts(a, scale)
        readings = await self._read_metrics(a, now)
        cold = mem.cold.add(
            facts.startups if facts else (),
            keep=self.settings.cold_start_samples,
            max_startup_s=self.settings.max_startup_s,
        )
        plan = _Plan.of(a, cold, facts, cluster, now)

        state = mem.state
        if (
            a.mode is Mode.HPA
            and mem.last_spec_replicas is not None
            and scale.spec_replicas != mem.last_spec_replicas
        ):
            # the HPA (the actuator) changed the count: a scale event for our rate limits too
            state = record_rescale(a.spec, state, now, mem.last_spec_replicas, scale.spec_replicas)
        observation = plan.observation(scale, facts, readings)
        decision, new_state = decide(a.spec, state, observation, now)

        conditions = _conditions_of(decision)
        scaled_to: int | None = None
        refused = ""
        last_scale_time = mem.last_scale_time
        foreign = [h for h in cluster.hpas.get(a.namespace, ()) if _targets(h, a.target)]
        siblings = sorted(set(cluster.actuators.get((a.namespace, a.target), ())) - {a.name})
        if a.mode is Mode.DIRECT and a.namespace in cluster.hpa_errors:  # no blind writes
            refused = (
                f"cannot tell whether a HorizontalPodAutoscaler also targets {a.target}:"
                f" {cluster.hpa_errors[a.namespace]}"
            )
            conditions = _replace(
                conditions, ConditionStatus("AbleToScale", "False", "FailedListHPAs", refused)
            )
        elif a.mode is Mode.DIRECT and foreign:
            names = ", ".join(sorted(str((h.get("metadata") or {}).get("name")) for h in foreign))
            refused = (
                f"HorizontalPodAutoscaler {names} also targets {a.target}; two actuators fight over"
                " /scale: delete it, or set mode: hpa to keep the HPA as the actuator"
            )
            conditions = _replace(conditions, ConditionStatus("AbleToScale", "False", "ForeignHPA", refused))
        elif a.mode is Mode.DIRECT and siblings:  # as upstream's AmbiguousSelector: nobody acts
            refused = (
                f"InferenceAutoscaler {', '.join(siblings)} also targets {a.target} in mode direct;"
                " keep one of them"
            )
            conditions = _replace(
                conditions, ConditionStatus("AbleToScale", "False", "AmbiguousTarget", refused)
            )
        elif a.mode is Mode.DIRECT and decision.scale:
            decision, new_state, observation, written, error = await self._write_scale(
                a, state, plan, scale, facts, readings, decision, new_state, now
            )
            conditions = _conditions_of(decision)  # a 409 may have led to a new decision
            if written is not None:
                scaled_to = written
                new_state = record_rescale(a.spec, new_state, now, decision.current_replicas, written)
                last_scale_time = rfc3339(now)
                direction = "up" if written > decision.current_replicas else "down"
                self.telemetry.count(key, self.telemetry.scales, direction)
                conditions = _replace(
                    conditions,
                    ConditionStatus(
                        "AbleToScale",
                        "True",
                        "SucceededRescale",
                        f"the controller was able to update the target scale to {written}",
                    ),
                )
                await self._event(
                    a,
                    now,
                    "Normal",
                    "SuccessfulRescale",
                    f"New size: {written}; reason: {decision.rescale_reason}; {_stage_chain(decision)}",
                )
            elif error:
                refused = error
                conditions = _replace(
                    conditions,
                    ConditionStatus(
                        "AbleToScale",
                        "False",
                        "FailedUpdateScale",
                        f"the controller was unable to update the target scale: {error}",
                    ),
                )
                await self._event(
                    a,
                    now,
                    "Warning",
                    "FailedRescale",
                    f"New size: {decision.desired_replicas}; reason: {decision.rescale_reason};"
                    f" error: {error}",
                )
        elif a.mode is Mode.DRY_RUN and decision.scale:
            refused = "mode dryRun: decided, not applied"
        conditions.append(plan.capacity_condition(decision))

        # decision.current_replicas is the count of the last read (a 409 reads the scale again)
        spec_replicas = scaled_to if scaled_to is not None else decision.current_replicas
        mem = replace(
            mem, state=new_state, cold=cold, last_spec_replicas=spec_replicas, last_scale_time=last_scale_time
        )
        status = self._status(a, mem, decision, plan, facts, spec_replicas, conditions, now)
        mem = await self._write_status(a, mem, now, status, force=scaled_to is not None)
        self.memory[a.uid] = mem
        self._publish(a, decision, plan, facts, readings, spec_replicas)
        return Outcome(
            a.key, decision, scaled_to, refused, conditions=tuple(conditions), observation=observation
        )

    async def _pod_facts(self, a: Autoscaler, scale: Scale) -> PodFacts | None:
        if not scale.selector:
            return None
        try:
            return summarize(await self.kube.list_pods(a.namespace, scale.selector))
        except KubeError as exc:
            # without pods, Value targets cannot be computed: the policy holds (ready pods unknown)
            log.warning("%s: %s", a.key, exc)
            self.telemetry.errors.labels("list_pods").inc()
            return None

    async def _read_metrics(self, a: Autoscaler, now: float) -> dict[str, MetricReading]:
        results = await asyncio.gather(*(self.reader.read(a.namespace, m, now) for m in a.spec.metrics))
        for m, r in zip(a.spec.metrics, results, strict=True):
            if r.values_milli is None:
                self.telemetry.errors.labels("read_metric").inc()
                log.info("%s: metric %s: %s", a.key, m.name, r.error)
        return {m.name: r for m, r in zip(a.spec.metrics, results, strict=True)}

    async def _write_scale(
        self,
        a: Autoscaler,
        state: PolicyState,
        plan: _Plan,
        scale: Scale,
        facts: PodFacts | None,
        readings: Mapping[str, MetricReading],
        decision: Decision,
        new_state: PolicyState,
        now: float,
    ) -> tuple[Decision, PolicyState, Observation, int | None, str]:
        """PUT /scale with the resourceVersion read; on 409 read again and decide again from `state`.

        Returns the decision that stands, its new state and observation, the count written (None:
        nothing written) and the error that stopped it.
        """
        observation = plan.observation(scale, facts, readings)
        for attempt in range(self.settings.scale_conflict_retries + 1):
            try:
                await self.kube.put_scale(a.namespace, a.target, scale, decision.desired_replicas)
                return decision, new_state, observation, decision.desired_replicas, ""
            except KubeError as exc:
                if not exc.conflict or attempt == self.settings.scale_conflict_retries:
                    self.telemetry.errors.labels("update_scale").inc()
                    return decision, new_state, observation, None, str(exc)
                log.info("%s: %s; reading the scale again", a.key, exc)
            try:
                scale = await self.kube.get_scale(a.namespace, a.target)
            except KubeError as exc:
                self.telemetry.errors.labels("get_scale").inc()
                return decision, new_state, observation, None, str(exc)
            observation = plan.observation(scale, facts, readings)
            decision, new_state = decide(a.spec, state, observation, now)
            if not decision.scale:
                return decision, new_state, observation, None, ""
        raise AssertionError("unreachable")  # pragma: no cover

    async def _event(self, a: Autoscaler, now: float, type_: str, reason: str, note: str) -> None:
        event = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{a.name}.{uuid.uuid4().hex[:16]}", "namespace": a.namespace},
            "eventTime": micro_time(now),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self.settings.identity[:128],
            "action": "Scale",
            "reason": reason,
            "type": type_,
            "note": note[:NOTE_LIMIT],
            "regarding": {
                "apiVersion": crd.API_VERSION,
                "kind": crd.KIND,
                "name": a.name,
                "namespace": a.namespace,
                "uid": a.uid,
            },
            "related": {
                "apiVersion": a.target.api_version,
                "kind": a.target.kind,
                "name": a.target.name,
                "namespace": a.namespace,
            },
        }
        try:
            await self.kube.create_event(a.namespace, event)
        except KubeError as exc:  # an event is a report: losing one never blocks the loop
            self.telemetry.errors.labels("create_event").inc()
            log.warning("%s: %s", a.key, exc)

    # --- status ----------------------------------------------------------------------------

    def _conditions_json(
        self, a: Autoscaler, conditions: Sequence[ConditionStatus], now: float
    ) -> list[dict[str, Any]]:
        previous = {c.get("type"): c for c in a.status.get("conditions") or [] if isinstance(c, Mapping)}
        out = []
        for c in conditions:
            before = previous.get(c.type)
            since = before.get("lastTransitionTime") if before and before.get("status") == c.status else None
            out.append(
                {
                    "type": c.type,
                    "status": c.status,
                    "reason": c.reason,
                    "message": c.message[:1024],
                    "lastTransitionTime": since or rfc3339(now),
                }
            )
        return out

    def _status_without_decision(self, a: Autoscaler, mem: Memory, cond: ConditionStatus) -> dict[str, Any]:
        """No decision this tick: the last status stays, with `cond` replacing its condition type."""
        kept = [
            ConditionStatus(
                str(c.get("type")), str(c.get("status")), str(c.get("reason", "")), str(c.get("message", ""))
            )
            for c in a.status.get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") != cond.type
        ]
        return {**a.status, "conditions": [cond, *kept], "policyState": crd.state_to_status(mem.state)}

    def _status(
        self,
        a: Autoscaler,
        mem: Memory,
        decision: Decision,
        plan: _Plan,
        facts: PodFacts | None,
        spec_replicas: int,
        conditions: Sequence[ConditionStatus],
        now: float,
    ) -> dict[str, Any]:
        status: dict[str, Any] = {
            "observedGeneration": a.generation,
            "mode": str(a.mode),
            "currentReplicas": spec_replicas,
            "desiredReplicas": decision.desired_replicas,
            "readyReplicas": facts.ready if facts else 0,
            "conditions": list(conditions),
            "lastDecision": {
                "time": rfc3339(now),
                "leadTimeSeconds": round(decision.lead_time_s, 3),
                "rescaleReason": decision.rescale_reason,
                "stages": [
                    {
                        "name": s.name,
                        "before": s.before,
                        "after": s.after,
                        "reason": s.reason,
                        "message": s.message[:1024],
                    }
                    for s in decision.stages
                ],
                "forecasts": [
                    {
                        "metric": f.metric,
                        "current": _num(f.current),
                        "predicted": _num(f.predicted),
                        "method": f.method,
                    }
                    for f in decision.forecasts
                ],
                "predictedReadySeconds": [round(t, 3) for t in plan.predicted_ready(decision)],
            },
            "coldStarts": plan.cold_start_status(),
            "policyState": crd.state_to_status(mem.state),
        }
        if mem.last_scale_time:
            status["lastScaleTime"] = mem.last_scale_time
        return status

    async def _write_status(
        self, a: Autoscaler, mem: Memory, now: float, status: dict[str, Any], *, force: bool
    ) -> Memory:
        status["conditions"] = self._conditions_json(a, status["conditions"], now)
        significant = {
            k: v for k, v in status.items() if k not in ("lastDecision", "policyState", "coldStarts")
        }
        significant["conditions"] = [
            {k: c[k] for k in ("type", "status", "reason", "message")} for c in status["conditions"]
        ]
        significant["samples"] = len((status.get("coldStarts") or {}).get("samples", []))
        interval = self.settings.status_interval_s
        if a.mode is Mode.HPA:  # the published recommendation's freshness is lastDecision.time
            interval = min(interval, self.settings.publish_max_age_s / 3)
        due = now - mem.written_at >= interval
        if not force and not due and significant == mem.written:
            return mem
        try:
            await self.kube.patch_autoscaler_status(a.namespace, a.name, _with_deletions(a.status, status))
        except KubeError as exc:
            self.telemetry.errors.labels("update_status").inc()
            log.warning("%s: %s", a.key, exc)
            return mem
        return replace(mem, written=significant, written_at=now)

    async def _report_invalid(self, obj: Mapping[str, Any], message: str, now: float) -> Outcome:
        meta = obj.get("metadata") or {}
        ns, name, uid = str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", ""))
        cond = ConditionStatus("ScalingActive", "False", "InvalidSpec", message)
        if self._invalid.get(uid) != message:
            status = {
                "observedGeneration": int(meta.get("generation") or 0),
                "conditions": [
                    {
                        "type": cond.type,
                        "status": cond.status,
                        "reason": cond.reason,
                        "message": message[:1024],
                        "lastTransitionTime": rfc3339(now),
                    }
                ],
            }
            try:
                await self.kube.patch_autoscaler_status(ns, name, status)
                self._invalid[uid] = message
            except KubeError as exc:
                log.warning("%s/%s: %s", ns, name, exc)
        return Outcome(f"{ns}/{name}", error=message, conditions=(cond,))

    def _publish(
        self,
        a: Autoscaler,
        decision: Decision,
        plan: _Plan,
        facts: PodFacts | None,
        readings: Mapping[str, MetricReading],
        spec_replicas: int,
    ) -> None:
        t, key = self.telemetry, (a.namespace, a.name)
        t.put(key, t.desired, decision.desired_replicas)
        t.put(key, t.current, spec_replicas)
        t.put(key, t.ready, facts.ready if facts else 0)
        t.put(key, t.lead_time, decision.lead_time_s)
        ready_in = plan.predicted_ready(decision)
        t.put(key, t.predicted_ready, max(ready_in, default=0.0))
        for name, reading in readings.items():  # every metric read, forecast or not
            if reading.values_milli:
                t.put(key, t.metric_value, sum(reading.values_milli) / 1000.0, name)
        for f in decision.forecasts:
            t.put(key, t.forecast, f.predicted, f.metric)
        deciding = next(
            (s for s in reversed(decision.stages) if s.before != s.after),
            decision.stages[-1] if decision.stages else None,
        )
        t.count(key, t.decisions, deciding.reason if deciding else "none")
        for source, value in plan.cold_start_figures().items():
            if value is not None:
                t.put(key, t.cold_start, value, source)


def _num(x: float) -> float | int:
    return round(x, 6)


def _with_deletions(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch that turns `old` into `new`: keys gone from `new` are set to null."""
    out: dict[str, Any] = {}
    for k, v in new.items():
        before = old.get(k)
        out[k] = _with_deletions(before, v) if isinstance(v, Mapping) and isinstance(before, Mapping) else v
    for k in old:
        if k not in new:
            out[k] = None
    return out


@lru_cache(maxsize=1024)
def _model_s(spec: ColdStartSpec, free_gpus: tuple[int, ...], image_cached: tuple[int, ...]) -> float:
    """The cold-start model's time to ready of one more replica: pure, asked several times a tick per
    object (expected load, status, gauges), and a cluster looks the same most ticks."""
    return coldstart.lead_time_s(spec, free_gpus_per_node=free_gpus, image_cached_nodes=image_cached)


@dataclass(frozen=True, slots=True)
class _Plan:
    """The horizon and capacity facts of one object this tick (pure, from what was read)."""

    autoscaler: Autoscaler
    cold: ColdStartHistory
    now: float
    free_gpus: tuple[int, ...]
    image_cached: tuple[int, ...]
    gpus_per_replica: int
    gpu_known: bool
    gpu_error: str
    observed_load_s: float | None  # the horizon quantile of scheduled -> Ready, once enough samples
    expected_load_s: float  # a typical replica's scheduled -> Ready, for replicas already starting

    @classmethod
    def of(
        cls, a: Autoscaler, cold: ColdStartHistory, facts: PodFacts | None, cluster: ClusterView, now: float
    ) -> _Plan:
        spec = a.spec.cold_start
        gpus = spec.gpus_per_replica if spec else (facts.gpus_per_pod if facts else 0)
        gpu = cluster.gpu
        free = gpu.free_gpus if gpu else ()
        cached = gpu.image_cached_nodes(facts.image if facts else None) if gpu else ()
        enough = len(cold.samples) >= a.horizon.min_samples
        observed = cold.load_quantile(a.horizon.quantile) if enough else None
        if enough:
            expected = cold.load_quantile(0.5) or 0.0
        elif spec is not None:  # the model's time for one replica on a node with room and the image
            expected = _model_s(spec, (spec.gpus_per_node,), (0,))
        else:
            expected = 0.0
        return cls(a, cold, now, free, cached, gpus, gpu is not None, cluster.gpu_error, observed, expected)

    @property
    def provision_s(self) -> float:
        spec = self.autoscaler.spec.cold_start
        return spec.node_provision_s if spec else 0.0

    def _fit(self, k: int) -> capacity.Fit:
        return capacity.fit(self.free_gpus, self.gpus_per_replica, k)

    def lead_time_s(self) -> float | None:
        """The observation's horizon; None lets the core use prediction.leadTimeSeconds or the model."""
        a = self.autoscaler
        prediction = a.spec.prediction
        if prediction is None or prediction.lead_time_s is not None:
            return None
        source = a.horizon.source
        if source is HorizonSource.COLD_START_MODEL:
            return None
        if self.observed_load_s is None:
            return 0.0 if source is HorizonSource.OBSERVED or a.spec.cold_start is None else None
        short = self.gpu_known and self.gpus_per_replica > 0 and self._fit(1).short > 0
        return self.observed_load_s + (self.provision_s if short else 0.0)

    def observation(
        self, scale: Scale, facts: PodFacts | None, readings: Mapping[str, MetricReading]
    ) -> Observation:
        starting: list[float] = []
        for pod in facts.starting if facts else ():
            if pod.scheduled_at is not None:
                at = pod.scheduled_at + self.expected_load_s
            elif pod.unschedulable:  # waits for a node first
                at = self.now + self.provision_s + self.expected_load_s
            else:
                at = self.now + self.expected_load_s
            starting.append(max(at, self.now))
        return Observation(
            spec_replicas=scale.spec_replicas,
            status_replicas=scale.status_replicas,
            ready_pods=facts.ready if facts and facts.matched else None,
            metrics=readings,
            starting_ready_at=tuple(sorted(starting)),
            lead_time_s=self.lead_time_s(),
            free_gpus_per_node=self.free_gpus if self.autoscaler.spec.cold_start else (),
            image_cached_nodes=self.image_cached if self.autoscaler.spec.cold_start else (),
        )

    def predicted_ready(self, decision: Decision) -> tuple[float, ...]:
        """Seconds until each replica the decision adds is ready: the model's, else the observed quantile
        plus node provisioning for the replicas that do not fit on existing nodes."""
        if decision.predicted_ready_s:
            return decision.predicted_ready_s
        k = decision.desired_replicas - decision.current_replicas
        if k <= 0 or self.observed_load_s is None:
            return ()
        fitting = self._fit(k).fitting if self.gpu_known else k
        return tuple(self.observed_load_s + (0.0 if i < fitting else self.provision_s) for i in range(k))

    def capacity_condition(self, decision: Decision) -> ConditionStatus:
        if self.gpus_per_replica <= 0:
            return ConditionStatus("CapacityAvailable", "True", "NoGPUsRequested", "replicas request no GPUs")
        if not self.gpu_known:
            why = (
                self.gpu_error
                or "GPU capacity is read only with spec.coldStart (gpusPerReplica, nodeProvisionSeconds)"
            )
            return ConditionStatus("CapacityAvailable", "Unknown", "CapacityUnknown", why)
        k = max(1, decision.desired_replicas - decision.current_replicas)
        f = self._fit(k)
        g = self.gpus_per_replica
        free = sum(self.free_gpus)
        if f.short == 0:
            return ConditionStatus(
                "CapacityAvailable",
                "True",
                "GPUsAvailable",
                f"{k} new replica(s) of {g} GPU(s) fit on existing nodes ({free} GPU(s) free)",
            )
        return ConditionStatus(
            "CapacityAvailable",
            "False",
            "InsufficientGPUs",
            f"{f.short} of {k} new replica(s) need {g} GPU(s) on one node and do not fit on existing nodes"
            f" ({free} GPU(s) free as {list(self.free_gpus)}); their predicted ready time includes"
            f" {self.provision_s:.0f} s of node provisioning",
        )

    def cold_start_figures(self) -> dict[str, float | None]:
        spec = self.autoscaler.spec.cold_start
        model = None
        if spec is not None:
            model = _model_s(spec, self.free_gpus, self.image_cached)
        return {
            "model": model,
            "observed_p50": self.cold.startup_quantile(0.5),
            "observed_p90": self.cold.startup_quantile(0.9),
        }

    def cold_start_status(self) -> dict[str, Any]:
        figures = self.cold_start_figures()
        out: dict[str, Any] = {"samples": self.cold.to_dict()}
        for name, value in (
            ("modelSeconds", figures["model"]),
            ("observedMedianSeconds", figures["observed_p50"]),
            ("observedP90Seconds", figures["observed_p90"]),
        ):
            if value is not None:
                out[name] = round(value, 3)
        return out


async def run(controller: Controller, stop: asyncio.Event, *, retry_period_s: float) -> None:
    """The real-time driver: leader election every retry period, a step every tick, until `stop`."""
    elector = controller.elector

    async def wait(seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=max(0.0, seconds))

    async def elect_once() -> None:
        assert elector is not None
        try:
            await elector.tick(controller.clock())
        except Exception:  # not a KubeError (those tick() handles): retried, or nobody ever leads
            log.exception("leader election failed")
            controller.telemetry.errors.labels("leader_election").inc()

    async def elect() -> None:  # after the first round, which run() awaits: never two at once
        while not stop.is_set():
            await wait(retry_period_s)
            if not stop.is_set():
                await elect_once()

    if elector is not None:
        await elect_once()
    election = asyncio.create_task(elect()) if elector is not None else None
    try:
        while not stop.is_set():
            began = controller.clock()
            try:
                await controller.step()
            except Exception:  # a bug in one tick must not end the process; the next tick retries
                log.exception("tick failed")
                controller.telemetry.errors.labels("tick").inc()
            await wait(controller.settings.tick_s - (controller.clock() - began))
    finally:
        if election is not None:
            election.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await election
        if elector is not None:
            await elector.release(controller.clock())
