"""The bursts' hold's arithmetic that numba compiles for the replay (replay/policies/holdkernel.py),
kept as Python in every build (autoscaler/compiledcore.py's PYTHON_ONLY: numba reads its functions'
bytecode, which a mypyc-compiled module has not): the regularized upper gamma at a given ln Γ
(lengths.upper_gamma's), the expected late share of a window under the hold's gamma and its
bisection (burstprice.py), and a late curve's TTFT share of a spell (latecurve.py).

Each keeps to what numba compiles to the same bits (tpottail.py): floats, the C library's exp, log,
erfc and sqrt, and ln Γ given (burstprice._lgammas: numba's lgamma is not CPython's).
tests/test_burstprice.py and tests/test_latecurve.py hold the compiled copies to these sources.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

_SQRT2: Final = math.sqrt(2.0)
# the spell's TTFT is the mean of its first passages by the times its requests arrive in it: the
# midpoint rule over this many points (the passage's chance is smooth in time, 0 at the spell's start)
_SPELL_POINTS: Final = 16


def upper_gamma_at(a: float, x: float, lgamma_a: float) -> float:
    """upper_gamma with ln Γ(a) given: a caller at one a and many x computes it once, and a numba
    copy (replay/policies/holdkernel.py) gets Python's bits, which its own lgamma does not give."""
    if x <= 0.0:
        return 1.0
    log_front = -x + a * math.log(x) - lgamma_a
    if x < a + 1.0:
        term = total = 1.0 / a
        ap = a
        for _ in range(500):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-10:
                break
        return max(0.0, 1.0 - total * math.exp(log_front))
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 500):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        step = d * c
        h *= step
        if abs(step - 1.0) < 1e-10:
            break
    return min(1.0, math.exp(log_front) * h)


def expected_at(
    k: float,
    x: float,
    us: Sequence[float],
    ttfts: Sequence[float],
    vs: Sequence[float],
    tpots: Sequence[float],
    stretch: float,
    ln_s: float,
    ln_s1: float,
    ln_t: float,
    ln_t1: float,
) -> float:
    """_expected on the curve's four point lists, the shapes' ln Γ given (_lgammas)."""
    return segments_at(k + 1.0, x, us, ttfts, ln_s, ln_s1) + segments_at(
        k * stretch + 1.0, x * stretch, vs, tpots, ln_t, ln_t1
    )


def segments_at(
    s: float, x: float, us: Sequence[float], shares: Sequence[float], ln_s: float, ln_s1: float
) -> float:
    """E[share(Λ / C)] at shape s (k + 1) and C / θ = x: closed per linear segment."""
    total = 0.0
    y0 = x * us[0]
    q0 = upper_gamma_at(s, y0, ln_s)
    q1 = upper_gamma_at(s + 1.0, y0, ln_s1)
    for j in range(1, len(us)):
        y1 = x * us[j]
        r0 = upper_gamma_at(s, y1, ln_s)
        r1 = upper_gamma_at(s + 1.0, y1, ln_s1)
        slope = (shares[j] - shares[j - 1]) / (us[j] - us[j - 1])
        at0 = shares[j - 1] - slope * us[j - 1]  # share = at0 + slope·u = at0 + (slope / x)·y
        total += at0 * (q0 - r0) + slope / x * s * (q1 - r1)
        q0, q1 = r0, r1
    return total + shares[-1] * q0  # past the last point: its share (1)


def bisect(
    k: float,
    budget: float,
    us: Sequence[float],
    ttfts: Sequence[float],
    vs: Sequence[float],
    tpots: Sequence[float],
    stretch: float,
    ln_s: float,
    ln_s1: float,
    ln_t: float,
    ln_t1: float,
) -> float:
    """C / θ at shape k: the expected late share falls as C rises, bisected in log to 1e-4."""
    lo, hi = 1e-3, k + 10.0
    while expected_at(k, hi, us, ttfts, vs, tpots, stretch, ln_s, ln_s1, ln_t, ln_t1) > budget:
        lo, hi = hi, hi * 2.0
        if hi > 1e9:
            return hi
    while expected_at(k, lo, us, ttfts, vs, tpots, stretch, ln_s, ln_s1, ln_t, ln_t1) <= budget and lo > 1e-9:
        hi, lo = lo, lo * 0.5
    for _ in range(60):
        if hi / lo < 1.0001:
            break
        mid = math.sqrt(lo * hi)
        if expected_at(k, mid, us, ttfts, vs, tpots, stretch, ln_s, ln_s1, ln_t, ln_t1) <= budget:
            hi = mid
        else:
            lo = mid
    return hi


def spell_wait(v: float, service: float, service_cv2: float, slack: float, spell_s: float) -> float:
    """The share of a spell's requests whose wait passes `slack`, the spell `spell_s` seconds at
    prefill utilization v from an empty queue: a request t into it waits the queue's reflected
    Brownian motion at t, which from empty is distributed as the free one's maximum over t
    (window_wait at t), so the share is its mean over the spell's arrivals (uniform in t). Over a
    spell long against the queue's relaxation below v = 1 it is Kingman's decay, above v = 1 all
    but the first slack / (v - 1) seconds' requests; a spell no longer than the TTFT target is
    absorbed as session 23's window was (its mean over the window, not its end)."""
    if slack <= 0.0:
        return 1.0
    if v <= 0.0:
        return 0.0
    n = _SPELL_POINTS
    step = spell_s / n
    total = 0.0
    for i in range(n):
        total += window_wait(v, service, service_cv2, slack, (i + 0.5) * step)
    return total / n


def window_wait(v: float, service: float, service_cv2: float, slack: float, window_s: float) -> float:
    """The chance that the prefill queue's wait passes `slack` within a window of `window_s` at
    prefill utilization v (any, 1 and over too): the work the prompts bring, less the time served,
    as a Brownian motion of drift v - 1 and variance v·service·(1 + cs²) a second (Poisson
    arrivals of prefill times of mean `service` and squared cv cs²), its maximum over the window
    past the slack (the first passage's closed form). Over a long window below v = 1 it is the
    exponential decay exp(-2(1 - v)·slack / (v·service·(1 + cs²))), Kingman's, which capacity's
    TTFT tail sizes at; over the TTFT target itself a window above the prefill's rate builds a
    queue of only (v - 1)·W: the headroom absorbs it within the target."""
    if slack <= 0.0:
        return 1.0
    if v <= 0.0:
        return 0.0
    mu = v - 1.0
    var = v * service * (1.0 + service_cv2)
    spread = math.sqrt(var * window_s)
    first = 0.5 * math.erfc((slack - mu * window_s) / spread / _SQRT2)
    z = (slack + mu * window_s) / spread
    # exp(2·mu·slack / var)·Q(z), in logs where Q underflows (its exponent is then below 0)
    lift = 2.0 * mu * slack / var
    tail = 0.5 * math.erfc(z / _SQRT2)
    if tail > 1e-300:
        second = math.exp(lift + math.log(tail)) if lift + math.log(tail) < 0.0 else 1.0
    else:
        second = math.exp(lift - 0.5 * z * z - math.log(z * math.sqrt(2.0 * math.pi)))
    got = first + second
    return got if got < 1.0 else 1.0
