"""The metric catalog's configuration: `CatalogSettings` and its parts, typed and checked, read from
a YAML/JSON file or built by `quick_start` for the no-config-file CLI path (adapter/catalog.py
serves reads from it)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Self

import httpx
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from adapter.presets import PRESETS, Combine, Kind, Signal, get_preset
from adapter.wire import metric_name_problem, namespace_problem
from common.selector import SelectorError, parse_selector

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
    ("infscale_arrival_rate", Signal.ARRIVAL_RATE, Aggregation.SUM),  # a gateway's
)


class CatalogSettings(BaseModel):
    """The catalog. Defaults: engine vllm, max_age_s 30, labels namespace/deployment/model, and (when
    `metrics` is omitted) infscale_queue_size, infscale_batch_size, infscale_inflight (the two added
    up), infscale_kv_cache_usage (a gateway's preset: infscale_arrival_rate) from the
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
            if (
                m.source is SourceKind.PROMETHEUS
                and m.signal is not None
                and preset.rules[m.signal].kind is Kind.SQUARE_RATE
            ):
                raise ValueError(
                    f"metric {m.name!r}: {m.signal.value} weighs histogram buckets by their bounds, which"
                    " PromQL cannot: use source scrape"
                )
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
