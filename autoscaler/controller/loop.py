"""The controller's shell: caches and a work queue in, plan() in the middle, effects out.

Reads come from informer caches (autoscaler/controller/cache.py) and shared metric reads
(metriccache.py); each InferenceAutoscaler is a key in a work queue (workqueue.py), reconciled when
it changes, when its target, its pods, an HPA on its target or its metric values change, and at
the latest every `tick_s`; a failure requeues it with its own exponential backoff (never later than
`tick_s`). One slow or failing object delays only itself.

A reconcile: snapshot (from the caches) -> plan() (pure, plan.py) -> effects: the /scale write first
(a 409 reads the scale again and plans again from the same memory; another failure plans again
knowing it), then the Events and the status patch. A non-leader reconciles nothing and forgets its
in-memory state (the new leader's is in the status); the caches keep running on the standby, so a
failover starts warm. `step()` is one pass at the clock's `now` (tests); `run()` is the real-time
driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from autoscaler.controller import crd
from autoscaler.controller.cache import Caches, scale_of
from autoscaler.controller.crd import Autoscaler, Mode, SpecError
from autoscaler.controller.kube import KubeClient, KubeError, Scale
from autoscaler.controller.kubetime import micro_time, rfc3339
from autoscaler.controller.leader import LeaderElector
from autoscaler.controller.metriccache import MetricCache
from autoscaler.controller.metrics import MetricsReader
from autoscaler.controller.plan import (
    Emit,
    Memory,
    Outcome,
    PatchStatus,
    Plan,
    Settings,
    Snapshot,
    WriteScale,
    plan,
    restore,
)
from autoscaler.controller.podfacts import PodFacts, summarize
from autoscaler.controller.report import ConditionStatus, cut_utf8
from autoscaler.controller.settings import ControllerSettings
from autoscaler.controller.telemetry import Telemetry
from autoscaler.controller.workqueue import WorkQueue
from common.selector import parse_selector

__all__ = ["REPORTING_CONTROLLER", "Controller", "Outcome", "run"]

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "infscale.io/controller"
CRD_CONDITION = "infscale.io/CRDInstalled"  # on the controller's own pod, read by `kubectl describe pod`


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
        informer_options: Mapping[str, Any] | None = None,
    ) -> None:
        """`informer_options`: common.listwatch.Informer keyword arguments (tests shorten backoffs)."""
        self.settings = settings
        self.kube = kube
        self.telemetry = telemetry or Telemetry()
        self.elector = elector
        self.clock = clock
        self.queue = WorkQueue(clock)
        self.caches = Caches(
            kube.api,
            namespace=settings.namespace,
            enqueue=self._changed,
            informer_options={"request_timeout_s": settings.request_timeout_s, **(informer_options or {})},
        )
        self.metrics = MetricCache(
            reader,
            on_change=self._changed,
            interval_s=settings.metrics_interval_s,
            max_reads_per_s=settings.metrics_max_reads_per_s,
            batch=settings.metrics_batch,
        )
        self.plan_settings = Settings(
            cold_start_samples=settings.cold_start_samples,
            max_startup_s=settings.max_startup_s,
            status_interval_s=settings.status_interval_s,
            publish_max_age_s=settings.publish_max_age_s,
        )
        self.memory: dict[str, Memory] = {}  # by uid
        self._uids: dict[str, str] = {}  # key -> uid, to forget a deleted object
        self._invalid: dict[str, str] = {}  # uid -> the spec error already reported
        self._parsed: dict[str, tuple[int, Autoscaler]] = {}  # uid -> (generation, parsed spec)
        self._pod_facts: dict[str, tuple[tuple[tuple[str, str], ...], PodFacts]] = {}  # key -> (pods, facts)
        self._scales: dict[str, Scale] = {}  # key -> its target's scale, as of a resourceVersion
        self._leading = False
        self.crd_missing = ""  # why the InferenceAutoscaler API is not served ("" when it is)
        self._stack: contextlib.AsyncExitStack | None = None

    # --- life cycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the caches (once); they run until close()."""
        if self._stack is None:
            self._stack = contextlib.AsyncExitStack()
            await self._stack.enter_async_context(self.caches.running())

    async def close(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()
            self._stack = None

    def _changed(self, key: str) -> None:
        if self._leading:
            self.queue.add(key)

    def leading(self, now: float) -> bool:
        """Whether to act; on losing the lease the in-memory state goes, on gaining it every object
        is queued (the new leader resumes from the statuses)."""
        leading = self.elector is None or self.elector.leading(now)
        if leading and not self._leading:
            self._leading = True
            for obj in self.caches.autoscalers.items():
                self.queue.add(_key(obj))
        elif not leading and self._leading:
            self._leading = False
            self.queue.clear()
            if self.memory:
                log.info("not leading: forgetting the state of %d object(s)", len(self.memory))
            self.memory.clear()
            self.telemetry.forget_all()
        self.telemetry.leader.set(1 if leading else 0)
        return leading

    async def housekeeping(self, now: float) -> None:
        """Readiness, and the missing-CRD report; every retry period (run) or step."""
        health = self.telemetry.health
        informer = self.caches.autoscalers
        missing = ""
        if not informer.synced.is_set() and informer.last_error_code == 404:
            missing = (
                f"the {crd.KIND} API ({crd.API_VERSION}) is not served: install the CRD"
                " (kubectl apply -f deploy/controller/crd.yaml); waiting for it"
            )
        if missing != self.crd_missing:
            self.crd_missing = missing
            await self._report_crd(missing, now)
        if missing:
            health.not_ready = missing
        elif not self.caches.synced:
            health.not_ready = "caches not synced yet: " + ", ".join(
                f"{i.name} ({i.last_error or 'listing'})"
                for i in self.caches.informers()
                if not i.synced.is_set()
            )
        else:
            health.not_ready = ""
        health.started = not health.not_ready
        health.last_tick_at = now

    async def _report_crd(self, missing: str, now: float) -> None:
        if missing:
            log.error("%s", missing)
        else:
            log.info("the %s API is served", crd.KIND)
        pod, namespace = self.settings.pod_name, self.settings.pod_namespace
        if not pod or not namespace:
            return  # not in a cluster: the log line and /readyz say it
        condition = {
            "type": CRD_CONDITION,
            "status": "False" if missing else "True",
            "reason": "CRDNotInstalled" if missing else "CRDInstalled",
            "message": missing or f"{crd.PLURAL}.{crd.GROUP} is served",
            "lastTransitionTime": rfc3339(now),
        }
        try:
            await self.kube.patch_pod_status_conditions(namespace, pod, [condition])
        except KubeError as exc:
            log.warning("cannot set the %s condition on pod %s/%s: %s", CRD_CONDITION, namespace, pod, exc)
        if missing:
            regarding = {"apiVersion": "v1", "kind": "Pod", "name": pod, "namespace": namespace}
            await self._create_event(
                namespace, regarding, None, Emit("Warning", "CRDNotInstalled", missing, "Watch"), now
            )

    # --- one pass (tests) ---------------------------------------------------------------------------

    async def step(self) -> list[Outcome]:
        """Every key due at the clock's now, once; reads the due metrics first."""
        now = self.clock()
        await self.start()
        if not self.caches.synced:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.caches.wait_synced(), timeout=self.settings.request_timeout_s)
        await self.housekeeping(now)
        if not self.leading(now) or not self.caches.autoscalers.synced.is_set():
            return []
        await self.metrics.poll(now)
        keys = []
        while (key := self.queue.pop(now)) is not None:
            keys.append(key)
        limit = asyncio.Semaphore(self.settings.concurrency)

        async def bounded(key: str) -> Outcome | None:
            async with limit:
                return await self.process(key, now)

        started = time.perf_counter()
        outcomes = [o for o in await asyncio.gather(*(bounded(k) for k in keys)) if o is not None]
        self.telemetry.tick_seconds.observe(time.perf_counter() - started)
        return outcomes

    async def process(self, key: str, now: float) -> Outcome | None:
        """Reconcile one key and requeue it: after its period, or sooner with backoff after a failure."""
        begun = time.perf_counter()
        failed = False
        try:
            outcome, failed = await self.reconcile(key, now)
            return outcome
        except Exception as exc:  # one object's bug must not stop the others
            log.exception("%s: reconcile failed", key)
            self.telemetry.errors.labels("reconcile").inc()
            failed = True
            return Outcome(key, error=f"{type(exc).__name__}: {exc}")
        finally:
            self.queue.done(key)
            if self.caches.autoscalers.get(key) is not None:
                if failed:
                    self.queue.add_after(key, min(self.queue.backoff_s(key), self.settings.tick_s))
                else:
                    self.queue.forget(key)
                    self.queue.add_after(key, self.settings.tick_s)
            self.telemetry.reconcile_seconds.observe(time.perf_counter() - begun)

    # --- one object ---------------------------------------------------------------------------------

    def _forget(self, key: str) -> None:
        uid = self._uids.pop(key, None)
        if uid is not None:
            self.memory.pop(uid, None)
            self._invalid.pop(uid, None)
            self._parsed.pop(uid, None)
        self._pod_facts.pop(key, None)
        self._scales.pop(key, None)
        self.metrics.forget(key)
        self.caches.unwatch(key)
        self.queue.remove(key)
        namespace, _, name = key.partition("/")
        self.telemetry.forget((namespace, name))

    async def reconcile(self, key: str, now: float) -> tuple[Outcome | None, bool]:
        """(outcome, failed); no outcome when the object is gone."""
        obj = self.caches.autoscalers.get(key)
        if obj is None:
            self._forget(key)
            return None, False
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if self._uids.get(key, uid) != uid:  # deleted and created again under the same name
            self._forget(key)
        self._uids[key] = uid
        generation = int(meta.get("generation") or 0)
        cached = self._parsed.get(uid)
        if cached is not None and cached[0] == generation:  # the spec is the same: only the status moved
            a = replace(cached[1], status=obj.get("status") or {})
        else:
            try:
                a = crd.parse_autoscaler(
                    obj,
                    tolerance=self.settings.tolerance,
                    downscale_stabilization_s=self.settings.downscale_stabilization_s,
                    max_metric_age_s=self.settings.max_metric_age_s,
                )
            except SpecError as exc:
                self._parsed.pop(uid, None)
                return await self._report_invalid(obj, str(exc), now)
            self._parsed[uid] = (generation, a)
        self._invalid.pop(uid, None)
        mem = self.memory.get(uid)
        if mem is None:
            mem, problem = restore(a)
            if problem:
                log.warning("%s: starting from a fresh state, the stored one is unusable: %s", a.key, problem)
                self.telemetry.errors.labels("restore_state").inc()
        snap = await self._snapshot(a, now)
        result = plan(a, snap, mem, now, self.plan_settings)
        result, failed = await self._perform(a, snap, mem, result, now)
        self.memory[uid] = result.memory
        self._publish(a, result.outcome)
        return result.outcome, failed or bool(snap.scale_error)

    async def _snapshot(self, a: Autoscaler, now: float) -> Snapshot:
        scale, scale_error = await self._scale(a)
        target = (a.namespace, a.target.group, a.target.kind, a.target.name)
        selector = parse_selector(scale.selector) if scale is not None and scale.selector else None
        self.caches.watch(a.key, target, selector)
        pods = (
            self._facts(a.key, self.caches.pods_matching(a.namespace, selector))
            if selector is not None
            else None
        )
        self.metrics.use(a.key, a.namespace, a.spec.metrics)
        readings = await self.metrics.readings(a.key, a.namespace, a.spec.metrics, now)
        for m in a.spec.metrics:
            r = readings[m.name]
            if r.values_milli is None:
                self.telemetry.errors.labels("read_metric").inc()
                log.info("%s: metric %s: %s", a.key, m.name, r.error)
        gpu, gpu_error = (None, "")
        if a.spec.cold_start is not None:
            gpu, gpu_error = await self.caches.gpu_nodes(self.settings.request_timeout_s)
        foreign: tuple[str, ...] = ()
        hpa_error = ""
        siblings: tuple[str, ...] = ()
        if a.mode is Mode.DIRECT:
            if not self.caches.hpas.synced.is_set():
                why = self.caches.hpas.last_error or "listing"
                hpa_error = f"the HorizontalPodAutoscalers are not listed yet: {why}"
            foreign = tuple(sorted(_name(h) for h in self.caches.hpas_in(a.namespace) if _targets(h, a)))
            siblings = tuple(sorted(k.partition("/")[2] for k in self.caches.actuators(target) if k != a.key))
        return Snapshot(
            scale=scale,
            scale_error=scale_error,
            pods=pods,
            readings=readings,
            gpu=gpu,
            gpu_error=gpu_error,
            foreign_hpas=foreign,
            hpa_error=hpa_error,
            siblings=siblings,
        )

    def _facts(self, key: str, pods: list[dict[str, Any]]) -> PodFacts:
        """summarize() again only when a pod changed (a resourceVersion moved, a pod came or went)."""
        versions = tuple(
            (str(p["metadata"].get("name", "")), str(p["metadata"].get("resourceVersion", ""))) for p in pods
        )
        cached = self._pod_facts.get(key)
        if cached is not None and cached[0] == versions:
            return cached[1]
        facts = summarize(pods)
        self._pod_facts[key] = (versions, facts)
        return facts

    async def _scale(self, a: Autoscaler) -> tuple[Scale | None, str]:
        informer = self.caches.target_informer(a.target)
        if informer is None:  # a kind without a cache: its /scale, read each time
            try:
                return await self.kube.get_scale(a.namespace, a.target), ""
            except KubeError as exc:
                self.telemetry.errors.labels("get_scale").inc()
                return None, str(exc)
        if not informer.synced.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(informer.synced.wait(), timeout=self.settings.request_timeout_s)
        if not informer.synced.is_set():
            self.telemetry.errors.labels("get_scale").inc()
            why = informer.last_error or "listing"
            return None, f"get scale of {a.target}: the {informer.name} cache is not synced: {why}"
        obj = informer.get(f"{a.namespace}/{a.target.name}")
        version = str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")
        cached = self._scales.get(a.key)
        if obj is not None and cached is not None and cached.resource_version == version:
            return cached, ""
        if obj is None:
            return (
                None,
                f'get scale of {a.target}: {informer.name}.{a.target.group} "{a.target.name}" not found',
            )
        scale = self._scales[a.key] = scale_of(obj)
        return scale, ""

    async def _perform(
        self, a: Autoscaler, snap: Snapshot, before: Memory, result: Plan, now: float
    ) -> tuple[Plan, bool]:
        """The effects, the /scale write first. Returns the plan that stands and whether a write failed."""
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
                await self._create_event(a.namespace, regarding, related, effect, now)
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

    async def _create_event(
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

    async def _report_invalid(self, obj: Mapping[str, Any], message: str, now: float) -> tuple[Outcome, bool]:
        meta = obj.get("metadata") or {}
        ns, name, uid = str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", ""))
        cond = ConditionStatus("ScalingActive", "False", "InvalidSpec", message)
        failed = False
        if self._invalid.get(uid) != message:
            status = {
                "observedGeneration": int(meta.get("generation") or 0),
                "conditions": [
                    {
                        "type": cond.type,
                        "status": cond.status,
                        "reason": cond.reason,
                        "message": cut_utf8(message, 1024),
                        "lastTransitionTime": rfc3339(now),
                    }
                ],
            }
            try:
                await self.kube.patch_autoscaler_status(ns, name, status)
                self._invalid[uid] = message
            except KubeError as exc:
                log.warning("%s/%s: %s", ns, name, exc)
                failed = True
        return Outcome(f"{ns}/{name}", error=message, conditions=(cond,)), failed

    def _publish(self, a: Autoscaler, outcome: Outcome) -> None:
        decision = outcome.decision
        if decision is None:
            return
        t, key = self.telemetry, (a.namespace, a.name)
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


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _targets(hpa: Mapping[str, Any], a: Autoscaler) -> bool:
    ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
    group = str(ref.get("apiVersion") or "").rpartition("/")[0]
    return ref.get("kind") == a.target.kind and ref.get("name") == a.target.name and group == a.target.group


async def run(controller: Controller, stop: asyncio.Event, *, retry_period_s: float) -> None:
    """The real-time driver until `stop`: leader election every retry period, the caches, metric
    reads on their interval, and `concurrency` workers taking keys from the queue as they fall due."""
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

    async def housekeeping() -> None:
        while not stop.is_set():
            now, began = controller.clock(), time.perf_counter()
            if elector is not None:
                await elect_once()
            try:
                await controller.housekeeping(now)
                controller.leading(controller.clock())
            except Exception:  # a bug here must not end the process
                log.exception("housekeeping failed")
                controller.telemetry.errors.labels("tick").inc()
            # a round of the loop, with or without objects: the not-acting alert counts these
            controller.telemetry.tick_seconds.observe(time.perf_counter() - began)
            await wait(retry_period_s)

    async def poll_metrics() -> None:
        while not stop.is_set():
            now = controller.clock()
            if controller._leading and controller.caches.autoscalers.synced.is_set():
                try:
                    await controller.metrics.poll(now)
                except Exception:
                    log.exception("metric reads failed")
                    controller.telemetry.errors.labels("read_metric").inc()
            due = controller.metrics.next_poll_at()
            await wait((due - controller.clock()) if due is not None else controller.metrics.interval_s)

    async def work() -> None:
        while not stop.is_set():
            key = await controller.queue.get()
            if key is None:
                return
            if not controller._leading:  # queued again, every key, when this replica leads
                controller.queue.done(key)
                continue
            await controller.process(key, controller.clock())

    await controller.start()
    tasks = [
        asyncio.create_task(housekeeping(), name="infscale housekeeping"),
        asyncio.create_task(poll_metrics(), name="infscale metrics"),
        *(
            asyncio.create_task(work(), name=f"infscale worker {i}")
            for i in range(controller.settings.concurrency)
        ),
    ]
    try:
        await stop.wait()
    finally:
        controller.queue.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await controller.close()
        if elector is not None:
            await elector.release(controller.clock())
