"""The demand the count is sized at: the least capacity whose expected late requests, under the
forecast's distribution, fit the SLO's allowance that the capacity model's own tail leaves unused.

The band (band.py) is the `quantile` (0.98) of the log ratio of the level's *peak* over the
horizon, plus the typical load t, to the mean forecast m plus t. The capacity asked for now serves
from the horizon on (what is ready before it is the fleet's already): what it must cover is the
level at the horizon, not the peak over the way there. Read with the log level a Brownian motion
about the mean forecast over the horizon, its peak exceeds a height twice as often as its end does
(the reflection principle), so the band's quantile is the end's 1 - (1 - quantile) / 2 (0.99 for
0.98): the level at the horizon is Y = (m + t)·X, ln X normal of median 0 and σ = q / z, q the band's
log width, z = 2.326 the normal deviate of 0.99. Of the normals with that quantile and a median at
or above the mean forecast, median 0 is the widest, and above the quantile the widest puts the most
mass: the conservative reading of one quantile. The load is L = Y - t.

A fleet of capacity C (the load it serves at the SLO) facing L:
  above C   the excess L - C is late (fluid: burstsize.py's late share), the C served at the
            capacity model's tail ε (the share of requests allowed to be late, 1 - attainment);
  below C   the capacity model's tail at L is at most ε·L / C: its TTFT tail is Kingman's
            u·exp(-(1 - u)·κ) of the prefill utilization u ∝ L, which meets ε at C, and whose
            exponential factor only falls as u falls (capacity.py). So ε·(1 - L / C) of L's
            requests is allowance left unused.
  always    the requests whose prefill alone is past the TTFT target (a share λ of every load,
            idlemiss.idle_misses) are late at any fleet size: they spend the allowance first.
The expected late share is within ε when (1 - ε)·E[(L - C)+] <= ε·E[L·(1 - L / C); 0 < L <= C]
- λ·E[L; 0 < L <= C]: the overshoot's late requests spend the allowance the queue and the prompts
no replica serves in time leave unused below capacity, the same rule at every fleet size. Where λ
is above what ε·(1 - L / C) leaves on average below C, no allowance is left and the count is the
band's upper (Mooncake's long prompts: λ 19 % against ε 1 %). The least such C is solved for (the
left side falls and the right rises with C); never above the band's upper, which stays the bound (a
wide band's fluid overshoot is above the allowance at its own upper; the upper is what the league
measured the margin at). On a small fleet a step of the count is a sixth to a half of it, so the
upper crossing a step by a sliver no longer buys the replica; on a large one the count is what a
load 2-8 % under the upper needs.

Where the TTFT binds at the band's upper, the overshoot meets a queue, not a wall (queued_width;
docs/policy-history.md "The overshoot past the count at the queue's own tail", session 23, kept in
session 29 with the scale-down's release margin at the band's upper, as before it): the count's
replicas run their prefill at a utilization u_C where the capacity model's TTFT tail
u·exp(-(1 - u)·κ) is ε, and a load x times the count's raises it to the tail at u_C·x,
tail·x·exp(κ·u_C·(x - 1)), all late only from saturation (x = 1 / u_C). The late share is the lesser
of that and the fluid share (late_at); the expected late share of the requests a fleet can serve is
held within ε, the idle misses outside it (they are late at any count and any utilization). On
Mooncake's mix u_C is 0.15-0.2 (the prefill times' heavy tail keeps the TTFT tail at ε only far
below saturation): a load 25 % over the count is 1.5 % late, not the fluid 21 %.

Pure arithmetic on floats; docs/policy.md ("Defaults and why": the count's demand).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist
from typing import Final

from autoscaler.policy import memo

_SQRT2: Final = math.sqrt(2.0)
_STEPS: Final = 24  # bisection steps in the deviate u: the width's error e^(σ·z / 2^24), nil
_z_cache: Final[dict[float, float]] = {}
# the solved share u / z by grid point: σ 1/16 apart in log (6 %), t / (m + t) 1/32 apart; the
# bilinear interpolation's error in the width < 0.5 % (tests), a solve ~25 late shares
_S_GRID: Final = 16.0
_T_GRID: Final = 32.0
_S_MIN: Final = 1e-3  # σ below it: its share's (a band under 0.3 %)
_L_GRID: Final = 32.0  # the idle misses λ / ε by 1/32: a third axis where λ > 0
_shares: Final[dict[tuple[int, int, int, float, float], float]] = {}
_U_GRID: Final = 32.0  # the prefill utilization at the count u_C by 1/32: the queue's axis
_U_MAX: Final = 31.0 / 32.0  # u_C above it read as it (the tail saturates past x = 1 / u_C)
_NODES: Final = 192  # the midpoint rule's nodes over ln X in [-8σ, 8σ] (queued's)
_queued_shares: Final[dict[tuple[int, int, int, float, float], float]] = {}
ShareAt = Callable[[int, int, int, float, float], float]  # a grid point's u / z (_share, _queued_share)


def deviate(quantile: float) -> float:
    """The standard normal's `quantile` point (z of 0.98: 2.054)."""
    z = _z_cache.get(quantile)
    if z is None:
        z = _z_cache[quantile] = NormalDist().inv_cdf(quantile)
    return z


