"""capacity.py's two cached searches (TTFT count, TPOT rate): apart, as flatsize.py's copy shares them."""

from __future__ import annotations

import math

from autoscaler.policy import memo, tpottail
from autoscaler.policy.capacityspec import ReplicaProfile
from autoscaler.policy.outputsteps import OutputSteps

TTFT_QUANTUM = 256.0  # the TTFT search is cached on its inputs rounded to 1/256 in log scale (0.4 %)
TTFT_KEPT = 8192  # the TTFT searches kept (memo.remember clears the table when it holds as many)
SHARE_KEPT = 4096  # the utilizations kept, by the slack's and the tail's steps alone
_ttft_cache: dict[tuple[int | None, int | None, int | None], int] = {}
_share_cache: dict[tuple[int | None, int | None], float] = {}


def ttft_servers(offered: float, slack_services: float, budget: float) -> int:
    """split_servers on its inputs rounded to 1/256 in log scale, cached on the steps k of
    exp(k / 256) (small ints hash faster than floats, and the exps are paid once per entry); None
    stands for an input <= 0, which is taken as 0. The utilization it divides the load by depends
    on the slack and the tail alone, and a tick's sizings search at new loads but few slacks and
    tails (on the bench's ticks half the searches miss this table, and 99 % meet a slack and tail
    seen before), so the utilization is kept apart, on their steps (tail_share)."""
    log, q = math.log, TTFT_QUANTUM
    key = (
        round(log(offered) * q) if offered > 0.0 else None,
        round(log(slack_services) * q) if slack_services > 0.0 else None,
        round(log(budget) * q) if budget > 0.0 else None,
    )
    got = _ttft_cache.get(key)
    if got is None:
        k_offered, k_slack, k_budget = key
        if k_offered is None:
            got = 1  # split_servers' count for no load, whatever the tail
        else:
            shared = (k_slack, k_budget)
            share = _share_cache.get(shared)
            if share is None:
                share = tail_share(
                    0.0 if k_slack is None else math.exp(k_slack / q),
                    0.0 if k_budget is None else math.exp(k_budget / q),
                )
                memo.remember(_share_cache, shared, share, SHARE_KEPT)
            got = servers_at(math.exp(k_offered / q), share)
        memo.remember(_ttft_cache, key, got, TTFT_KEPT)
    return got


_GRID = 1048576.0  # 2^20: the bisection's points k / 2^20 (its hi - lo after 20 halvings)
_LAST = 1048575  # the highest k it reaches (it never tests u = 1)
_ANY = -1.0  # tail_share's answer for a tail of 1 or more: any utilization below 1 fits


def split_servers(offered: float, slack_services: float, tail: float) -> int:
    """Least n with u·exp(-(1 - u)·slack) <= tail at u = offered / n (slack in the wait tail's
    mean service times): n M/G/1 queues each fed 1/n of the load. The tail rises with u, so the
    largest u that fits, to 2^-20 (utilization), gives n = ceil(offered / u)."""
    if offered <= 0.0:
        return 1
    return servers_at(offered, tail_share(slack_services, tail))


def tail_share(slack_services: float, tail: float) -> float:
    """The utilization split_servers divides the load by: utilization's, 1e-6 where none fits, _ANY
    for a tail of 1 or more. A function of the slack and the tail alone (ttft_servers keeps it)."""
    if tail >= 1.0:
        return _ANY
    u = utilization(slack_services, tail)
    return u if u > 0.0 else 1e-6


def servers_at(offered: float, share: float) -> int:
    """split_servers' count for a load `offered` > 0 at tail_share's `share`."""
    if share == _ANY:
        return math.floor(offered) + 1
    return max(1, math.ceil(offered / share - 1e-9))


