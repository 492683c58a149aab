"""The policy core's pricing of the bursts' hold compiled by numba for the replay, from the same source
(autoscaler/policy/flathold.py, Python in every build) and with the same bits
(tests/test_burstprice.py, tests/test_latecurve.py): burstprice's bisection (C / θ at one shape k:
the regularized upper gamma at ~110 points of the late curve for each of ~19 bisection steps) and
latecurve's spell_wait (a curve point's TTFT share: the mean of 16 first passages). The hold's cache
and the curves' are keyed by the mix, which moves on most ticks of a replay: interpreted, these were
four fifths of a predictive replay's time (ServeGen m-large × 0.048 on one-gpu-8b: 76 and 4 of 101 s
under cProfile; the curves' TPOT shares, 18 s, are tailkernel.py's compiled _miss). The core stays
pure Python (the controller has no compiler); the predictive policy installs these when it is built.

ln Γ of the four shapes comes in as arguments (burstprice._lgammas, Python's math.lgamma), since
numba's lgamma is not CPython's to the bit.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np

from autoscaler.policy import burstprice, flathold, latecurve
from replay.kernel import jit as _cache_stamps  # noqa: F401  (its locator: stale callees recompile callers)

_compiled: Any = None
_compiled_spell: Any = None


def compiled_bisect() -> Any:
    """flathold.bisect compiled (loaded from numba's on-disk cache after the first time), on
    float64 arrays of the curve's points."""
    global _compiled
    if _compiled is None:
        _compiled = _compile("upper_gamma_at", "segments_at", "expected_at", "bisect")
    return _compiled


def compiled_spell_wait() -> Any:
    """flathold.spell_wait compiled (window_wait its compiled callee)."""
    global _compiled_spell
    if _compiled_spell is None:
        _compiled_spell = _compile("window_wait", "spell_wait")
    return _compiled_spell


def _compile(*names: str) -> Any:
    """flathold's functions compiled, callees first, each from a copy of its code whose globals
    have the compiled callees in place of the Python ones: the last."""
    jit = numba.njit(cache=True)
    scope = dict(vars(flathold))
    for name in names:
        scope[name] = jit(types.FunctionType(getattr(flathold, name).__code__, scope, name))
    return scope[names[-1]]


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
    """flathold.bisect by the compiled copy: the curve's tuples (of any length) as arrays."""
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
