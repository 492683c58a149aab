"""Demand: the requests and tokens that arrive per second, estimated, forecast and given a band.

Sits at the head of the predictive stages (planner.py). Its input is what engines count: the
adapter serves their counters as rates (requests finished, prompt tokens prefilled, tokens
generated per second, summed over the target's pods) and the in-flight gauge. Counters count
*processed* work, which the autoscaler itself moves: while capacity is short they fall behind the
arrivals and the difference piles up in flight. So the arrivals are the conservation law

    arrivals/s = finished/s + d(in flight)/dt

and the token demand is the arrivals times the *mix*, the tokens per request (prompt and output):
the tokens counted over the requests counted, as weighted sums over the last ~MIX_REQUESTS
requests or the level's own window, whichever is longer (the mix's noise is a mean's over so many
requests, and the prompt counter, which counts a request when it is prefilled, against the
finished one, which counts it when it ends, only agree over windows longer than requests last).
The arrivals are forecast by Holt's method with a damped trend (the trend's effect fades with time
constant damping_s, so no horizon extrapolates without bound), in Wright's irregular-time form as
forecast.py's Holt; the tokens follow them at the mix, which has no trend of its own (a token
series of its own had one, and on Mooncake's long prompts its noise swung the sizing 11 -> 41).
The forecaster's own error is scored online: each tick's forecast is kept until its target time,
then compared with the peak that came (or earlier, once that peak is above its band); a
stochastic approximation tracks the `quantile` of those log ratios, by the level the forecast was
made at (levelbins.py), and planning uses the forecast times exp(that quantile). docs/policy.md
("The predictive stages", "Defaults and why") has the details and the defaults' reasons.

Pure: no clock, no I/O; times are seconds on the caller's clock. State is a NamedTuple value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from autoscaler.policy import levelbins
from autoscaler.policy.capacity import Demand
from autoscaler.policy.levelbins import Bins, Relative
from autoscaler.policy.spec import DemandSpec

if TYPE_CHECKING:
    from autoscaler.policy.statejson import TimeCodec

MAX_PENDING = 48  # forecasts awaiting their target time: one every horizon / 32 at most
MAX_SCORED_HORIZON_S = 600.0  # a longer horizon is scored at 600 s: the band must adapt within minutes
TYPICAL_HALF_LIFE_S = 600.0  # the typical demand forgets half of itself in 10 minutes
MAX_ERROR = 4.0  # |log ratio| beyond e^4 = 55x counts as e^4: one outage does not ruin the band
MAX_SCORED = levelbins.MAX_SCORED  # the prior's weight fades up to this many scored errors
# The mix weighs a request exp(-requests counted since / MIX_REQUESTS): ~2 x 400 requests' worth,
# a standard error of 5 % on lengths of cs^2 2 (docs/policy.md, "Defaults and why")
MIX_REQUESTS = 400.0
# A NamedTuple built as tuple.__new__(cls, fields) skips its Python-level __new__ (~0.4 against
# ~1.3 µs here): the values a tick builds are made so (a dozen a tick).
_new = tuple.__new__


class Series(NamedTuple):
    level: float
    trend: float  # per second


class Mix(NamedTuple):
    """Tokens per request: weighted sums of the tokens counted over the requests counted."""

    requests: float  # the requests counted, weighted (about MIX_REQUESTS once that many were)
    prompt: float  # prompt tokens per request
    output: float  # generated tokens per request


class DemandState(NamedTuple):
    at: float  # the last sample's time
    inflight: float  # the last in-flight reading (its growth is demand the counters miss)
    mix: Mix  # tokens per request
    requests: Series  # arrivals/s
    primed: bool  # a second sample gave the trends a start
    # (made at, target time, forecast load, its levelbins bin), oldest first; load -1: scored
    # early (track); bin -1: made before the bins (an older state), scored into the pooled alone
    pending: tuple[tuple[float, float, float, int], ...]
    error_quantile: float  # tracked quantile of log(actual / forecast), every forecast pooled
    error_scale: float  # smoothed |log ratio|: the quantile tracker's step
    scored: float  # forecasts scored so far (capped at MAX_SCORED)
    typical: Demand  # the demand averaged over TYPICAL_HALF_LIFE_S: the band's offset and mix at idle
    peaks: tuple[tuple[float, float], ...] = ()  # (time, load) with loads falling: window maxima
    # the level's peak over the scored horizon (peaks[0]), averaged as `typical` but rising at once
    # to a new peak: how high the bursts typically go (scaledown.slo_weight)
    typical_peak: float = 0.0
    # per bin of the level a forecast was made at, its errors' mean |log ratio| and count, and the
    # tracked quantile of error / that scale: a bin's band (levelbins.py); () until scored
    bins: Bins = ()
    relative: Relative = Relative()

    def to_dict(self, codec: TimeCodec | None = None) -> dict[str, Any]:
        """JSON-ready, times through `codec` (statejson.TimeCodec; default: seconds)."""
        from autoscaler.policy import statejson  # it reads this module's types

        return statejson.demand_to_dict(self, codec or statejson.SECONDS)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], codec: TimeCodec | None = None) -> DemandState:
        """Parse to_dict output; a malformed field raises ValueError naming it (statejson.py)."""
        from autoscaler.policy import statejson

        return statejson.demand_from_dict(data, codec or statejson.SECONDS)


class Estimate(NamedTuple):
    """This tick's demand as the counters and the in-flight growth show it (not smoothed)."""

    now: Demand
    growth_per_s: float  # d(in flight)/dt that went into it


