"""The Prometheus source: instant PromQL queries through Prometheus' HTTP API.

Pipeline position: `promql_for` (pure) turns an engine preset's rule into a per-pod PromQL
expression, so this source returns the same per-pod values the direct scraper computes and the
catalog aggregates both the same way. A metric may instead carry its own `query`; its result series
are served under their own labels. Answers are cached for `cache_ttl_s`, because every HPA polls every
15 s and one query per metric per few seconds is plenty.

Freshness: Prometheus marks a failed or vanished target's series stale, so an instant query drops
them; values carry the evaluation time as their timestamp.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import httpx

from adapter.buckets import BucketError, in_bound_order
from adapter.presets import LE, Combine, EnginePreset, Kind, Rule, Series, Signal, Term
from adapter.sources import (
    DEPLOYMENT,
    MODEL,
    NAMESPACE,
    POD,
    PodValue,
    SourceError,
    SourceReading,
    in_namespace,
)
from adapter.telemetry import Telemetry

if TYPE_CHECKING:
    from adapter.catalogconfig import PrometheusSettings

SOURCE = "prometheus"
_AGGREGATOR = {Combine.SUM: "sum", Combine.MEAN: "avg", Combine.MAX: "max"}


def _selector(series: Series) -> str:
    if not series.match:
        return series.name
    # json.dumps gives a double-quoted string with the escapes PromQL accepts (\\, \", \n)
    matchers = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(series.match.items()))
    return f"{series.name}{{{matchers}}}"


def _term(term: Term, kind: Kind, combine: Combine, by: str, window_s: int) -> str:
    parts = []
    for alt in term.alternatives:
        if kind is Kind.RATE:
            parts.append(f"sum by ({by}) (rate({_selector(alt)}[{window_s}s]))")
        elif kind is Kind.BUCKET_RATE:  # per bound: summed over a pod's series of each `le`
            parts.append(f"sum by ({by}, {LE}) (rate({_selector(alt)}[{window_s}s]))")
        else:
            parts.append(f"{_AGGREGATOR[combine]} by ({by}) ({_selector(alt)})")
    # `or` keeps a pod's first alternative and adds pods that only have a later one (old names)
    return " or ".join(f"({p})" for p in parts) if len(parts) > 1 else parts[0]


def promql_for(rule: Rule, by: Sequence[str], window_s: int) -> str:
    """A PromQL expression with one series per pod (grouped `by` these labels) computing `rule`;
    a BUCKET_RATE rule's, one per pod and `le` bound."""
    grouping = ", ".join(by)
    if rule.kind is Kind.SQUARE_RATE:  # the catalog refuses it on this source (adapter/histogram.py)
        raise ValueError("a histogram's Σ x² has no PromQL: it weighs buckets by their `le` bounds")
    if rule.kind is Kind.RATIO:
        numerator, denominator = (_term(t, Kind.GAUGE, Combine.SUM, grouping, window_s) for t in rule.terms)
        # `> 0` drops pods whose capacity is 0: no data rather than a division by zero
        return f"({numerator}) / (({denominator}) > 0)"
    terms = [_term(t, rule.kind, rule.combine, grouping, window_s) for t in rule.terms]
    expr = terms[0]
    for t in terms[1:]:
        # a + b where a pod has both; a or b alone where it has one: the scraper's "sum of present terms"
        expr = f"(({expr}) + ({t})) or ({expr}) or ({t})"
    return expr


