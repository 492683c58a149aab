"""Scale-down as rent or buy: keep a replica while keeping it is cheaper than re-creating it.

A replica released now and needed again after a gap T costs, kept, its GPUs for T. Released, it
costs its successor's GPUs from scheduling to ready (re-creation time R) *and* the requests it
would have served in that time, which the next burst serves late. Counted at the fleet's own
goodput per GPU-hour, those are worth w x its GPUs for R, w = its capacity over the fleet's mean
throughput per replica (slo_weight): buying back costs (1 + w) x R, the break-even of the
ski-rental problem. w is 1 for a fleet that is busy all the time; on bursty traffic the fleet is
idle between bursts, so a request costs the fleet many GPU-seconds and a replica missing in a
burst costs many requests' worth. The plain break-even B (w = SLO_WEIGHT = 1) prices every
window but one: a level whose last idle gap was longer than B and within its weighted break-even
Bw is a burst that came back after an idle spell, and is kept Bw (below).

R is not one replica's cold start. When a burst comes back to its recent peak P, every replica
released since comes back at once and they share the storage: the one released at level L (the
L-th replica) is the (P - L + 1)-th of those re-created, ready only after the loads of all before
it. So B grows with the depth below the peak (horizon.recreate_s(cold, m)): the top replica goes
after about one cold start idle, the next one load time later, and the fleet shrinks no faster
than the storage could bring it back. On a slow load path (a 600 s cold start) the burst's
capacity stays warm between bursts; on a fast one (or with a node cache) it goes quickly.

A replica released does not free its GPUs at once: it takes no new request and finishes its own
first, the last of them after about H_B of their mean time in the system (drain_s). Those GPUs are
paid whether the need comes back or not, so the break-even is the re-creation's price plus the
drain. Requests of seconds drain in seconds; a reasoning model's minute-long answers, 175 a
replica, hold it ~6 minutes, longer than its re-creation, and a fleet that released and re-created
at that pace paid both (stationary long outputs on reference-70b: 9 cold starts an hour for a
constant rate, each new replica filled at once by the router with a replica's worth of prompts).

Each level is hedged as the learning-augmented ski rental of Purohit, Svitkina and Kumar
(NeurIPS 2018) with trust λ: level L is kept λ·B after it was last needed even if the forecast
says it will not be needed, and at most B / λ after it when the forecast says it will. Whatever
the forecast, that costs at most 1 + 1/λ times the best choice in hindsight, and 1 + λ when the
forecast is right. "Needed" comes from the history of needs, so recurrence counts: a level the
bursts keep reaching is never idle longer than the gap between them.

Recurrence is a second prediction beside the forecast: a level whose last idle gap (from the end
of one need of it to the next) was within its break-even is predicted to come back as soon, so it
is kept for its break-even B after it was last needed even when the forecast's band says it will
not be needed (bursts that return faster than a replica can be brought back, which a forecast of
the level cannot see between them). That is the plain ski rental's keep (B), between the trusted
forecast's B / λ and the untrusted λ·B. A gap longer than B but within the weighted break-even Bw
keeps the level Bw: what it predicts back is a burst after an idle spell, whose requests a
missing replica loses at the weighted price. A gap within B is the need's own flicker (the band's
margin swinging with the estimate's noise), kept B as before: pricing those returns at w too
held the steady traces' noise longer for nothing (docs/policy-history.md, "The price of a late request").

The history of needs is a monotone queue of (time, replicas) whose replica counts fall from the
front: the last time a level L was needed is the newest entry of at least L. The gaps are one
figure per level (gaps[L - 1]), updated when a level is needed again.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final, final

from autoscaler.policy.demand import typical_weight
from autoscaler.policy.record import Record

TRUST: Final = 0.5  # λ: 1.5x the hindsight optimum when the forecast is right, 3x at worst
_EULER: Final = 0.5772156649015329  # the Euler–Mascheroni constant: H_n ≈ ln n + γ + 1/2n − 1/12n²
SLO_WEIGHT: Final = 1.0  # a replica-second of unserved demand at full utilization: a replica-second of GPUs

NeedHistory = tuple[tuple[float, int], ...]
Gaps = tuple[float, ...]  # gaps[L - 1]: seconds from level L's last need to the one before it
Found = tuple[float, int]  # (time, replicas): the fleet found at first sight (hold_found)


@final
class Keep(Record):
    FIELDS = ("replicas", "reason", "template", "args")

    replicas: int
    reason: str
    template: str  # the stage message as a Stage template, formatted only when read
    args: tuple[object, ...]

    def __init__(self, replicas: int, reason: str, template: str, args: tuple[object, ...] = ()) -> None:
        self.replicas = replicas
        self.reason = reason
        self.template = template
        self.args = args


def remember(history: NeedHistory, now: float, need: int, keep_s: float) -> NeedHistory:
    """Add this tick's need, dropping what no window of keep_s can reach and what it dominates."""
    cut = 0
    while cut < len(history) and history[cut][0] < now - keep_s:
        cut += 1
    end = len(history)
    while end > cut and history[end - 1][1] <= need:
        end -= 1
    return history[cut:end] + ((now, need),)  # noqa: RUF005 (levelbins.score)


