"""Direct pod scraping: fetch each engine pod's `/metrics`, keep the newest value per pod.

Pipeline position: targets come from `TargetSet`s (a static URL list here, Kubernetes pods in
adapter/sources/discovery.py); `ScrapeSource.run` scrapes them every interval with aiohttp's
client (bounded concurrency, a timeout per request, keep-alive connections reused across rounds,
each pod's result stored as soon as it arrives, so one slow pod never delays another's value);
`observe` (pure) turns one scrape into timestamped signal values; `ScrapeSource.read` hands the
catalog the values no older than max-age and counts the rest.
"""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, Self

import aiohttp

from adapter.buckets import BucketError, Buckets, rates_between
from adapter.exposition import ExpositionError, ExpositionParser, Samples
from adapter.histogram import Moments, square_rate
from adapter.presetread import (
    bucket_counts,
    counter_rate,
    counter_total,
    gauge_value,
    histogram_total,
    is_counter,
    model_of,
    wanted_names,
)
from adapter.presets import LE, EnginePreset, Kind, Signal
from adapter.sources import DEPLOYMENT, MODEL, NAMESPACE, PodValue, SourceError, SourceReading, in_namespace
from adapter.telemetry import Telemetry

if TYPE_CHECKING:
    from adapter.catalogconfig import ScrapeSettings, StaticEndpoint

log = logging.getLogger(__name__)
SOURCE = "scrape"
_MAX_BODY_BYTES = 16 * 1024 * 1024  # a vLLM exposition is ~100 kB; anything near this is not an engine


@dataclass(frozen=True, slots=True)
class Target:
    key: str  # unique per pod: namespace/name, or the URL of a static endpoint
    url: str
    labels: Mapping[str, str] = field(default_factory=dict)  # namespace, deployment, pod, extra


class TargetSet(Protocol):
    def targets(self) -> Sequence[Target]:
        """The targets to scrape in the next round."""
        ...


class StaticTargets:
    """A fixed list of endpoints from the catalog."""

    def __init__(self, endpoints: Sequence[StaticEndpoint]) -> None:
        self._targets = [
            Target(
                key=e.url,
                url=e.url,
                labels={
                    **e.labels,
                    **({NAMESPACE: e.namespace} if e.namespace else {}),
                    **({DEPLOYMENT: e.deployment} if e.deployment else {}),
                },
            )
            for e in endpoints
        ]

    def targets(self) -> Sequence[Target]:
        return self._targets


@dataclass(frozen=True, slots=True)
class PodObservation:
    """Everything one successful scrape of one pod yields, stamped with the time it completed."""

    t: float
    gauges: Mapping[Signal, float]
    # Moments: a histogram's (SQUARE_RATE rules); Buckets: its cumulative counts (BUCKET_RATE)
    counters: Mapping[Signal, float | Moments | Buckets]
    rates: Mapping[Signal, tuple[float, int]]  # rate per second, window in whole seconds
    model: str | None
    bucket_rates: Mapping[Signal, tuple[Buckets, int]] = field(default_factory=dict)  # per bound
    problems: Mapping[Signal, str] = field(default_factory=dict)  # why a signal was refused


def observe(
    preset: EnginePreset, samples: Samples, t: float, previous: PodObservation | None
) -> PodObservation:
    """One pod's signals from one scrape. Rates need the previous good scrape of the same pod."""
    gauges: dict[Signal, float] = {}
    counters: dict[Signal, float | Moments | Buckets] = {}
    rates: dict[Signal, tuple[float, int]] = {}
    bucket_rates: dict[Signal, tuple[Buckets, int]] = {}
    problems: dict[Signal, str] = {}
    for signal, rule in preset.rules.items():
        if rule.kind is Kind.BUCKET_RATE:
            try:
                counts = bucket_counts(rule, samples)
                if counts is None:
                    continue
                counters[signal] = counts  # kept when the rates below are refused: the next scrape's pair
                before = previous.counters.get(signal) if previous is not None else None
                if previous is not None and isinstance(before, Buckets):
                    per_bound = rates_between(before, previous.t, counts, t)
                    if per_bound is not None:
                        bucket_rates[signal] = (per_bound, max(1, round(t - previous.t)))
            except BucketError as exc:
                problems[signal] = exc.problem.value
        elif rule.kind is Kind.SQUARE_RATE:
            moments = histogram_total(rule, samples)
            if moments is None or not all(math.isfinite(v) and v >= 0 for v in moments):
                continue
            counters[signal] = moments
            before = previous.counters.get(signal) if previous is not None else None
            if previous is not None and isinstance(before, Moments):
                r = square_rate(before, previous.t, moments, t)
                if r is not None:
                    rates[signal] = (r, max(1, round(t - previous.t)))
        elif rule.kind is Kind.RATE:
            total = counter_total(rule, samples)
            if total is None or not (math.isfinite(total) and total >= 0):
                continue  # a counter is a finite count: a negative or infinite one gives no rate
            counters[signal] = total
            last = previous.counters.get(signal) if previous is not None else None
            if previous is not None and isinstance(last, float | int):
                r = counter_rate(last, previous.t, total, t)
                if r is not None:
                    rates[signal] = (r, max(1, round(t - previous.t)))
        else:
            value = gauge_value(rule, samples)
            if value is not None:
                gauges[signal] = value
    return PodObservation(t, gauges, counters, rates, model_of(preset, samples), bucket_rates, problems)