def observe(
    spec: DemandSpec,
    state: DemandState | None,
    now: float,
    finished: float,
    prompt: float,
    generated: float,
    inflight: float,
) -> tuple[DemandState, Estimate]:
    """Fold one tick's readings (rates summed over pods, in-flight requests) into the state."""
    if state is None or now < state.at:  # first sight, or a clock that stepped back: start over
        est = Estimate(Demand(finished, prompt, generated), 0.0)
        return _start(now, finished, prompt, generated, inflight), est
    dt = now - state.at
    if dt <= 0.0:
        est = Estimate(Demand(finished, prompt, generated), 0.0)
        return state, est
    weight = _weight(spec.alpha, dt, spec.smoothing_period_s)
    counted = finished * dt
    # the older requests' weight: MIX_REQUESTS requests or the level's window, the longer
    decay = math.exp(-counted / MIX_REQUESTS) if counted > 0.0 else 1.0
    if decay < 1.0 - weight:
        decay = 1.0 - weight
    mix = _mix(state.mix, decay, counted, prompt * dt, generated * dt)
    growth = (inflight - state.inflight) / dt
    arrivals = finished + growth
    arrivals = arrivals if arrivals > 0.0 else 0.0  # max(x, 0.0), NaN to 0, without the call
    now_demand = _new(Demand, (arrivals, arrivals * mix.prompt, arrivals * mix.output))
    b = _weight(spec.beta, dt, spec.smoothing_period_s)
    typical_w = typical_weight(dt)
    req = _holt(state.requests, arrivals, dt, weight, b, state.primed)
    new = _new(
        DemandState,
        (
            now,
            inflight,
            mix,
            req,
            True,
            state.pending,
            state.error_quantile,
            state.error_scale,
            state.scored,
            _toward(state.typical, now_demand, typical_w),
            state.peaks,  # the levels the pending forecasts are scored against (track)
            _toward_peak(state.typical_peak, state.peaks, typical_w),
            state.bins,
            state.relative,
        ),
    )
    return new, _new(Estimate, (now_demand, growth))


_LN2 = math.log(2.0)


