"""The controller's shell: caches and a work queue in, plan() in the middle, effects out.

Reads come from informer caches (autoscaler/controller/cache.py) and shared metric reads
(metriccache.py); each InferenceAutoscaler is a key in a work queue (workqueue.py), reconciled when
it changes, when its target, its pods, an HPA on its target or its metric values change, and at
the latest every `tick_s`; a failure requeues it with its own exponential backoff (never later than
`tick_s`). One slow or failing object delays only itself.

A reconcile: snapshot (from the caches, snapshots.py) -> plan() (pure, plan.py) -> effects
(effects.py): the /scale write first, then the Events and the status patch. A non-leader
reconciles nothing and forgets its in-memory state (the new leader's is in the status); the caches
keep running on the standby, so a failover starts warm. `step()` is one pass at the clock's `now`
(tests); `run()` (driver.py) is the real-time driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from autoscaler.controller import crd
from autoscaler.controller.cache import Caches
from autoscaler.controller.crd import Autoscaler, SpecError
from autoscaler.controller.driver import run
from autoscaler.controller.effects import REPORTING_CONTROLLER, Effects, publish
from autoscaler.controller.kube import KubeClient, KubeError
from autoscaler.controller.kubetime import rfc3339
from autoscaler.controller.leader import LeaderElector
from autoscaler.controller.metriccache import MetricCache
from autoscaler.controller.metrics import MetricsReader
from autoscaler.controller.plan import plan
from autoscaler.controller.planvalues import Emit, Memory, Outcome, Settings, restore
from autoscaler.controller.report import ConditionStatus, cut_utf8
from autoscaler.controller.settings import ControllerSettings
from autoscaler.controller.snapshots import Snapshots
from autoscaler.controller.telemetry import Telemetry
from autoscaler.controller.workqueue import WorkQueue

__all__ = ["REPORTING_CONTROLLER", "Controller", "Outcome", "run"]

log = logging.getLogger(__name__)

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
        self.snapshots = Snapshots(settings, kube, self.caches, self.metrics, self.telemetry)
        self.effects = Effects(settings, kube, self.telemetry, self.plan_settings)
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
            await self.effects.create_event(
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
                    self.queue.add_after(key, self.settings.tick_s, align_s=self.settings.resync_align_s)
            self.telemetry.reconcile_seconds.observe(time.perf_counter() - begun)

    # --- one object ---------------------------------------------------------------------------------

    def _forget(self, key: str) -> None:
        uid = self._uids.pop(key, None)
        if uid is not None:
            self.memory.pop(uid, None)
            self._invalid.pop(uid, None)
            self._parsed.pop(uid, None)
        self.snapshots.forget(key)
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
        status = obj.get("status") or {}
        if cached is not None and cached[0] == generation:  # the spec is the same: perhaps the status
            a = cached[1] if cached[1].status is status else replace(cached[1], status=status)
            if a is not cached[1]:
                self._parsed[uid] = (generation, a)
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
        snap = await self.snapshots.take(a, now)
        result = plan(a, snap, mem, now, self.plan_settings)
        result, failed = await self.effects.perform(a, snap, mem, result, now)
        self.memory[uid] = result.memory
        publish(self.telemetry, a, result.outcome)
        return result.outcome, failed or bool(snap.scale_error)

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


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
