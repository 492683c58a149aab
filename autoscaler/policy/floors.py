"""Floors under the proposal: headroom, a warm minimum, time-of-day schedules.

`now` is Unix seconds; schedules read the wall clock in their own zone from it.
"""

from __future__ import annotations

import math
from datetime import datetime
from functools import lru_cache
from zoneinfo import ZoneInfo

from autoscaler.policy.spec import FloorSpec, Schedule


@lru_cache(maxsize=256)
def _local_clock(timezone: str, epoch_minute: int) -> tuple[int, int]:
    """(weekday, minute of day) in a zone. Offsets change on whole minutes, so one lookup a minute."""
    local = datetime.fromtimestamp(epoch_minute * 60, ZoneInfo(timezone))
    return local.weekday(), local.hour * 60 + local.minute


def schedule_active(schedule: Schedule, now: float) -> bool:
    weekday, minute = _local_clock(schedule.timezone, int(now // 60))
    if schedule.start_minute <= schedule.end_minute:
        return weekday in schedule.weekdays and schedule.start_minute <= minute < schedule.end_minute
    # wraps past midnight: the part after midnight belongs to the previous day's window
    if minute >= schedule.start_minute:
        return weekday in schedule.weekdays
    return minute < schedule.end_minute and (weekday - 1) % 7 in schedule.weekdays


def apply_floors(floors: FloorSpec, raw: int, now: float) -> tuple[int, tuple[str, str]]:
    value, reason = raw, ("", "")
    if floors.headroom_replicas or floors.headroom_fraction:
        value = raw + floors.headroom_replicas + math.ceil(raw * floors.headroom_fraction)
        reason = (
            "Headroom",
            f"+{floors.headroom_replicas} replicas and +{floors.headroom_fraction:.0%} headroom",
        )
    if floors.warm_min_replicas > value:
        value = floors.warm_min_replicas
        reason = ("WarmFloor", f"keeping at least {floors.warm_min_replicas} warm replicas")
    for schedule in floors.schedules:
        if schedule.min_replicas > value and schedule_active(schedule, now):
            value = schedule.min_replicas
            reason = (
                "ScheduledFloor",
                f"schedule in {schedule.timezone} holds at least {schedule.min_replicas}",
            )
    return value, reason
