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

Where the core itself is compiled by mypyc (autoscaler/compiledcore.py), install() leaves these
copies out: the core's own arithmetic, compiled with its callers, takes its floats unboxed, where a
call into a copy boxes its 19-46 arguments and unboxes them again (docs/policy.md, "Performance",
session 40). flatahead and flatband are then compiled modules, which keep no bytecode, so the
copies are compiled from their sources (`_source`) wherever they are still asked for (the tests).
"""

from __future__ import annotations

import importlib.util
import types
from collections.abc import Callable
from typing import Any

import numba

from autoscaler import compiledcore
from autoscaler.policy import flatahead, flatband, flatdemand
from replay.kernel import jit as _cache_stamps  # noqa: F401  (its locator: stale callees recompile callers)

_compiled: dict[str, Any] = {}
_sources: dict[str, types.ModuleType] = {}  # flatahead's and flatband's, where mypyc compiled them


def _source(module: types.ModuleType) -> types.ModuleType:
    """`module`, or where mypyc compiled it (its functions keep no bytecode for numba) a copy run
    from its source file, once (its imports are the core's own)."""
    if not str(module.__file__).endswith(".so"):  # as compiledcore.compiled tells a compiled module
        return module
    name = module.__name__.rsplit(".", 1)[1]
    if name not in _sources:
        path = compiledcore.CORE / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"{module.__name__}_source", path)
        assert spec is not None and spec.loader is not None
        _sources[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_sources[name])
    return _sources[name]


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
        ahead = _source(flatahead)
        _compiled["callees"] = {
            "load": jit(ahead.load),
            "pooled": jit(ahead.pooled),
            "width": jit(ahead.width),
        }
    got: dict[str, Any] = _compiled["callees"]
    return got


def compiled_burst_test() -> Any:
    """flatband.burst_test compiled: floats, and an int for the bins' count."""
    if "burst" not in _compiled:
        band = _source(flatband)
        scope = {**vars(band), **_band_callees()}
        _compiled["burst"] = _entry(band.burst_test, _bins_value, scope)
    return _compiled["burst"]


def compiled_ahead() -> tuple[Any, Any]:
    """flatahead's (start, forecast) compiled: floats, and an int for the bins' count."""
    if "ahead" not in _compiled:
        ahead = _source(flatahead)
        scope = {**vars(ahead), **_band_callees()}
        start = _entry(ahead.start, _bins_value, scope)
        _compiled["ahead"] = (start, _entry(ahead.forecast, _bins_value, scope))
    got: tuple[Any, Any] = _compiled["ahead"]
    return got


def install() -> None:
    """demand.observe's tick, the panic's test and the Lookahead's forecasts by the compiled copies
    from now on, in this process; none where the core is compiled by mypyc (the module's docstring)."""
    if compiledcore.active() is not None:
        return
    flatdemand.install(compiled())
    flatband.use(compiled_burst_test())
    flatahead.use(compiled_ahead())
