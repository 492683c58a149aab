"""demand.observe's arithmetic in flat floats, one call a tick, for a compiled copy
(replay/policies/tickkernel.py, installed by install()).

observe folds a tick through ten Python calls (the mix, two Holt steps, the typical average, the
in-flight arrivals, their helpers), a few operations each. `tick` is the same arithmetic, operation
for operation and in the same order, on the state's floats, returning the new ones; flatcalls.fold
unpacks the state into a copy of it and builds the new state from what it returns. Interpreted, the one
call of 37 arguments costs more than the ten it replaces (3.6 against 3.1 µs a tick), so the
Python path keeps demand.py's own; compiled, 2.6 µs. The source keeps to what numba compiles to the
same bits (floats, the C library's exp and expm1, no power with a constant exponent: tpottail.py);
tests/test_flatdemand.py holds that fold, by this source and by the compiled copy, to observe's own to
the bit. A reading not taken is passed as a flag and 0.0 (a window of None as 0.0, which
read_variance reads as None), a gateway series not kept yet as `has_gate` False.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from autoscaler.policy import demand, lasting
from autoscaler.policy import mix as mixes

MIX_REQUESTS = mixes.MIX_REQUESTS
SPREAD_REQUESTS = mixes.SPREAD_REQUESTS
MIX_LIFETIMES = demand.MIX_LIFETIMES
TYPICAL_HALF_LIFE_S = demand.TYPICAL_HALF_LIFE_S
LONGEST_S = lasting.LONGEST_S


def tick(
    at: float,
    was_inflight: float,
    mix_requests: float,
    mix_prompt: float,
    mix_output: float,
    mix_sq: float,
    spread_r: float,
    spread_p: float,
    mix_osq: float,
    spread_o: float,
    level: float,
    trend: float,
    primed: bool,
    s2: float,
    sn: float,
    has_gate: bool,
    gate_level: float,
    gate_trend: float,
    typical_r: float,
    typical_p: float,
    typical_o: float,
    typical_peak: float,
    has_peaks: bool,
    top: float,
    lasting_time: float,
    lasting_rate: float,
    lasting_excess: float,
    now: float,
    finished: float,
    prompt: float,
    generated: float,
    inflight: float,
    has_squares: bool,
    prompt_sq: float,
    window_s: float,
    has_arrived: bool,
    arrived: float,
    arrived_window_s: float,
    has_outputs_pair: bool,
    output_sq: float,
    output_sum: float,
    weight: float,
    b: float,
    typical_w: float,
) -> tuple[
    float, float, float, float, float, float, float, float,
    float, float,
    float, float,
    bool, float, float,
    float, float, float,
    float,
    float, float, float,
    float, float, float, float,
]:  # fmt: skip
    """One tick after `at` (now > at) with the state's floats and this tick's readings, at the
    tick's weights (demand.tick_weights): (the mix's eight fields, the arrivals' level and trend,
    the spread's two, the gateway series' flag, level and trend, the typical demand's three, the
    typical peak, the in-flight arrivals' three (lasting.py), this tick's demand's three and the
    in-flight growth), each as demand.observe worked it out."""
    dt = now - at
    counted = finished * dt
    # the older requests' weight (demand.observe): MIX_REQUESTS requests, the level's window or
    # MIX_LIFETIMES times the requests' time in the system, or its typical value where longer
    # (demand.mix_window_s), the longest
    decay = math.exp(-counted / MIX_REQUESTS) if counted > 0.0 else 1.0
    if decay < 1.0 - weight:
        decay = 1.0 - weight
    lifetimes = 0.0
    if inflight > 0.0:
        lifetimes = MIX_LIFETIMES * inflight / finished if finished > 0.0 else TYPICAL_HALF_LIFE_S
    typical_life = MIX_LIFETIMES * lasting_time
    if lifetimes < typical_life:
        lifetimes = typical_life
    if not lifetimes < TYPICAL_HALF_LIFE_S:
        lifetimes = TYPICAL_HALF_LIFE_S
    if lifetimes > 0.0:
        kept = math.exp(-dt / lifetimes)
        if decay < kept:
            decay = kept
    # the mix (mix.add_counts)
    requests = 0.0 if counted < 0.0 else counted  # NaN kept, as _mix keeps it
    total = mix_requests * decay + requests
    if total <= 0.0:
        counted_mix, p, o, sq, sr, sp = mix_requests, mix_prompt, mix_output, mix_sq, spread_r, spread_p
        osq, so = mix_osq, spread_o
    else:
        p = mix_prompt + (prompt * dt - requests * mix_prompt) / total
        o = mix_output + (generated * dt - requests * mix_output) / total
        # the lengths' spread over SPREAD_REQUESTS or the mix's window
        slow = math.exp(-requests / SPREAD_REQUESTS)
        if slow < decay:
            slow = decay
        sr = spread_r * slow + requests
        sp, sq = spread_p, mix_sq
        so, osq = spread_o, mix_osq
        if sr > 0.0:
            sp = sp + (prompt * dt - requests * sp) / sr
            if has_squares and requests > 0.0:
                squares = prompt_sq * dt
                sq = squares / requests if sq <= 0.0 else sq + (squares - requests * sq) / sr
                if sq < 0.0:
                    sq = 0.0
            if has_outputs_pair and requests > 0.0:
                out_squares = output_sq * dt
                out_sum = output_sum * dt
                if osq <= 0.0:
                    osq = out_squares / requests
                    so = out_sum / requests
                else:
                    osq = osq + (out_squares - requests * osq) / sr
                    so = so + (out_sum - requests * so) / sr
                if osq < 0.0:
                    osq = 0.0
        counted_mix = total
        if p < 0.0:
            p = 0.0
        if o < 0.0:
            o = 0.0
        if sp < 0.0:
            sp = 0.0
        if so < 0.0:
            so = 0.0
    growth = (inflight - was_inflight) / dt
    arrivals = finished + growth
    arrivals = arrivals if arrivals > 0.0 else 0.0
    now_p = arrivals * p
    now_o = arrivals * o
    # the arrivals' level and trend (demand._holt)
    if primed:
        predicted = level + trend * dt
        new_level = predicted + weight * (arrivals - predicted)
        if new_level < 0.0:
            new_level = 0.0
        new_trend = trend + b * ((new_level - level) / dt - trend)
    else:
        new_level, new_trend = arrivals, 0.0
    if primed:
        if has_gate and has_arrived:
            rl, rt, count, count_window = gate_level, gate_trend, arrived, arrived_window_s
        else:
            rl, rt, count, count_window = level, trend, arrivals, window_s
        ahead = (rl + rt * dt) * dt
        if ahead < 0.0:
            ahead = 0.0
        miss = count * dt - ahead
        # demand.read_variance, a window of None passed as 0.0
        variance = 1.0 if count_window <= 0.0 or dt <= count_window else dt / count_window
        excess = (miss * miss * (1.0 - 0.5 * weight) - ahead * variance) / dt
        if sn <= 0.0:
            s2, sn = excess, ahead
        else:
            s2, sn = s2 + typical_w * (excess - s2), sn + typical_w * (ahead - sn)
    if not has_arrived:
        has_gate = False
    elif not has_gate:
        has_gate, gate_level, gate_trend = True, arrived, 0.0
    else:
        predicted = gate_level + gate_trend * dt
        new_gate = predicted + weight * (arrived - predicted)
        if new_gate < 0.0:
            new_gate = 0.0
        gate_trend = gate_trend + b * ((new_gate - gate_level) / dt - gate_trend)
        gate_level = new_gate
    # the typical demand (demand._toward)
    typical_r = typical_r + typical_w * (arrivals - typical_r)
    typical_p = typical_p + typical_w * (now_p - typical_p)
    typical_o = typical_o + typical_w * (now_o - typical_o)
    # the in-flight arrivals (lasting.after_tick), the gateway's count where there is one
    rate_in = arrived if has_arrived else arrivals
    t = 0.0
    if inflight > 0.0:
        t = inflight / finished if finished > 0.0 else LONGEST_S
        if not t < LONGEST_S:
            t = LONGEST_S
    if lasting_time <= 0.0:
        lasting_time, lasting_rate, lasting_excess = t, rate_in, 0.0
    else:
        lasting_time = lasting_time + typical_w * (t - lasting_time)
        u = -math.expm1(-dt / lasting_time) if lasting_time > 0.0 else 1.0
        lasting_rate = lasting_rate + u * (rate_in - lasting_rate)
        poisson = u / (2.0 - u) * typical_r / dt
        deviation = lasting_rate - typical_r
        lasting_excess = lasting_excess + typical_w * (deviation * deviation - poisson - lasting_excess)
    # the typical peak (demand._toward_peak)
    if has_peaks:
        typical_peak = top if top >= typical_peak else typical_peak + typical_w * (top - typical_peak)
    return (
        counted_mix, p, o, sq, sr, sp, osq, so,
        new_level, new_trend,
        s2, sn,
        has_gate, gate_level, gate_trend,
        typical_r, typical_p, typical_o,
        typical_peak,
        lasting_time, lasting_rate, lasting_excess,
        arrivals, now_p, now_o, growth,
    )  # fmt: skip


_kernel: Callable[..., Any] = tick  # the copy flatcalls.fold calls: this module's, or the compiled one


def install(kernel: Callable[..., Any] | None) -> None:
    """demand.observe by `kernel`, a compiled copy of `tick`, from now on (None: demand.py's own)."""
    from autoscaler.policy import flatcalls  # it reads _kernel from this module

    global _kernel
    _kernel = tick if kernel is None else kernel
    demand.use(None if kernel is None else flatcalls.fold)
