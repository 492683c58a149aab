"""Scale-down as rent or buy: keep a replica while keeping it is cheaper than re-creating it.

A replica released now and needed again after a gap T costs its GPUs for the cold start of its
successor (a replica holds its GPUs from scheduling to ready) and the requests it then serves
late; kept, it costs its GPUs for T. So the break-even gap is the re-creation time B
(horizon.recreate_s) and the question is the ski-rental problem: keep while the next need comes
sooner than B. The forecast answers it (its upper band over [now, now + B]), hedged as the
learning-augmented ski rental of Purohit, Svitkina and Kumar (NeurIPS 2018) with trust λ: a
replica the forecast says will not be needed is still kept λ·B after its last need, and one the
forecast says will be needed is released anyway after B / λ without a need. Whatever the
forecast, that costs at most 1 + 1/λ times the best choice in hindsight, and 1 + λ when the
forecast is right.

The history of needs is a monotone queue of (time, replicas) whose replica counts fall from the
front: the maximum over any trailing window is its first entry inside the window.
"""

from __future__ import annotations

from typing import NamedTuple

TRUST = 0.5  # λ: 1.5x the hindsight optimum when the forecast is right, 3x at worst

NeedHistory = tuple[tuple[float, int], ...]


class Keep(NamedTuple):
    replicas: int
    reason: str
    message: str


def remember(history: NeedHistory, now: float, need: int, keep_s: float) -> NeedHistory:
    """Add this tick's need, dropping what no window of keep_s can reach and what it dominates."""
    cut = 0
    while cut < len(history) and history[cut][0] < now - keep_s:
        cut += 1
    end = len(history)
    while end > cut and history[end - 1][1] <= need:
        end -= 1
    return (*history[cut:end], (now, need))


def recent_max(history: NeedHistory, now: float, window_s: float) -> int:
    """The largest need recorded within the last window_s (0 if none)."""
    for at, need in history:
        if at >= now - window_s:
            return need
    return 0


def keep(
    have: int, need_now: int, need_ahead: int, history: NeedHistory, now: float, breakeven_s: float
) -> Keep:
    """Replicas to keep of `have` when `need_now` are needed now and the forecast's upper band
    asks for `need_ahead` at most over the next breakeven_s."""
    if need_now >= have:
        return Keep(have, "NeededNow", f"{need_now} needed now")
    if not history:  # first sight (a restart): as upstream seeds its window, the current count
        return Keep(have, "FirstSight", "no history of needs yet: holding the current count")
    hedge = recent_max(history, now, TRUST * breakeven_s)
    longest = recent_max(history, now, breakeven_s / TRUST)
    wanted = max(need_ahead, hedge)
    kept = max(need_now, min(wanted, longest))
    kept = min(kept, have)
    if kept == have:
        why = (
            f"needed again within the {breakeven_s:.0f} s a re-creation takes"
            if need_ahead >= have
            else f"needed {TRUST * breakeven_s:.0f} s ago (hedge: half the re-creation time)"
        )
        return Keep(have, "KeepWarm", why)
    return Keep(
        kept,
        "ReleaseIdle",
        f"{have - kept} replica(s) not needed within {breakeven_s:.0f} s (re-creation time),"
        f" nor in the last {TRUST * breakeven_s:.0f} s",
    )