def typical_weight(elapsed_s: float) -> float:
    """The weight a new value gets in a typical average last moved elapsed_s ago (its half-life
    TYPICAL_HALF_LIFE_S): the typical demand here, the fleet's typical capacity in scaledown."""
    return -math.expm1(-elapsed_s * _LN2 / TYPICAL_HALF_LIFE_S)


def _toward(old: Demand, new: Demand, w: float) -> Demand:
    r, p, o = old
    nr, np, no = new
    return _new(Demand, (r + w * (nr - r), p + w * (np - p), o + w * (no - o)))


def _toward_peak(typical_peak: float, peaks: tuple[tuple[float, float], ...], w: float) -> float:
    """The typical peak after a tick of weight w: the window maximum (peaks[0]) if higher (a burst's
    height is known when it is seen), else the typical peak decaying towards it (the bursts stop)."""
    if not peaks:
        return typical_peak
    top = peaks[0][1]
    return top if top >= typical_peak else typical_peak + w * (top - typical_peak)


def _mix(mix: Mix, decay: float, requests: float, prompt: float, output: float) -> Mix:
    """The mix after `requests` more counted with `prompt` and `output` tokens, the weight of those
    counted before multiplied by `decay`: the ratio of the weighted sums, kept as the weight and
    the ratios."""
    if requests < 0.0:
        requests = 0.0
    counted = mix.requests * decay + requests
    if counted <= 0.0:  # no request counted yet: tokens alone give no mix
        return mix
    p = mix.prompt + (prompt - requests * mix.prompt) / counted
    o = mix.output + (output - requests * mix.output) / counted
    return _new(Mix, (counted, 0.0 if p < 0.0 else p, 0.0 if o < 0.0 else o))


def _start(now: float, finished: float, prompt: float, generated: float, inflight: float) -> DemandState:
    # the first rates' ratio, weighing nothing: the next tick's counts replace it (no time span yet)
    mix = Mix(0.0, prompt / finished, generated / finished) if finished > 0.0 else Mix(0.0, 0.0, 0.0)
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


def _weight(base: float, dt: float, period: float) -> float:
    """A weight quoted for a gap of `period` applied over `dt`: 1 - (1 - base)^(dt / period)."""
    if base >= 1.0:
        return 1.0
    return -math.expm1(dt / period * math.log1p(-base))


def _holt(s: Series, y: float, dt: float, a: float, b: float, primed: bool) -> Series:
    old_level, old_trend = s
    if not primed:  # the first difference starts the trend, as Holt's usual initialisation
        return _new(Series, (y, (y - old_level) / dt))
    predicted = old_level + old_trend * dt
    level = predicted + a * (y - predicted)
    if level < 0.0:
        level = 0.0  # demand is never negative: a trend that overshot zero starts from zero
    trend = old_trend + b * ((level - old_level) / dt - old_trend)
    return _new(Series, (level, trend))


def expected(spec: DemandSpec, state: DemandState, horizon_s: float) -> Demand:
    """The mean forecast horizon_s after the last sample: the arrivals' (damped trend, never below
    0) at the mix."""
    tau = spec.damping_s
    reach = tau * -math.expm1(-horizon_s / tau) if horizon_s > 0.0 else 0.0
    rl, rt = state.requests
    r = rl + rt * reach
    if r < 0.0:
        r = 0.0
    _, p, o = state.mix
    return _new(Demand, (r, r * p, r * o))


def error_quantile(spec: DemandSpec, state: DemandState) -> float:
    """The quantile of the scored log errors, the prior's figure until errors were scored, blended
    by weight; never below 0 (the band never plans below the mean)."""
    n = state.scored
    w = spec.prior_weight
    q = (w * spec.prior_error + n * state.error_quantile) / (w + n) if w + n > 0.0 else spec.prior_error
    return q if q > 0.0 else 0.0


