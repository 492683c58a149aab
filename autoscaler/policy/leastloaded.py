"""The TTFT wait tail under a least-loaded router: capacity.size's count when the router sends each
request to the replica with the fewest requests in flight (capacityspec.Router.LEAST_REQUESTS).

capacity.py's tail is one M/G/1 prefill queue per replica fed λ/n at random: a request waits
whenever its replica is prefilling, with probability u = λ·E[S]/n, which falls only as 1/n. A
least-loaded router rarely sends a prompt to a replica that is prefilling, in two ways, and the
wait tail is the per-replica one times the smaller of their factors (each at most 1):

- few_held, where replicas hold about one request (long prompts, short outputs: Mooncake): it
  sends the prompt to a replica with nothing in flight unless every replica holds a request, and
  only a replica that holds one can be prefilling: P(all n hold one) / P(one holds one at random)
  = P(Poisson(L) >= n) / (1 - exp(-L/n)), L the requests in flight (Little's law over a prefill
  and its o decode steps), spread as the arrivals' counts where they come in bursts (a gamma of
  L·I variance, I their index of dispersion: with the Poisson count alone Azure code's bursts
  found too few replicas);
- pooled, where replicas hold many (chat, code, long prompts with hundreds of tokens out): the
  counts are level, and a replica that has just taken a prompt is one above the replicas it was
  tied with, so it is not picked again until its own request finishes (few do during a prefill:
  a prefill is one to a few steps) or the fleet's arrivals outrun its departures by as many as
  were tied with it, which takes longer the more replicas there are.

docs/policy.md ("How accurate the capacity model is") and tests/replay/test_pooled_wait_vs_replay.py
check them against the replay. Pure arithmetic on floats.
"""

from __future__ import annotations

import math

from autoscaler.policy import lengths, memo

NORMAL_SHAPE = 1000.0  # a count in flight of more clumps than this is read as a normal
_QUANTUM = 256.0  # cached on the inputs rounded to 1/256 in log scale (0.4 %), as tailsearch's TTFT search
_cache: dict[tuple[tuple[int | None, ...], int], int] = {}  # cleared when it reaches 8192
_ERFC_EDGE = 6.0  # the tied replicas past this many standard deviations of the walk add < 2e-9 each


def servers(
    offered: float,
    slack_services: float,
    tail: float,
    decoding: float,
    rho: float,
    index: float,
    most: int,
    cs2: float = 1.0,
    departing: float = 0.0,
    residual: float = 0.0,
) -> int:
    """The least n (at most `most`, the random router's count, where the factor's 1 already fits)
    whose wait tail (wait_tail) at the slack (in the tail's mean service times, as capacity's) is at
    most `tail`; `offered` = λ·E[S], `decoding` = λ·o·base, `rho` = λ·w (capacity.size's terms),
    `index` the arrivals' index of dispersion (1: Poisson), `cs2` the prefill times' squared
    coefficient of variation, `departing` = λ·base·k (pooled's own departures) and `residual` the
    share of a prefill's residual past the slack (the light-traffic tail, lengths.residual_share).
    The tail falls with n, so n is bisected; cached on the inputs rounded to 1/256 in log scale."""
    log, q = math.log, _QUANTUM
    inputs = (offered, slack_services, tail, decoding, rho, index, cs2, departing, residual)
    steps = tuple(round(log(v) * q) if v > 0.0 else None for v in inputs)
    key = (steps, most)
    got = _cache.get(key)
    if got is None:
        rounded = [0.0 if k is None else math.exp(k / q) for k in steps]
        o, s, t, d, r, i, c, g, x = rounded
        got = _bisect(o, s, t, d, r, i, c, g, most, x)
        memo.remember(_cache, key, got, 8192)
    return got


def _bisect(
    offered: float,
    slack: float,
    tail: float,
    decoding: float,
    rho: float,
    index: float,
    cs2: float,
    departing: float,
    most: int,
    residual: float = 0.0,
) -> int:
    lo = math.floor(offered)  # u >= 1 there: never fits
    hi = most
    if offered <= 0.0:
        return hi
    # one replica's backlog behind a hold (held_share) can ask for two, which fit: the share at two
    # is below the random router's at one
    held_one = hi == 1 and residual > 0.0
    if held_one and wait_tail(1, offered, slack, decoding, rho, index, cs2, departing, residual) > tail:
        hi = 2
    if hi <= lo + 1:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid > 0 and wait_tail(mid, offered, slack, decoding, rho, index, cs2, departing, residual) <= tail:
            hi = mid
        else:
            lo = mid
    return hi


def wait_tail(
    n: int,
    offered: float,
    slack: float,
    decoding: float,
    rho: float,
    index: float = 1.0,
    cs2: float = 1.0,
    departing: float = 0.0,
    residual: float = 0.0,
) -> float:
    """The share of requests that wait past `slack` at n replicas under a least-loaded router: the
    per-replica tail u·exp(-(1 - u)·slack) times the smaller of two factors, each the share of its
    prefill during which a prefilling replica can still be picked: few_held (every replica holds a
    request) and pooled (the one it took its prompt with has been cancelled); or at light load,
    where larger, the waits behind one long prefill (held_share)."""
    u = offered / n
    if u >= 1.0:
        return 1.0
    per_replica = u * math.exp(-(1.0 - u) * slack)
    if index < 1.0:
        index = 1.0
    factor = pooled(n, offered, rho, index, cs2, departing)
    few = 1.0
    if n > rho:
        few = few_held(n, offered, decoding, rho, index)
        if few < factor:
            factor = few
    queued = factor * per_replica
    held = held_share(n, u, residual, few)
    return held if held > queued else queued


