"""The metric catalog: which external metrics the adapter serves and how each is computed.

Pipeline position: behind the server's `MetricsBackend` seam (adapter/backend.py). `CatalogSettings`
is the typed configuration (from a YAML/JSON file, or `quick_start` for the no-config-file CLI path);
`build_catalog` starts the sources (adapter/sources/) and yields a `Catalog`, which answers a read by
asking the metric's source for fresh per-pod values, then filtering by namespace, aggregating across
pods (`aggregate`, pure) and matching the label selector. No fresh data is an error, never a 0.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Self

import httpx
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from adapter.backend import MetricSample, NoData, SourceUnavailable, UnknownMetric
from adapter.lru import LRU
from adapter.presets import PRESETS, Combine, Signal, combine, get_preset, value_problem
from adapter.sources import NAMESPACE, PodValue, Source, SourceError, SourceReading
from adapter.telemetry import Telemetry
from adapter.wire import metric_name_problem, namespace_problem
from common.selector import Selector, SelectorError, parse_selector

# How the pods of one label group add up: the same three ways as the series of one pod.
Aggregation = Combine


class SourceKind(StrEnum):
    SCRAPE = "scrape"
    PROMETHEUS = "prometheus"


class CatalogError(ValueError):
    """A catalog file that cannot be read or does not validate; the message names the file and field."""


_FROZEN = ConfigDict(frozen=True, extra="forbid")
# Go's RequestInfo reads /namespaces/{ns}/status|finalize as a namespace subresource, so the
# kube-apiserver would authorize such a metric as namespaces/status (external_metrics_api.md 1.4).
_RESERVED_METRIC_NAMES = frozenset({"status", "finalize"})


def check_metric_name(name: str) -> str:
    """The HPA's rule for an external metric name (IsValidPathSegmentName), plus the reserved names."""
    if not name:
        raise ValueError("metric name must not be empty")
    if problem := metric_name_problem(name):
        raise ValueError(problem)
    if name in _RESERVED_METRIC_NAMES:
        raise ValueError(f"metric name {name!r} is reserved: the kube-apiserver routes it as a subresource")
    return name


def check_http_url(value: str, what: str) -> str:
    """An http(s) URL with a host; `what` names the setting in the message ("endpoint url")."""
    try:
        url = httpx.URL(value)
    except httpx.InvalidURL as exc:
        raise ValueError(f"{what} {value!r} is not a URL: {exc}") from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"{what} {value!r} must be http:// or https:// with a host")
    # httpx percent-encodes what a host may not contain ('[10.0.0.5' -> '%5B10.0.0.5') and keeps
    # any port number; either would only fail at the first request, on every request
    if "%" in url.host:
        raise ValueError(f"{what} {value!r}: {url.host!r} is not a valid host")
    if url.port is not None and not 0 < url.port < 65536:
        raise ValueError(f"{what} {value!r}: port {url.port} is not in 1-65535")
    return value


def _check_namespace(value: str | None) -> str | None:
    if value is not None and (problem := namespace_problem(value)):
        raise ValueError(problem)
    return value


class MetricSpec(BaseModel):
    """One external metric served."""

    model_config = _FROZEN
    name: str  # as the HPA names it, e.g. infscale_queue_size
    signal: Signal | None = None  # the engine signal (adapter/presets.py); or give `query`
    source: SourceKind = SourceKind.SCRAPE
    aggregation: Aggregation = Aggregation.SUM  # across the pods of one label group
    query: str | None = None  # prometheus only: explicit PromQL instead of the preset's
    max_age_s: float | None = Field(default=None, gt=0)  # overrides CatalogSettings.max_age_s

    _name = field_validator("name")(classmethod(lambda cls, v: check_metric_name(v)))

    @model_validator(mode="after")
    def _signal_or_query(self) -> Self:
        if self.query is not None and self.source is not SourceKind.PROMETHEUS:
            raise ValueError(
                f"metric {self.name!r}: query needs source: prometheus (source is {self.source})"
            )
        if (self.signal is None) == (self.query is None):
            raise ValueError(f"metric {self.name!r}: give exactly one of signal and query")
        return self


class StaticEndpoint(BaseModel):
    """An engine's metrics URL given by hand (development, tests, non-Kubernetes use)."""

    model_config = _FROZEN
    url: str
    namespace: str | None = None  # None: the endpoint's values are served in every namespace
    deployment: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)  # extra labels served with its values

    _url = field_validator("url")(classmethod(lambda cls, v: check_http_url(v, "endpoint url")))

    _namespace = field_validator("namespace")(classmethod(lambda cls, v: _check_namespace(v)))