def bounded(history: NeedHistory, limit: int) -> NeedHistory:
    """The history with every need at most `limit`, as remember() keeps it: needs recorded under a
    higher maxReplicas (lowered since) count as the bound, since no burst brings back more (the
    re-creation of 4,000 through the storage would be priced at minutes each, and take seconds to
    work out)."""
    out: NeedHistory = ()
    for at, need in history:
        out = remember(out, at, min(need, limit), math.inf)
    return out


def recur(history: NeedHistory, gaps: Gaps, now: float, need: int, keep_s: float) -> Gaps:
    """The gaps after this tick's need (before remember() adds it): each level above the last
    tick's need that is needed again gets the time since it was last needed; one the history no
    longer reaches (older than keep_s, the longest window) gets keep_s, longer than any window."""
    last = history[-1][1] if history else 0  # remember() always keeps the newest tick's need
    if need <= last:
        return gaps
    out = list(gaps)
    if len(out) < need:
        out.extend([keep_s] * (need - len(out)))
    i = len(history) - 1
    for level in range(last + 1, need + 1):
        while i >= 0 and history[i][1] < level:  # the newest entry of at least `level`
            i -= 1
        out[level - 1] = keep_s if i < 0 else min(now - history[i][0], keep_s)
    return tuple(out)


def record(
    history: NeedHistory, gaps: Gaps, now: float, need: int, keep_s: float
) -> tuple[NeedHistory, Gaps]:
    """This tick's need in both: recur() on the history before it, then remember(); the gaps of
    levels above the remembered peak are dropped (recur() starts them afresh when they are needed
    again)."""
    gaps = recur(history, gaps, now, need, keep_s)
    history = remember(history, now, need, keep_s)
    peak = history[0][1]
    return history, gaps[:peak] if len(gaps) > peak else gaps


def recent_max(history: NeedHistory, now: float, window_s: float) -> int:
    """The largest need recorded within the last window_s (0 if none)."""
    for at, need in history:
        if at >= now - window_s:
            return need
    return 0


def breakeven_s(recreate_s: float, slo_weight: float = SLO_WEIGHT, drain_s: float = 0.0) -> float:
    """Idle seconds after which releasing a replica that takes recreate_s to come back, and holds
    its GPUs drain_s after its release (drain_s()), pays."""
    return (1.0 + slo_weight) * recreate_s + drain_s


def drain_s(time_in_system_s: float, per_replica: float) -> float:
    """Seconds a released replica still holds its GPUs: it takes no new request but finishes its
    own. The one released holds the fewest, and a router that balances requests in flight leaves
    every replica within one of the mean `per_replica`: the floor of it, B. Memoryless lifetimes of
    mean time_in_system_s leave each a residual of that mean, and the last of B ends after H_B of
    them (the harmonic number: the mean of the largest of B exponentials; its asymptotic series,
    within 1 % at 1 and 0.04 % from 2 on). None to finish (B = 0): none to wait for."""
    if not (time_in_system_s > 0.0 and per_replica >= 1.0):  # NaN too
        return 0.0
    # a float (the same values): compiled, an int's log and arithmetic were generic calls
    b = float(math.floor(per_replica)) if per_replica < 1e9 else 1e9
    return time_in_system_s * (math.log(b) + _EULER + 0.5 / b - 1.0 / (12.0 * b * b))


def slo_weight(typical_load: float, typical_peak: float, typical_capacity: float) -> float:
    """The price of a replica-second of unserved demand in replica-seconds of GPUs: the replica's
    capacity over the fleet's mean throughput per replica, i.e. 1 / the fleet's utilization
    (typical_capacity / typical_load, loads in one unit, averaged alike), at most typical_peak /
    typical_load: a fleet that holds the bursts' capacity runs at that utilization, and idle
    capacity beyond it is the fleet's own holding, which must not price itself into holding
    more (in a long idle spell the load falls and 1 / utilization grows without bound). At least
    SLO_WEIGHT; SLO_WEIGHT when there is no load yet."""
    if typical_load <= 1e-12:
        return SLO_WEIGHT
    w = typical_peak / typical_load
    if typical_capacity > 0.0:
        inverse = typical_capacity / typical_load
        w = inverse if inverse < w else w
    return w if w > SLO_WEIGHT else SLO_WEIGHT


def averaged(typical: float, now_value: float, last_at: float | None, now: float) -> float:
    """`typical` moved towards now_value as demand.py averages its typical demand (its half-life),
    from the first value (typical 0, or no tick before)."""
    if typical <= 0.0 or last_at is None:
        return now_value
    w = typical_weight(now - last_at)
    return typical + w * (now_value - typical)


