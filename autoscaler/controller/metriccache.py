"""External metric reads shared by every autoscaler: one read per (namespace, metric) per interval.

infscale's adapter answers a read with a selector by filtering one answer for the whole namespace
(adapter/catalog.py: aggregate, then `selector.matches`), so the controller reads each (namespace,
metric) once without a selector and picks each autoscaler's series out of it, the same way. 1,000
autoscalers on one metric cost one read per interval instead of 1,000; a change of an autoscaler's
values queues it at once, so the reaction time is about the interval, not the decision period.

Other adapters evaluate the selector themselves (prometheus-adapter puts it into PromQL, KEDA
requires it): the first time a (namespace, metric, selector) is used, the series picked out are
compared with a read that carries the selector; when the label sets differ, that metric is read
per autoscaler from then on (logged once). `batch=False` reads everything per autoscaler.

Each (namespace, metric) is read every `interval_s`, or less often when there are many, so that the
controller never makes more than `max_reads_per_s` reads a second.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from autoscaler.controller.metrics import MetricList, MetricsReader, reading_of
from autoscaler.policy.observation import MetricReading
from autoscaler.policy.spec import MetricSpec
from common.selector import Operator, Selector, parse_selector

log = logging.getLogger(__name__)

Pair = tuple[str, str]  # (namespace, metric)


@dataclass
class _Source:
    """One (namespace, metric): its last answer and who reads it."""

    answer: MetricList | None = None
    read_at: float = -float("inf")
    readers: set[str] = field(default_factory=set)
    per_object: bool = False  # the adapter evaluates selectors itself: read per autoscaler
    index: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # (key, value) -> items


def _positions(source: _Source, selector: Selector) -> tuple[int, ...]:
    """Where the items `selector` picks sit in the source's answer (which has items)."""
    answer = source.answer
    assert answer is not None and answer.items is not None
    candidates: Sequence[int] | None = None
    for r in selector.requirements:
        if r.operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN) and len(r.values) == 1:
            candidates = source.index.get((r.key, r.values[0]), [])
            break
    indices = range(len(answer.items)) if candidates is None else candidates
    return tuple(i for i in indices if selector.matches(answer.items[i].labels))


def _at(answer: MetricList, positions: tuple[int, ...]) -> MetricList:
    assert answer.items is not None
    return MetricList(tuple(answer.items[i] for i in positions), read_at=answer.read_at)


def _picked(source: _Source, selector: Selector) -> MetricList:
    answer = source.answer
    assert answer is not None
    if answer.items is None:
        return answer
    return _at(answer, _positions(source, selector))


def _labels_of(answer: MetricList) -> list[tuple[tuple[str, str], ...]] | None:
    if answer.items is None:
        return None
    return sorted(tuple(sorted(i.labels.items())) for i in answer.items)