class KubernetesDiscovery(BaseModel):
    """Engine pods found through the Kubernetes API (list + watch)."""

    model_config = _FROZEN
    namespace: str | None = None  # None: all namespaces (needs a ClusterRole for pods)
    label_selector: str  # e.g. app.kubernetes.io/component=engine
    port: int | str = 8000  # container port number, or a named container port
    path: str = "/metrics"
    scheme: Literal["http", "https"] = "http"
    # the pod label whose value is served as `deployment`; None: the owning Deployment's name
    deployment_label: str | None = None
    watch_timeout_s: int = Field(default=300, gt=0)  # server-side watch timeout before a re-watch

    _namespace = field_validator("namespace")(classmethod(lambda cls, v: _check_namespace(v)))

    @field_validator("label_selector")
    @classmethod
    def _selector(cls, value: str) -> str:
        try:
            parse_selector(value)
        except SelectorError as exc:
            raise ValueError(f"label_selector {value!r}: {exc}") from exc
        return value

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"path {value!r} must start with '/'")
        return value


class PrometheusSettings(BaseModel):
    model_config = _FROZEN
    url: str  # e.g. http://prometheus.monitoring.svc:9090
    timeout_s: float = Field(default=5.0, gt=0)
    rate_window_s: int = Field(default=60, gt=0)  # rate() window; ≥ 2 scrape intervals of Prometheus
    cache_ttl_s: float = Field(default=5.0, ge=0)  # one query answers every HPA polling within this
    bearer_token_file: str | None = None
    # label names in Prometheus that hold the pod's namespace, name and deployment
    namespace_label: str = "namespace"
    pod_label: str = "pod"
    deployment_label: str = "deployment"

    _url = field_validator("url")(classmethod(lambda cls, v: check_http_url(v, "prometheus url")))


class ScrapeSettings(BaseModel):
    model_config = _FROZEN
    interval_s: float = Field(default=5.0, gt=0)  # one round per interval
    timeout_s: float = Field(default=2.0, gt=0)  # per pod; a slow pod costs only its own value
    concurrency: int = Field(default=100, gt=0)  # scrapes in flight at once
    # per target (adapter/exposition.py); past either bound its scrape fails, counted by reason.
    # A vLLM pod exposes ~300-2,000 lines: the bounds are 10x that, far below what stalls a round.
    max_lines_per_target: int = Field(default=20_000, gt=0)
    max_series_per_target: int = Field(default=10_000, gt=0)
    series_cache_size: int = Field(default=50_000, gt=0)  # series keys remembered across targets
    # for https endpoints: the CA that signed the engines' certificates (default: system roots)
    tls_ca_file: str | None = None
    tls_insecure_skip_verify: bool = False  # development only: accept any engine certificate

    @model_validator(mode="after")
    def _tls(self) -> Self:
        if self.tls_ca_file is not None and self.tls_insecure_skip_verify:
            raise ValueError("tls_ca_file and tls_insecure_skip_verify exclude each other")
        return self


# The signals the quick start serves, with how they add up across pods: queues and batches are
# totals (an AverageValue target divides by replicas), saturation is a mean fraction.
_DEFAULT_METRICS = (
    ("infscale_queue_size", Signal.QUEUE_SIZE, Aggregation.SUM),
    ("infscale_batch_size", Signal.BATCH_SIZE, Aggregation.SUM),
    ("infscale_inflight", Signal.INFLIGHT, Aggregation.SUM),
    ("infscale_kv_cache_usage", Signal.KV_CACHE_USAGE, Aggregation.MEAN),
)