def peak_deviate(quantile: float) -> float:
    """The deviate at the horizon of a Brownian motion whose maximum over it has its `quantile`
    there (reflection: P(max > x) = 2·P(B_h > x); 0.98: 2.326)."""
    return deviate(1.0 - 0.5 * (1.0 - quantile))


def _above(k: int, cut: float, sigma: float) -> float:
    """E[X^k; X > cut] for ln X normal(0, σ²)."""
    full = math.exp(0.5 * k * k * sigma * sigma)
    if cut <= 0.0:
        return full
    return full * 0.5 * math.erfc((math.log(cut) - k * sigma * sigma) / (sigma * _SQRT2))


def terms(c: float, t: float, sigma: float) -> tuple[float, float, float]:
    """(E[(L - c)+], E[L·(1 - L / c); 0 < L <= c], E[L; 0 < L <= c]) for L = X - t, ln X
    normal(0, σ²): the overshoot past c, the queue's allowance unused below it and the load below
    it, in units of m + t."""
    top = c + t
    a0, a1, a2 = _above(0, top, sigma), _above(1, top, sigma), _above(2, top, sigma)
    over = a1 - top * a0
    b0, b1, b2 = _above(0, t, sigma), _above(1, t, sigma), _above(2, t, sigma)
    d0, d1, d2 = b0 - a0, b1 - a1, b2 - a2  # E[X^k; t < X <= c + t]
    first = d1 - t * d0
    second = d2 - 2.0 * t * d1 + t * t * d0
    return over, (first - second / c) if c > 0.0 else 0.0, first


def fits(over: float, unused: float, below: float, tail: float, lost: float) -> bool:
    """Whether the overshoot's late requests fit the allowance left below capacity (terms')."""
    return (1.0 - tail) * over <= tail * unused - lost * below


def width(q: float, z: float, typical_share: float, tail: float, lost: float = 0.0) -> float | None:
    """exp(u·σ), σ = q / z, for the least u in [0, z] whose capacity (m + t)·exp(u·σ) - t meets
    fits() with the idle misses `lost` (solve's), u / z interpolated on a grid in (log σ, t, and
    lost / tail where lost > 0) solved once a point; None where only the band's own upper (u = z)
    does. `typical_share` is t / (m + t), in [0, 1]."""
    if not (q > 0.0 and z > 0.0 and tail > lost):
        return None
    return _on_grid(q, z, typical_share, tail, lost / tail * _L_GRID if lost > 0.0 else 0.0, _share)


def _on_grid(
    q: float, z: float, typical_share: float, tail: float, third: float, share_at: ShareAt
) -> float | None:
    """exp(u·σ), u / z bilinear in (log σ, t) and linear in the third axis at `third` (in its grid's
    steps), from share_at's points (each solved once); None where only the band's upper does."""
    sigma = q / z
    at = math.log(sigma if sigma > _S_MIN else _S_MIN) * _S_GRID
    i = math.floor(at)
    t = typical_share if typical_share < 1.0 else 1.0
    tj = t * _T_GRID
    j = math.floor(tj)
    if j >= _T_GRID:
        j = int(_T_GRID) - 1
    fi, fj = at - i, tj - j
    k = math.floor(third)
    fk = third - k
    cells = _cell_tables.of(share_at, z, tail)
    share = _plane(_cell(cells, share_at, i, j, k, z, tail), fi, fj)
    if fk > 0.0:
        share += fk * (_plane(_cell(cells, share_at, i, j, k + 1, z, tail), fi, fj) - share)
    if share >= 1.0:
        return None
    return math.exp(share * q)


# a grid cell's corners' u / z: at (i, j), (i + 1, j), (i, j + 1) and (i + 1, j + 1)
Cell = tuple[float, float, float, float]
# the cells share_at's points were read into, for each (z, tail): a tick reads up to eight points,
# each a 5-tuple key hashed (two floats) where one int key a cell is hashed here; a spec's z and
# tail are the same every tick, so the last table read is compared first (memo.Tables)
_cell_tables: Final[memo.Tables[Cell]] = memo.Tables(64)


def _cell(cells: dict[int, Cell], share_at: ShareAt, i: int, j: int, k: int, z: float, tail: float) -> Cell:
    """The cell at (i, j) on the third axis' k-th plane: j below 32 and k at most 32 (the t grid's
    and the third axis' points), so (i·64 + j)·64 + k is one cell's alone."""
    key = (i * 64 + j) * 64 + k
    got = cells.get(key)
    if got is None:
        got = (
            share_at(i, j, k, z, tail),
            share_at(i + 1, j, k, z, tail),
            share_at(i, j + 1, k, z, tail),
            share_at(i + 1, j + 1, k, z, tail),
        )
        got = memo.remember(cells, key, got, 4096)
    return got


def _plane(cell: Cell, fi: float, fj: float) -> float:
    """The share u / z bilinear in (log σ, t) in a cell."""
    s00, s10, s01, s11 = cell
    return (s00 + fi * (s10 - s00)) * (1.0 - fj) + (s01 + fi * (s11 - s01)) * fj


