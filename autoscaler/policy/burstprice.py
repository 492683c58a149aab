"""The bursts' hold priced by the capacity model's own late share of a window above C, per engine.

burstsize.hold_rate prices a window of rate Λ over the TTFT target above the rate C the fleet
serves at the SLO as a wall: 1 - C / Λ of its requests late, at twice the SLO's tail because "the
fleet serves a window a little above C mostly in time". How far above, and how late, is the
capacity model's own answer, and it differs by engine: latecurve.curve, the late share of a window
at u = Λ / C. The hold is the least C whose expected late share under the hold's size-biased gamma
(burstsize.py: shape k + 1, scale θ) is at most the budget; the curve is linear between its points,
1 past the last, so the expectation is closed per segment (Q of shapes k + 1 and k + 2 at its ends)
and C / θ depends on k and the curve alone: bisected in log on burstsize's grid of k (1/16 apart in
log) and interpolated, cached by the curve's key. docs/policy.md ("Defaults and why", burst hold).

Pure Python, as the policy core is; the replay bisects by a copy numba compiles from this source
(replay/policies/holdkernel.py, installed with use()): the curve's key follows the mix, so a replay
misses the cache on most ticks, ~15 ms a bisection interpreted. So _bisect and its callees keep to
what numba compiles to the same bits (tpottail.py): floats, the C library's exp and log, and ln Γ
given (_lgammas: numba's lgamma is not CPython's). tests/test_burstprice.py holds the copy to them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Final

from autoscaler.policy import memo
from autoscaler.policy.latecurve import Curve
from autoscaler.policy.lengths import upper_gamma_at

# The priced late share may be twice the SLO's tail, burstsize.BURST_BUDGET's, as the league measured
# it (at the tail itself one-gpu-8b's Azure code × 5.5 went over its goal C's GPU-hours: 23.4 where
# the clairvoyant's 21.0 allows 23.1; docs/policy-history.md, session 23)
BUDGET: Final = 2.0
_GRID: Final = 16.0  # the shape's grid in log k (burstsize's)
_K_MIN: Final = 1e-6
_K_MAX: Final = 1e6
_holds: Final[dict[tuple[object, ...], float]] = {}  # C / θ by (curve key, grid point, budget)


def expected_late(c: float, rate: float, theta: float, curve: Curve, window_s: float) -> float:
    """The share of requests late when the fleet serves c at the SLO: rates over `window_s` gamma
    of mean `rate` and scale `theta`, seen size-biased (shape k + 1), each persisting over the
    curve's spell (latecurve.persistence); a window at u = Λ / c late by the TTFT tail's points, and by the
    TPOT tail's at the rate over the decode's time where it is longer than the spell (the same
    mixture, its excess variance spread over the decode's spells: scale θ·S / D)."""
    return _expected(rate / theta, c / theta, curve, _stretch(curve, window_s))


def _stretch(curve: Curve, window_s: float) -> float:
    """The decode's time over the spell its rate persists (the window's where longer), at least 1."""
    decode_s = curve[2]
    spell = curve[3] if curve[3] > window_s else window_s
    return decode_s / spell if decode_s > spell else 1.0


def _expected(k: float, x: float, curve: Curve, stretch: float) -> float:
    """expected_late at shape k + 1 (rates over θ), C / θ = x and the decode `stretch` times the
    window: the TTFT tail over the window, the TPOT tail over the decode (shape k·stretch + 1)."""
    (us, ttfts), (vs, tpots), _, _ = curve
    return _expected_at(k, x, us, ttfts, vs, tpots, stretch, *_lgammas(k, stretch))


def _lgammas(k: float, stretch: float) -> tuple[float, float, float, float]:
    """ln Γ of the four shapes _expected_at reads Q at: k + 1 and k + 2 over the window, k·stretch + 1
    and k·stretch + 2 over the decode (each sum as _segments_at forms it, for the same bits)."""
    s = k + 1.0
    t = k * stretch + 1.0
    return math.lgamma(s), math.lgamma(s + 1.0), math.lgamma(t), math.lgamma(t + 1.0)


def _expected_at(
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
    return _segments_at(k + 1.0, x, us, ttfts, ln_s, ln_s1) + _segments_at(
        k * stretch + 1.0, x * stretch, vs, tpots, ln_t, ln_t1
    )


def _segments_at(
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


def hold_rate(
    rate: float,
    spread: float,
    window_s: float,
    budget: float,
    key: tuple[object, ...],
    curve: Curve,
) -> float:
    """The least rate C whose expected late share (expected_late) is at most `budget`, for arrivals
    of mean `rate` and index of dispersion `spread` over `window_s`; `rate` itself when Poisson."""
    if not rate > 0.0:
        return 0.0
    if not (spread > 1.0 and budget > 0.0 and window_s > 0.0):
        return rate
    theta = (spread - 1.0) / window_s
    k = rate / theta
    if not k < _K_MAX:
        return rate
    at = math.log(k if k > _K_MIN else _K_MIN) * _GRID
    i = math.floor(at)
    stretch = _stretch(curve, window_s)
    below = _grid_x(key, curve, i, budget, stretch)
    above = _grid_x(key, curve, i + 1, budget, stretch)
    held = (below + (at - i) * (above - below)) * theta
    return held if held > rate else rate


def _grid_x(key: tuple[object, ...], curve: Curve, i: int, budget: float, stretch: float) -> float:
    full = (key, i, budget, stretch)
    x = _holds.get(full)
    if x is None:
        x = memo.remember(_holds, full, _hold_x(math.exp(i / _GRID), budget, curve, stretch), 8192)
    return x


def _hold_x(k: float, budget: float, curve: Curve, stretch: float) -> float:
    """C / θ at shape k (_bisect, by the compiled copy where one is installed)."""
    (us, ttfts), (vs, tpots), _, _ = curve
    return _kernel(k, budget, us, ttfts, vs, tpots, stretch, *_lgammas(k, stretch))


def _bisect(
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
    while _expected_at(k, hi, us, ttfts, vs, tpots, stretch, ln_s, ln_s1, ln_t, ln_t1) > budget:
        lo, hi = hi, hi * 2.0
        if hi > 1e9:
            return hi
    while (
        _expected_at(k, lo, us, ttfts, vs, tpots, stretch, ln_s, ln_s1, ln_t, ln_t1) <= budget and lo > 1e-9
    ):
        hi, lo = lo, lo * 0.5
    for _ in range(60):
        if hi / lo < 1.0001:
            break
        mid = math.sqrt(lo * hi)
        if _expected_at(k, mid, us, ttfts, vs, tpots, stretch, ln_s, ln_s1, ln_t, ln_t1) <= budget:
            hi = mid
        else:
            lo = mid
    return hi


BisectKernel = Callable[..., float]
_kernel: BisectKernel = _bisect


def use(kernel: BisectKernel | None) -> None:
    """Bisect the hold with `kernel`, a compiled copy of _bisect giving its bits (None: _bisect)."""
    global _kernel
    _kernel = _bisect if kernel is None else kernel