class CatalogSettings(BaseModel):
    """The catalog. Defaults: engine vllm, max_age_s 30, labels namespace/deployment/model, and (when
    `metrics` is omitted) infscale_queue_size, infscale_batch_size, infscale_inflight (the two added
    up), infscale_kv_cache_usage from the
    scrape source, limited to the signals the engine has."""

    model_config = _FROZEN
    engine: str = "vllm"
    metrics: tuple[MetricSpec, ...] | None = None
    labels: tuple[str, ...] = ("namespace", "deployment", "model")  # served, so selectors narrow
    max_age_s: float = Field(default=30.0, gt=0)
    # (metric, namespace) answers kept between scrapes; least recently read ones go first. One is
    # ~0.5 KB; an HPA reads one pair every 15 s, so 4,096 cover thousands of HPAs, and a read of a
    # forgotten pair costs one aggregation (~2 ms for 1,000 pods).
    answer_cache_size: int = Field(default=4096, gt=0)
    endpoints: tuple[StaticEndpoint, ...] = ()
    kubernetes: KubernetesDiscovery | None = None
    prometheus: PrometheusSettings | None = None
    scrape: ScrapeSettings = ScrapeSettings()

    @field_validator("engine")
    @classmethod
    def _engine(cls, value: str) -> str:
        get_preset(value)
        return value

    @field_validator("endpoints", mode="before")
    @classmethod
    def _endpoint_strings(cls, value: Any) -> Any:
        # a bare URL string is the common case: `endpoints: [http://10.0.0.5:8000/metrics]`
        if isinstance(value, list | tuple):
            return [{"url": v} if isinstance(v, str) else v for v in value]
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        preset = PRESETS[self.engine]
        seen: set[str] = set()
        for m in self.metric_specs():
            if m.name in seen:
                raise ValueError(f"metric {m.name!r} is listed twice")
            seen.add(m.name)
            if m.signal is not None and m.signal not in preset.rules:
                have = ", ".join(sorted(preset.rules))
                raise ValueError(
                    f"metric {m.name!r}: engine {self.engine!r} has no signal {m.signal.value!r} "
                    f"(has: {have})"
                )
            if m.source is SourceKind.SCRAPE and not self.endpoints and self.kubernetes is None:
                raise ValueError(f"metric {m.name!r} uses source scrape: set endpoints or kubernetes")
            if m.source is SourceKind.PROMETHEUS and self.prometheus is None:
                raise ValueError(f"metric {m.name!r} uses source prometheus: set prometheus.url")
        if not seen:
            raise ValueError("metrics is empty: the adapter would serve nothing")
        return self

    def metric_specs(self) -> tuple[MetricSpec, ...]:
        if self.metrics is not None:
            return self.metrics
        rules = PRESETS[self.engine].rules
        return tuple(
            MetricSpec(name=name, signal=signal, aggregation=how)
            for name, signal, how in _DEFAULT_METRICS
            if signal in rules
        )

    @classmethod
    def quick_start(cls, endpoints: Sequence[str], engine: str = "vllm") -> CatalogSettings:
        """`--endpoints URL[,URL…] --engine E`: the default metrics over these URLs, every namespace."""
        return cls(engine=engine, endpoints=tuple(StaticEndpoint(url=u) for u in endpoints))

    @classmethod
    def from_file(cls, path: str | Path) -> CatalogSettings:
        """Load a YAML or JSON catalog (YAML is a superset of JSON, so one loader reads both)."""
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise CatalogError(f"{path}: cannot read catalog: {exc}") from exc
        if not isinstance(data, dict):
            raise CatalogError(f"{path}: a catalog is a mapping, got {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise CatalogError(f"{path}: {_describe(exc)}") from exc


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        message = err["msg"].removeprefix("Value error, ")
        where = ".".join(str(p) for p in err["loc"])
        value = err.get("input")
        if isinstance(value, dict | list):  # a whole section: the message already names the culprit
            parts.append(f"{where}: {message}" if where else message)
        else:
            parts.append(f"{where or 'catalog'}: {message} (got {json.dumps(value, default=str)[:80]})")
    return "; ".join(parts)


# --- pure: from per-pod values to the items of one read ------------------------------------------


def aggregate(
    values: Sequence[PodValue], namespace: str, label_names: Sequence[str], how: Aggregation
) -> list[MetricSample]:
    """Group pod values by their served labels and combine each group.

    Values from endpoints without a namespace are served in every namespace, under the requested one.
    One item per label group: the HPA sums the items a selector matches, so duplicates would double
    count.
    """
    groups: dict[tuple[tuple[str, str], ...], list[PodValue]] = {}
    for v in values:
        labels = dict(v.labels)
        labels[NAMESPACE] = namespace
        key = tuple((name, labels[name]) for name in label_names if name in labels)
        groups.setdefault(key, []).append(v)
    out = []
    for key, members in sorted(groups.items()):
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
        samples = tuple(aggregate(values, namespace, self._settings.labels, spec.aggregation))
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
