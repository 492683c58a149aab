"""The TTFT wait tail of one replica's prefill queue from its prefill times' own residual, where the
engines publish the prompt lengths (lengths.py): capacity.size's tail for gamma prompt lengths.

capacity.py's tail without the lengths is u·exp(-(1 - u)·t / E[R]), R the residual of the prefill
in progress (E[R] = E[S]·(1 + cs²) / 2): exact for M/M/1, and for any M/G/1 in heavy traffic. At
the light loads a TTFT target keeps replicas at, the wait is mostly one residual, and its tail is
the residual's own, which the exponential misses twice: its E[S] charges the attention at the mean
prompt's square, not the prompts' second moment, and its shape is not the residual's. A few
30,000-token prompts among 700-token ones (ServeGen's DeepSeek-R1, cv² 10) have P(R > 1.9 s) =
0.095 (gamma lengths; the trace's own 0.16) where capacity.py's exponential says 0.017, while
4,000-token prompts of cv² 0.5 have a residual lighter than the exponential's. So the M/G/1 wait is taken as
Beneš's series, P(W > t) = Σ_k (1 - u)·u^k·P(R_1 + … + R_k > t), with its first term exact,

    P(R > t) = E[(S - t)⁺] / E[S],   S = α'·x + β·x², x gamma of mean p and the lengths' cv²,

from the gamma's partial moments, and the rest (k >= 2, given k >= 2) as one gamma of the compound
sum's mean and variance (within 2 % of the whole series, k to 400, at u 0.07-0.8). Against
simulated M/G/1 queues (Lindley's recursion, 400,000 requests) it gives P(W > the mean request's
slack) within 5 % (4,000-token prompts of cv² 0.5 at u 0.30 / 0.48: 0.90 / 3.39 % against
0.86 / 3.35 %; 700-token prompts of cv² 9.9 at u 0.08 / 0.17: 0.87 / 2.03 % against 0.84 /
2.03 %; docs/policy.md, "How accurate the capacity model is").

Times are in units of E[S], the mean prefill: a prompt of y·p tokens takes s(y) = (y + r·y²) / c
of it, r = β·p / α' (the attention's share against the rest at the mean prompt) and
c = 1 + r·(1 + cv²) (E[y²] = 1 + cv²), so E[s] = 1. Pure arithmetic on floats.
"""

from __future__ import annotations

import math
from typing import Final

from autoscaler.policy import lengths, memo

QUANTUM: Final = 256.0  # the search is cached on its inputs rounded to 1/256 in log scale (0.4 %)
KEPT: Final = 8192  # the searches kept (memo.remember clears the table when it holds as many)
_cache: dict[tuple[int | None, ...], int] = {}


def mean_factor(r: float, cv2: float) -> float:
    """E[S] over the mean prompt's own prefill (α'·p + β·p²): the attention over the prompts'
    second moment, not the mean's square."""
    return (1.0 + r * (1.0 + cv2)) / (1.0 + r)


def service_cv2(r: float, cv2: float) -> float:
    """The prefill times' squared coefficient of variation: E[s²] - 1."""
    m2, m3, m4 = _y_moments(cv2)
    c = 1.0 + r * m2
    return (m2 + 2.0 * r * m3 + r * r * m4) / (c * c) - 1.0


def residual_survival(tau: float, r: float, cv2: float) -> float:
    """P(R > tau), R the residual of s (tau in mean prefills): E[(s - tau)⁺] as E[s] = 1."""
    if tau <= 0.0:
        return 1.0
    y = _longest(tau, r, cv2)
    k = 1.0 / cv2
    z = y * k  # y over the gamma's scale cv2 (its mean is 1)
    q = lengths.upper_gamma
    longer = q(k, z)
    beyond = (q(k + 1.0, z) - y * longer) + r * ((1.0 + cv2) * q(k + 2.0, z) - y * y * longer)
    got = beyond / (1.0 + r * (1.0 + cv2))
    return 0.0 if got < 0.0 else got


def residual_excess(tau: float, r: float, cv2: float) -> float:
    """E[(R - tau)⁺] = ∫_tau^∞ P(R > x) dx = E[((s - tau)⁺)²] / 2 (E[s] = 1), from the gamma's
    partial moments: s² = (y² + 2r·y³ + r²·y⁴) / c² over y above the least y whose prefill passes tau."""
    if tau < 0.0:
        tau = 0.0
    c = 1.0 + r * (1.0 + cv2)
    y = _longest(tau, r, cv2)
    k = 1.0 / cv2
    z = y * k
    q = lengths.upper_gamma
    m2, m3, m4 = _y_moments(cv2)
    p0, p1, p2 = q(k, z), q(k + 1.0, z), m2 * q(k + 2.0, z)
    p3, p4 = m3 * q(k + 3.0, z), m4 * q(k + 4.0, z)
    square = (p2 + 2.0 * r * p3 + r * r * p4) / (c * c)
    first = (p1 + r * p2) / c
    got = 0.5 * (square - 2.0 * tau * first + tau * tau * p0)
    return 0.0 if got < 0.0 else got