@dataclass(slots=True)
class _PodState:
    good: PodObservation | None = None
    error: str | None = None  # why the last attempt failed; None when it succeeded


class _ScrapeFailed(Exception):
    """One scrape failed for a reason counted in telemetry (`timeout`, `http_status`, …)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class ScrapeSource:
    """The `scrape` source. Use as an async context manager (it owns its HTTP client session).

    aiohttp's client, not httpx: a request costs ~0.25 ms of CPU against httpx's ~0.6 ms (C HTTP
    parser; the connection pool finds an idle connection by origin in O(1), where httpcore scans
    every pooled connection twice per request), which is what keeps a round over 1,000 pods under
    a second.
    """

    def __init__(
        self,
        preset: EnginePreset,
        target_sets: Sequence[TargetSet],
        settings: ScrapeSettings,
        telemetry: Telemetry,
        clock: Callable[[], float] = time.time,
        max_age_s: float = 30.0,  # only for the stale-targets gauge; reads apply each metric's own
    ) -> None:
        self._preset = preset
        self._max_age_s = max_age_s
        self._parser = ExpositionParser(
            wanted_names(preset),
            max_lines=settings.max_lines_per_target,
            max_series=settings.max_series_per_target,
            cache_size=settings.series_cache_size,
        )
        # parsing (and reading the signals) runs here, off the event loop: a 15 MB exposition must
        # not stall /healthz
        self._parse_pool: ThreadPoolExecutor | None = None
        self._target_sets = target_sets
        self._settings = settings
        self._telemetry = telemetry
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None  # open between enter and exit
        self._states: dict[str, _PodState] = {}
        self._generation = 0  # bumped by every scrape result and every change of the target set
        self._known: frozenset[str] = frozenset()
        # until a round over some pods has ended, the pods not scraped yet are not "new, no load
        # yet" but unread: a sum over the pods scraped so far would under-report (queue 4 of 10)
        self._first_round_done = False

    async def __aenter__(self) -> Self:
        settings = self._settings
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=settings.concurrency,  # the semaphore is the real bound
                limit_per_host=0,
                ssl=self._tls_context(),
                # keep connections across rounds: a 5 s expiry would equal the default interval
                keepalive_timeout=3 * settings.interval_s + settings.timeout_s,
            ),
            timeout=aiohttp.ClientTimeout(total=settings.timeout_s),
            headers={"Accept": "text/plain;version=0.0.4"},  # not OpenMetrics: one parser
            # no HTTP(S)_PROXY or ~/.netrc: pods are scraped directly, as Prometheus does (and
            # trust_env costs a thread-pool hop per request to read ~/.netrc)
            trust_env=False,
        )
        self._parse_pool = ThreadPoolExecutor(1, thread_name_prefix="infscale-parse")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()
        pool, self._parse_pool = self._parse_pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def targets(self) -> list[Target]:
        by_key: dict[str, Target] = {}
        for target_set in self._target_sets:
            for t in target_set.targets():
                by_key.setdefault(t.key, t)
        return list(by_key.values())

    def generation(self) -> int | None:
        return self._generation

    def error_of(self, key: str) -> str | None:
        """Why the last scrape of a target failed (for logs and tests); None if it succeeded."""
        state = self._states.get(key)
        return state.error if state else None

    async def run(self) -> None:
        """Scrape every interval until cancelled. The outer loop is the only place that sleeps."""
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await self.scrape_round()
            except Exception:  # a bug must not end scraping for every pod: log it, go on next interval
                log.exception("scrape round failed")
            await asyncio.sleep(max(0.0, self._settings.interval_s - (loop.time() - started)))

    async def scrape_round(self) -> None:
        """Scrape all current targets once, concurrently; returns when every scrape ended or timed out."""
        targets = self.targets()
        live = frozenset(t.key for t in targets)
        if live != self._known:
            self._known = live
            self._generation += 1
        for key in [k for k in self._states if k not in live]:  # pods that went away
            del self._states[key]
        started = time.perf_counter()
        semaphore = asyncio.Semaphore(self._settings.concurrency)
        await asyncio.gather(*(self._scrape(t, semaphore) for t in targets))
        if targets:
            self._first_round_done = True
        self._telemetry.scrape_round_duration_s.observe(time.perf_counter() - started)
        self._telemetry.targets.set(len(targets))
        now = self._clock()
        self._telemetry.stale_targets.set(
            sum(1 for t in targets if not self._fresh(self._states.get(t.key), now, self._max_age_s))
        )

    @staticmethod
    def _fresh(state: _PodState | None, now: float, max_age_s: float) -> bool:
        return state is not None and state.good is not None and now - state.good.t <= max_age_s

    async def _scrape(self, target: Target, semaphore: asyncio.Semaphore) -> None:
        session = self._session
        assert session is not None, "use ScrapeSource as an async context manager"
        state = self._states.setdefault(target.key, _PodState())
        async with semaphore:
            started = time.perf_counter()
            try:
                # asyncio.timeout bounds the whole exchange, connect to last byte
                async with asyncio.timeout(self._settings.timeout_s):
                    body = await self._fetch(session, target.url)
                observation = await asyncio.get_running_loop().run_in_executor(
                    self._parse_pool, self._observe, body, state.good
                )
            except TimeoutError:
                self._fail(state, "timeout", f"no answer within {self._settings.timeout_s:g}s")
                return
            except _ScrapeFailed as exc:
                self._fail(state, exc.reason, str(exc))
                return
            except aiohttp.ClientError as exc:
                self._fail(state, "connect", f"{type(exc).__name__}: {exc}")
                return
            except ExpositionError as exc:
                self._fail(state, exc.reason, str(exc))
                return
            finally:
                self._telemetry.scrape_duration_s.labels(SOURCE).observe(time.perf_counter() - started)
        state.good = observation
        state.error = None
        self._generation += 1

    def _observe(self, body: bytes, previous: PodObservation | None) -> PodObservation:
        """Parse one pod's body and read its signals, in the parse thread: both cost in proportion
        to the body (9,999 series took the event loop ~0.15 s), and the loop must stay free."""
        return observe(self._preset, self._parser.parse(body), self._clock(), previous)

    def _tls_context(self) -> ssl.SSLContext:
        """The engines' trust: system roots, the configured CA, or none (development)."""
        try:
            context = ssl.create_default_context(cafile=self._settings.tls_ca_file)
        except (OSError, ssl.SSLError) as exc:  # neither names the file
            raise SourceError(f"scrape tls_ca_file {self._settings.tls_ca_file}: {exc}") from exc
        if self._settings.tls_insecure_skip_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    async def _fetch(self, session: aiohttp.ClientSession, url: str) -> bytes:
        """The body, read in chunks so a runaway endpoint cannot fill the adapter's memory: past
        16 MiB or max_lines_per_target lines the read stops (a 260,000-line body is refused after
        its first ~20,000 lines, not read to the end)."""
        max_lines = self._settings.max_lines_per_target
        async with session.get(url, allow_redirects=False) as response:
            if not 200 <= response.status < 300:  # a redirect too: /metrics is never moved
                raise _ScrapeFailed("http_status", f"HTTP {response.status}")
            chunks, size, lines = [], 0, 0
            async for chunk in response.content.iter_any():
                size += len(chunk)
                lines += chunk.count(b"\n")
                if size > _MAX_BODY_BYTES:
                    raise ExpositionError(
                        f"body larger than {_MAX_BODY_BYTES} bytes: not an engine's metrics",
                        "body_too_large",
                    )
                if lines >= max_lines:  # the parser counts the same way: lines = newlines + 1
                    raise ExpositionError(
                        f"at least {lines + 1} lines, more than max_lines_per_target {max_lines}",
                        "too_many_lines",
                    )
                chunks.append(chunk)
        return b"".join(chunks)

    def _fail(self, state: _PodState, reason: str, message: str) -> None:
        state.error = message
        self._generation += 1
        self._telemetry.scrape_errors.labels(SOURCE, reason).inc()

    async def read(
        self, signal: Signal | None, query: str | None, namespace: str, now: float, max_age_s: float
    ) -> SourceReading:
        if signal is None or query is not None:
            raise SourceError("the scrape source serves engine signals, not PromQL queries")
        rule = self._preset.rule(signal)
        is_rate = is_counter(rule)
        values: list[PodValue] = []
        invalid: dict[str, int] = {}
        known = stale = failing = 0
        for target in self.targets():
            if not in_namespace(target.labels, namespace):
                continue
            known += 1
            state = self._states.get(target.key)
            if state is not None and state.error is not None:
                failing += 1
            if not self._fresh(state, now, max_age_s):
                stale += 1
                continue
            assert state is not None and state.good is not None
            good = state.good
            labels = dict(target.labels)
            if good.model is not None:
                labels[MODEL] = good.model
            if rule.kind is Kind.BUCKET_RATE:
                if (problem := good.problems.get(signal)) is not None:
                    invalid[problem] = invalid.get(problem, 0) + 1
                elif signal in good.bucket_rates:
                    per_bound, window = good.bucket_rates[signal]
                    values.extend(
                        PodValue({**labels, LE: le}, value, good.t, window)
                        for le, value in zip(per_bound.bounds, per_bound.values, strict=True)
                    )
            elif is_rate:
                if signal in good.rates:
                    value, window = good.rates[signal]
                    values.append(PodValue(labels, value, good.t, window))
            elif signal in good.gauges:
                values.append(PodValue(labels, good.gauges[signal], good.t))
        if known and not self._first_round_done:
            raise SourceError(f"the first scrape round over {known} pods has not ended yet")
        return SourceReading(tuple(values), stale=stale, failing=failing, targets=known, invalid=invalid)