def band_quantile(spec: DemandSpec, state: DemandState, forecast_load: float, typical_load: float) -> float:
    """The error quantile a forecast of `forecast_load` is planned on: its bin's (levelbins.py),
    blended with the pooled one (error_quantile) by the errors it rests on as the pooled one is
    with the prior, so a bin with few leans on all of them; never below 0."""
    pooled = error_quantile(spec, state)
    got = levelbins.quantile(state.bins, state.relative, levelbins.bin_of(forecast_load, typical_load))
    if got is None:
        return pooled
    own, n = got
    w = spec.prior_weight
    q = (w * pooled + n * own) / (w + n)
    return q if q > 0.0 else 0.0


def upper(
    spec: DemandSpec,
    state: DemandState,
    mean: Demand,
    load: Callable[[Demand], float],
    typical_load: float | None = None,
) -> Demand:
    """The band's upper quantile over a mean forecast.

    Errors are log ratios of (load + typical load): relative to the level when it is high, to the
    typical load when it is near zero, so on/off traffic keeps a band in absolute terms (an idle
    minute before a burst forecasts 0, and is scored against the burst). The upper load is then
    (mean + typical) × exp(quantile) - typical, spread over the mean's mix (the typical mix at 0),
    the quantile that of the forecasts made at the mean's level (band_quantile).
    `typical_load` is load(state.typical) when the caller has it.
    """
    typical = load(state.typical) if typical_load is None else typical_load
    offset = typical
    mean_load = load(mean)
    q = band_quantile(spec, state, mean_load, typical)
    high = (mean_load + offset) * math.exp(q) - offset
    if mean_load > 1e-12:
        return mean.scaled(high / mean_load)
    if typical > 1e-12 and high > 0.0:
        return state.typical.scaled(high / typical)
    return mean


def _score(
    e: float, q: float, scale: float, scored: float, spec: DemandSpec, above: bool = False
) -> tuple[float, float, float]:
    """The quantile tracker (error_quantile, error_scale, scored) after one forecast's log error e,
    clipped to ±MAX_ERROR: a stochastic-approximation step of the smoothed |e| towards the
    `quantile`. `above`: e is known to be above the tracked quantile (early scoring)."""
    e = MAX_ERROR if e > MAX_ERROR else -MAX_ERROR if e < -MAX_ERROR else e
    scale += 0.05 * (abs(e) - scale) if scored else abs(e)
    q += (0.1 * scale + 1e-3) * (spec.quantile - (1.0 if not above and e <= q else 0.0))
    if scored < MAX_SCORED:
        scored += 1.0
    return q, scale, scored


