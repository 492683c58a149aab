"""Shared storage: loaders splitting one bandwidth, and the errors every cold-start input raises.

Each of the n loaders still loading gets min(per-loader cap, shared / n), recomputed whenever one
starts or finishes (egalitarian processor sharing with a cap). Rates are constant between such
events, so every schedule here is exact. Seed: 140 GB at a shared 10 GB/s takes 14 s alone; 8
together get 1.25 GB/s each and all finish at 112 s.

Pure: no clock, no I/O. Used by the start-up machine (startup.py), hence by the cold-start model
and the replay's fleet alike.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

# Bytes are discrete: a loader with at most one byte left (GB = 10^9 bytes) is done, everywhere
# (at its start too). This absorbs the float residue of "advance by exactly the time to the next
# completion"; the price is that a finish may come one byte's transfer time early.
BYTE_GB = 1e-9


class ColdStartInputError(ValueError):
    """A cold-start input out of range; `field` names it (a ColdStartSpec field or an argument)."""

    def __init__(self, field: str, value: object, requirement: str) -> None:
        super().__init__(f"{field} must be {requirement}, got {value!r}")
        self.field = field
        self.value = value
        self.requirement = requirement


def require(ok: bool, field: str, value: object, requirement: str) -> None:
    if not ok:
        raise ColdStartInputError(field, value, requirement)


def finite_at_least_zero(x: float) -> bool:
    return math.isfinite(x) and x >= 0  # also rejects NaN, for which every comparison is False


def finite_positive(x: float) -> bool:
    return math.isfinite(x) and x > 0


def loader_gbps(loaders: int, storage_gbps: float, per_loader_gbps: float | None = None) -> float:
    """The speed of each of `loaders` concurrent loaders: min(cap, shared / loaders)."""
    fair = storage_gbps / loaders
    return fair if per_loader_gbps is None else min(per_loader_gbps, fair)


def next_load_completion_s(
    remaining_gb: Sequence[float], storage_gbps: float, per_loader_gbps: float | None = None
) -> float:
    """Seconds until the first of these loaders finishes if nobody joins; inf when there are none.

    Every loader gets the same speed, so the one with the fewest bytes left finishes first.
    """
    if not remaining_gb:
        return math.inf
    least = min(remaining_gb)
    return 0.0 if least <= BYTE_GB else least / loader_gbps(len(remaining_gb), storage_gbps, per_loader_gbps)


def advance_loads(
    remaining_gb: Sequence[float], dt_s: float, storage_gbps: float, per_loader_gbps: float | None = None
) -> tuple[float, ...]:
    """GB left for each loader after `dt_s` seconds in which nobody joins; finished loaders read 0.0.

    Exact across the completions inside `dt_s` (the survivors speed up at each). The replay
    simulator calls this between its own events, then adds the loaders that start.
    """
    require(finite_at_least_zero(dt_s), "dt_s", dt_s, "a finite number >= 0")
    served = 0.0  # GB each still-active loader has received since the start of dt_s (all equal)
    t = 0.0
    active = len(remaining_gb)
    for size in sorted(remaining_gb):
        if size - served <= BYTE_GB:  # done already, or together with the previous one
            active -= 1
            continue
        rate = loader_gbps(active, storage_gbps, per_loader_gbps)
        done_at = t + (size - served) / rate
        if done_at >= dt_s:
            served += (dt_s - t) * rate
            break
        t, served, active = done_at, size, active - 1
    else:
        return (0.0,) * len(remaining_gb)
    return tuple(left if (left := size - served) > BYTE_GB else 0.0 for size in remaining_gb)


def shared_load_finish_times(
    sizes_gb: Sequence[float],
    start_s: Sequence[float] | None = None,
    *,
    storage_gbps: float,
    per_loader_gbps: float | None = None,
) -> tuple[float, ...]:
    """When each loader finishes, loader i reading sizes_gb[i] from start_s[i] (default: all at 0).

    Event-driven and exact: between two events (a start or a finish) n is constant, so every
    active loader has received the same number of GB since any common instant. We track that
    "service per active loader" S(t); a loader joining at S = S_j with size s finishes when S
    reaches S_j + s, so finishes come off a heap in order of that target. Cost O(n log n).

    Worked example, 140 GB each at 10 GB/s, one loader at t = 0 and one at t = 7: alone until
    t = 7 the first reads 70 GB; then both run at 5 GB/s and the first finishes its last 70 GB at
    t = 21; the second has read 14 * 5 = 70 GB by then, runs alone at 10 GB/s and finishes its
    last 70 GB at t = 28.
    """
    n = len(sizes_gb)
    starts: Sequence[float] = start_s if start_s is not None else (0.0,) * n
    if len(starts) != n:
        raise ColdStartInputError("start_s", len(starts), f"as long as sizes_gb ({n})")
    for i in range(n):
        require(finite_at_least_zero(sizes_gb[i]), f"sizes_gb[{i}]", sizes_gb[i], "a finite number >= 0")
        require(math.isfinite(starts[i]), f"start_s[{i}]", starts[i], "finite")
    require(finite_positive(storage_gbps), "storage_gbps", storage_gbps, "a finite number > 0")
    require(
        per_loader_gbps is None or finite_positive(per_loader_gbps),
        "per_loader_gbps",
        per_loader_gbps,
        "unset or a finite number > 0",
    )
    return _finish_times(sizes_gb, starts, storage_gbps, per_loader_gbps)


def _finish_times(
    sizes_gb: Sequence[float], starts: Sequence[float], storage_gbps: float, per_loader_gbps: float | None
) -> tuple[float, ...]:
    n = len(sizes_gb)
    finish = [0.0] * n
    arrivals = sorted(range(n), key=starts.__getitem__)
    active: list[tuple[float, int]] = []  # heap of (target service, loader)
    served = 0.0  # S(t)
    t = -math.inf
    nxt = 0  # index into arrivals
    while nxt < n or active:
        if not active:  # idle storage: jump to the next start; no target is pending, so S restarts
            t, served = starts[arrivals[nxt]], 0.0
        while nxt < n and starts[arrivals[nxt]] <= t:
            i = arrivals[nxt]
            heapq.heappush(active, (served + sizes_gb[i], i))
            nxt += 1
        gap = active[0][0] - served
        if gap > BYTE_GB:  # otherwise the first is already done (and takes no bandwidth from S)
            rate = loader_gbps(len(active), storage_gbps, per_loader_gbps)
            done_at = t + gap / rate
            if nxt < n and starts[arrivals[nxt]] < done_at:
                start = starts[arrivals[nxt]]
                served += (start - t) * rate
                t = start
                continue
            t, served = done_at, active[0][0]
        while active and active[0][0] - served <= BYTE_GB:
            finish[heapq.heappop(active)[1]] = t
    return tuple(finish)


def loads_left_at(
    sizes_gb: Sequence[float],
    start_s: Sequence[float],
    at_s: float,
    *,
    storage_gbps: float,
    per_loader_gbps: float | None = None,
) -> tuple[float, ...]:
    """GB each loader has left at `at_s`, loader i reading sizes_gb[i] from start_s[i]: its whole
    size if it starts after `at_s`, 0.0 once done. Exact, as advance_loads between the starts.

    Worked example, 140 GB each at 10 GB/s from t = 0 and t = 7: at t = 14 the first has read 70 GB
    alone and 35 GB shared (35 left), the second 35 GB (105 left).
    """
    left = list(sizes_gb)
    active: list[int] = []
    t = 0.0
    for i in sorted(range(len(left)), key=start_s.__getitem__):
        begin = start_s[i]
        if begin > at_s:
            break
        if active and begin > t:
            _advance(left, active, begin - t, storage_gbps, per_loader_gbps)
            active = [j for j in active if left[j] > 0.0]
        t = begin  # the starts come in order, so never before t
        active.append(i)
    if active and at_s > t:
        _advance(left, active, at_s - t, storage_gbps, per_loader_gbps)
    return tuple(left)


def _advance(
    left: list[float], active: list[int], dt_s: float, storage_gbps: float, per_loader_gbps: float | None
) -> None:
    after = advance_loads([left[j] for j in active], dt_s, storage_gbps, per_loader_gbps)
    for j, gb in zip(active, after, strict=True):
        left[j] = gb
