"""The policy core's pricing of the bursts' hold compiled by numba for the replay, from the same
source and with the same bits (tests/test_burstprice.py, tests/test_latecurve.py): burstprice's
_bisect (C / θ at one shape k: the regularized upper gamma at ~110 points of the late curve for
each of ~19 bisection steps) and latecurve's spell_wait (a curve point's TTFT share: the mean of
16 first passages). The hold's cache and the curves' are keyed by the mix, which moves on most
ticks of a replay: interpreted, these were four fifths of a predictive replay's time (ServeGen
m-large × 0.048 on one-gpu-8b: 76 and 4 of 101 s under cProfile; the curves' TPOT shares, 18 s,
are tailkernel.py's compiled _miss). The core stays pure Python (the controller has no compiler);
the predictive policy installs these when it is built.

ln Γ of the four shapes comes in as arguments (burstprice._lgammas, Python's math.lgamma), since
numba's lgamma is not CPython's to the bit. As tailkernel.py does, each function is compiled from
a copy of its code whose globals have the compiled callees in place of the Python ones.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np

from autoscaler.policy import burstprice, latecurve, lengths
from replay.kernel import jit as _cache_stamps  # noqa: F401  (its locator: stale callees recompile callers)

_compiled: Any = None
_compiled_spell: Any = None


def compiled_bisect() -> Any:
    """burstprice._bisect compiled (loaded from numba's on-disk cache after the first time), on
    float64 arrays of the curve's points."""
    global _compiled
    if _compiled is None:
        jit = numba.njit(cache=True)
        scope = dict(vars(burstprice))
        code = lengths.upper_gamma_at.__code__
        scope["upper_gamma_at"] = jit(types.FunctionType(code, dict(vars(lengths)), "upper_gamma_at"))
        for name in ("_segments_at", "_expected_at", "_bisect"):  # callees first
            code = getattr(burstprice, name).__code__
            scope[name] = jit(types.FunctionType(code, scope, name))
        _compiled = scope["_bisect"]
    return _compiled


def compiled_spell_wait() -> Any:
    """latecurve.spell_wait compiled (window_wait its compiled callee)."""
    global _compiled_spell
    if _compiled_spell is None:
        jit = numba.njit(cache=True)
        scope = dict(vars(latecurve))
        for name in ("window_wait", "spell_wait"):  # callee first
            code = getattr(latecurve, name).__code__
            scope[name] = jit(types.FunctionType(code, scope, name))
        _compiled_spell = scope["spell_wait"]
    return _compiled_spell


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
    """burstprice._bisect by the compiled copy: the curve's tuples (of any length) as arrays."""
    return float(
        compiled_bisect()(
            k,
            budget,
            np.asarray(us, dtype=np.float64),
            np.asarray(ttfts, dtype=np.float64),
            np.asarray(vs, dtype=np.float64),
            np.asarray(tpots, dtype=np.float64),
            stretch,
            ln_s,
            ln_s1,
            ln_t,
            ln_t1,
        )
    )


def install() -> None:
    """The policy core's hold bisected, and its curves' TTFT shares computed, by the compiled
    copies from now on, in this process."""
    compiled_bisect()  # compiled (or loaded) now, so no decision waits for it
    burstprice.use(bisect)
    latecurve.use(compiled_spell_wait())
