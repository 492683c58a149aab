"""The panic's test in flat floats, one call a tick: is this tick's demand over the band the last
tick's state allowed for it (planstages.panic_stage)?

The test reads the band's upper over the mean forecast from the last sample to now (demand.expected,
band.upper) and compares the loads: ten Python calls (the forecast, four loads, the band's quantile
and its bin, the widening) of a few operations each. `burst_test` is the same arithmetic, operation
for operation and in the same order, on the state's floats, its loads and band width by flatahead's
`load` and `width` (one copy of each for both modules); interpreted it costs less than those calls
(~1.7 against ~2.1 µs a tick, `python -m bench.tick_parts`), compiled
(replay/policies/tickkernel.py, installed by the bench, its callees compiled too) ~0.8 µs. It keeps
to what numba compiles to the same bits (floats, the C library's exp and expm1; tpottail.py);
tests/test_flatband.py holds both copies to band.upper's composition to the bit. `terms` are
capacityfacts.py's load terms (load_terms)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from autoscaler.policy.flatahead import load, pooled, width


def burst_test(
    a0: float,
    a1: float,
    b0: float,
    c0: float,
    k: float,
    min_rate: float,
    tau: float,
    h: float,
    rl: float,
    rt: float,
    p: float,
    o: float,
    tr: float,
    tp: float,
    to: float,
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
    er: float,
    ep: float,
    eo: float,
    threshold: float,
) -> tuple[bool, float]:
    """(the demand seen (er, ep, eo) loads more than `threshold` times the band's upper h seconds
    after the state's sample, that upper's requests/s): the load's terms, the spec's damping and
    prior, the state's series (rl, rt), mix (p, o), typical demand, pooled tracker and its first
    two bins (levelbins.py: how many it has, each one's scale and count, the ratios' quantile and
    count) and bin 0's heights (their quantile and lean)."""
    # demand.expected
    reach = tau * -math.expm1(-h / tau) if h > 0.0 else 0.0
    mr = rl + rt * reach
    if mr < 0.0:
        mr = 0.0
    mp = mr * p
    mo = mr * o
    # the loads of the typical demand and of the mean (capacityfacts' load)
    typical = load(a0, a1, b0, c0, k, min_rate, tr, tp, to)
    mean_load = load(a0, a1, b0, c0, k, min_rate, mr, mp, mo)
    # band.band_quantile: the pooled quantile (error_quantile), blended with the mean's bin's
    w = prior_weight
    q = pooled(w, prior_error, scored, error_quantile)
    b = 0 if mean_load < typical else 1  # levelbins.bin_of
    hq = height_quantile
    widening = width(q, w, b, bins, scale0, scored0, scale1, scored1, ratio_quantile, ratios_scored, hq, lean)
    # band.widened
    if b == 0 and lean > 0.0:
        high = mean_load + typical * (widening - 1.0)
    else:
        high = (mean_load + typical) * widening - typical
    if mean_load > 1e-12:
        f = high / mean_load
        ur, up, uo = mr * f, mp * f, mo * f
    elif typical > 1e-12 and high > 0.0:
        f = high / typical
        ur, up, uo = tr * f, tp * f, to * f
    else:
        ur, up, uo = mr, mp, mo
    upper = load(a0, a1, b0, c0, k, min_rate, ur, up, uo)
    seen = load(a0, a1, b0, c0, k, min_rate, er, ep, eo)
    return seen > threshold * upper, ur


kernel: Callable[..., Any] = burst_test  # the copy flatcalls.above_band calls: this one, or a compiled one


def use(compiled: Callable[..., Any] | None) -> None:
    """The panic's test by `compiled`, a compiled copy of burst_test (None: this module's)."""
    global kernel
    kernel = burst_test if compiled is None else compiled
