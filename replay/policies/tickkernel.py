"""The policy core's per-tick arithmetic in flat floats compiled by numba from the same sources, the
same bits: the demand's tick (autoscaler/policy/flatdemand.py, demand.observe's arithmetic;
tests/test_flatdemand.py), the panic's test (flatband.py: the band over the last tick's state
against this tick's demand; tests/test_flatband.py) and the Lookahead's reading of the state and
forecasts (flatahead.py; tests/test_flatahead.py). As sizekernel.py, installed by
`python -m bench policy` (tests/test_tickkernel.py: the same decisions); the core stays pure Python.

Each is called at its compiled signature's own entry point, not through numba's dispatcher: the
dispatcher works out the types of the 30-37 arguments on every call (~0.8 µs for the tick's, where
its arithmetic interpreted costs ~0.9 µs), the entry point converts them to the signature's
(~0.37 µs). Their callers pass floats, bools for flags and an int for the bins' count.

One input differs: exp of a band quantile past ~709, where CPython raises OverflowError and the
compiled copy returns inf. No tracked state reaches it (errors are clipped to ±4, the bins' ratios
to ±8, each tracker's step a fraction of them: quantiles of a few tens at most); only a state
written by hand could.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import numba

from autoscaler.policy import flatahead, flatband, flatdemand
from replay.kernel import jit as _cache_stamps  # noqa: F401  (its locator: stale callees recompile callers)

_compiled: dict[str, Any] = {}


def _entry(
    function: Callable[..., Any], value: Callable[[str], object], scope: dict[str, Any] | None = None
) -> Any:
    """`function` compiled (or loaded from numba's on-disk cache) at the types of its arguments'
    `value`s, as the entry point of that one signature; `scope`: its globals, the compiled callees
    in place of the Python ones (its module's by default)."""
    if scope is not None:
        function = types.FunctionType(function.__code__, scope, function.__name__)
    jitted: Any = numba.njit(cache=True)(function)
    code = function.__code__
    jitted(*(value(name) for name in code.co_varnames[: code.co_argcount]))
    (signature,) = jitted.signatures
    return jitted.overloads[signature].entry_point


def _tick_value(name: str) -> object:
    # a tick one second after the state's, the readings' flags set
    if name in {"primed", "has_gate", "has_peaks", "has_squares", "has_arrived", "has_out_squares"}:
        return True
    return 2.0 if name == "now" else 1.0


def compiled() -> Any:
    """flatdemand.tick compiled: floats, and bools for its flags."""
    if "tick" not in _compiled:
        _compiled["tick"] = _entry(flatdemand.tick, _tick_value)
    return _compiled["tick"]


def _bins_value(name: str) -> object:
    return 2 if name == "bins" else 1.0


def _band_callees() -> dict[str, Any]:
    """flatahead's load, pooled quantile and band width compiled, the callees of flatband's and
    flatahead's copies."""
    if "callees" not in _compiled:
        jit = numba.njit(cache=True)
        _compiled["callees"] = {
            "load": jit(flatahead.load),
            "pooled": jit(flatahead.pooled),
            "width": jit(flatahead.width),
        }
    got: dict[str, Any] = _compiled["callees"]
    return got


def compiled_burst_test() -> Any:
    """flatband.burst_test compiled: floats, and an int for the bins' count."""
    if "burst" not in _compiled:
        scope = {**vars(flatband), **_band_callees()}
        _compiled["burst"] = _entry(flatband.burst_test, _bins_value, scope)
    return _compiled["burst"]


def compiled_ahead() -> tuple[Any, Any]:
    """flatahead's (start, forecast) compiled: floats, and an int for the bins' count."""
    if "ahead" not in _compiled:
        scope = {**vars(flatahead), **_band_callees()}
        start = _entry(flatahead.start, _bins_value, scope)
        _compiled["ahead"] = (start, _entry(flatahead.forecast, _bins_value, scope))
    got: tuple[Any, Any] = _compiled["ahead"]
    return got


def install() -> None:
    """demand.observe's tick, the panic's test and the Lookahead's forecasts by the compiled copies
    from now on, in this process."""
    flatdemand.install(compiled())
    flatband.use(compiled_burst_test())
    flatahead.use(compiled_ahead())