def wait_tail(u: float, tau: float, r: float, cv2: float, thin: float = 1.0, step: float = 0.0) -> float:
    """P(W > tau) of an M/G/1 prefill queue at utilization u (tau in mean prefills): the first
    residual exact, two or more as one gamma of their compound sum's mean and variance.
    Beneš's series Σ_k (1 - u)·u^k·P(R_1 + … + R_k > tau) counts k prompts ahead, each one an
    arrival that found the replica busy; `thin` (at most 1) is the share of those a router still
    sends there (leastloaded.py's factor), so the k-th term is (1 - u)·(u·thin)^k.

    `step`: a step's token budget in mean prefills (budget / p, the attention token-weighted as
    E[S]'s). The series is the tail of the work V ahead of an arrival (the M/G/1's virtual wait);
    the engine admits a prompt at the first step whose budget the tokens ahead leave room in, so
    it waits V less the part of the work ahead that the admitting step takes with it, D in
    [0, step): read as uniform (and below V), P(W > tau) = (1/b)·∫_0^b P(V > tau + θ) dθ with
    b = min(step, tau), each term's tail averaged over the shift in closed form."""
    if u >= 1.0:
        return 1.0
    if u <= 0.0:
        return 0.0
    v = u * thin
    m2, m3, m4 = _y_moments(cv2)
    m5 = m4 * (1.0 + 4.0 * cv2)
    m6 = m5 * (1.0 + 5.0 * cv2)
    c = 1.0 + r * m2
    s2 = (m2 + 2.0 * r * m3 + r * r * m4) / (c * c)
    s3 = (m3 + 3.0 * r * m4 + 3.0 * r * r * m5 + r * r * r * m6) / (c * c * c)
    mean = 0.5 * s2  # E[R] = E[S²] / 2E[S]
    var = s3 / 3.0 - mean * mean  # E[R²] = E[S³] / 3E[S]
    more = 2.0 + v / (1.0 - v)  # E[K | K >= 2], K geometric of v
    spread = v / ((1.0 - v) * (1.0 - v))  # Var[K | K >= 2]
    sum_mean = more * mean
    sum_var = more * var + spread * mean * mean
    scale = sum_var / sum_mean
    shape = sum_mean / scale
    b = step if step < tau else tau
    q = lengths.upper_gamma
    if b <= 1e-9:
        one = residual_survival(tau, r, cv2)
        two_or_more = q(shape, tau / scale)
    else:  # ∫_x^∞ Q(a, y) dy = a·Q(a + 1, x) - x·Q(a, x): the gamma's partial mean past x
        one = (residual_excess(tau, r, cv2) - residual_excess(tau + b, r, cv2)) / b
        z1, z2 = tau / scale, (tau + b) / scale
        past1 = shape * q(shape + 1.0, z1) - z1 * q(shape, z1)
        past2 = shape * q(shape + 1.0, z2) - z2 * q(shape, z2)
        two_or_more = scale * (past1 - past2) / b
    return (1.0 - u) * v * (one + v / (1.0 - v) * two_or_more)


def servers(offered: float, tau: float, budget: float, r: float, cv2: float, step: float = 0.0) -> int:
    """The least n whose replicas' tail at u = offered / n is at most `budget` (offered = λ·E[S];
    `step` the token budget in mean prefills, as wait_tail's), cached on the inputs rounded to
    1/256 in log scale; the tail rises with u, so the largest u that fits is bisected (to 2^-20)
    and n = ceil(offered / u)."""
    log, q = math.log, QUANTUM
    values = (offered, tau, budget, r, cv2, step)
    key = tuple(round(log(v) * q) if v > 0.0 else None for v in values)
    got = _cache.get(key)
    if got is None:
        rounded = [0.0 if k is None else math.exp(k / q) for k in key]
        got = _search(rounded[0], rounded[1], rounded[2], rounded[3], rounded[4], rounded[5])
        memo.remember(_cache, key, got, KEPT)
    return got


def _search(offered: float, tau: float, budget: float, r: float, cv2: float, step: float) -> int:
    if offered <= 0.0:
        return 1
    if budget >= 1.0:
        return math.floor(offered) + 1  # any utilization below 1 fits
    c = lengths.clip_cv2(cv2)
    lo, hi = 0.0, 1.0
    for _ in range(20):
        u = 0.5 * (lo + hi)
        if wait_tail(u, tau, r, c, 1.0, step) <= budget:
            lo = u
        else:
            hi = u
    if lo <= 0.0:
        lo = 1e-6
    return max(1, math.ceil(offered / lo - 1e-9))


def _longest(tau: float, r: float, cv2: float) -> float:
    """The least y (in mean prompts) whose prefill s(y) = (y + r·y²) / c passes tau."""
    c = 1.0 + r * (1.0 + cv2)
    return (math.sqrt(1.0 + 4.0 * r * tau * c) - 1.0) / (2.0 * r) if r > 0.0 else tau * c


def _y_moments(cv2: float) -> tuple[float, float, float]:
    """E[y²], E[y³], E[y⁴] of gamma lengths of mean 1 and squared coefficient of variation cv2."""
    m2 = 1.0 + cv2
    m3 = m2 * (1.0 + 2.0 * cv2)
    return m2, m3, m3 * (1.0 + 3.0 * cv2)
