"""A reconcile's snapshot of the cluster (plan.py's `Snapshot`), from the informer caches and the
shared metric reads; the target's scale and its pods' facts are re-derived only when a
resourceVersion moved."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import operator
from collections.abc import Mapping
from typing import Any

from autoscaler.controller.cache import Caches
from autoscaler.controller.crd import Autoscaler, Mode
from autoscaler.controller.kube import KubeClient, KubeError, Scale
from autoscaler.controller.metriccache import MetricCache
from autoscaler.controller.planvalues import Snapshot
from autoscaler.controller.podfacts import PodFacts, summarize
from autoscaler.controller.settings import ControllerSettings
from autoscaler.controller.slim import scale_of
from autoscaler.controller.telemetry import Telemetry
from autoscaler.policy import memo
from autoscaler.policy.spec import AutoscalerSpec, MetricSpec, TargetType
from common.selector import Selector, parse_selector

log = logging.getLogger(__name__)


class Snapshots:
    def __init__(
        self,
        settings: ControllerSettings,
        kube: KubeClient,
        caches: Caches,
        metrics: MetricCache,
        telemetry: Telemetry,
    ) -> None:
        self.settings = settings
        self.kube = kube
        self.caches = caches
        self.metrics = metrics
        self.telemetry = telemetry
        # key -> (selector, the candidate pods, their facts): the pods are held, so compared by identity
        self._pod_facts: dict[str, tuple[Selector, tuple[Mapping[str, Any], ...], PodFacts]] = {}
        self._scales: dict[str, Scale] = {}  # key -> its target's scale, as of a resourceVersion

    def forget(self, key: str) -> None:
        self._pod_facts.pop(key, None)
        self._scales.pop(key, None)

    async def take(self, a: Autoscaler, now: float) -> Snapshot:
        scale, scale_error = await self._scale(a)
        target = (a.namespace, a.target.group, a.target.kind, a.target.name)
        selector = parse_selector(scale.selector) if scale is not None and scale.selector else None
        self.caches.watch(a.key, target, selector)
        pods = self._facts(a.key, a.namespace, selector) if selector is not None else None
        metrics = memo.by_identity(_read_metrics, a.spec, read_metrics, size=4096)
        self.metrics.use(a.key, a.namespace, metrics)
        readings = await self.metrics.readings(a.key, a.namespace, metrics, now)
        for m in metrics:
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

    def _facts(self, key: str, namespace: str, selector: Selector) -> PodFacts:
        """Matched and summarized again only when a candidate pod changed (the cache holds a new
        object for every change), came or went, or the selector changed."""
        candidates = self.caches.pod_candidates(namespace, selector)
        cached = self._pod_facts.get(key)
        if (
            cached is not None
            and cached[0] is selector
            and len(cached[1]) == len(candidates)
            and all(map(operator.is_, cached[1], candidates))
        ):
            return cached[2]
        facts = summarize(self.caches.pods_matching(namespace, selector, candidates))
        self._pod_facts[key] = (selector, tuple(candidates), facts)
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


_read_metrics: memo.Table = {}  # by spec (hashing one costs more than the lookup saves)


def read_metrics(spec: AutoscalerSpec) -> tuple[MetricSpec, ...]:
    """spec.metrics, and the metrics the capacity section's demand stage reads (rates, in flight,
    queue) that spec.metrics does not list: with the first metric's selector, which picks the
    target's series (the adapter labels every series of a target alike: namespace, deployment,
    model). Their target is never used (they are not proposals); 1 satisfies MetricSpec."""
    if spec.capacity is None:
        return spec.metrics
    listed = {m.name for m in spec.metrics}
    selector = spec.metrics[0].selector if spec.metrics else ""
    extra = tuple(
        MetricSpec(name, TargetType.VALUE, 1, selector)
        for name in dict.fromkeys(spec.capacity.metric_names)
        if name not in listed
    )
    return (*spec.metrics, *extra)


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _targets(hpa: Mapping[str, Any], a: Autoscaler) -> bool:
    ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
    group = str(ref.get("apiVersion") or "").rpartition("/")[0]
    return ref.get("kind") == a.target.kind and ref.get("name") == a.target.name and group == a.target.group
