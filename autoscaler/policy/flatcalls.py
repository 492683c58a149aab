"""The calls into the flat kernels' copies (flatdemand.tick, flatband.burst_test): the state's
values unpacked into their arguments, the new state built from what they return.

A module of its own so that the optional mypyc build compiles it (autoscaler/compiledcore.py): numba reads
flatdemand's and flatband's functions' bytecode, so those stay Python. The arguments are passed one
by one, not starred: a compiled caller gathers starred arguments into a list, then a tuple (~700
instructions each), where one by one they go on the C stack.
"""

from __future__ import annotations

from typing import Any, Final

from autoscaler.policy import flatband, flatdemand
from autoscaler.policy.capacity import Demand
from autoscaler.policy.demand import DemandState, Estimate, Series
from autoscaler.policy.lasting import Lasting
from autoscaler.policy.mix import Mix

_NO_BIN: Final = (0.0, 0.0)  # a bin not scored yet, as the kernels take it
# the state's tuples read as objects: compiled, a float read as a float is unboxed from its tuple,
# then boxed again for the kernel's call
Boxed = tuple[Any, ...]


def fold(
    state: DemandState,
    now: float,
    readings: tuple[
        float,
        float,
        float,
        float,
        float | None,
        float | None,
        float | None,
        float | None,
        float | None,
        float | None,
    ],
    weights: tuple[float, float, float],
) -> tuple[DemandState, Estimate]:
    """demand.observe past its guards (now after state.at), its `readings` (finished, prompt,
    generated, inflight, prompt_sq, window_s, arrived, arrived_window_s, output_sq, output_sum) at the
    tick's weights, by flatdemand's kernel (flatdemand.install)."""
    (
        finished,
        prompt,
        generated,
        inflight,
        prompt_sq,
        window_s,
        arrived,
        arrived_window_s,
        output_sq,
        output_sum,
    ) = readings
    # the outputs' two moments are read as a pair (mix.add_counts)
    out_pair, osq_read, osum_read = False, 0.0, 0.0
    if output_sq is not None and output_sum is not None:
        out_pair, osq_read, osum_read = True, output_sq, output_sum
    gate, peaks = state.counted, state.peaks
    mix = state.mix
    lasted = state.lasting
    level, trend = state.requests.level, state.requests.trend
    s2, sn = state.spread  # a pair of floats: unpacked, not boxed into a new tuple first
    gate_level, gate_trend = (0.0, 0.0) if gate is None else (gate.level, gate.trend)
    typical = state.typical
    typical_r, typical_p, typical_o = typical.requests, typical.prompt_tokens, typical.output_tokens
    lasting_time, lasting_rate, lasting_excess = lasted.time_s, lasted.rate, lasted.excess
    weight, b, typical_w = weights
    out: Boxed = flatdemand._kernel(
        state.at, state.inflight, mix.requests, mix.prompt, mix.output, mix.prompt_sq, mix.spread_requests,
        mix.spread_prompt, mix.output_sq, mix.spread_output,
        level, trend,
        state.primed, s2, sn,
        gate is not None, gate_level, gate_trend,
        typical_r, typical_p, typical_o, state.typical_peak, bool(peaks), peaks[0][1] if peaks else 0.0,
        lasting_time, lasting_rate, lasting_excess,
        now, finished, prompt, generated, inflight,
        prompt_sq is not None, 0.0 if prompt_sq is None else prompt_sq,
        0.0 if window_s is None else window_s,
        arrived is not None, 0.0 if arrived is None else arrived,
        0.0 if arrived_window_s is None else arrived_window_s,
        out_pair, osq_read, osum_read,
        weight, b, typical_w,
    )  # fmt: skip
    new = DemandState(
        now,
        inflight,
        Mix(out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7]),
        Series(out[8], out[9]),
        True,
        state.pending,
        state.error_quantile,
        state.error_scale,
        state.scored,
        Demand(out[15], out[16], out[17]),
        peaks,
        out[18],
        state.bins,
        state.relative,
        out[10:12],
        Series(out[13], out[14]) if out[12] else None,
        Lasting(out[19], out[20], out[21]),
        state.heights,
    )
    return new, Estimate(Demand(out[22], out[23], out[24]), out[25])


def above_band(
    terms: tuple[float, ...],
    band: tuple[float, float, float],
    prior: DemandState,
    now: float,
    seen: Demand,
    threshold: float,
) -> tuple[bool, float]:
    """flatband's kernel (flatband.use) for demand `seen` now against the band over `prior`
    (primed), at the load's terms and the band's (capacityfacts.load_terms, band_terms)."""
    bins: Boxed = prior.bins  # its pairs read as objects too (below)
    n = len(bins)
    relative, heights = prior.relative, prior.heights
    boxed: Boxed = terms
    first: Boxed = bins[0] if n else _NO_BIN
    second: Boxed = bins[1] if n > 1 else _NO_BIN
    a0, a1, b0, c0, k, min_rate = boxed
    damping_s, prior_weight, prior_error = band
    rl, rt = prior.requests.level, prior.requests.trend
    p, o = prior.mix.prompt, prior.mix.output
    typical = prior.typical
    tr, tp, to = typical.requests, typical.prompt_tokens, typical.output_tokens
    s0, n0 = first
    s1, n1 = second
    er, ep, eo = seen.requests, seen.prompt_tokens, seen.output_tokens
    rq, rn, hq, lean = relative.quantile, relative.scored, heights.quantile, heights.lean
    got: tuple[bool, float] = flatband.kernel(
        a0, a1, b0, c0, k, min_rate, damping_s, now - prior.at, rl, rt, p, o, tr, tp, to,
        prior_weight, prior_error, prior.scored, prior.error_quantile,
        n, s0, n0, s1, n1, rq, rn, hq, lean,
        er, ep, eo, threshold,
    )  # fmt: skip
    return got