def held_share(n: int, u: float, residual: float, few: float = 1.0) -> float:
    """The share of requests that wait past the slack behind one long prefill (a hold), u the
    prefill utilization a replica and `residual` the share of a prefill past the slack
    (E[(S - slack)+] / E[S]): u·residual / (n - u), times few_held's factor. At one replica every
    arrival meets the hold, and the ones after it queue behind the backlog it left, which drains
    at 1 - u: u·residual / (1 - u) (an arrival x into a hold of S waits S - (1 - u)·x). From two
    replicas on the router sends the held replica only what keeps it level with the others, whose
    counts rise by λ/n a second among n while it serves none: λ/n² of the arrivals, u·residual / n
    of them late (the held replica's own backlog, u/n, in the denominator); and where replicas hold
    about one request (Mooncake), only while every replica holds one (`few`, few_held's factor: 1
    where they hold many). Against the replay's static fleets, tests/replay/test_held_wait_vs_replay.py."""
    if residual <= 0.0:
        return 0.0
    return few * u * residual / (n - u)


def few_held(n: int, offered: float, decoding: float, rho: float, index: float) -> float:
    """P(every replica holds a request) / P(a replica holds one, split at random), at most 1:
    L = offered + decoding / (1 - rho/n) in flight (each request's prefill, then its decode steps
    of the mean step base / (1 - ρ/n)). Arrivals of index of dispersion I > 1 spread the count in
    flight as much: a gamma of its mean and I times its variance, P(X >= n) = 1 - Q(n/I, L/I), in
    place of the Poisson's (I = 1: the same)."""
    inflight = offered + decoding / (1.0 - rho / n)
    held = -math.expm1(-inflight / n)  # one replica holds a request, split at random
    shape = inflight / index
    if shape > NORMAL_SHAPE:  # the gamma's own series converges too slowly there: its normal limit
        every = 0.5 * math.erfc((n - inflight) / math.sqrt(2.0 * inflight * index))
    else:
        every = 1.0 - lengths.upper_gamma(n / index, shape)  # all n hold one
    if held <= 0.0 or every >= held:
        return 1.0
    return every / held


def departing(lam: float, base: float, p: float, budget: int | None) -> float:
    """pooled's `departing`, λ·base·k: a prefill of p tokens spans k = p / budget steps of the token
    budget (at least one; one without a budget), and each step finishes B/o of a replica's decodes."""
    steps = p / budget if budget is not None and p > budget else 1.0
    return lam * base * steps


def pooled(n: int, offered: float, rho: float, index: float, cs2: float, departing: float) -> float:
    """The share of its prefill during which a replica that took a prompt can be picked again, where
    replicas hold many requests: their counts are level (each within one of the others), and taking
    the prompt put it one above the g others that were tied with it at the fewest. It is the router's
    pick again once that is undone: by a request of its own finishing (its decodes finish B/o a step,
    k steps a prefill of p tokens in chunks of the token budget: k = p / budget, at least 1; so
    `departing` = λ·base·k, B = λ·o·base / (n - ρ)), or by the fleet's arrivals outrunning its
    departures by g (a walk of +1 an arrival, -1 a departure, both at λ in the steady state, of
    variance (1 + I)·λ·A over a time A; by the reflection principle it has reached g by then with
    probability erfc(g / √(2·(1 + I)·λ·A))). g is the count in flight modulo n, read as uniform on
    0..n-1 (n = 1: the single queue, factor 1). A is the age of the prefill an arrival would meet,
    E[S]·(1 + cs²)/2, the mean residual of a service (at the mean age the concave chance is at most
    its mean: the factor errs high, the count with it). The waits keep the single replica's decay,
    also on the safe side: a replica two prompts deep is two above the level, picked still less.
    On 4,000-token prompts at 0.9 req/s a replica (u 0.27) it is 0.67 / 0.43 / 0.29 / 0.17 at n = 2
    / 4 / 8 / 21, and the tail stays above the replay's waits at every n from 2 while falling with
    them (tests/replay/test_pooled_wait_vs_replay.py; docs/policy.md, "How accurate the capacity
    model is")."""
    if n <= 1:
        return 1.0
    age = 0.5 * (1.0 + cs2)  # in mean prefills
    walk = 2.0 * (1.0 + index) * offered * age  # 2σ² of the walk over that age, in requests²
    hit = 1.0  # g = 0: tied with none, already level
    if walk > 0.0:
        scale = 1.0 / math.sqrt(walk)
        last = n - 1
        edge = _ERFC_EDGE * math.sqrt(0.5 * walk)
        if edge < last:
            last = int(edge) + 1
        erfc = math.erfc
        for g in range(1, last + 1):
            hit += erfc(g * scale)
    reached = hit / n
    own = departing / (n - rho) * age if n > rho else 0.0  # its own requests finishing, over A
    return 1.0 - (1.0 - reached) * math.exp(-own)