def _share(i: int, j: int, k: int, z: float, tail: float) -> float:
    key = (i, j, k, z, tail)
    got = _shares.get(key)
    if got is None:
        sigma = math.exp(i / _S_GRID)
        u = solve(sigma * z, z, j / _T_GRID, tail, k / _L_GRID * tail)
        got = memo.remember(_shares, key, 1.0 if u is None else math.log(u) / (sigma * z), 4096)
    return got


def solve(q: float, z: float, typical_share: float, tail: float, lost: float = 0.0) -> float | None:
    """width's exp(u·σ) solved: bisection in u over [0, z]; None where u = z."""
    if not (q > 0.0 and z > 0.0 and tail > lost):
        return None
    sigma = q / z
    t = typical_share

    def ok(cap: float) -> bool:
        return fits(*terms(cap, t, sigma), tail, lost)

    return _least_width(q, z, t, ok)


def _least_width(q: float, z: float, t: float, ok: Callable[[float], bool]) -> float | None:
    """exp(u·σ) for the least u in [0, z] whose capacity exp(u·σ) - t is ok (ok rises with it),
    bisected; 1 where u = 0 is, None where only u = z is."""
    if ok(1.0 - t):
        return 1.0
    if not ok(math.exp(q) - t):
        return None
    sigma = q / z
    lo, hi = 0.0, z
    for _ in range(_STEPS):
        mid = 0.5 * (lo + hi)
        if ok(math.exp(mid * sigma) - t):
            hi = mid
        else:
            lo = mid
    return math.exp(hi * sigma)


def steepness(utilization: float, tail: float) -> float:
    """κ·u_C of the queue's tail W(u) = u·exp(-(1 - u)·κ) that meets `tail` at u_C: the tail at
    u_C·x is then tail·x·exp(κ·u_C·(x - 1)) (0 in the limit u_C -> 0)."""
    u = utilization
    if u <= 0.0:
        return 0.0
    return u * math.log(u / tail) / (1.0 - u)


def late_at(x: float, tail: float, steep: float, utilization: float) -> float:
    """The late share of a load x times the capacity C: the lesser of the fluid share (past C the
    excess late, C served at the tail; below it the tail at most tail·x) and the queue's own tail
    at u_C·x (all late from saturation, x = 1 / u_C, on)."""
    if x <= 1.0:
        return tail * x
    fluid = 1.0 - (1.0 - tail) / x
    if x * utilization < 1.0:
        queue = tail * x * math.exp(steep * (x - 1.0))
        if queue < fluid:
            return queue
    return fluid


def queued(c: float, t: float, sigma: float, tail: float, utilization: float) -> tuple[float, float]:
    """(E[L·late_at(L / c); L > 0], E[L; L > 0]) for L = X - t, ln X normal(0, σ²), in units of
    m + t: the late requests and the load, by the midpoint rule over ln X in [-8σ, 8σ]."""
    steep = steepness(utilization, tail)
    lo = -8.0 * sigma
    step = 16.0 * sigma / _NODES
    late = load = 0.0
    for i in range(_NODES):
        y = lo + (i + 0.5) * step
        lv = math.exp(y) - t
        if lv <= 0.0:
            continue
        density = math.exp(-0.5 * (y / sigma) ** 2)
        load += lv * density
        late += lv * late_at(lv / c, tail, steep, utilization) * density
    return late, load


def solve_queued(q: float, z: float, typical_share: float, tail: float, utilization: float) -> float | None:
    """The least width exp(u·σ), u in [0, z], whose capacity's expected late share (queued) is
    within `tail`; None where only the band's own upper (u = z) does. Bisection, as solve."""
    if not (q > 0.0 and z > 0.0 and tail > 0.0):
        return None
    sigma = q / z
    t = typical_share

    def ok(cap: float) -> bool:
        if cap <= 0.0:
            return False
        late, load = queued(cap, t, sigma, tail, utilization)
        return late <= tail * load

    return _least_width(q, z, t, ok)


def queued_width(q: float, z: float, typical_share: float, tail: float, utilization: float) -> float | None:
    """solve_queued's width, u / z interpolated on the grid in (log σ, t, u_C by 1/32) solved once
    a point; None where only the band's own upper does."""
    if not (q > 0.0 and z > 0.0 and tail > 0.0):
        return None
    u = utilization if utilization < _U_MAX else _U_MAX
    return _on_grid(q, z, typical_share, tail, (u if u > 0.0 else 0.0) * _U_GRID, _queued_share)


def _queued_share(i: int, j: int, k: int, z: float, tail: float) -> float:
    key = (i, j, k, z, tail)
    got = _queued_shares.get(key)
    if got is None:
        sigma = math.exp(i / _S_GRID)
        u = solve_queued(sigma * z, z, j / _T_GRID, tail, k / _U_GRID)
        got = memo.remember(_queued_shares, key, 1.0 if u is None else math.log(u) / (sigma * z), 4096)
    return got
