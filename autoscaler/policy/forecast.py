"""Forecast a metric's value at now + horizon, the predictive stage's input.

Where it sits: every tick the policy (decide.py) feeds each metric's new sample to `observe`
and asks `forecast` for the value one lead time ahead: the time a replica started now needs to
become ready, which decide.py picks. The forecaster's memory is a frozen `ForecastState` kept
in `PolicyState.forecasters[metric]`; `to_dict`/`from_dict` let a restarted controller resume
it from a CRD status. Pure: no clock, no I/O; `at` and `now` are seconds on one clock that must not
restart (the seasonal history is indexed by absolute time).

The methods and their parameters are described in docs/forecasting.md. The common path (LAST,
LINEAR, HOLT) is O(1) per sample in plain Python floats: numpy's ~1 µs per call would eat the
budget on arrays this small.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autoscaler.policy.spec import ForecasterKind, PredictionSpec

# Values saturate here: with at most MAX_WINDOW_SAMPLES samples and x <= 2e7 s, every running sum
# and trend stays finite (256 × 2e7 × 1e100 ≈ 5e111), so no state ever holds inf or NaN.
MAX_ABS_VALUE = 1e100
MAX_WINDOW_SAMPLES = 256  # LINEAR keeps at most this many (the newest) samples of its window
MIN_TREND_DT_S = 1e-3  # closer samples move Holt's level only: a slope over ~0 s is noise
SEASON_DIGITS = 6  # closed seasonal buckets keep 6 significant digits: short, exact JSON

_LAST = ForecasterKind.LAST
_LINEAR = ForecasterKind.LINEAR
_HOLT = ForecasterKind.HOLT
_SEASONAL = ForecasterKind.SEASONAL


@dataclass(frozen=True, slots=True)
class Forecast:
    """The forecast value (finite, >= 0), the method that produced it and why that one."""

    value: float
    method: ForecasterKind  # after any fallback, e.g. HOLT when SEASONAL had no history
    reason: str


@dataclass(frozen=True, slots=True)
class HoltState:
    level: float
    trend: float  # per second
    primed: bool  # False until a second sample gave the first slope


Sums = tuple[float, float, float, float]  # Σx, Σy, Σx², Σxy with x = at - origin


@dataclass(frozen=True, slots=True)
class LinearState:
    """The window's samples as a two-stack queue, so that no sum is ever subtracted from.

    Least squares needs Σx, Σy, Σx², Σxy over the window. Subtracting the samples that leave
    cancels catastrophically after a spike (Σy of 9e15 and 1, minus 9e15, is 2, not 1), so the
    oldest `len(front_sums)` samples carry suffix sums (front_sums[i] sums samples i..front-1) and
    newer ones a running total (back_sums). A sample leaving drops a suffix; when a sample leaves
    the back, the whole window becomes the front again, re-anchored at its oldest sample: O(n)
    once per n samples, O(1) amortized, and x stays under about two windows.
    Only samples, origin and the front's length are serialized; from_dict redoes the same folds.
    """

    samples: tuple[tuple[float, float], ...]  # (at, value), oldest first, never empty
    origin: float
    front_sums: tuple[Sums, ...]
    back_sums: Sums  # the samples after the front, summed oldest first


@dataclass(frozen=True, slots=True)
class SeasonalState:
    """A ring of bucket means covering the last season, plus the bucket being filled.

    Bucket k holds samples with floor(at / bucket_s) == k. Slot k % len(means) holds the mean of
    closed bucket k for bucket - len(means) <= k < bucket; None marks a bucket with no sample.
    """

    bucket_s: float
    bucket: int  # the open bucket: the newest sample's
    open_sum: float
    open_count: int
    means: tuple[float | None, ...]


@dataclass(frozen=True, slots=True)
class ForecastState:
    """Everything one metric's forecaster remembers. Only the parts the spec uses are kept."""

    last_at: float
    last_value: float
    holt: HoltState | None = None
    linear: LinearState | None = None
    seasonal: SeasonalState | None = None

    def digest(self) -> tuple[Any, ...]:
        """The state without the times of its samples (they move on every reading), floats to four
        decimals (absolute: a trend decaying towards 0 settles instead of moving forever): what the
        controller compares with the status it wrote last (controller/report.state_digest). Read
        off the fields beside to_dict(), whose output and a walk over it cost more than the rest of
        a steady reconcile's bookkeeping."""
        h, lin, s = self.holt, self.linear, self.seasonal
        return (
            round(self.last_value, 4),
            None if h is None else (round(h.level, 4), round(h.trend, 4), h.primed),
            None if lin is None else tuple(round(v, 4) for _, v in lin.samples),
            None
            if s is None
            else (
                s.bucket_s,
                s.bucket,
                round(s.open_sum, 4),
                s.open_count,
                tuple(None if m is None else round(m, 4) for m in s.means),
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; weekly seasonal history dominates its size (see docs/forecasting.md)."""
        from autoscaler.policy import forecastjson  # it reads this module's types

        return forecastjson.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ForecastState:
        """Parse `to_dict` output; a malformed field raises ValueError naming it and its value."""
        from autoscaler.policy import forecastjson

        return forecastjson.from_dict(data)


def observe(spec: PredictionSpec, state: ForecastState | None, at: float, value: float) -> ForecastState:
    """Fold one sample into the state.

    A sample older than the last one is ignored (the same state comes back). A sample at the last
    one's time replaces it where raw samples are kept (the last value, the linear window); Holt
    gives it zero weight, as its time-scaled weight is 0 for a 0 s gap, and so do the seasonal
    buckets (a repeated reading would otherwise count twice in a bucket's mean).
    """
    if not math.isfinite(at):
        raise ValueError(f"observe: at must be a finite time in seconds, got {at!r}")
    if not math.isfinite(value):
        raise ValueError(f"observe: value must be a finite number, got {value!r} at {at!r}")
    at, value = float(at), float(value)  # ints would survive until a JSON round trip made them floats
    if value > MAX_ABS_VALUE:
        value = MAX_ABS_VALUE
    elif value < -MAX_ABS_VALUE:
        value = -MAX_ABS_VALUE
    kind = spec.forecaster
    fallback = spec.season_fallback
    want_holt = kind == _HOLT or (kind == _SEASONAL and fallback == _HOLT)
    want_linear = kind == _LINEAR or (kind == _SEASONAL and fallback == _LINEAR)
    if state is None:
        return ForecastState(
            at,
            value,
            HoltState(value, 0.0, False) if want_holt else None,
            _linear_start(at, value) if want_linear else None,
            _seasonal_start(spec, at, value) if kind == _SEASONAL else None,
        )
    if at < state.last_at:
        return state
    dt = at - state.last_at
    holt = linear = seasonal = None
    if want_holt:
        holt = HoltState(value, 0.0, False) if state.holt is None else _holt_step(spec, state.holt, dt, value)
    if want_linear:
        linear = (
            _linear_start(at, value)
            if state.linear is None
            else _linear_step(state.linear, at, value, spec.window_s, dt == 0.0)
        )
    if kind == _SEASONAL:
        old = state.seasonal
        if old is None or old.bucket_s != spec.season_bucket_s or len(old.means) != _season_buckets(spec):
            seasonal = _seasonal_start(spec, at, value)  # new, or the season's shape changed
        else:
            seasonal = old if dt == 0.0 else _seasonal_step(old, at, value)
    return ForecastState(at, value, holt, linear, seasonal)


def forecast(spec: PredictionSpec, state: ForecastState | None, now: float, horizon_s: float) -> Forecast:
    """The value expected at now + horizon_s (never before the last sample), clamped at >= 0."""
    if not math.isfinite(now):
        raise ValueError(f"forecast: now must be a finite time in seconds, got {now!r}")
    if not 0.0 <= horizon_s < math.inf:
        raise ValueError(f"forecast: horizon_s must be finite and >= 0, got {horizon_s!r}")
    if state is None:
        return Forecast(0.0, _LAST, "no sample yet: nothing to forecast from")
    target = now + horizon_s
    if target < state.last_at:
        target = state.last_at  # a clock behind the last sample: do not forecast the past
    kind = spec.forecaster
    if kind == _SEASONAL:
        result = _seasonal_forecast(spec, state, target)
    else:
        result = _by_kind(kind, spec, state, target)
    value = result.value
    if value >= 0.0 and value < math.inf:
        return result
    if value < 0.0:
        return Forecast(0.0, result.method, result.reason + "; clamped at 0")
    return _clamped_last(state, f"{result.method} overflowed ({value!r}); used the last value")


# --- per-method arithmetic ----------------------------------------------------------------------


def _by_kind(kind: ForecasterKind, spec: PredictionSpec, state: ForecastState, target: float) -> Forecast:
    if kind == _HOLT:
        h = state.holt
        if h is None:
            return _clamped_last(state, "holt has no state yet (forecaster changed?); used the last value")
        if not h.primed:
            return Forecast(h.level, _HOLT, "holt: one sample time so far, no trend yet; the level")
        return Forecast(h.level + h.trend * (target - state.last_at), _HOLT, "holt: level + trend × lead")
    if kind == _LINEAR:
        lin = state.linear
        if lin is None:
            return _clamped_last(state, "linear has no state yet (forecaster changed?); used the last value")
        n = len(lin.samples)
        sx, sy, sxx, sxy = _linear_totals(lin)
        # n·Σx² - (Σx)² = n² · variance of x; ~0 when every sample has the same time
        denom = n * sxx - sx * sx
        if n < 2 or denom <= 1e-12 * n * sxx:
            return _clamped_last(
                state, "linear: fewer than 2 sample times in the window; used the last value"
            )
        slope = (n * sxy - sx * sy) / denom
        intercept = (sy - slope * sx) / n
        return Forecast(intercept + slope * (target - lin.origin), _LINEAR, "linear: least-squares trend")
    return Forecast(state.last_value, _LAST, "last: the latest sample")


def _clamped_last(state: ForecastState, reason: str) -> Forecast:
    return Forecast(max(state.last_value, 0.0), _LAST, reason)


def _holt_step(spec: PredictionSpec, h: HoltState, dt: float, y: float) -> HoltState:
    """Holt's update for a sample dt seconds after the previous one (Wright's irregular-time form).

    alpha and beta are the weights for a gap of smoothing_period_s; a gap of dt gets
    1 - (1 - alpha) ** (dt / period), e.g. alpha 0.5 over 15 s gives 0.206 to a sample 5 s later,
    so three 5 s samples move the level exactly as much as one 15 s sample. The slope is per second.
    """
    if dt <= 0.0:
        return h
    if not h.primed:
        if dt < MIN_TREND_DT_S:
            return HoltState(y, 0.0, False)
        return HoltState(y, (y - h.level) / dt, True)  # Holt's usual start: the first difference
    steps = dt / spec.smoothing_period_s
    a = -math.expm1(steps * math.log1p(-spec.alpha)) if spec.alpha < 1.0 else 1.0
    predicted = h.level + h.trend * dt
    level = y if a == 1.0 else predicted + a * (y - predicted)
    if dt < MIN_TREND_DT_S:
        trend = h.trend
    else:
        b = -math.expm1(steps * math.log1p(-spec.beta)) if spec.beta < 1.0 else 1.0
        trend = h.trend + b * ((level - h.level) / dt - h.trend)
    if math.isfinite(level) and math.isfinite(trend):
        return HoltState(level, trend, True)
    return HoltState(y, 0.0, False)  # a trend extrapolated over an enormous gap: start again


def _linear_start(at: float, y: float) -> LinearState:
    return LinearState(((at, y),), at, (), (0.0, y, 0.0, 0.0))


def _fold(samples: Sequence[tuple[float, float]], origin: float) -> list[Sums]:
    """Running sums over samples in the given order: out[i] covers samples[0..i]."""
    sx = sy = sxx = sxy = 0.0
    out: list[Sums] = []
    for t, v in samples:
        x = t - origin
        sx += x
        sy += v
        sxx += x * x
        sxy += x * v
        out.append((sx, sy, sxx, sxy))
    return out


def linear_state(samples: tuple[tuple[float, float], ...], origin: float, front: int) -> LinearState:
    """The state with its sums folded from scratch: the rebuild, and from_dict's exact replay."""
    suffix = _fold(samples[front - 1 :: -1] if front else (), origin)
    back = _fold(samples[front:], origin)
    return LinearState(samples, origin, tuple(reversed(suffix)), back[-1] if back else (0.0, 0.0, 0.0, 0.0))


def _linear_totals(lin: LinearState) -> Sums:
    sx, sy, sxx, sxy = lin.back_sums
    if lin.front_sums:
        fx, fy, fxx, fxy = lin.front_sums[0]
        return fx + sx, fy + sy, fxx + sxx, fxy + sxy
    return sx, sy, sxx, sxy


def _linear_step(lin: LinearState, at: float, y: float, window_s: float, replace: bool) -> LinearState:
    front = lin.front_sums
    if replace:  # same time as the newest sample: swap its value, refold the part it is in
        samples = (*lin.samples[:-1], (at, y))
        if len(front) == len(samples):
            return linear_state(samples, lin.origin, len(front))
        return LinearState(samples, lin.origin, front, _fold(samples[len(front) :], lin.origin)[-1])
    x = at - lin.origin
    sx, sy, sxx, sxy = lin.back_sums
    back = (sx + x, sy + y, sxx + x * x, sxy + x * y)
    old = lin.samples
    n = len(old)
    cutoff = at - window_s
    drop = 0
    while drop < n and old[drop][0] < cutoff:
        drop += 1
    if n + 1 - drop > MAX_WINDOW_SAMPLES:
        drop = n + 1 - MAX_WINDOW_SAMPLES
    if drop == 0:
        return LinearState((*old, (at, y)), lin.origin, front, back)
    if drop <= len(front):
        return LinearState((*old[drop:], (at, y)), lin.origin, front[drop:], back)
    kept = (*old[drop:], (at, y))
    return linear_state(kept, kept[0][0], len(kept))


def _season_buckets(spec: PredictionSpec) -> int:
    return round(spec.season_s / spec.season_bucket_s)


def _seasonal_start(spec: PredictionSpec, at: float, y: float) -> SeasonalState:
    return SeasonalState(
        spec.season_bucket_s, math.floor(at / spec.season_bucket_s), y, 1, (None,) * _season_buckets(spec)
    )


def _seasonal_step(s: SeasonalState, at: float, y: float) -> SeasonalState:
    k = math.floor(at / s.bucket_s)
    if k <= s.bucket:  # floor(at / bucket_s) never decreases as at grows, so k == bucket here
        return SeasonalState(s.bucket_s, s.bucket, s.open_sum + y, s.open_count + 1, s.means)
    # close the open bucket; buckets skipped since then had no sample
    n = len(s.means)
    means = list(s.means)
    for skipped in range(s.bucket + 1, min(k, s.bucket + 1 + n)):
        means[skipped % n] = None
    if k - s.bucket <= n:
        means[s.bucket % n] = float(f"{s.open_sum / s.open_count:.{SEASON_DIGITS}g}")
    return SeasonalState(s.bucket_s, k, y, 1, tuple(means))


def _seasonal_forecast(spec: PredictionSpec, state: ForecastState, target: float) -> Forecast:
    s = state.seasonal
    if s is not None:
        n = len(s.means)
        k = math.floor(target / s.bucket_s) - n  # the bucket one season before the target
        if s.bucket - n <= k < s.bucket:
            mean = s.means[k % n]
            if mean is not None:
                return Forecast(mean, _SEASONAL, "seasonal: the mean one season before the target")
        elif k == s.bucket:  # a horizon of a whole season: the open bucket is the best there is
            return Forecast(s.open_sum / s.open_count, _SEASONAL, "seasonal: the open bucket one season back")
    fallback = spec.season_fallback
    got = _by_kind(fallback, spec, state, target)
    reason = f"seasonal: no history one season before the target, fell back to {fallback}"
    if got.method != fallback:  # the fallback fell back too: say why
        reason = f"{reason}; {got.reason}"
    return Forecast(got.value, got.method, reason)
