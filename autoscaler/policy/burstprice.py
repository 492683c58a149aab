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

The bisection and the expectation it reads are flathold.py's, Python in every build: the replay
bisects by a copy numba compiles from that source (replay/policies/holdkernel.py, installed with
use()), since the curve's key follows the mix and a replay misses the cache on most ticks, ~15 ms a
bisection interpreted. tests/test_burstprice.py holds the copy to the source's bits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

from autoscaler.policy import flathold, memo
from autoscaler.policy.latecurve import Curve

# The priced late share may be twice the SLO's tail, burstsize.BURST_BUDGET's, as the league measured
# it (at the tail itself one-gpu-8b's Azure code × 5.5 went over its goal C's GPU-hours: 23.4 where
# the clairvoyant's 21.0 allows 23.1; docs/policy-history.md, session 23)
BUDGET: Final = 2.0
_GRID: Final = 16.0  # the shape's grid in log k (burstsize's)
_K_MIN: Final = 1e-6
_K_MAX: Final = 1e6
# C / θ by grid point, a table per (curve key, budget, stretch): a tick's curve key is built anew,
# so compared with the last one read, not hashed with its floats at each point (memo.Tables)
_holds: Final[memo.Tables[float]] = memo.Tables(64)


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
    (us, ttfts), (vs, tpots) = curve[0], curve[1]
    return flathold.expected_at(k, x, us, ttfts, vs, tpots, stretch, *_lgammas(k, stretch))


def _lgammas(k: float, stretch: float) -> tuple[float, float, float, float]:
    """ln Γ of the four shapes flathold.expected_at reads Q at: k + 1 and k + 2 over the window,
    k·stretch + 1 and k·stretch + 2 over the decode (each sum as segments_at forms it, the same bits)."""
    s = k + 1.0
    t = k * stretch + 1.0
    return math.lgamma(s), math.lgamma(s + 1.0), math.lgamma(t), math.lgamma(t + 1.0)


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
    table = _holds.of(key, budget, stretch)
    below = _grid_x(table, curve, i, budget, stretch)
    above = _grid_x(table, curve, i + 1, budget, stretch)
    held = (below + (at - i) * (above - below)) * theta
    return held if held > rate else rate


def _grid_x(table: dict[int, float], curve: Curve, i: int, budget: float, stretch: float) -> float:
    x = table.get(i)
    if x is None:
        x = memo.remember(table, i, _hold_x(math.exp(i / _GRID), budget, curve, stretch), 8192)
    return x


def _hold_x(k: float, budget: float, curve: Curve, stretch: float) -> float:
    """C / θ at shape k (flathold.bisect, by the compiled copy where one is installed)."""
    (us, ttfts), (vs, tpots) = curve[0], curve[1]
    return _kernel(k, budget, us, ttfts, vs, tpots, stretch, *_lgammas(k, stretch))


BisectKernel = Callable[..., float]
_kernel: BisectKernel = flathold.bisect


def use(kernel: BisectKernel | None) -> None:
    """Bisect the hold with `kernel`, a compiled copy of flathold.bisect giving its bits (None:
    flathold.bisect)."""
    global _kernel
    _kernel = flathold.bisect if kernel is None else kernel