def track(
    spec: DemandSpec,
    state: DemandState,
    now: float,
    level_now: float,
    horizon_s: float,
    load_ahead: float,
    typical_load: float,
) -> DemandState:
    """Score the forecasts due by now, and keep `load_ahead` (the mean forecast horizon_s ahead)
    to be scored when its time comes; `level_now` is the load of the demand's smoothed level
    after this tick's sample, loads in one unit, `typical_load` the typical demand's (the log
    ratios' offset, see `upper`).

    A forecast made at t for t + h is scored against the *peak* level over (t, t + h]: capacity
    asked for at t arrives at t + h at the earliest and what is released at t comes back no
    sooner, so the upper quantile planned on is that of the peak over the horizon, not of one
    instant (on bursty traffic the difference is the whole burst). The level, not one tick's
    estimate: a tick's estimate carries the counters' noise (one scrape's in-flight growth, prompt
    tokens counted as their chunks are prefilled, the mean prompt squared in the attention term),
    ±40 % tick to tick on Azure conv, and its peak over a horizon made the band ×2 there; that
    noise is not demand a fleet must be sized for (the queue absorbs one scrape of it, and the
    capacity model's queueing tail covers the Poisson arrivals at a rate). The level follows a
    step within four scrapes (alpha 0.3: 76 %), so a burst that lasts longer is scored in full.

    A forecast whose window has already peaked above its band is scored then, not at t + h: its
    error is above the tracked quantile whatever comes, so the tracker's step is known; the band
    widens during a burst, not a horizon after it.
    """
    peaks = state.peaks
    pending = state.pending
    end = len(peaks)
    while end and peaks[end - 1][1] <= level_now:
        end -= 1
    # the forecasts made since `since` have this tick's level as the peak of their window so far
    since = peaks[end - 1][0] if end else -math.inf
    if end and pending and since > pending[-1][0]:
        # a higher level since the newest forecast was made: every pending window holds it, and a
        # forecast made from now on starts after this tick, so this level is never a window's peak
        # (one entry per gap between forecasts: the tuple is bounded by MAX_PENDING + 1)
        peaks = peaks[:end]
        since = math.inf
    else:
        peaks = (*peaks[:end], (now, level_now))
    typical_peak = state.typical_peak if state.typical_peak >= level_now else level_now  # a new peak at once
    offset = typical_load + 1e-12
    q, scale, scored = state.error_quantile, state.error_scale, state.scored
    bins, relative = state.bins, state.relative
    due = 0
    while due < len(pending) and pending[due][1] <= now:
        made, _, forecast, b = pending[due]
        due += 1
        if forecast < 0.0:
            continue  # scored early (below)
        peak = next(load for at, load in peaks if at > made)  # the newest entry qualifies
        e = math.log((peak + offset) / (forecast + offset))
        q, scale, scored = _score(e, q, scale, scored, spec)
        if b >= 0:
            bins, relative = levelbins.score(bins, relative, b, _clip(e), spec.quantile, False)
    if due:
        pending = pending[due:]
    # Early scoring: a forecast not yet due whose window has already peaked above its band has an
    # error above the tracked quantile whatever comes before it falls due, so the tracker's step is
    # known now: it is scored now (with the error so far, a lower bound), and the band widens during
    # a burst instead of one horizon after it. Only the forecasts whose peak this tick's level is
    # can have crossed it since the last tick (the newest, made since `since`). The band crossed is
    # the forecast's bin's; the pooled tracker, the bins' fallback, takes the bound as the error
    # when it is not above its own quantile (a bin's band can be below the pooled one).
    i = len(pending) - 1
    if i >= 0 and pending[i][0] >= since:
        top = level_now + offset
        early = None
        while i >= 0 and pending[i][0] >= since:
            made, target, forecast, b = pending[i]
            got = levelbins.quantile(bins, relative, b) if b >= 0 else None
            tracked = q if got is None else got[0]
            if forecast >= 0.0 and top > (forecast + offset) * math.exp(tracked):
                e = math.log(top / (forecast + offset))
                q, scale, scored = _score(e, q, scale, scored, spec, above=e > q)
                if b >= 0:
                    bins, relative = levelbins.score(bins, relative, b, _clip(e), spec.quantile, True)
                if early is None:
                    early = list(pending)
                early[i] = (made, target, -1.0, b)
            i -= 1
        if early is not None:
            pending = tuple(early)
    scored_at = min(horizon_s, MAX_SCORED_HORIZON_S)
    if not pending or now - pending[-1][0] >= scored_at / 32.0:
        if len(pending) >= MAX_PENDING:
            pending = pending[1:]
        pending = (*pending, (now, now + scored_at, load_ahead, levelbins.bin_of(load_ahead, typical_load)))
    oldest = pending[0][0]
    cut = 0
    while cut < len(peaks) - 1 and peaks[cut][0] <= oldest:
        cut += 1
    if cut:
        peaks = peaks[cut:]
    # state._replace(pending=..., error_quantile=..., error_scale=..., scored=..., peaks=...,
    # typical_peak=..., bins=..., relative=...), built directly
    return _new(
        DemandState,
        (*state[:5], pending, q, scale, scored, state.typical, peaks, typical_peak, bins, relative),
    )


def _clip(e: float) -> float:
    return MAX_ERROR if e > MAX_ERROR else -MAX_ERROR if e < -MAX_ERROR else e
