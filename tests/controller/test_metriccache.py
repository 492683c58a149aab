"""Shared metric reads: one read per (namespace, metric), each autoscaler's series picked out by its
selector, checked once against a read with the selector; a change of values queues the autoscaler."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from autoscaler.controller.metriccache import MetricCache, sources_of
from autoscaler.controller.metrics import MetricItem, MetricList, reading_of
from autoscaler.policy.observation import MetricReading
from autoscaler.policy.spec import MetricSpec, TargetType
from common.selector import parse_selector

NS = "serving"
Q = "infscale_queue_size"


def metric(deployment: str) -> MetricSpec:
    return MetricSpec(Q, TargetType.AVERAGE_VALUE, 4000, selector=f"deployment={deployment}")


class Adapter:
    """infscale's adapter: an answer with a selector is the namespace's answer, filtered."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}
        self.requests: list[tuple[str, str]] = []  # (metric, selector)
        self.evaluates_selectors = False  # True: as prometheus-adapter, another answer for a selector

    def items(self, selector: str) -> tuple[MetricItem, ...]:
        chosen = parse_selector(selector)
        return tuple(
            MetricItem({"namespace": NS, "deployment": d}, round(v * 1000), 100.0)
            for d, v in sorted(self.values.items())
            if chosen.matches({"namespace": NS, "deployment": d})
        )

    async def read_items(self, namespace: str, name: str, selector: str, now: float) -> MetricList:
        self.requests.append((name, selector))
        if self.evaluates_selectors and not selector:  # aggregated over everything, other labels
            total = sum(self.values.values())
            return MetricList((MetricItem({}, round(total * 1000), 100.0),), read_at=now)
        return MetricList(self.items(selector), read_at=now)

    async def read(self, namespace: str, m: MetricSpec, now: float) -> MetricReading:
        return reading_of(await self.read_items(namespace, m.name, m.selector, now), now)

    async def close(self) -> None:
        return None


def values(readings: Mapping[str, MetricReading]) -> tuple[int, ...] | None:
    return readings[Q].values_milli


async def test_one_read_for_many_autoscalers_and_changes_queue_them() -> None:
    adapter = Adapter()
    adapter.values = {f"m{i}": 8.0 for i in range(50)}
    queued: list[str] = []
    cache = MetricCache(adapter, on_change=queued.append, interval_s=0.5)
    for i in range(50):
        cache.use(f"{NS}/m{i}", NS, [metric(f"m{i}")])
    for i in range(50):  # the first reconciles: one shared read, one check per selector
        assert values(await cache.readings(f"{NS}/m{i}", NS, [metric(f"m{i}")], 100.0)) == (8000,)
    assert adapter.requests.count((Q, "")) == 1 and len(adapter.requests) == 51
    assert sources_of(cache) == {(NS, Q): 50}

    adapter.requests.clear()
    assert await cache.poll(100.2) == 0  # not due
    adapter.values["m7"] = 24.0
    assert await cache.poll(100.5) == 1  # due: one read for all 50
    assert adapter.requests == [(Q, "")] and queued == [f"{NS}/m7"]  # only the one whose values moved
    assert values(await cache.readings(f"{NS}/m7", NS, [metric("m7")], 100.6)) == (24000,)
    assert cache.next_poll_at() == pytest.approx(101.0)


async def test_an_adapter_that_evaluates_selectors_itself_is_read_per_autoscaler() -> None:
    adapter = Adapter()
    adapter.values = {"a": 8.0, "b": 4.0}
    adapter.evaluates_selectors = True
    cache = MetricCache(adapter, on_change=lambda key: None)
    cache.use(f"{NS}/a", NS, [metric("a")])
    first = await cache.readings(f"{NS}/a", NS, [metric("a")], 100.0)
    assert values(first) == (8000,)  # the check's own answer, not the aggregate picked apart
    adapter.requests.clear()
    assert values(await cache.readings(f"{NS}/a", NS, [metric("a")], 105.0)) == (8000,)
    assert adapter.requests == [(Q, "deployment=a")]  # from now on: with the selector, per autoscaler
    assert await cache.poll(200.0) == 0


async def test_many_sources_stretch_the_interval_to_the_read_budget() -> None:
    cache = MetricCache(Adapter(), on_change=lambda key: None, interval_s=0.5, max_reads_per_s=20)
    for i in range(100):
        cache.use(f"ns{i}/x", f"ns{i}", [metric("x")])
    assert cache.period_s == pytest.approx(5.0)  # 100 (namespace, metric) pairs at 20 reads/s
    cache.forget("ns0/x")
    assert sources_of(cache).get(("ns0", Q)) is None


async def test_a_failed_shared_read_fails_every_autoscaler_on_it_without_a_crash() -> None:
    class Broken(Adapter):
        async def read_items(self, namespace: str, name: str, selector: str, now: float) -> MetricList:
            return MetricList(None, "503 ServiceUnavailable: adapter down", now)

    cache = MetricCache(Broken(), on_change=lambda key: None)
    cache.use(f"{NS}/a", NS, [metric("a")])
    reading = (await cache.readings(f"{NS}/a", NS, [metric("a")], 100.0))[Q]
    assert reading.values_milli is None and "adapter down" in reading.error


async def test_per_autoscaler_reads_when_batching_is_off() -> None:
    adapter = Adapter()
    adapter.values = {"a": 8.0}
    cache = MetricCache(adapter, on_change=lambda key: None, batch=False)
    cache.use(f"{NS}/a", NS, [metric("a")])
    assert values(await cache.readings(f"{NS}/a", NS, [metric("a")], 100.0)) == (8000,)
    assert adapter.requests == [(Q, "deployment=a")] and await cache.poll(200.0) == 0


async def test_positions_are_reused_while_the_series_stay_and_found_again_when_they_move() -> None:
    """In a steady state each answer differs (new timestamps) with the same series: an autoscaler's
    items are taken from where they were, so its values, their age and a change back and forth are
    all seen; when series come or go, they are found again."""
    adapter = Adapter()
    adapter.values = {"a": 8.0, "b": 4.0, "c": 2.0}
    queued: list[str] = []
    cache = MetricCache(adapter, on_change=queued.append, interval_s=0.5)
    for d in "abc":
        cache.use(f"{NS}/{d}", NS, [metric(d)])
        await cache.readings(f"{NS}/{d}", NS, [metric(d)], 100.0)
    reading = (await cache.readings(f"{NS}/b", NS, [metric("b")], 130.0))[Q]
    assert reading.values_milli == (4000,) and reading.age_s == pytest.approx(30.0)  # stamps at 100 s
    for at, value in ((101.0, 16.0), (102.0, 4.0), (103.0, 16.0)):  # b: 4 -> 16 -> 4 -> 16
        adapter.values["b"] = value
        queued.clear()
        await cache.poll(at)
        assert queued == [f"{NS}/b"]
        assert values(await cache.readings(f"{NS}/b", NS, [metric("b")], at)) == (round(value * 1000),)
    adapter.values = {"0": 1.0, "a": 8.0, "b": 32.0, "c": 2.0}  # a series comes first: positions move
    await cache.poll(104.0)
    assert values(await cache.readings(f"{NS}/b", NS, [metric("b")], 104.0)) == (32000,)
    assert values(await cache.readings(f"{NS}/c", NS, [metric("c")], 104.0)) == (2000,)
    del adapter.values["b"]  # gone: an empty answer for b, upstream's error, not a stale value
    await cache.poll(105.0)
    assert values(await cache.readings(f"{NS}/b", NS, [metric("b")], 105.0)) == ()
