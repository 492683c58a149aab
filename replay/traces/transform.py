"""Trace → trace: rate scaling (×k) and time windows. Pure functions of their inputs and a seed.

Rate scaling: superposition of thinned, shifted copies
-----------------------------------------------------
`scale_rate(trace, k)` lays ⌈k⌉ copies of the trace on top of each other; copy j keeps each request
independently with probability min(1, k − j), so the expected count is exactly k × n (k = 2.5: two
full copies and one half copy; k = 0.3: one copy thinned to 30 %). Every copy but the first is
shifted later by its own uniform offset in [0, `shift_s`) so copies do not arrive in lock-step.

Why not time compression (divide every timestamp by k)? It multiplies the rate, but it also shortens
every burst, ramp and quiet gap by k and squeezes a daily cycle into a fraction of a day — exactly the
shapes an autoscaler is judged on. Superposition keeps the rate's shape in time (rate(t) × k), keeps
each copy's burst structure, and draws lengths from the original rows, so length distributions are
unchanged. Its cost: within one copy's offset the k copies' requests are correlated (the same bursts
repeat a moment apart), which is the right bias for an autoscaler test — it preserves burstiness
instead of smoothing it away as independent resampling would.

Windows: `time_window(trace, start_s, end_s)` keeps requests with start ≤ t < end and re-bases them so
the first kept request is at 0, as `Trace` requires.
"""

from __future__ import annotations

import math

import numpy as np

from replay.trace import Trace
from replay.traces.errors import TraceError

DEFAULT_SHIFT_S = 1.0  # well under the 5 s scrape and 15 s sync: invisible to a policy, breaks lock-step


def scale_rate(trace: Trace, k: float, *, seed: int = 0, shift_s: float = DEFAULT_SHIFT_S) -> Trace:
    """The trace at k times its request rate (see the module docstring for the method)."""
    if not math.isfinite(k) or k <= 0:
        raise TraceError(f"rate scale: expected a number > 0, got {k!r}")
    if not math.isfinite(shift_s) or shift_s < 0:
        raise TraceError(f"rate scale shift_s: expected a number >= 0, got {shift_s!r}")
    if k == 1:
        return trace
    rng = np.random.default_rng(seed)
    n = len(trace)
    picks: list[np.ndarray] = []
    shifts: list[np.ndarray] = []
    for copy in range(math.ceil(k)):
        keep_p = min(1.0, k - copy)
        kept = np.arange(n) if keep_p >= 1.0 else np.flatnonzero(rng.random(n) < keep_p)
        offset = 0.0 if copy == 0 else float(rng.uniform(0.0, shift_s))
        picks.append(kept)
        shifts.append(np.full(len(kept), offset))
    index = np.concatenate(picks)
    arrival = trace.arrival_s[index] + np.concatenate(shifts)
    if len(arrival) == 0:
        raise TraceError(f"trace {trace.name!r}: rate scale {k:g} kept none of its {n} requests")
    order = np.argsort(arrival, kind="stable")
    arrival, index = arrival[order], index[order]
    return Trace(
        name=f"{trace.name}x{k:g}",
        arrival_s=arrival - arrival[0],
        input_tokens=trace.input_tokens[index],
        output_tokens=trace.output_tokens[index],
        prefix=None if trace.prefix is None else trace.prefix.take(index),
    )


def time_window(trace: Trace, start_s: float = 0.0, end_s: float | None = None) -> Trace:
    """Requests with start_s ≤ arrival < end_s (end None: to the end), re-based to start at 0."""
    end = math.inf if end_s is None else end_s
    if not (math.isfinite(start_s) and start_s >= 0) or not end > start_s:
        raise TraceError(f"time window: expected 0 <= start < end, got start={start_s!r} end={end_s!r}")
    lo = int(np.searchsorted(trace.arrival_s, start_s, side="left"))
    hi = int(np.searchsorted(trace.arrival_s, end, side="left"))
    if hi <= lo:
        raise TraceError(
            f"trace {trace.name!r}: no request in [{start_s:g}, {end:g}) s "
            f"(the trace spans 0 to {trace.duration_s:g} s)"
        )
    arrival = trace.arrival_s[lo:hi]
    return Trace(
        name=trace.name if (lo == 0 and hi == len(trace)) else f"{trace.name}[{start_s:g}:{end:g}]",
        arrival_s=arrival - arrival[0],
        input_tokens=trace.input_tokens[lo:hi],
        output_tokens=trace.output_tokens[lo:hi],
        prefix=None if trace.prefix is None else trace.prefix.take(np.arange(lo, hi)),
    )


def window_and_scale(
    trace: Trace, *, start_s: float = 0.0, end_s: float | None = None, rate_scale: float = 1.0, seed: int = 0
) -> Trace:
    """The window first (on the trace's own clock), then the rate scale: what every loader applies."""
    if start_s != 0.0 or end_s is not None:
        trace = time_window(trace, start_s, end_s)
    return trace if rate_scale == 1.0 else scale_rate(trace, rate_scale, seed=seed)
