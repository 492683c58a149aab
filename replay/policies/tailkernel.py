"""The policy core's per-request TPOT tail (autoscaler/policy/tpottail.py) compiled by numba for the
replay, from the same source: a cache miss of tailsearch.tpot_rate 1.7-3.1 ms -> ~40 µs, the same
bits (tests/test_tpottail.py). The core stays pure Python (the controller has no compiler and may
have no writable cache directory); the predictive policy installs this when it is built.

The series' functions call each other by their global names, so each is compiled from a copy of
its code whose globals are the module's with the compiled callees in place of the Python ones.
"""

from __future__ import annotations

import types
from typing import Any

import numba

from autoscaler.policy import tpottail
from replay.kernel import jit as _cache_stamps  # noqa: F401  (its locator: stale callees recompile callers)

_compiled: Any = None


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


def install() -> None:
    """The policy core's TPOT tail, and its share that misses, computed by the compiled copies
    from now on, in this process."""
    tpottail.use(compiled_rate(), compiled_miss())
