"""A plan's effects, performed: the /scale write first (a 409 reads the scale again and plans again
from the same memory; another failure plans again knowing it), then the Events and the status
patch; and the outcome's figures as gauges and counters."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from autoscaler.controller import crd
from autoscaler.controller.crd import Autoscaler
from autoscaler.controller.kube import KubeClient, KubeError, Scale
from autoscaler.controller.kubetime import micro_time
from autoscaler.controller.plan import plan
from autoscaler.controller.planvalues import (
    Emit,
    Memory,
    Outcome,
    PatchStatus,
    Plan,
    Settings,
    Snapshot,
    WriteScale,
)
from autoscaler.controller.report import cut_utf8
from autoscaler.controller.settings import ControllerSettings
from autoscaler.controller.telemetry import Telemetry

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "infscale.io/controller"


class Effects:
    def __init__(
        self, settings: ControllerSettings, kube: KubeClient, telemetry: Telemetry, plan_settings: Settings
    ) -> None:
        self.settings = settings
        self.kube = kube
        self.telemetry = telemetry
        self.plan_settings = plan_settings

    async def perform(
        self, a: Autoscaler, snap: Snapshot, before: Memory, result: Plan, now: float
    ) -> tuple[Plan, bool]:
        """The effects, the /scale write first. Returns the plan that stands and whether a write failed."""
        if not result.effects:  # a steady object: nothing to write
            return result, False
        failed = False
        for attempt in range(self.settings.scale_conflict_retries + 1):
            write = next((e for e in result.effects if isinstance(e, WriteScale)), None)
            if write is None:
                break
            current = Scale(write.current, 0, "", write.resource_version)
            try:
                await self.kube.put_scale(a.namespace, a.target, current, write.replicas)
                log.info(
                    "%s: scaled %s from %d to %d: %s",
                    a.key,
                    a.target,
                    write.current,
                    write.replicas,
                    result.outcome.decision.rescale_reason if result.outcome.decision else "",
                )
                direction = "up" if write.replicas > write.current else "down"
                self.telemetry.count((a.namespace, a.name), self.telemetry.scales, direction)
                break
            except KubeError as exc:
                if exc.conflict and attempt < self.settings.scale_conflict_retries:
                    log.info("%s: %s; reading the scale again", a.key, exc)
                    try:  # from the API itself: the cache may not have the other write yet
                        fresh = await self.kube.get_scale(a.namespace, a.target)
                    except KubeError as again:
                        self.telemetry.errors.labels("get_scale").inc()
                        result, failed = (
                            plan(a, replace(snap, write_error=str(again)), before, now, self.plan_settings),
                            True,
                        )
                        break
                    snap = replace(snap, scale=fresh)
                    result = plan(a, snap, before, now, self.plan_settings)
                    continue
                self.telemetry.errors.labels("update_scale").inc()
                result, failed = (
                    plan(a, replace(snap, write_error=str(exc)), before, now, self.plan_settings),
                    True,
                )
                break
        mem = result.memory
        regarding = {
            "apiVersion": crd.API_VERSION,
            "kind": crd.KIND,
            "name": a.name,
            "namespace": a.namespace,
            "uid": a.uid,
        }
        related = {
            "apiVersion": a.target.api_version,
            "kind": a.target.kind,
            "name": a.target.name,
            "namespace": a.namespace,
        }
        for effect in result.effects:
            if isinstance(effect, Emit):
                await self.create_event(a.namespace, regarding, related, effect, now)
            elif isinstance(effect, PatchStatus):
                try:
                    await self.kube.patch_autoscaler_status(a.namespace, a.name, effect.patch)
                except KubeError as exc:  # written again at the next reconcile, which comes soon
                    self.telemetry.errors.labels("update_status").inc()
                    log.warning("%s: %s", a.key, exc)
                    mem = replace(
                        mem,
                        written=before.written,
                        written_state=before.written_state,
                        written_at=before.written_at,
                        status=before.status,
                    )
                    failed = True
        return result._replace(memory=mem), failed

    async def create_event(
        self,
        namespace: str,
        regarding: Mapping[str, Any],
        related: Mapping[str, Any] | None,
        emit: Emit,
        now: float,
    ) -> None:
        event: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{regarding['name']}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "eventTime": micro_time(now),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self.settings.identity[:128],
            "action": emit.action,
            "reason": emit.reason,
            "type": emit.type,
            "note": cut_utf8(emit.note, 1024),
            "regarding": dict(regarding),
        }
        if related is not None:
            event["related"] = dict(related)
        try:
            await self.kube.create_event(namespace, event)
        except KubeError as exc:  # an event is a report: losing one never blocks the loop
            self.telemetry.errors.labels("create_event").inc()
            log.warning("%s/%s: %s", namespace, regarding["name"], exc)


def publish(telemetry: Telemetry, a: Autoscaler, outcome: Outcome) -> None:
    decision = outcome.decision
    if decision is None:
        return
    t, key = telemetry, (a.namespace, a.name)
    t.put(key, t.desired, decision.desired_replicas)
    t.put(key, t.current, outcome.spec_replicas)
    t.put(key, t.ready, outcome.ready)
    t.put(key, t.lead_time, decision.lead_time_s)
    t.put(key, t.predicted_ready, max(outcome.predicted_ready, default=0.0))
    for name, reading in outcome.readings.items():  # every metric read, forecast or not
        if reading.values_milli:
            t.put(key, t.metric_value, sum(reading.values_milli) / 1000.0, name)
    for f in decision.forecasts:
        t.put(key, t.forecast, f.predicted, f.metric)
    deciding = next(
        (s for s in reversed(decision.stages) if s.before != s.after),
        decision.stages[-1] if decision.stages else None,
    )
    t.count(key, t.decisions, deciding.reason if deciding else "none")
    for source, value in outcome.cold_start.items():
        if value is not None:
            t.put(key, t.cold_start, value, source)