class PrometheusSource:
    """The `prometheus` source. Use as an async context manager (it owns its httpx client)."""

    def __init__(
        self,
        preset: EnginePreset,
        settings: PrometheusSettings,
        telemetry: Telemetry,
        clock: Callable[[], float] = time.time,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._preset = preset
        self._settings = settings
        self._telemetry = telemetry
        self._clock = clock
        self._client = client
        self._owns_client = client is None
        self._cache: dict[tuple[Signal | None, str | None], tuple[float, _Checked]] = {}
        # Prometheus label name -> the canonical name the catalog serves
        self._rename = {
            settings.namespace_label: NAMESPACE,
            settings.pod_label: POD,
            settings.deployment_label: DEPLOYMENT,
        }
        if preset.model_label:
            self._rename[preset.model_label] = MODEL
        self._by = [settings.namespace_label, settings.pod_label, settings.deployment_label]
        if preset.model_label:
            self._by.append(preset.model_label)

    async def __aenter__(self) -> Self:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._settings.timeout_s)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    def generation(self) -> int | None:
        return None  # answers come from this source's own TTL cache

    def query_for(self, signal: Signal) -> str:
        return promql_for(self._preset.rule(signal), self._by, self._settings.rate_window_s)

    async def read(
        self, signal: Signal | None, query: str | None, namespace: str, now: float, max_age_s: float
    ) -> SourceReading:
        key = (signal, query)
        cached = self._cache.get(key)
        if cached is not None and now - cached[0] <= self._settings.cache_ttl_s:
            checked = cached[1]
        else:
            if query is not None:
                checked = _Checked(await self.instant_query(query), ())
            elif signal is not None:
                checked = await self._signal(signal)
            else:
                raise SourceError("a prometheus metric needs a signal or a query")
            self._cache[key] = (now, checked)
        mine = tuple(v for v in checked.values if in_namespace(v.labels, namespace))
        invalid: dict[str, int] = {}
        for labels, reason in checked.refused:
            if in_namespace(labels, namespace):
                invalid[reason] = invalid.get(reason, 0) + 1
        # a pod is one series, or one per bound (BUCKET_RATE)
        pods = {tuple(sorted((k, x) for k, x in v.labels.items() if k != LE)) for v in mine}
        return SourceReading(mine, targets=len(pods) + sum(invalid.values()), invalid=invalid)

    async def _signal(self, signal: Signal) -> _Checked:
        if self._preset.rule(signal).kind is not Kind.BUCKET_RATE:
            return _Checked(await self.instant_query(self.query_for(signal)), ())
        # a NaN bound kept: left out, it would be a gap in the pod's histogram nobody could see
        values = await self.instant_query(self.query_for(signal), keep_non_finite=True)
        return _histograms(values, self._settings.rate_window_s)

    async def instant_query(self, promql: str, keep_non_finite: bool = False) -> list[PodValue]:
        """Evaluate `promql` now; one PodValue per result series (NaN and ±Inf ones only when asked
        to keep them). Raises SourceError."""
        assert self._client is not None, "use PrometheusSource as an async context manager"
        url = self._settings.url.rstrip("/") + "/api/v1/query"
        headers = self._auth_headers()
        started = time.perf_counter()
        try:
            response = await self._client.post(url, data={"query": promql}, headers=headers)
        except httpx.TimeoutException as exc:
            self._telemetry.scrape_errors.labels(SOURCE, "timeout").inc()
            raise SourceError(f"Prometheus at {self._settings.url} did not answer in time") from exc
        except httpx.HTTPError as exc:
            self._telemetry.scrape_errors.labels(SOURCE, "connect").inc()
            raise SourceError(f"Prometheus at {self._settings.url}: {type(exc).__name__}: {exc}") from exc
        finally:
            self._telemetry.scrape_duration_s.labels(SOURCE).observe(time.perf_counter() - started)
        return self._parse(promql, response, keep_non_finite)

    def _auth_headers(self) -> dict[str, str]:
        """Read for every query (at most one per cache_ttl_s per metric): projected
        service-account tokens rotate, and a token read once at start-up would expire."""
        path = self._settings.bearer_token_file
        if path is None:
            return {}
        try:
            token = Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SourceError(f"cannot read Prometheus bearer token file {path}: {exc}") from exc
        return {"Authorization": f"Bearer {token}"}

    def _parse(self, promql: str, response: httpx.Response, keep_non_finite: bool) -> list[PodValue]:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._telemetry.scrape_errors.labels(SOURCE, "http_status").inc()
            raise SourceError(
                f"Prometheus at {self._settings.url} answered HTTP {response.status_code} without a JSON body"
            )
        if body.get("status") != "success":
            self._telemetry.scrape_errors.labels(SOURCE, "query").inc()
            raise SourceError(
                f"Prometheus rejected query {promql!r} (HTTP {response.status_code}): "
                f"{body.get('errorType', 'error')}: {body.get('error', 'no message')}"
            )
        data = body.get("data") or {}
        if data.get("resultType") != "vector":
            self._telemetry.scrape_errors.labels(SOURCE, "query").inc()
            raise SourceError(
                f"query {promql!r} returned a {data.get('resultType')!r}; an instant vector is needed"
            )
        values = (self._value(promql, item) for item in data.get("result") or ())
        # NaN or ±Inf has no Quantity form: no data, never a made-up 0
        return [v for v in values if keep_non_finite or math.isfinite(v.value)]

    def _value(self, promql: str, item: Mapping[str, Any]) -> PodValue:
        try:
            timestamp, text = item["value"]
            value = float(text)
            labels = {
                self._rename.get(k, k): str(v)
                for k, v in (item.get("metric") or {}).items()
                if k != "__name__"
            }
            timestamp = float(timestamp)
        except (KeyError, TypeError, ValueError) as exc:
            raise SourceError(f"query {promql!r}: malformed result item {item!r}") from exc
        return PodValue(labels, value, timestamp)


@dataclass(frozen=True, slots=True)
class _Checked:
    """One query's answer: the values served, and the pods refused with why (their labels, reason)."""

    values: list[PodValue]
    refused: tuple[tuple[Mapping[str, str], str], ...]


def _histograms(values: Sequence[PodValue], window_s: int) -> _Checked:
    """A BUCKET_RATE query's values, one per pod and bound, checked pod by pod as the scrape
    source checks counts (adapter/buckets.py): a pod whose bounds are no histogram's is refused
    whole, never served a tail that is not there. Values carry the rate window."""
    pods: dict[tuple[tuple[str, str], ...], list[PodValue]] = {}
    for v in values:
        pods.setdefault(tuple(sorted((k, x) for k, x in v.labels.items() if k != LE)), []).append(v)
    served: list[PodValue] = []
    refused: list[tuple[Mapping[str, str], str]] = []
    for key, members in pods.items():
        try:
            in_bound_order((m.labels.get(LE), m.value) for m in members)
        except BucketError as exc:
            refused.append((dict(key), exc.problem.value))
            continue
        served.extend(PodValue(m.labels, m.value, m.timestamp, window_s) for m in members)
    return _Checked(served, tuple(refused))
