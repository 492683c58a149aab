"""The policy core's fused sizing (autoscaler/policy/flatsize.py: burstsize.size in flat floats)
compiled by numba, from the same source: a quarter of a predictive decision's instructions, the
same bits (tests/test_flatsize.py). The core stays pure Python (the controller has no compiler
and may have no writable cache directory). `python -m bench policy` installs it; the replay does
not yet: its router is the least-loaded one, which the kernel does not cover (flatsize.py).

As tailkernel.py does, each function is compiled from a copy of its code whose globals are
flatsize's and flattables' with the compiled callees in place of the Python ones (the TPOT tail's
_rate is tailkernel's). Compiling takes ~10 s the first time, then loads from numba's on-disk cache;
install() compiles it (or loads it) before it returns, so no decision waits for it.
"""

from __future__ import annotations

import types
from typing import Any

import numba
import numpy as np

from autoscaler.policy import burstsize, flatkernel, flatsize, flattables, tailsearch, tpottail
from replay.kernel import jit as _cache_stamps  # noqa: F401  (its locator: stale callees recompile callers)
from replay.policies.tailkernel import compiled_rate

_compiled: flatkernel.Kernel | None = None
_dispatcher: Any = None  # numba's for flatsize.size, whose one signature's entry point _compiled calls
_CALLEES = (  # flatsize's and the flattables' it imports, callees first
    "_finite",
    "_prefill",
    "_decode",
    "_idle_misses",
    "_share",
    "ttft_servers",
    "tpot_rate",
    "_terms",
    "_fixed",
    "_sizer",
    "_asks",
    "_at",
    "_thinned",
    "_thinned_kept",
    "size",
)


def _floats(values: list[float]) -> Any:
    return np.array(values, dtype=np.float64)


def _ints(values: list[int]) -> Any:
    return np.array(values, dtype=np.int64)


_searches: dict[str, Any] = {}


def searches() -> dict[str, Any]:
    """tailsearch's split_servers, its tail_share and servers_at, utilization, bisect_utilization
    and their _fits compiled, each calling the others' compiled copies by name (from numba's
    on-disk cache after the first time)."""
    if not _searches:
        jit = numba.njit(cache=True)
        scope = dict(vars(tailsearch))
        names = ("_fits", "bisect_utilization", "utilization", "tail_share", "servers_at", "split_servers")
        for name in names:
            scope[name] = jit(types.FunctionType(getattr(tailsearch, name).__code__, scope, name))
            _searches[name] = scope[name]
    return _searches


def compiled() -> flatkernel.Kernel:
    """flatsize.size compiled (loaded from numba's on-disk cache after the first time)."""
    global _compiled, _dispatcher
    if _compiled is None:
        jit = numba.njit(cache=True)
        scope = {**vars(flattables), **vars(flatsize)}  # flattables' functions read their own globals
        scope["_rate"] = compiled_rate()
        scope["prefill_rate"] = jit(tpottail.prefill_rate)
        scope["units"] = jit(tpottail.units)
        scope["tail_share"] = searches()["tail_share"]
        scope["servers_at"] = searches()["servers_at"]
        for name in _CALLEES:
            code = scope[name].__code__  # the Python function, flatsize's or flattables'
            scope[name] = jit(types.FunctionType(code, scope, name))
        size = scope["size"]
        # compile now, on the bench's profile at the signature burstsize passes (floats, an int limit)
        floats = _floats([0.01] * flattables.FIELDS + [0.0] * flattables.TABLE_FLOATS)
        size(floats, _ints([0] * flattables.KEYS), 1.0, 1.0, 1.0, 1.0, 1, 1.0, 1.0, 0.0, 0.0)
        # ... and called at that signature's entry point, not through the dispatcher, which works
        # the 11 arguments' types out each call (~0.51 against ~0.38 µs): no compile later, on a
        # decision; ints are converted to its floats (a float limit to an int, as the dispatcher
        # does), other types raise TypeError and burstsize sizes those in Python (flatkernel.sizing)
        size.disable_compile()
        (signature,) = size.signatures
        _dispatcher = size
        kernel = flatkernel.Kernel(size.overloads[signature].entry_point, _floats, _ints)
        _compiled = kernel
    return _compiled


def install() -> None:
    """burstsize.size by the compiled copy from now on, in this process."""
    burstsize.use(compiled())
