"""The manual clock: time moves only by hand; sleepers wake at their own time, in order."""

from __future__ import annotations

import asyncio

import pytest

from common.clock import ManualClock, settle


async def test_sleepers_wake_in_order_at_their_own_time() -> None:
    clock = ManualClock(100.0)
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, until: float) -> None:
        await clock.sleep_until(until)
        woke.append((name, clock()))

    tasks = [asyncio.create_task(sleeper("late", 130.0)), asyncio.create_task(sleeper("early", 110.0))]
    await settle()
    assert clock.sleepers == 2
    await clock.advance_to(120.0)
    assert woke == [("early", 110.0)]
    await clock.advance_to(200.0)
    assert woke == [("early", 110.0), ("late", 130.0)]
    assert clock.now() == 200.0
    await asyncio.gather(*tasks)


async def test_a_jump_wakes_everyone_due_at_the_new_time() -> None:
    clock = ManualClock()
    task = asyncio.create_task(clock.sleep(5.0))
    await settle()
    clock.advance(10.0)
    await task
    assert clock() == 10.0


async def test_a_cancelled_sleeper_is_forgotten() -> None:
    clock = ManualClock()
    task = asyncio.create_task(clock.sleep(5.0))
    await settle()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert clock.sleepers == 0


def test_time_never_goes_back() -> None:
    clock = ManualClock(10.0)
    with pytest.raises(ValueError, match="does not go back"):
        clock.set(5.0)
