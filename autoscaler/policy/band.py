"""The band: the demand forecaster's own errors, scored online, and the upper quantile planned on.

Each tick's mean forecast (demand.expected) is kept until its target time, then compared with the
peak of the demand's level that came (or earlier, once that peak is above its band: early
scoring); a stochastic approximation tracks the `quantile` of those log ratios, pooled and by the
level the forecast was made at (levelbins.py), and planning uses the forecast times exp(that
quantile) (upper). The errors, the pending forecasts and the peaks are DemandState's fields
(demand.py). docs/policy.md ("The predictive stages", "Defaults and why") has the defaults' reasons.

Pure: no clock, no I/O; times are seconds on the caller's clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

from autoscaler.policy import lateband, levelbins, levelnoise
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityspec import DemandSpec
from autoscaler.policy.demand import MAX_PENDING, DemandState, level_alpha
from autoscaler.policy.levelbins import Heights

MAX_SCORED_HORIZON_S: Final = 600.0  # a longer horizon is scored at 600 s: the band must adapt within minutes
MAX_ERROR: Final = 4.0  # |log ratio| beyond e^4 = 55x counts as e^4: one outage does not ruin the band
MAX_SCORED: Final = levelbins.MAX_SCORED  # the prior's weight fades up to this many scored errors
# bin 0's heights over the typical load are clipped where a forecast of 0's log ratio is: e^4 - 1
MAX_HEIGHT: Final = 53.598150033144236  # math.expm1(MAX_ERROR), a literal for mypyc's Final
_EXPM1: Final = math.expm1  # no mypyc primitive: read as a module's attribute at each call
if len(DemandState.FIELDS) != 18:  # track builds its result field by field
    raise AssertionError("band.track lists DemandState's 18 fields: update it with the state")


def error_quantile(spec: DemandSpec, state: DemandState) -> float:
    """The quantile of the scored log errors, the prior's figure until errors were scored, blended
    by weight; never below 0 (the band never plans below the mean)."""
    return _pooled(spec, state.error_quantile, state.scored)


def band_quantile(spec: DemandSpec, state: DemandState, forecast_load: float, typical_load: float) -> float:
    """The error quantile a forecast of `forecast_load` is planned on: its bin's (levelbins.py),
    blended with the pooled one (error_quantile) by the errors it rests on as the pooled one is
    with the prior, so a bin with few leans on all of them; never below 0."""
    b = levelbins.bin_of(forecast_load, typical_load)
    return _planned(spec, state.error_quantile, state.scored, state.bins, state.relative, b)


def on_heights(state: DemandState, forecast_load: float, typical_load: float) -> bool:
    """Whether a forecast of `forecast_load` plans on bin 0's heights: made below the typical load
    (levelbins.bin_of's bin 0) while the heights' lean is above 0 (track)."""
    return forecast_load < typical_load and state.heights.lean > 0.0


def _pooled(spec: DemandSpec, q: float, n: float) -> float:
    """error_quantile of a pooled tracker at quantile q over n scored errors."""
    w = spec.prior_weight
    q = (w * spec.prior_error + n * q) / (w + n) if w + n > 0.0 else spec.prior_error
    return q if q > 0.0 else 0.0


def _planned(
    spec: DemandSpec, q: float, n: float, bins: levelbins.Bins, relative: levelbins.Relative, b: int
) -> float:
    """band_quantile of bin b from the trackers' fields (pooled quantile q over n errors, the bins)."""
    pooled = _pooled(spec, q, n)
    got = levelbins.quantile(bins, relative, b)
    if got is None:
        return pooled
    own, m = got
    w = spec.prior_weight
    q = (w * pooled + m * own) / (w + m)
    return q if q > 0.0 else 0.0


def upper(
    spec: DemandSpec,
    state: DemandState,
    mean: Demand,
    load: Callable[[Demand], float],
    typical_load: float | None = None,
    mean_load: float | None = None,
) -> Demand:
    """The band's upper quantile over a mean forecast.

    Errors are log ratios of (load + typical load): relative to the level when it is high, to the
    typical load when it is near zero, so on/off traffic keeps a band in absolute terms (an idle
    minute before a burst forecasts 0, and is scored against the burst). The upper load is then
    (mean + typical) × exp(quantile) - typical, spread over the mean's mix (the typical mix at 0),
    the quantile that of the forecasts made at the mean's level (band_quantile).
    `typical_load` is load(state.typical) and `mean_load` load(mean) when the caller has them.
    """
    typical = load(state.typical) if typical_load is None else typical_load
    if mean_load is None:
        mean_load = load(mean)
    return widened(state, mean, mean_load, typical, band_width(spec, state, mean_load, typical))


def band_width(spec: DemandSpec, state: DemandState, forecast_load: float, typical_load: float) -> float:
    """The width `widened` reads for a forecast of `forecast_load`: exp(band_quantile), or in bin 0
    while its errors as heights over the typical load plan tighter than as log ratios (the heights'
    `lean` above 0, track), 1 + the heights' quantile (never below 0), which widened reads as the
    band's height over the level in typical loads."""
    if on_heights(state, forecast_load, typical_load):
        hq = state.heights.quantile
        return 1.0 + (hq if hq > 0.0 else 0.0)
    return math.exp(band_quantile(spec, state, forecast_load, typical_load))


def widened(state: DemandState, mean: Demand, mean_load: float, typical: float, width: float) -> Demand:
    """upper's band over `mean` (its load `mean_load`) at the width of its bin (band_width), which
    a caller with several forecasts of one state works out once a bin (lookahead.py): in log space,
    (mean + typical) x width - typical; in bin 0 planned on heights, mean + typical x (width - 1)."""
    if on_heights(state, mean_load, typical):  # read as band_width gave it
        high = mean_load + typical * (width - 1.0)
    else:
        high = (mean_load + typical) * width - typical
    if mean_load > 1e-12:
        return mean.scaled(high / mean_load)
    if typical > 1e-12 and high > 0.0:
        return state.typical.scaled(high / typical)
    return mean


def _score(
    e: float,
    q: float,
    scale: float,
    scored: float,
    spec: DemandSpec,
    above: bool = False,
    bound: float = MAX_ERROR,
) -> tuple[float, float, float]:
    """The quantile tracker (error_quantile, error_scale, scored) after one forecast's log error e,
    clipped to ±bound: a stochastic-approximation step of the smoothed |e| towards the
    `quantile`. `above`: e is known to be above the tracked quantile (early scoring)."""
    e = bound if e > bound else -bound if e < -bound else e
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
    rate: float = 0.0,
    alpha: float | None = None,
) -> DemandState:
    """Score the forecasts due by now, and keep `load_ahead` (the mean forecast horizon_s ahead)
    to be scored when its time comes; `level_now` is the load of the demand's smoothed level
    after this tick's sample, loads in one unit, `typical_load` the typical demand's (the log
    ratios' offset, see `upper`), `rate` the level's arrivals per second, `alpha` the level's weight
    a period as observe applied it this tick (demand.level_alpha_at; None: at `rate`, read as
    Poisson counts).

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

    The level is scored less its own noise's expected excess over a horizon (levelnoise.py): at a
    few requests a tick a rate that does not move peaks above itself by the Poisson counts alone.
    """
    scored_at = MAX_SCORED_HORIZON_S if horizon_s > MAX_SCORED_HORIZON_S else horizon_s  # min(), no call
    typical_peak = state.typical_peak if state.typical_peak >= level_now else level_now  # a new peak at once
    period = spec.smoothing_period_s
    if alpha is None:  # the level's weight at its rate, its counts read as Poisson's
        at = state.typical.requests if state.typical.requests > rate else rate
        alpha = level_alpha(spec.alpha, period, at, spec.level_requests)
    noise = levelnoise.peak_excess(alpha, period, rate, scored_at)
    level_now = level_now * (1.0 - noise) if noise < 1.0 else 0.0
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
        peaks = peaks[:end] + ((now, level_now),)  # noqa: RUF005 (levelbins.score)
    offset = typical_load + 1e-12
    q, scale, scored = state.error_quantile, state.error_scale, state.scored
    bins, relative, heights = state.bins, state.relative, state.heights
    due, count = 0, len(pending)
    while due < count and pending[due][1] <= now:
        made, _, forecast, b = pending[due]
        due += 1
        if forecast < 0.0:
            continue  # scored early (below)
        k = 0  # the first entry after `made` (the newest qualifies)
        while peaks[k][0] <= made:
            k += 1
        peak = peaks[k][1]
        if b == 0:
            heights = _heights(spec, heights, forecast, peak, offset, q, scored, bins, relative, False)
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
    # the forecast's bin's, the one it plans on (bin 0's heights' where they lean so); every
    # tracker takes the bound as the error, above its own quantile or not: the pooled one, the
    # bins' fallback (a bin's band can be below the pooled one), the bins' when bin 0 crossed its
    # heights' band, and bin 0's heights when it crossed the log one. A forecast is scored once, in
    # every tracker at one time.
    i = len(pending) - 1
    if i >= 0 and pending[i][0] >= since:
        top = level_now + offset
        early = None
        # exp of each bin's tracked quantile (bin b at b + 1, -1 the unbinned), until a score moves
        # them; 0.0 not worked out yet (an exp is never 0 at the clipped errors' quantiles)
        widths = [0.0] * (levelbins.BINS + 1)
        while i >= 0:
            made, target, forecast, b = pending[i]
            if not made >= since:  # NaN too, as the loop's test was
                break
            if forecast >= 0.0:
                width = widths[b + 1]
                if width == 0.0:
                    got = levelbins.quantile(bins, relative, b) if b >= 0 else None
                    width = widths[b + 1] = math.exp(q if got is None else got[0])
                on_heights = b == 0 and heights.lean > 0.0
                hq = heights.quantile if heights.quantile > 0.0 else 0.0
                band_top = forecast + offset * (1.0 + hq) if on_heights else (forecast + offset) * width
                if top > band_top:
                    e = math.log(top / (forecast + offset))
                    if b == 0:
                        heights = _heights(
                            spec, heights, forecast, level_now, offset, q, scored, bins, relative, True
                        )
                    q, scale, scored = _score(e, q, scale, scored, spec, above=e > q)
                    if b >= 0:
                        above = not on_heights or top > (forecast + offset) * width
                        bins, relative = levelbins.score(bins, relative, b, _clip(e), spec.quantile, above)
                    widths = [0.0] * (levelbins.BINS + 1)
                    if early is None:
                        early = list(pending)
                    early[i] = (made, target, -1.0, b)
            i -= 1
        if early is not None:
            pending = tuple(early)
    if not pending or now - pending[-1][0] >= scored_at / 32.0:
        if len(pending) >= MAX_PENDING:
            pending = pending[1:]
        bin_ahead = levelbins.bin_of(load_ahead, typical_load)
        pending = pending + ((now, now + scored_at, load_ahead, bin_ahead),)  # noqa: RUF005 (levelbins.score)
    oldest = pending[0][0]
    cut, last = 0, len(peaks) - 1
    while cut < last and peaks[cut][0] <= oldest:
        cut += 1
    if cut:
        peaks = peaks[cut:]
    # state._replace(pending=..., error_quantile=..., error_scale=..., scored=..., peaks=...,
    # typical_peak=..., bins=..., relative=..., heights=...), built directly (the other fields as
    # they are: at, inflight, mix, requests, primed; typical; spread, counted, lasting)
    s = state
    return DemandState(
        s.at, s.inflight, s.mix, s.requests, s.primed, pending, q, scale, scored, s.typical, peaks,
        typical_peak, bins, relative, s.spread, s.counted, s.lasting, heights,
    )  # fmt: skip


