"""Demand: the requests and tokens that arrive per second, estimated and forecast (band.py gives
the forecast its band).

Sits at the head of the predictive stages (planner.py). Its input is what engines count: the
adapter serves their counters as rates (requests finished, prompt tokens prefilled, tokens
generated per second, summed over the target's pods) and the in-flight gauge. Counters count
*processed* work, which the autoscaler itself moves: while capacity is short they fall behind the
arrivals and the difference piles up in flight. So the arrivals are the conservation law

    arrivals/s = finished/s + d(in flight)/dt

and the token demand is the arrivals times the *mix*, the tokens per request (prompt and output):
the tokens counted over the requests counted, as weighted sums over the last ~MIX_REQUESTS
requests, the level's own window or twice the requests' time in the system, whichever is longest
(the mix's noise is a mean's over so many requests, and the prompt counter, which counts a request
when it is prefilled, against the finished one, which counts it when it ends, only agree over
windows longer than requests last: minutes for a reasoning model's 1,500-token answers).
The arrivals are forecast by Holt's method with a damped trend (the trend's effect fades with time
constant damping_s, so no horizon extrapolates without bound), in Wright's irregular-time form as
forecast.py's Holt; the tokens follow them at the mix, which has no trend of its own (a token
series of its own had one, and on Mooncake's long prompts its noise swung the sizing 11 -> 41).
The forecaster's own errors are scored online and give the band planned on (band.py); the state
kept for them lives in DemandState (demandstate.py). docs/policy.md ("The predictive stages",
"Defaults and why") has the details and the defaults' reasons.

Pure: no clock, no I/O; times are seconds on the caller's clock. State is a value (demandstate.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

from autoscaler.policy import memo
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityspec import DemandSpec

# the state's values, in a module of their own (demandstate.py), re-exported: callers read them here
from autoscaler.policy.demandstate import DemandState as DemandState
from autoscaler.policy.demandstate import Estimate as Estimate
from autoscaler.policy.demandstate import Series as Series
from autoscaler.policy.lasting import after_tick
from autoscaler.policy.mix import MIX_REQUESTS, SPREAD_REQUESTS, Mix, add_counts

MAX_PENDING: Final = 48  # forecasts awaiting their target time: one every horizon / 32 at most
TYPICAL_HALF_LIFE_S: Final = 600.0  # the typical demand forgets half of itself in 10 minutes
# ... and at least MIX_LIFETIMES times as long as requests last (Little's law: in flight / finished/s,
# at most TYPICAL_HALF_LIFE_S): the prompt counter counts a request when it starts, the finished one
# when it ends, so over a shorter window their ratio swings with the arrivals (docs/policy.md)
MIX_LIFETIMES = 2.0


def observe(
    spec: DemandSpec,
    state: DemandState | None,
    now: float,
    finished: float,
    prompt: float,
    generated: float,
    inflight: float,
    prompt_sq: float | None = None,
    window_s: float | None = None,
    arrived: float | None = None,
    arrived_window_s: float | None = None,
    output_sq: float | None = None,
    output_sum: float | None = None,
    level_alpha: float | None = None,
) -> tuple[DemandState, Estimate]:
    """Fold one tick's readings (rates summed over pods, in-flight requests; `prompt_sq` the
    prompt tokens squared per second, None where no engine publishes prompt lengths; `output_sq`
    and `output_sum` the generated tokens squared and the generated tokens per second of the
    requests finished, both from the output-length histogram, likewise for output lengths) into the
    state; `window_s`: the seconds the finished rate was measured over (None: the tick's own).
    `arrived`: the gateway's arrivals/s over `arrived_window_s`, the count the dispersion is read
    from, about a level of its own (None: no counter or no reading: finished + growth about the
    level, which they set). `level_alpha`: the level's weight a period for this tick, where the
    caller has worked it out (level_alpha_at, as the planner does for band.track); None: here."""
    if state is None or now < state.at:  # first sight, or a clock that stepped back: start over
        est = Estimate(Demand(finished, prompt, generated), 0.0)
        return _start(now, finished, prompt, generated, inflight), est
    dt = now - state.at
    if dt <= 0.0:
        est = Estimate(Demand(finished, prompt, generated), 0.0)
        return state, est
    alpha, beta, period = spec.alpha, spec.beta, spec.smoothing_period_s
    last_alpha, last_beta, last_period, last_dt, weights = _last_weights[0]
    if not (last_dt == dt and last_alpha == alpha and last_beta == beta and last_period == period):
        kept = _tick_weights.get((alpha, beta, period, dt))  # the same every tick of a fixed period
        if kept is None:
            kept = tick_weights(alpha, beta, period, dt)
            memo.remember(_tick_weights, (alpha, beta, period, dt), kept, 64)
        weights = kept
        _last_weights[0] = (alpha, beta, period, dt, weights)
    slower = level_alpha_at(spec, state, dt, window_s) if level_alpha is None else level_alpha
    if slower < alpha:  # too few requests a tick for alpha's window: a longer one (level_alpha_at)
        weights = (_weight(slower, dt, period), weights[1], weights[2])
    fused = _fused  # a global, read once
    if fused is not None:  # the arithmetic in one compiled call (flatcalls.fold), where installed
        readings = (
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
        )
        return fused(state, now, readings, weights)
    weight, b, typical_w = weights
    counted = finished * dt
    # the older requests' weight: MIX_REQUESTS requests, the level's window or MIX_LIFETIMES times
    # the requests' time in the system, the longest
    decay = math.exp(-counted / MIX_REQUESTS) if counted > 0.0 else 1.0
    if decay < 1.0 - weight:
        decay = 1.0 - weight
    lifetimes = mix_window_s(finished, inflight, state.lasting.time_s)
    if lifetimes > 0.0:
        lasting = math.exp(-dt / lifetimes)
        if decay < lasting:
            decay = lasting
    squares = None if prompt_sq is None else prompt_sq * dt
    out_squares = None if output_sq is None else output_sq * dt
    out_sum = None if output_sum is None else output_sum * dt
    mix = add_counts(
        state.mix, decay, counted, prompt * dt, generated * dt, squares, SPREAD_REQUESTS, out_squares, out_sum
    )
    growth = (inflight - state.inflight) / dt
    arrivals = finished + growth
    arrivals = arrivals if arrivals > 0.0 else 0.0  # max(x, 0.0), NaN to 0, without the call
    now_demand = Demand(arrivals, arrivals * mix.prompt, arrivals * mix.output)
    req = _holt(state.requests, arrivals, dt, weight, b, state.primed)
    spread = state.spread
    gate = state.counted
    if state.primed:
        # counted as they arrive where a gateway counts them: finishes come in clumps (a batch's
        # requests end together), which read as bursts (docs/policy.md, arrivalRateMetric); each
        # count about its own level, whose error the miss's weight allows for
        if gate is not None and arrived is not None:
            about, count, count_window = gate, arrived, arrived_window_s
        else:
            about, count, count_window = state.requests, arrivals, window_s
        rl, rt = about.level, about.trend
        ahead = (rl + rt * dt) * dt  # the count the level expected this tick
        if ahead < 0.0:
            ahead = 0.0
        miss = count * dt - ahead
        # the level's own error adds weight / (2 - weight) of a Poisson count's variance to the miss
        # over the variance a Poisson count shows as read (read_variance), per second of the tick
        excess = (miss * miss * (1.0 - 0.5 * weight) - ahead * read_variance(dt, count_window)) / dt
        s2, sn = spread
        if sn <= 0.0:
            spread = (excess, ahead)
        else:
            spread = (s2 + typical_w * (excess - s2), sn + typical_w * (ahead - sn))
    if arrived is None:
        gate = None
    elif gate is None:  # its first reading: a level to count the next ones about
        gate = Series(arrived, 0.0)
    else:
        gate = _holt(gate, arrived, dt, weight, b, True)
    typical = _toward(state.typical, now_demand, typical_w)
    # the arrivals in flight: the gateway's count where there is one, as the dispersion's
    lasted = after_tick(
        state.lasting,
        arrivals if arrived is None else arrived,
        finished,
        inflight,
        dt,
        typical.requests,
        typical_w,
    )
    new = DemandState(
        now,
        inflight,
        mix,
        req,
        True,
        state.pending,
        state.error_quantile,
        state.error_scale,
        state.scored,
        typical,
        state.peaks,  # the levels the pending forecasts are scored against (track)
        _toward_peak(state.typical_peak, state.peaks, typical_w),
        state.bins,
        state.relative,
        spread,
        gate,
        lasted,
        state.heights,
    )
    return new, Estimate(now_demand, growth)


def mix_window_s(finished: float, inflight: float, typical_s: float = 0.0) -> float:
    """The mix's time constant the requests' own time in the system asks for: MIX_LIFETIMES times
    in flight / finished per second (Little's law), or the typical time in the system `typical_s`
    (lasting.py's) where longer, at most TYPICAL_HALF_LIFE_S (also while nothing finishes); 0 with
    nothing in flight and no typical time. The typical time keeps the window through a drain:
    there the fleet's last requests finish with none starting, in flight / finished falls to
    seconds, and a window that short counts finishes whose prompts it has already forgotten (on/off
    minute-long requests: the mix at 1,150 tokens a request where they have 2,000)."""
    if not inflight > 0.0:
        window = 0.0
    else:
        window = MIX_LIFETIMES * inflight / finished if finished > 0.0 else TYPICAL_HALF_LIFE_S
    typical = MIX_LIFETIMES * typical_s
    if window < typical:
        window = typical
    return window if window < TYPICAL_HALF_LIFE_S else TYPICAL_HALF_LIFE_S


def read_variance(dt: float, window_s: float | None) -> float:
    """The variance of a Poisson tick's count as read, over its mean: finished/s x dt + the in-flight
    growth, the rate measured over the last window_s. The growth counts the tick's arrivals less
    its finishes, the rate adds back the last window's finishes scaled by dt / window_s: a window
    shorter than the tick reads its variance dt / window_s times (3 at a 5 s scrape and a 15 s
    tick, read as bursts before). A longer window shares earlier ticks' finishes, which the level
    has seen too: the miss about it stays near Poisson's (1.35 at 60 s), 1 is kept. None: 1."""
    if window_s is None or window_s <= 0.0 or dt <= window_s:
        return 1.0
    return dt / window_s


MAX_DISPERSION = 1e4  # an index of dispersion kept finite (counts of a few requests a tick after idle)


def dispersion(state: DemandState | None, window_s: float) -> float:
    """The arrivals' index of dispersion over window_s (variance over mean of the counts about the
    level's forecast; a renewal process's ca² in the limit): 1 (Poisson) before any count, never
    below 1. Bursts longer than the window make its excess over 1 grow with the window (the variance
    as its square, the mean as itself), so a tick's excess is scaled by window_s / the tick."""
    if state is None:
        return 1.0
    s2, sn = state.spread
    if sn <= 0.0 or s2 <= 0.0:
        return 1.0
    i = 1.0 + s2 / sn * window_s
    return MAX_DISPERSION if i > MAX_DISPERSION else i


def tick_s(state: DemandState | None) -> float:
    """The seconds the dispersion's counts were read over, on average: the count a tick expected
    over the arrivals per second (both averaged as `typical`); 0 before any count or arrival."""
    if state is None:
        return 0.0
    sn = state.spread[1]
    rate = state.typical.requests
    return sn / rate if sn > 0.0 and rate > 0.0 else 0.0


_LN2: Final = math.log(2.0)


def typical_weight(elapsed_s: float) -> float:
    """The weight a new value gets in a typical average last moved elapsed_s ago (its half-life
    TYPICAL_HALF_LIFE_S): the typical demand here, the fleet's typical capacity in scaledown."""
    return -math.expm1(-elapsed_s * _LN2 / TYPICAL_HALF_LIFE_S)


def _toward(old: Demand, new: Demand, w: float) -> Demand:
    r, p, o = old.requests, old.prompt_tokens, old.output_tokens
    nr, np, no = new.requests, new.prompt_tokens, new.output_tokens
    return Demand(r + w * (nr - r), p + w * (np - p), o + w * (no - o))


def _toward_peak(typical_peak: float, peaks: tuple[tuple[float, float], ...], w: float) -> float:
    """The typical peak after a tick of weight w: the window maximum (peaks[0]) if higher (a burst's
    height is known when it is seen), else the typical peak decaying towards it (the bursts stop)."""
    if not peaks:
        return typical_peak
    top = peaks[0][1]
    return top if top >= typical_peak else typical_peak + w * (top - typical_peak)


def _start(now: float, finished: float, prompt: float, generated: float, inflight: float) -> DemandState:
    # the first rates' ratio, weighing nothing: the next tick's counts replace it (no time span yet)
    p = prompt / finished if finished > 0.0 else 0.0
    mix = Mix(0.0, p, generated / finished, spread_prompt=p) if finished > 0.0 else Mix(0.0, 0.0, 0.0)
    return DemandState(
        now,
        inflight,
        mix,
        Series(finished, 0.0),
        False,
        (),
        0.0,
        0.0,
        0.0,
        Demand(finished, prompt, generated),
    )


# observe's arithmetic after its guards, as flatcalls.fold does it by a compiled copy (None: here)
_fused: Callable[..., tuple[DemandState, Estimate]] | None = None


def use(fused: Callable[..., tuple[DemandState, Estimate]] | None) -> None:
    """Fold ticks past observe's guards by `fused` (flatdemand.install; None: in Python)."""
    global _fused
    _fused = fused


_tick_weights: Final[dict[tuple[float, float, float, float], tuple[float, float, float]]] = {}
# the last tick's weights, compared first: hashing and comparing the dict's four-float key costs
# ~1,300 instructions a tick, compiled
_last_weights: Final[list[tuple[float, float, float, float, tuple[float, float, float]]]] = [
    (math.nan, math.nan, math.nan, math.nan, (0.0, 0.0, 0.0))
]


def level_alpha(alpha: float, period_s: float, rate: float, requests: float) -> float:
    """The level's weight a period at `rate` requests/s: alpha, or less where alpha's window would
    average fewer than `requests` requests (DemandSpec.level_requests; 0: alpha). An exponential
    average of weight w a period holds (2 - w) / w periods' counts, so w / (2 - w) <=
    rate·period / requests. The level at a few requests a period swung with its counts (Mooncake
    x 0.52: a steady 2 req/s forecast at 1.2-2.9 tick to tick), and the fleet, sized up at once and
    released slowly, rode the swings' tops (docs/policy.md, "Defaults and why"). At 0 req/s the
    level stands still: observe reads the level or the typical demand, the higher, and the typical
    moves at any rate."""
    if requests <= 0.0:
        return alpha
    x = rate * period_s / requests
    floor = 2.0 * x / (1.0 + x)
    return floor if floor < alpha else alpha


def level_alpha_at(spec: DemandSpec, state: DemandState, dt: float, window_s: float | None) -> float:
    """The level's weight a period that observe applies to the tick dt after `state` (level_alpha):
    at the level's rate or the typical demand's, the higher, and with the requests counted at the
    tick's estimate's own noise. Its finishes read as a rate over window_s shorter than the tick
    carry read_variance times a Poisson count's variance (3 at a 5 s rate a 15 s tick), so the
    level holds that many times `level_requests` counted requests for the same precision."""
    rate = state.requests.level
    if rate < state.typical.requests:
        rate = state.typical.requests
    requests = spec.level_requests * read_variance(dt, window_s)
    return level_alpha(spec.alpha, spec.smoothing_period_s, rate, requests)


def tick_weights(alpha: float, beta: float, period: float, dt: float) -> tuple[float, float, float]:
    """A tick's weights after dt seconds: the level's (alpha), the trend's (beta), the typical's."""
    return _weight(alpha, dt, period), _weight(beta, dt, period), typical_weight(dt)


def _weight(base: float, dt: float, period: float) -> float:
    """A weight quoted for a gap of `period` applied over `dt`: 1 - (1 - base)^(dt / period)."""
    if base >= 1.0:
        return 1.0
    return -math.expm1(dt / period * math.log1p(-base))


def _holt(s: Series, y: float, dt: float, a: float, b: float, primed: bool) -> Series:
    old_level, old_trend = s.level, s.trend
    if not primed:  # the trend starts at 0: the first sample misses the in-flight growth (it
        # has no earlier gauge to difference), so the first difference is the fleet's start, not
        # the demand's (103 -> 380 req/s in a tick on Poisson traffic forecast 2,580 ten minutes on)
        return Series(y, 0.0)
    predicted = old_level + old_trend * dt
    level = predicted + a * (y - predicted)
    if level < 0.0:
        level = 0.0  # demand is never negative: a trend that overshot zero starts from zero
    trend = old_trend + b * ((level - old_level) / dt - old_trend)
    return Series(level, trend)


def expected(spec: DemandSpec, state: DemandState, horizon_s: float) -> Demand:
    """The mean forecast horizon_s after the last sample: the arrivals' (damped trend, never below
    0) at the mix."""
    tau = spec.damping_s
    reach = tau * -math.expm1(-horizon_s / tau) if horizon_s > 0.0 else 0.0
    requests = state.requests
    r = requests.level + requests.trend * reach
    if r < 0.0:
        r = 0.0
    mix = state.mix
    return Demand(r, r * mix.prompt, r * mix.output)
