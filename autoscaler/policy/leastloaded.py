"""The TTFT wait tail under a least-loaded router: capacity.size's count when the router sends each
request to the replica with the fewest requests in flight (capacityspec.Router.LEAST_REQUESTS).

capacity.py's tail is one M/G/1 prefill queue per replica fed λ/n at random: a request waits
whenever its replica is prefilling, with probability u = λ·E[S]/n, which falls only as 1/n. A
least-loaded router sends it to a replica with nothing in flight unless every replica holds a
request, and only a replica that holds one can be prefilling. So the wait tail is the per-replica
one times

    P(all n replicas hold a request) / P(a replica holds one under a random split)
      = P(Poisson(L) >= n) / (1 - exp(-L/n)),   at most 1,

L the requests in flight: Little's law over a request's prefill and its o decode steps, Poisson as
in an M/G/∞ (the fleet is not saturated where the factor matters), spread as the arrivals' counts
are where they come in bursts (a gamma of L·I variance, I their index of dispersion: with the
Poisson count alone Azure code's bursts found too few replicas). Where replicas hold many
requests each (chat, code: tens in flight a replica) the factor is 1 and the tail is capacity.py's;
where they hold about one (long prompts, short outputs: Mooncake) the tail falls as fast as the
Poisson count's upper tail, as the replay's does (docs/policy.md, "How accurate the capacity model
is"). Pure arithmetic on floats.
"""

from __future__ import annotations

import math

from autoscaler.policy import lengths, memo

NORMAL_SHAPE = 1000.0  # a count in flight of more clumps than this is read as a normal
_QUANTUM = 256.0  # cached on the inputs rounded to 1/256 in log scale (0.4 %), as tailsearch's TTFT search
_cache: dict[tuple[tuple[int | None, ...], int], int] = {}  # cleared when it reaches 8192


def servers(
    offered: float, slack_services: float, tail: float, decoding: float, rho: float, index: float, most: int
) -> int:
    """The least n (at most `most`, the random router's count, where the factor's 1 already fits)
    whose wait tail (wait_tail) at the slack (in the tail's mean service times, as capacity's) is at
    most `tail`; `offered` = λ·E[S], `decoding` = λ·o·base, `rho` = λ·w (capacity.size's terms),
    `index` the arrivals' index of dispersion (1: Poisson).
    The tail falls with n, so n is bisected; cached on the inputs rounded to 1/256 in log scale."""
    log, q = math.log, _QUANTUM
    inputs = (offered, slack_services, tail, decoding, rho, index)
    steps = tuple(round(log(v) * q) if v > 0.0 else None for v in inputs)
    key = (steps, most)
    got = _cache.get(key)
    if got is None:
        rounded = [0.0 if k is None else math.exp(k / q) for k in steps]
        got = _bisect(rounded[0], rounded[1], rounded[2], rounded[3], rounded[4], rounded[5], most)
        memo.remember(_cache, key, got, 8192)
    return got


def _bisect(
    offered: float, slack: float, tail: float, decoding: float, rho: float, index: float, most: int
) -> int:
    lo = math.floor(offered)  # u >= 1 there: never fits
    hi = most
    if offered <= 0.0 or hi <= lo + 1:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid > 0 and wait_tail(mid, offered, slack, decoding, rho, index) <= tail:
            hi = mid
        else:
            lo = mid
    return hi


def wait_tail(n: int, offered: float, slack: float, decoding: float, rho: float, index: float = 1.0) -> float:
    """The share of requests that wait past `slack` at n replicas under a least-loaded router: the
    per-replica tail u·exp(-(1 - u)·slack) times P(Poisson(L) >= n) / (1 - exp(-L/n)), at most 1,
    L = offered + decoding / (1 - rho/n) in flight (each request's prefill, then its decode steps
    of the mean step base / (1 - ρ/n)). Arrivals of index of dispersion I > 1 spread the count in
    flight as much: a gamma of its mean and I times its variance, P(X >= n) = 1 - Q(n/I, L/I), in
    place of the Poisson's (I = 1: the same)."""
    u = offered / n
    if u >= 1.0:
        return 1.0
    per_replica = u * math.exp(-(1.0 - u) * slack)
    if n <= rho:  # the decodes alone fill the replicas: the random split's tail
        return per_replica
    inflight = offered + decoding / (1.0 - rho / n)
    held = -math.expm1(-inflight / n)  # one replica holds a request, split at random
    if index < 1.0:
        index = 1.0
    shape = inflight / index
    if shape > NORMAL_SHAPE:  # the gamma's own series converges too slowly there: its normal limit
        every = 0.5 * math.erfc((n - inflight) / math.sqrt(2.0 * inflight * index))
    else:
        every = 1.0 - lengths.upper_gamma(n / index, shape)  # all n hold one
    if held <= 0.0 or every >= held:
        return per_replica
    return every / held * per_replica