def _heights(
    spec: DemandSpec,
    heights: Heights,
    forecast: float,
    peak: float,
    offset: float,
    q: float,
    scored: float,
    bins: levelbins.Bins,
    relative: levelbins.Relative,
    early: bool,
) -> Heights:
    """Bin 0's heights after its forecast `forecast` scored against `peak` (loads; `offset` the
    typical load's, q and scored the pooled tracker's, bins and relative the bins', all before this
    forecast's score). `early`: scored early, the peak so far; the height is above the heights'
    quantile if the peak crossed their band.

    The lean steps first, by the two bands' quantile (pinball) losses on this height, the log
    band's less the heights', in typical loads: the log band's height over the forecast is
    (forecast / typical + 1) x (exp(bin 0's quantile) - 1) (band_quantile, the prior and the pooled
    blended in as planned), the heights' their quantile. The quantile loss is a proper score of an
    upper quantile: lower for the band that covers as often with less height, so a band too narrow
    to cover loses by its misses, one too wide by its height. Their mean and variance run over the
    heights' errors after the first 1 / (1 - quantile) (50 at 0.98: one expected above a 0.98
    band; before, the heights' tracker is still climbing from 0), and the lean is the mean less
    its standard error times the band's quantile's normal deviate (2.05 at 0.98): bin 0 moves to
    the heights when their band scores better at the band's own confidence, not on a mean that
    hovers about 0 (Mooncake's and ServeGen's steady troughs crossed it back and forth)."""
    hq, hs, hn = heights.quantile, heights.scale, heights.scored
    mean, variance, lean = heights.mean, heights.variance, heights.lean
    h = (peak - forecast) / offset
    h = MAX_HEIGHT if h > MAX_HEIGHT else -MAX_HEIGHT if h < -MAX_HEIGHT else h
    ql = _planned(spec, q, scored, bins, relative, 0)  # band_quantile's for bin 0, as planned
    tau = spec.quantile
    above_log = (forecast / offset + 1.0) * _EXPM1(ql)
    above_heights = hq if hq > 0.0 else 0.0
    loss = (h - above_log) * (tau - (1.0 if h < above_log else 0.0))
    loss -= (h - above_heights) * (tau - (1.0 if h < above_heights else 0.0))
    hq, hs, hn = _score(h, hq, hs, hn, spec, early and h > hq, MAX_HEIGHT)
    first = 1.0 / (1.0 - tau)
    if hn >= first:
        m = hn - first + 1.0  # the losses counted (up to MAX_SCORED less the first)
        step = loss - mean
        mean += step / m
        variance += (step * (loss - mean) - variance) / m
        lean = mean - lateband.deviate(tau) * math.sqrt(variance / (m - 1.0)) if m > 1.5 else 0.0
    return Heights(hq, hs, hn, mean, variance, lean)


def _clip(e: float) -> float:
    return MAX_ERROR if e > MAX_ERROR else -MAX_ERROR if e < -MAX_ERROR else e
