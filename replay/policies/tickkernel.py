"""The policy core's demand tick (autoscaler/policy/flatdemand.py: demand.observe's arithmetic in
flat floats) compiled by numba from the same source, the same bits (tests/test_flatdemand.py). As
sizekernel.py, installed by `python -m bench policy`; the core stays pure Python.

The call goes to the compiled signature's own entry point, not through numba's dispatcher: the
dispatcher works out the types of the 37 arguments on every call (~0.8 µs, where the arithmetic
interpreted costs ~0.9 µs), the entry point converts them to the signature's (~0.37 µs). fold
passes floats and bools only, the planner's readings being floats.
"""

from __future__ import annotations

from typing import Any

import numba

from autoscaler.policy import flatdemand

_compiled: Any = None


def compiled() -> Any:
    """flatdemand.tick compiled (loaded from numba's on-disk cache after the first time), as the
    entry point of its one signature (floats, and bools for the flags)."""
    global _compiled
    if _compiled is None:
        jitted: Any = numba.njit(cache=True)(flatdemand.tick)
        flags = {"primed", "has_gate", "has_peaks", "has_squares", "has_arrived"}
        names = flatdemand.tick.__code__.co_varnames[: flatdemand.tick.__code__.co_argcount]
        # compiles, or loads the cache (a tick one second after the state's)
        jitted(*(True if name in flags else 2.0 if name == "now" else 1.0 for name in names))
        (signature,) = jitted.signatures
        _compiled = jitted.overloads[signature].entry_point
    return _compiled


def install() -> None:
    """demand.observe folds its ticks by the compiled copy from now on, in this process."""
    flatdemand.install(compiled())
