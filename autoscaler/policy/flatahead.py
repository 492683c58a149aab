"""The Lookahead's forecasts in flat floats (lookahead.py), for a compiled copy
(replay/policies/tickkernel.py, installed by the bench through use()).

A tick's Lookahead reads the demand state once (the typical demand's load, the level and its load,
the dispersion, the band's width exp(quantile) for each bin of levelbins.py) and forecasts at each
horizon the horizon's search asks for (demand.expected, its load, the band over it: band.widened),
each through a handful of Python calls. `start` and `forecast` are the same arithmetic, operation
for operation and in the same order, on the state's floats; both bins' widths are worked out at
the start (band.band_quantile's, each the value the lazy one would read). Interpreted, the calls of
18-27 arguments cost more than the ones they replace, so the Python path keeps the Lookahead's own
code. They keep to what numba compiles to the same bits (floats, the C library's exp and expm1;
tpottail.py); tests/test_flatahead.py holds both copies to the Lookahead's own to the bit. `terms`
are the load's (capacityfacts.load_terms): a0, a1, b0, c0, k, min_rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from autoscaler.policy.demand import MAX_DISPERSION


def load(
    a0: float, a1: float, b0: float, c0: float, k: float, min_rate: float, r: float, pt: float, ot: float
) -> float:
    """capacityfacts._load_function's load of (r, pt, ot)."""
    if r < min_rate:
        return a0 * pt
    x = pt / r
    y = ot / r
    return r * ((a0 + a1 * (x + 1.0)) * x + (b0 + c0 * (x + k * y)) * y)


def pooled(prior_weight: float, prior_error: float, scored: float, error_quantile: float) -> float:
    """band.error_quantile: the scored errors' quantile blended with the prior's by weight, never below 0."""
    w = prior_weight
    q = (w * prior_error + scored * error_quantile) / (w + scored) if w + scored > 0.0 else prior_error
    return q if q > 0.0 else 0.0


def width(
    pooled: float,
    w: float,
    b: int,
    bins: int,
    scale0: float,
    n0: float,
    scale1: float,
    n1: float,
    rq: float,
    rn: float,
    hq: float,
    lean: float,
) -> float:
    """band.band_width for bin b, its pooled quantile (band.error_quantile) given: exp(band_quantile),
    or bin 0's heights' 1 + quantile where they lean so (hq, lean: levelbins.Heights)."""
    if b == 0 and lean > 0.0:
        return 1.0 + (hq if hq > 0.0 else 0.0)
    q = pooled
    if b < bins and not rn <= 0.0:
        scale, n_b = (scale0, n0) if b == 0 else (scale1, n1)
        if not n_b <= 0.0:
            own = rq * scale
            n = rn if rn < n_b else n_b
            q = (w * pooled + n * own) / (w + n)
            q = q if q > 0.0 else 0.0
    return math.exp(q)


def start(
    a0: float,
    a1: float,
    b0: float,
    c0: float,
    k: float,
    min_rate: float,
    rl: float,
    rt: float,
    p: float,
    o: float,
    tr: float,
    tp: float,
    to: float,
    s2: float,
    sn: float,
    window_s: float,
    prior_weight: float,
    prior_error: float,
    scored: float,
    error_quantile: float,
    bins: int,
    scale0: float,
    scored0: float,
    scale1: float,
    scored1: float,
    ratio_quantile: float,
    ratios_scored: float,
    height_quantile: float,
    lean: float,
) -> tuple[float, float, float, float, float, float, float, float]:
    """(the typical demand's load, the level (demand.expected at 0: requests, prompt and output
    tokens) and its load, the dispersion over window_s (demand.dispersion), the band's width for
    bins 0 and 1) of a state: its series (rl, rt), mix (p, o), typical demand, spread (s2, sn),
    pooled tracker, first two bins and bin 0's heights (as flatband.burst_test takes them)."""
    typical = load(a0, a1, b0, c0, k, min_rate, tr, tp, to)
    mr = rl + rt * 0.0
    if mr < 0.0:
        mr = 0.0
    mp = mr * p
    mo = mr * o
    level = load(a0, a1, b0, c0, k, min_rate, mr, mp, mo)
    if sn <= 0.0 or s2 <= 0.0:
        spread = 1.0
    else:
        spread = 1.0 + s2 / sn * window_s
        if spread > MAX_DISPERSION:
            spread = MAX_DISPERSION
    w = prior_weight
    q = pooled(w, prior_error, scored, error_quantile)
    hq = height_quantile
    width0 = width(q, w, 0, bins, scale0, scored0, scale1, scored1, ratio_quantile, ratios_scored, hq, lean)
    width1 = width(q, w, 1, bins, scale0, scored0, scale1, scored1, ratio_quantile, ratios_scored, hq, lean)
    return typical, mr, mp, mo, level, spread, width0, width1


def forecast(
    h: float,
    a0: float,
    a1: float,
    b0: float,
    c0: float,
    k: float,
    min_rate: float,
    tau: float,
    rl: float,
    rt: float,
    p: float,
    o: float,
    typical: float,
    tr: float,
    tp: float,
    to: float,
    width0: float,
    width1: float,
    lean: float,
) -> tuple[float, float, float, float, float, float, float]:
    """(the mean forecast h seconds ahead (demand.expected, damping tau), its load, the band's upper
    over it (band.widened at its bin's width, bin 0's read as a height where its heights' `lean`
    is above 0)), `typical` the typical demand's load."""
    reach = tau * -math.expm1(-h / tau) if h > 0.0 else 0.0
    mr = rl + rt * reach
    if mr < 0.0:
        mr = 0.0
    mp = mr * p
    mo = mr * o
    mean_load = load(a0, a1, b0, c0, k, min_rate, mr, mp, mo)
    if mean_load < typical and lean > 0.0:  # levelbins.bin_of: bin 0 on heights
        high = mean_load + typical * (width0 - 1.0)
    else:
        widening = width0 if mean_load < typical else width1
        high = (mean_load + typical) * widening - typical
    if mean_load > 1e-12:
        f = high / mean_load
        return mr, mp, mo, mean_load, mr * f, mp * f, mo * f
    if typical > 1e-12 and high > 0.0:
        f = high / typical
        return mr, mp, mo, mean_load, tr * f, tp * f, to * f
    return mr, mp, mo, mean_load, mr, mp, mo


# the copies of (start, forecast) lookahead.py calls where installed (use); None: its own arithmetic
kernels: tuple[Callable[..., Any], Callable[..., Any]] | None = None


def use(copies: tuple[Callable[..., Any], Callable[..., Any]] | None) -> None:
    """The Lookahead's arithmetic by `copies` of (start, forecast): compiled ones, or these (tests);
    None: lookahead.py's own."""
    global kernels
    kernels = copies
