"""The work queue against client-go's workqueue semantics: dedup, dirty-while-processing, delays that
keep the earliest time, per-key exponential backoff. Time is a manual clock."""

from __future__ import annotations

import asyncio

import pytest

from autoscaler.controller.workqueue import WorkQueue
from common.clock import ManualClock


def drain(q: WorkQueue, now: float) -> list[str]:
    out = []
    while (key := q.pop(now)) is not None:
        out.append(key)
        q.done(key)
    return out


def test_a_key_is_queued_once_in_order() -> None:
    q = WorkQueue(ManualClock())
    for key in ("a", "b", "a", "c", "b"):
        q.add(key)
    assert drain(q, 0.0) == ["a", "b", "c"]


def test_added_while_processing_comes_again_after_done_never_twice_at_once() -> None:
    q = WorkQueue(ManualClock())
    q.add("a")
    assert q.pop(0.0) == "a"
    q.add("a")  # a change arrives while "a" is reconciled
    assert q.pop(0.0) is None  # not handed out a second time concurrently
    q.done("a")
    assert q.pop(0.0) == "a"


def test_delays_keep_the_earliest_time_and_an_add_supersedes_them() -> None:
    clock = ManualClock(100.0)
    q = WorkQueue(clock)
    q.add_at("a", 110.0)
    q.add_at("a", 105.0)  # earlier: kept
    q.add_at("a", 120.0)  # later: ignored
    assert q.next_at() == 105.0
    assert q.pop(104.9) is None
    assert q.pop(105.0) == "a"
    q.done("a")
    q.add_after("b", 30.0)
    q.add("b")  # a change: now, the delayed entry is dropped
    assert drain(q, 100.0) == ["b"]
    assert q.next_at() is None and len(q) == 0


@pytest.mark.parametrize(
    ("failures", "delay"),
    [
        pytest.param(1, 0.005, id="first failure: the base"),
        pytest.param(2, 0.01, id="doubles"),
        pytest.param(11, 0.005 * 2**10, id="11th: 5.12 s"),
        pytest.param(40, 1000.0, id="capped at 1000 s"),
    ],
)
def test_backoff_is_exponential_per_key(failures: int, delay: float) -> None:
    q = WorkQueue(ManualClock())
    got = [q.backoff_s("a") for _ in range(failures)][-1]
    assert got == pytest.approx(delay)
    assert q.backoff_s("b") == pytest.approx(0.005)  # another key has its own count
    q.forget("a")
    assert q.failures("a") == 0 and q.backoff_s("a") == pytest.approx(0.005)


def test_remove_drops_a_key_wherever_it_waits() -> None:
    clock = ManualClock()
    q = WorkQueue(clock)
    q.add("a")
    q.add_after("b", 5)
    q.remove("a")
    q.remove("b")
    assert drain(q, 10.0) == [] and len(q) == 0


async def test_get_wakes_on_an_add() -> None:
    q = WorkQueue(ManualClock())
    waiter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not waiter.done()
    q.add("a")
    assert await asyncio.wait_for(waiter, 5) == "a"
    q.close()
    assert await asyncio.wait_for(q.get(), 5) is None


def test_aligned_delays_share_one_due_time_never_later_than_the_delay() -> None:
    clock = ManualClock(1000.05)
    q = WorkQueue(clock)
    q.add_after("a", 15.0, align_s=0.25)  # 1015.05 -> 1015.0
    clock.advance(0.15)
    q.add_after("b", 15.0, align_s=0.25)  # 1015.2 -> 1015.0: the same timer as "a"
    clock.advance(0.1)
    q.add_after("c", 15.0, align_s=0.25)  # 1015.3 -> 1015.25
    assert q.next_at() == 1015.0
    assert q.pop(1014.99) is None
    assert drain(q, 1015.0) == ["a", "b"]
    assert q.next_at() == 1015.25
    q.add_after("d", 0.2, align_s=0.25)  # not longer than the grid: not aligned (never due at once)
    assert q.next_at() == pytest.approx(1000.5)
