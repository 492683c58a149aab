"""The policy core's per-request TPOT tail (autoscaler/policy/tpottail.py) compiled by numba for the
replay, from the same source: a cache miss of tailsearch.tpot_rate 1.7-3.1 ms -> ~40 µs, the same
bits (tests/test_tpottail.py). The core stays pure Python (the controller has no compiler and may
have no writable cache directory); the predictive policy installs this when it is built.

The series' functions call each other by their global names, so each is compiled from a copy of
its code whose globals are the module's with the compiled callees in place of the Python ones. The
outputs' decode steps come to the core as tuples (outputsteps.py) and go to the compiled copies as
arrays: a tuple's length is part of numba's type, so each length would compile anew.
"""

from __future__ import annotations

import types
from typing import Any

import numba
import numpy as np

from autoscaler.policy import tpottail
from replay.kernel import jit as _cache_stamps  # noqa: F401  (its locator: stale callees recompile callers)

_compiled: Any = None
_arrays: dict[int, tuple[tuple[float, ...], Any]] = {}  # a steps tuple's array, by its identity
_KEPT = 256  # arrays kept (the core keeps its step sets, so a run meets a few dozen)


def compiled_rate() -> Any:
    """tpottail._rate compiled (loaded from numba's on-disk cache after the first time)."""
    global _compiled
    if _compiled is None:
        scope = dict(vars(tpottail))
        for name in ("_beyond", "prefill_rate", "_miss", "_rate"):  # callees first
            code = getattr(tpottail, name).__code__
            scope[name] = numba.njit(cache=True)(types.FunctionType(code, scope, name))
        _compiled = scope["_rate"]
    return _compiled


def compiled_miss() -> Any:
    """tpottail._miss compiled, the copy compiled_rate calls (latecurve's curves read it too)."""
    return compiled_rate().py_func.__globals__["_miss"]


def array(values: tuple[float, ...]) -> Any:
    """`values` as a float64 array, kept by the tuple's identity (the core's step sets are kept
    objects: a tick's tails read the same ones)."""
    got = _arrays.get(id(values))
    if got is not None and got[0] is values:
        return got[1]
    if len(_arrays) >= _KEPT:
        _arrays.clear()
    made = np.asarray(values, dtype=np.float64)
    _arrays[id(values)] = (values, made)
    return made


def rate(*args: Any) -> float:
    """compiled_rate() on tpottail._rate's arguments, its last two (the steps) as arrays."""
    return float(compiled_rate()(*args[:-2], array(args[-2]), array(args[-1])))


def miss(*args: Any) -> float:
    """compiled_miss() on tpottail._miss's arguments, its last two (the steps) as arrays."""
    return float(compiled_miss()(*args[:-2], array(args[-2]), array(args[-1])))


def install() -> None:
    """The policy core's TPOT tail, and its share that misses, computed by the compiled copies
    from now on, in this process."""
    tpottail.use(rate, miss)
