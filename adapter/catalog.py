"""The metric catalog: which external metrics the adapter serves and how each is computed.

Pipeline position: behind the server's `MetricsBackend` seam (adapter/backend.py). `CatalogSettings`
(adapter/catalogconfig.py) is the typed configuration; `build_catalog` starts the sources
(adapter/sources/) and yields a `Catalog`, which answers a read by asking the metric's source for
fresh per-pod values, then filtering by namespace, aggregating across pods (`aggregate`, pure) and
matching the label selector. No fresh data is an error, never a 0.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from adapter.backend import MetricSample, NoData, SourceUnavailable, UnknownMetric
from adapter.catalogconfig import Aggregation, CatalogSettings, MetricSpec, SourceKind
from adapter.lru import LRU
from adapter.presetread import combine
from adapter.presets import LE, Signal, get_preset, item_labels, value_problem
from adapter.sources import NAMESPACE, PodValue, Source, SourceError, SourceReading
from adapter.telemetry import Telemetry
from common.selector import Selector

# --- pure: from per-pod values to the items of one read ------------------------------------------


def aggregate(
    values: Sequence[PodValue], namespace: str, label_names: Sequence[str], how: Aggregation
) -> list[MetricSample]:
    """Group pod values by their served labels and combine each group.

    Values from endpoints without a namespace are served in every namespace, under the requested one.
    One item per label group: the HPA sums the items a selector matches, so duplicates would double
    count. A histogram's bucket rates group by `le` too (presets.item_labels), in bound order.
    """
    groups: dict[tuple[tuple[str, str], ...], list[PodValue]] = {}
    for v in values:
        labels = dict(v.labels)
        labels[NAMESPACE] = namespace
        key = tuple((name, labels[name]) for name in label_names if name in labels)
        groups.setdefault(key, []).append(v)
    out = []
    for key, members in sorted(groups.items(), key=lambda group: _order(group[0])):
        value = combine([m.value for m in members], how)
        windows = [m.window_s for m in members if m.window_s is not None]
        out.append(
            MetricSample(
                labels=dict(key),
                value=value,
                timestamp=max(m.timestamp for m in members),
                window_s=max(windows) if windows else None,
            )
        )
    return out


def _order(key: tuple[tuple[str, str], ...]) -> tuple[tuple[tuple[str, str], ...], float]:
    """Label groups by their labels, then by their bound as a number ("2.5" before "10.0")."""
    bound = dict(key).get(LE)
    try:
        upper = math.inf if bound is None else float(bound)
    except ValueError:  # the sources let no such bound through
        upper = math.inf
    return tuple(kv for kv in key if kv[0] != LE), upper


# --- the backend ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Answer:
    """One (metric, namespace) answer before the selector, reusable while it cannot change."""

    generation: int
    valid_until: float  # when the oldest value in it passes max-age
    reading: SourceReading
    samples: tuple[MetricSample, ...]
    invalid: Mapping[str, int]  # pods left out because their value is no valid reading, by reason


def valid_values(values: Sequence[PodValue], signal: Signal | None) -> tuple[list[PodValue], dict[str, int]]:
    """The values that are valid readings of `signal` (presets.value_problem), and how many were
    not, by reason. One pod's -1000 or +Inf is left out on its own instead of turning its whole
    group into a negative number or an error."""
    valid: list[PodValue] = []
    invalid: dict[str, int] = {}
    for v in values:
        problem = value_problem(signal, v.value)
        if problem is None:
            valid.append(v)
        else:
            invalid[problem] = invalid.get(problem, 0) + 1
    return valid, invalid


class Catalog:
    """`MetricsBackend` over the configured sources."""

    def __init__(
        self,
        settings: CatalogSettings,
        sources: Mapping[SourceKind, Source],
        telemetry: Telemetry,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._metrics = {m.name: m for m in settings.metric_specs()}
        preset = get_preset(settings.engine)
        # the labels each metric's items are served under: the catalog's, a histogram's bound
        self._labels = {
            m.name: (*settings.labels, *(item_labels(preset.rule(m.signal)) if m.signal else ()))
            for m in self._metrics.values()
        }
        self._sources = sources
        self._telemetry = telemetry
        self._clock = clock
        self._answers: LRU[tuple[str, str], _Answer] = LRU(settings.answer_cache_size)

    def metric_names(self) -> Sequence[str]:
        return list(self._metrics)

    async def read(self, namespace: str, metric: str, selector: Selector) -> Sequence[MetricSample]:
        spec = self._metrics.get(metric)
        if spec is None:
            raise UnknownMetric(f"the server could not find the metric {metric} for namespace {namespace}")
        max_age_s = spec.max_age_s or self._settings.max_age_s
        answer = await self._answer(spec, namespace, max_age_s)
        reading, samples = answer.reading, answer.samples
        if reading.stale:
            self._telemetry.stale_exclusions.labels(metric).inc(reading.stale)
        for reason, count in answer.invalid.items():
            self._telemetry.invalid_exclusions.labels(metric, reason).inc(count)
        if not samples:
            self._telemetry.no_data_reads.labels(metric).inc()
            raise _no_data(metric, namespace, reading, max_age_s, answer.invalid)
        self._telemetry.observe_freshness(metric, max(s.timestamp for s in samples))
        # a known metric whose groups all miss the selector: 200 with no items (the HPA holds)
        return [s for s in samples if selector.matches(s.labels)]

    async def _answer(self, spec: MetricSpec, namespace: str, max_age_s: float) -> _Answer:
        """Aggregating 1,000 pods costs ~2 ms; HPAs and kubectl ask the same question many times
        between two scrapes. An answer is reused while the source's data is unchanged (same
        generation) and none of its values has aged past max-age."""
        source = self._sources[spec.source]
        generation = source.generation()
        now = self._clock()
        key = (spec.name, namespace)
        cached = self._answers.get(key)
        if cached is not None and cached.generation == generation and now <= cached.valid_until:
            return cached
        try:
            reading = await source.read(spec.signal, spec.query, namespace, now, max_age_s)
        except SourceError as exc:
            raise SourceUnavailable(f"unable to fetch metric {spec.name}: {exc}") from exc
        values, invalid = valid_values(reading.values, spec.signal)
        for reason, count in reading.invalid.items():  # what the source refused before any value
            invalid[reason] = invalid.get(reason, 0) + count
        samples = tuple(aggregate(values, namespace, self._labels[spec.name], spec.aggregation))
        # nothing fresh stays nothing fresh until a scrape lands (a new generation)
        oldest = min((v.timestamp for v in values), default=math.inf)
        answer = _Answer(
            -1 if generation is None else generation, oldest + max_age_s, reading, samples, invalid
        )
        if generation is not None:
            self._answers.put(key, answer)
        return answer


def _no_data(
    metric: str, namespace: str, r: SourceReading, max_age_s: float, invalid: Mapping[str, int]
) -> Exception:
    where = f"metric {metric} in namespace {namespace}"
    if r.targets and r.failing == r.targets:
        return SourceUnavailable(f"no fresh data for {where}: all {r.targets} pods fail their scrapes")
    if r.targets == 0 and not invalid:
        return NoData(f"no fresh data for {where}: no engine pods found")
    detail = f"{r.targets} pods known, {r.stale} older than {max_age_s:g}s, {r.failing} failing"
    if invalid:
        reasons = ", ".join(f"{n} {reason.replace('_', ' ')}" for reason, n in sorted(invalid.items()))
        detail += f", {sum(invalid.values())} with invalid values ({reasons})"
    elif r.stale == 0 and r.failing == 0:
        detail += ", none exposes the signal"
    return NoData(f"no fresh data for {where}: {detail}")


@asynccontextmanager
async def build_catalog(
    settings: CatalogSettings,
    telemetry: Telemetry,
    *,
    clock: Callable[[], float] = time.time,
    kube_client: Any = None,
) -> AsyncIterator[Catalog]:
    """Start the sources the catalog's metrics use; stop them on exit.

    `kube_client` is a kubernetes_asyncio ApiClient; when None and pod discovery is configured, one is
    built from the in-cluster service account or the local kubeconfig.
    """
    # imported here: the Prometheus-only and static-only paths never load the Kubernetes client
    from adapter.sources.prometheus import PrometheusSource
    from adapter.sources.scrape import ScrapeSource, StaticTargets, TargetSet

    kinds = {m.source for m in settings.metric_specs()}
    sources: dict[SourceKind, Source] = {}
    async with AsyncExitStack() as stack:
        tasks: list[asyncio.Task[None]] = []
        if SourceKind.SCRAPE in kinds:
            providers: list[TargetSet] = []
            if settings.endpoints:
                providers.append(StaticTargets(settings.endpoints))
            if settings.kubernetes is not None:
                from adapter.sources.discovery import KubernetesPods, kube_api_client

                api = kube_client
                if api is None:
                    api = await stack.enter_async_context(kube_api_client())
                pods = KubernetesPods(api, settings.kubernetes, telemetry)
                providers.append(pods)
                tasks.append(asyncio.create_task(pods.run(), name="infscale-pod-discovery"))
            scrape = ScrapeSource(
                get_preset(settings.engine),
                providers,
                settings.scrape,
                telemetry,
                clock,
                max_age_s=settings.max_age_s,
            )
            await stack.enter_async_context(scrape)
            tasks.append(asyncio.create_task(scrape.run(), name="infscale-scrape-loop"))
            sources[SourceKind.SCRAPE] = scrape
        if SourceKind.PROMETHEUS in kinds:
            assert settings.prometheus is not None  # checked by CatalogSettings
            prom = PrometheusSource(get_preset(settings.engine), settings.prometheus, telemetry, clock)
            await stack.enter_async_context(prom)
            sources[SourceKind.PROMETHEUS] = prom
        try:
            yield Catalog(settings, sources, telemetry, clock)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