def utilization(slack_services: float, tail: float) -> float:
    """bisect_utilization's u, the largest k / 2^20 below 1 whose tail fits, found by Newton's
    method on the tail's log and then checked at that point and the next: ~7 exps where bisection
    works out 20 tails (the TTFT search misses on about half of a tick's sizings). Newton's
    answer only picks the point; the checks are bisection's own comparisons (_fits), so the u is
    bisection's wherever the computed tail rises with u (tests/test_tailsearch.py)."""
    s = slack_services
    if not (0.0 < tail < 1.0 and 0.0 <= s < 1e300):  # a tail that falls somewhere, or no number
        return bisect_utilization(s, tail)
    exp = math.exp
    # h(v) = v + (e^v - 1)·s - ln tail, v = ln u, rises and is convex: from v = 0, where h is
    # -ln tail > 0, Newton's steps fall to the root without passing it, and a step under 1e-6 leaves
    # v within ~1e-12 of it (the checks below move k by the rest)
    v, target = 0.0, math.log(tail)
    for _ in range(60):
        e = exp(v)
        step = (v + (e - 1.0) * s - target) / (1.0 + s * e)
        v -= step
        if step < 1e-6:
            break
    k = math.floor(exp(v) * _GRID)
    if k > _LAST:
        k = _LAST
    while k > 0 and not _fits(k / _GRID, s, tail):
        k -= 1
    while k < _LAST and _fits((k + 1) / _GRID, s, tail):
        k += 1
    return k / _GRID


def bisect_utilization(slack_services: float, tail: float) -> float:
    """The largest u = k / 2^20 below 1 with u·exp(-(1 - u)·slack) <= tail, by bisection over
    [0, 1] (0 where none does): split_servers' reference, and its path for a falling tail."""
    lo, hi = 0.0, 1.0
    for _ in range(20):  # hi - lo = 2^-k exactly after k halvings: 2^-20 is the first below 1e-6
        u = 0.5 * (lo + hi)
        if _fits(u, slack_services, tail):
            lo = u
        else:
            hi = u
    return lo


def _fits(u: float, slack_services: float, tail: float) -> bool:
    """Whether the wait tail u·exp(-(1 - u)·slack) at utilization u is within `tail`: the one
    comparison both searches make, so utilization's checks are bisection's own."""
    return u * math.exp(-(1.0 - u) * slack_services) <= tail


TPOT_QUANTUM = 16.0  # the TPOT tail's rate is cached on the mix and speed rounded to 1/16 in log (6 %)
TPOT_KEPT = 4096  # the TPOT tail's rates kept (memo.remember clears the table when it holds as many)
_tpot_cache: dict[tuple[object, ...], float] = {}


def tpot_rate(
    profile: ReplicaProfile,
    tpot_s: float,
    tail: float,
    p: float,
    o: float,
    speed: float,
    cv2: float = 1.0,
    outputs_cv2: float = 1.0,
    steps: OutputSteps | None = None,
) -> float:
    """The most requests/s one replica serves with at most `tail` of them over `tpot_s` (inf when
    no request can miss it by the prefill it shares its steps with), for p-token prompts of
    lengths' cv² `cv2` and o-token outputs of lengths' cv² `outputs_cv2` and decode steps `steps`
    (outputsteps.py; None: geometric) at `speed`; cached on (tail, p, o, speed, cv2, outputs_cv2)
    rounded to 1/16 in log scale (cv² 1 exactly) and the steps' own key (already rounded)."""
    key = (
        profile,
        tpot_s,
        round(math.log(tail) * TPOT_QUANTUM),
        round(math.log(p) * TPOT_QUANTUM),
        round(math.log(o) * TPOT_QUANTUM),
        round(math.log(speed) * TPOT_QUANTUM),
        round(math.log(cv2) * TPOT_QUANTUM),
        round(math.log(outputs_cv2) * TPOT_QUANTUM),
        None if steps is None else steps.key,
    )
    got = _tpot_cache.get(key)
    if got is None:
        tail_r, p_r, o_r, speed_r, cv2_r, out_r = (math.exp(k / TPOT_QUANTUM) for k in key[2:8])
        got = tpottail.rate(
            profile, tpot_s, min(tail_r, 1.0), p_r, max(o_r, 1.0), speed_r, cv2_r, out_r, steps
        )
        memo.remember(_tpot_cache, key, got, TPOT_KEPT)
    return got