def _window(
    level: int,
    trusted: bool,
    gap: float,
    history: NeedHistory,
    now: float,
    recreate_s: Callable[[int], float],
    slo_weight: float = SLO_WEIGHT,
    drain: float = 0.0,
) -> tuple[float, float]:
    """(break-even, idle window) of the replica at `level`. It would come back as the m-th of the
    replicas up to the peak a burst reaches within that window: the largest m consistent with its
    own window (from the deepest down), so an old spike does not deepen today's small dips. The
    window: B / λ when the forecast needs it, B when its last gap was within B, the weighted
    break-even Bw when its last gap was longer than B but within Bw, else λ·B (the break-even
    returned is Bw in the third case, B otherwise)."""
    m = history[0][1] - level + 1
    while True:
        r = recreate_s(m)
        b = breakeven_s(r, SLO_WEIGHT, drain)
        if trusted:
            window = b / TRUST
        elif gap <= b:
            window = b
        else:
            weighted = breakeven_s(r, slo_weight, drain)
            if gap <= weighted:
                window = b = weighted
            else:
                window = TRUST * b
        depth = recent_max(history, now, window) - level + 1
        if depth >= m or depth < 1:
            return b, window
        m = depth


def keep(
    have: int,
    need_now: int,
    need_ahead: int,
    history: NeedHistory,
    now: float,
    recreate_s: Callable[[int], float],
    gaps: Gaps = (),
    slo_weight: float = SLO_WEIGHT,
    drain: float = 0.0,
) -> Keep:
    """Replicas to keep of `have` when `need_now` are needed now, the forecast's upper band asks
    for `need_ahead` at most over the next re-creation, recreate_s(m) is when the last of m
    replicas re-created together would be ready (m >= 1), gaps are the levels' last idle gaps
    (recur), slo_weight the price of a late request (slo_weight()) and `drain` the seconds a
    released replica holds its GPUs while its requests finish (drain_s())."""
    if need_now >= have:
        return Keep(have, "NeededNow", "{} needed now", (need_now,))
    if not history:  # first sight (a restart): as upstream seeds its window, the current count
        return Keep(have, "FirstSight", "no history of needs yet: holding the current count")
    peak = history[0][1]
    # the entries of at least `level` are a prefix (the needs fall strictly from the front): its
    # last is the newest, further back as the level falls
    i, last = 0, len(history) - 1
    kept, idle, b, trusted, gap = need_now, math.inf, math.inf, False, math.inf
    for level in range(min(have, peak), need_now, -1):
        while i < last and history[i + 1][1] >= level:
            i += 1
        idle = now - history[i][0]
        trusted = need_ahead >= level
        gap = gaps[level - 1] if level <= len(gaps) else math.inf
        b, window = _window(level, trusted, gap, history, now, recreate_s, slo_weight, drain)
        if idle <= window:
            kept = level
            break
    if kept == have:
        if trusted:
            return Keep(
                have,
                "KeepWarm",
                "the forecast needs {} within the {:.0f} s break-even (idle {:.0f} s)",
                (have, b, idle),
            )
        if gap <= b:
            return Keep(
                have,
                "KeepRecurring",
                "replica {} came back {:.0f} s after its last need, within its {:.0f} s break-even"
                " (idle {:.0f} s)",
                (have, gap, b, idle),
            )
        return Keep(
            have,
            "KeepWarm",
            "replica {} was needed {:.0f} s ago, within λ x its {:.0f} s break-even",
            (have, idle, b),
        )
    return Keep(
        kept,
        "ReleaseIdle",
        "{} replica(s) idle past their break-even (re-creation x {:g} and a {:.0f} s drain, hedged by"
        " trust {:g}); keeping {}, {} needed at the recent peak",
        (have - kept, 1 + SLO_WEIGHT, drain, TRUST, kept, peak),
    )


def found_at_first_sight(
    found: Found | None, first_sight: bool, have: int, now: float, breakeven_one: float
) -> Found | None:
    """The found fleet after this tick: the current count at first sight (no need recorded yet: a
    start, or a restart without memory), forgotten once its hold is over (hold_found)."""
    if first_sight:
        return (now, have) if have > 0 else None
    if found is not None and now - found[0] > TRUST * breakeven_one:
        return None
    return found


def hold_found(kept: Keep, have: int, found: Found | None, now: float, breakeven_one: float) -> Keep:
    """Upstream seeds its window with the count it finds; here the fleet found at first sight
    counts as needed then, each replica as if re-created alone (no burst has shown how deep a
    return would go): kept λ·B(1) after first sight, the untrusted window of the top replica,
    one re-creation. The first readings are the least informed (a band at its prior, rates
    over a window the counters have just begun to fill, a mix of the requests that finished
    first), so the first releases wait for that long (docs/policy.md, "Defaults and why")."""
    if found is None:
        return kept
    at, count = found
    hold = count if count < have else have
    left = TRUST * breakeven_one - (now - at)
    if kept.replicas >= hold or left < 0.0:
        return kept
    return Keep(
        hold,
        "FoundFleet",
        "the {} replica(s) found at first sight are kept λ x one's {:.0f} s break-even ({:.0f} s more)",
        (count, breakeven_one, left),
    )