class MetricCache:
    def __init__(
        self,
        reader: MetricsReader,
        *,
        on_change: Callable[[str], None],
        interval_s: float = 0.5,
        max_reads_per_s: float = 20.0,
        batch: bool = True,
    ) -> None:
        self.reader = reader
        self.on_change = on_change
        self.interval_s = interval_s
        self.max_reads_per_s = max_reads_per_s
        self.batch = batch
        self.reads = 0  # requests made, for the benchmark
        self._sources: dict[Pair, _Source] = {}
        self._uses: dict[str, tuple[str, tuple[MetricSpec, ...]]] = {}  # autoscaler -> (ns, metrics)
        self._seen: dict[tuple[str, str], tuple[tuple[int, ...] | None, str]] = {}  # (key, metric) -> values
        self._verified: set[tuple[str, str, str]] = set()
        # (key, metric) -> (the source's index, selector, positions of the items picked)
        self._picks: dict[tuple[str, str], tuple[object, str, tuple[int, ...]]] = {}

    @property
    def period_s(self) -> float:
        """How often each (namespace, metric) is read: the interval, stretched to the read budget."""
        return max(self.interval_s, len(self._sources) / self.max_reads_per_s)

    def use(self, key: str, namespace: str, metrics: Sequence[MetricSpec]) -> None:
        """Autoscaler `key` reads these metrics (called by each reconcile; cheap when unchanged)."""
        wanted = (namespace, tuple(metrics))
        if self._uses.get(key) == wanted:
            return
        self.forget(key)
        self._uses[key] = wanted
        for m in metrics:
            self._sources.setdefault((namespace, m.name), _Source()).readers.add(key)

    def forget(self, key: str) -> None:
        namespace, metrics = self._uses.pop(key, ("", ()))
        for m in metrics:
            source = self._sources.get((namespace, m.name))
            if source is not None:
                source.readers.discard(key)
                if not source.readers:
                    del self._sources[(namespace, m.name)]
            self._seen.pop((key, m.name), None)
            self._picks.pop((key, m.name), None)

    async def _read(self, pair: Pair, source: _Source, now: float) -> list[Mapping[str, str]] | None:
        """Read it again; the label sets whose value changed (None: the answer failed or recovered,
        everyone on it is to be checked)."""
        self.reads += 1
        answer = await self.reader.read_items(pair[0], pair[1], "", now)
        before = source.answer.items if source.answer is not None else None
        items = answer.items
        source.answer, source.read_at = answer, now
        if before is not None and items is before:  # the same bytes as last time: not parsed again
            return []
        if (
            before is not None
            and items is not None
            and len(before) == len(items)
            and all(old.labels == new.labels for old, new in zip(before, items, strict=True))
        ):  # the same series in the same order (the steady case): the index holds, compare values
            return [
                new.labels
                for old, new in zip(before, items, strict=True)
                if old.value_milli != new.value_milli
            ]
        index: dict[tuple[str, str], list[int]] = {}
        for i, item in enumerate(items or ()):
            for label in item.labels.items():
                index.setdefault(label, []).append(i)
        source.index = index
        return None  # series came, went or failed: everyone on it is checked

    async def readings(
        self, key: str, namespace: str, metrics: Sequence[MetricSpec], now: float
    ) -> dict[str, MetricReading]:
        """This autoscaler's readings: picked out of the shared answers (read now if there is none)."""
        out: dict[str, MetricReading] = {}
        for m in metrics:
            source = self._sources.get((namespace, m.name))
            if not self.batch or source is None or source.per_object:
                self.reads += 1
                out[m.name] = await self.reader.read(namespace, m, now)
                continue
            if source.answer is None:
                await self._read((namespace, m.name), source, now)
            assert source.answer is not None
            out[m.name] = await self._reading(key, namespace, m, source, now)
        return out

    async def _reading(
        self, key: str, namespace: str, m: MetricSpec, source: _Source, now: float
    ) -> MetricReading:
        """Picked out of the shared answer. Where its selector's items sit is found once per index
        (built again only when series come, go or move): in a steady state the answer changes at
        every scrape round, its series do not."""
        answer = source.answer
        assert answer is not None
        pick = self._picks.get((key, m.name))
        if (
            pick is not None
            and pick[0] is source.index
            and pick[1] == m.selector
            and answer.items is not None
        ):
            reading = reading_of(_at(answer, pick[2]), now)
        else:
            positions = None
            if answer.items is None:
                picked = answer
            else:
                positions = _positions(source, parse_selector(m.selector))
                picked = _at(answer, positions)
            if (namespace, m.name, m.selector) not in self._verified:
                picked = await self._verify(namespace, m, source, picked, now)
            reading = reading_of(picked, now)
            verified = (namespace, m.name, m.selector) in self._verified and not source.per_object
            if positions is not None and verified:
                self._picks[(key, m.name)] = (source.index, m.selector, positions)
        self._seen[(key, m.name)] = _signature(reading)
        return reading

    async def _verify(
        self, namespace: str, m: MetricSpec, source: _Source, picked: MetricList, now: float
    ) -> MetricList:
        """Does the adapter answer `m.selector` by filtering the namespace's answer? Asked once."""
        self.reads += 1
        direct = await self.reader.read_items(namespace, m.name, m.selector, now)
        mine, theirs = _labels_of(picked), _labels_of(direct)
        if (mine is None) != (theirs is None):  # one failed: ask again next time
            return picked
        self._verified.add((namespace, m.name, m.selector))
        if mine != theirs:
            source.per_object = True
            log.warning(
                "metric %s in %s: the metrics API answers selector %r with other series than it lists"
                " without one (%d vs %d); reading it per autoscaler from now on",
                m.name,
                namespace,
                m.selector,
                len(theirs or ()),
                len(mine or ()),
            )
            return direct
        return picked

    async def poll(self, now: float) -> int:
        """Read every (namespace, metric) that is due; queue the autoscalers whose values changed.
        Returns how many were read."""
        period = self.period_s
        due = [(p, s) for p, s in self._sources.items() if not s.per_object and now - s.read_at >= period]
        if not self.batch or not due:
            return 0
        changes = await asyncio.gather(*(self._read(p, s, now) for p, s in due))
        for (pair, source), changed in zip(due, changes, strict=True):
            if changed == []:  # the same values as before: nobody's readings moved (a steady state)
                continue
            for key in list(source.readers):
                _, metrics = self._uses.get(key, ("", ()))
                for m in metrics:
                    if m.name != pair[1]:
                        continue
                    selector = parse_selector(m.selector)
                    if changed is not None and not any(selector.matches(labels) for labels in changed):
                        continue
                    signature = _signature(reading_of(_picked(source, selector), now))
                    if self._seen.get((key, m.name)) != signature:
                        self.on_change(key)
        return len(due)

    def next_poll_at(self) -> float | None:
        if not self.batch:
            return None
        times = [s.read_at + self.period_s for s in self._sources.values() if not s.per_object]
        return min(times) if times else None


def _signature(reading: MetricReading) -> tuple[tuple[int, ...] | None, str]:
    """What a change is: other values, or failing for another reason (not just an older sample)."""
    return (reading.values_milli, "" if reading.values_milli is not None else reading.error)


def sources_of(cache: MetricCache) -> Mapping[Pair, int]:
    """(namespace, metric) -> how many autoscalers read it (telemetry, tests)."""
    return {pair: len(source.readers) for pair, source in cache._sources.items()}
