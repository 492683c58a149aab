"""Forecasting of the load signal (autoscaler/policy/forecast.py): every method on hand-computed series,
irregular sampling, fallbacks and their reasons, serialization, bad input, and properties."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy.forecast import (
    MAX_ABS_VALUE,
    MAX_WINDOW_SAMPLES,
    Forecast,
    ForecastState,
    forecast,
    observe,
)
from autoscaler.policy.spec import ForecasterKind, PredictionSpec

LAST = ForecasterKind.LAST
LINEAR = ForecasterKind.LINEAR
HOLT = ForecasterKind.HOLT
SEASONAL = ForecasterKind.SEASONAL
TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces"

Series = Sequence[tuple[float, float]]


def run(spec: PredictionSpec, series: Series, state: ForecastState | None = None) -> ForecastState:
    for at, value in series:
        state = observe(spec, state, at, value)
    assert state is not None
    return state


def check(got: Forecast, value: float, method: ForecasterKind, reason: str = "") -> None:
    """The one assertion helper: value to 1e-9 relative, the method used, a phrase of the reason."""
    assert got.value == pytest.approx(value, rel=1e-9, abs=1e-9), got
    assert got.method == method, got
    assert reason in got.reason, got


def ramp(start: float, slope: float, times: Sequence[float]) -> list[tuple[float, float]]:
    return [(t, start + slope * t) for t in times]


# ---------------------------------------------------------------------------------------------------
# each method on hand-computed series; dt = 15 s = smoothing_period_s so alpha/beta apply as written
# ---------------------------------------------------------------------------------------------------

EVERY_15S = [0.0, 15.0, 30.0, 45.0]


@pytest.mark.parametrize(
    ("spec", "series", "now", "horizon_s", "value", "method"),
    [
        pytest.param(
            PredictionSpec(forecaster=LAST), [(0, 5), (15, 5), (30, 5)], 30, 60, 5, LAST, id="last constant"
        ),
        pytest.param(
            PredictionSpec(forecaster=LAST), [(0, 1), (15, 1), (30, 9)], 30, 60, 9, LAST, id="last step"
        ),
        pytest.param(
            PredictionSpec(forecaster=LAST),
            ramp(0, 1, EVERY_15S),
            45,
            600,
            45,
            LAST,
            id="last ignores the horizon",
        ),
        pytest.param(
            PredictionSpec(forecaster=LINEAR),
            [(0, 7), (15, 7), (30, 7)],
            30,
            60,
            7,
            LINEAR,
            id="linear constant",
        ),
        # 2 + 0.5 t at t = 60 + 30
        pytest.param(
            PredictionSpec(forecaster=LINEAR),
            ramp(2, 0.5, [0, 15, 30, 45, 60]),
            60,
            30,
            47,
            LINEAR,
            id="linear ramp",
        ),
        # x̄ = 15, ȳ = 3, Σ(x-x̄)(y-ȳ) = 30 + 0 - 5 + 45 = 70, Σ(x-x̄)² = 500 → slope 0.14; 3 + 0.14 × (50 - 15)
        pytest.param(
            PredictionSpec(forecaster=LINEAR),
            [(0, 1), (10, 3), (20, 2), (30, 6)],
            30,
            20,
            7.9,
            LINEAR,
            id="linear noisy, least squares by hand",
        ),
        # window 20 s at t = 40 keeps t = 20, 30, 40: the flat part after the step
        pytest.param(
            PredictionSpec(forecaster=LINEAR, window_s=20),
            [(0, 0), (10, 0), (20, 10), (30, 10), (40, 10)],
            40,
            100,
            10,
            LINEAR,
            id="linear step, old samples leave the window",
        ),
        pytest.param(
            PredictionSpec(forecaster=HOLT), [(0, 5), (15, 5), (30, 5)], 30, 60, 5, HOLT, id="holt constant"
        ),
        # primed by the first difference (level 3, trend 0.2/s), then exact: 9 + 0.2 × 15
        pytest.param(
            PredictionSpec(forecaster=HOLT), ramp(0, 0.2, EVERY_15S), 45, 15, 12, HOLT, id="holt ramp"
        ),
        # third sample: predicted 0, level 0 + 0.5 × 10 = 5, trend 0.3 × (5 / 15) = 0.1 → 5 + 0.1 × 30
        pytest.param(
            PredictionSpec(forecaster=HOLT),
            [(0, 0), (15, 0), (30, 10)],
            30,
            30,
            8,
            HOLT,
            id="holt step by hand",
        ),
        # level 13, trend 0.2 | pred 16 → level 13.5, trend 0.15 | pred 15.75 → level 15.875,
        # trend 0.15 + 0.3 × (2.375 / 15 - 0.15) = 0.1525 → 15.875 + 0.1525 × 20
        pytest.param(
            PredictionSpec(forecaster=HOLT),
            [(0, 10), (15, 13), (30, 11), (45, 16)],
            45,
            20,
            18.925,
            HOLT,
            id="holt noisy by hand",
        ),
        # the horizon counts from the last sample: now is 10 s later, so 15.875 + 0.1525 × 30
        pytest.param(
            PredictionSpec(forecaster=HOLT),
            [(0, 10), (15, 13), (30, 11), (45, 16)],
            55,
            20,
            20.45,
            HOLT,
            id="holt extrapolates from the last sample time",
        ),
        pytest.param(
            PredictionSpec(forecaster=SEASONAL, season_s=600, season_bucket_s=300),
            [(t, 7) for t in range(0, 901, 30)],
            900,
            60,
            7,
            SEASONAL,
            id="seasonal constant",
        ),
        # irregular, noisy samples in [0, 300): the bucket keeps their plain mean (3 + 5 + 10 + 2) / 4
        pytest.param(
            PredictionSpec(forecaster=SEASONAL, season_s=600, season_bucket_s=300),
            [(0, 3), (17, 5), (190, 10), (299.5, 2), (600, 40), (610, 41)],
            610,
            30,
            5,
            SEASONAL,
            id="seasonal noisy, irregular samples: the bucket mean",
        ),
        # season 600 s of 300 s buckets: bucket [0, 300) averages 4, [300, 600) averages 20
        pytest.param(
            PredictionSpec(forecaster=SEASONAL, season_s=600, season_bucket_s=300),
            [(0, 2), (150, 6), (300, 20), (450, 20), (600, 1), (750, 1)],
            750,
            200,
            20,
            SEASONAL,
            id="seasonal: the bucket one season before now + horizon",
        ),
        pytest.param(
            PredictionSpec(forecaster=SEASONAL, season_s=600, season_bucket_s=300),
            [(0, 2), (150, 6), (300, 20), (450, 20), (600, 1), (750, 1)],
            600,
            60,
            4,
            SEASONAL,
            id="seasonal: an earlier bucket for an earlier target",
        ),
        # the ring has two slots: closing [600, 900) overwrote [0, 300)'s slot with the newer mean
        pytest.param(
            PredictionSpec(forecaster=SEASONAL, season_s=600, season_bucket_s=300),
            [(0, 8), (299, 8), (600, 1), (900, 5)],
            900,
            300,
            1,
            SEASONAL,
            id="seasonal: a ring slot holds the newest bucket",
        ),
    ],
)
def test_method_on_series(
    spec: PredictionSpec, series: Series, now: float, horizon_s: float, value: float, method: ForecasterKind
) -> None:
    check(forecast(spec, run(spec, series), now, horizon_s), value, method)


@pytest.mark.parametrize(
    ("kind", "series", "value", "method"),
    [
        pytest.param(LAST, [(0, -3)], 0, LAST, id="last negative value"),
        pytest.param(LINEAR, ramp(100, -2, [0, 15, 30]), 0, LINEAR, id="linear falling ramp"),
        pytest.param(HOLT, ramp(100, -2, [0, 15, 30]), 0, HOLT, id="holt falling ramp"),
    ],
)
def test_forecasts_are_clamped_at_zero(
    kind: ForecasterKind, series: Series, value: float, method: ForecasterKind
) -> None:
    spec = PredictionSpec(forecaster=kind)
    check(forecast(spec, run(spec, series), 30, 600), value, method, "clamped at 0")


# ---------------------------------------------------------------------------------------------------
# irregular sampling
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gap_s", "level"),
    [
        pytest.param(5.0, 10 * (1 - 0.5 ** (1 / 3)), id="5 s gap: alpha 0.206"),
        pytest.param(15.0, 5.0, id="15 s gap: alpha as written"),
        pytest.param(45.0, 8.75, id="45 s gap: three periods' weight 1 - 0.5**3"),
        pytest.param(1e9, 10.0, id="huge gap: the new sample is the level"),
    ],
)
def test_holt_weight_scales_with_the_gap(gap_s: float, level: float) -> None:
    # beta 0 keeps the trend at 0, so the forecast is the level alone
    spec = PredictionSpec(forecaster=HOLT, beta=0.0)
    state = run(spec, [(0, 0), (15, 0), (15 + gap_s, 10)])
    check(forecast(spec, state, 15 + gap_s, 0), level, HOLT)


def test_three_5s_samples_move_holt_like_one_15s_sample() -> None:
    spec = PredictionSpec(forecaster=HOLT, beta=0.0)
    fine = run(spec, [(0, 0), (15, 0), (20, 10), (25, 10), (30, 10)])
    coarse = run(spec, [(0, 0), (15, 0), (30, 10)])
    check(forecast(spec, fine, 30, 0), forecast(spec, coarse, 30, 0).value, HOLT)


JITTERED = [0.0, 4.1, 9.7, 13.2, 18.9, 23.0, 27.4, 33.3, 36.8, 41.5]


@pytest.mark.parametrize("kind", [pytest.param(LINEAR, id="linear"), pytest.param(HOLT, id="holt")])
def test_trend_methods_exact_on_a_jittered_ramp(kind: ForecasterKind) -> None:
    spec = PredictionSpec(forecaster=kind)
    state = run(spec, ramp(3, 0.7, JITTERED))
    check(forecast(spec, state, 41.5, 90), 3 + 0.7 * 131.5, kind)


@pytest.mark.parametrize(
    ("kind", "series", "value"),
    [
        pytest.param(LAST, [(0, 10), (15, 15), (30, 20), (30, 50)], 50, id="last takes the replacement"),
        # (0,10) (15,15) (30,20) is an exact line once 99 is replaced
        pytest.param(LINEAR, [(0, 10), (15, 15), (30, 99), (30, 20)], 20, id="linear replaces the point"),
        # window 20 s: at t = 30 the window is re-summed, so the replaced point is in the suffix sums
        pytest.param(
            LINEAR,
            [(0, 0), (10, 1), (20, 2), (30, 50), (30, 3)],
            3,
            id="linear replaces a point just re-summed",
        ),
        # a 0 s gap has zero weight: as if (30, 20) were the last sample
        pytest.param(HOLT, [(0, 10), (15, 15), (30, 20), (30, 50)], 20, id="holt ignores a 0 s gap"),
    ],
)
def test_duplicate_timestamp(kind: ForecasterKind, series: Series, value: float) -> None:
    spec = PredictionSpec(forecaster=kind, window_s=20)
    check(forecast(spec, run(spec, series), 30, 0), value, kind)


def test_duplicate_timestamp_is_not_counted_twice_in_a_seasonal_bucket() -> None:
    spec = PredictionSpec(forecaster=SEASONAL, season_s=600, season_bucket_s=300)
    state = run(spec, [(0, 2), (100, 6), (100, 6), (300, 0), (600, 0)])
    check(forecast(spec, state, 600, 0), 4, SEASONAL)


@pytest.mark.parametrize("kind", [pytest.param(k, id=str(k)) for k in ForecasterKind])
def test_out_of_order_sample_leaves_the_state_unchanged(kind: ForecasterKind) -> None:
    spec = PredictionSpec(forecaster=kind, season_s=600, season_bucket_s=300)
    state = run(spec, [(0, 1), (15, 2), (30, 3)])
    assert observe(spec, state, 29.999, 1000) is state


def test_clock_behind_the_last_sample_forecasts_from_the_last_sample() -> None:
    spec = PredictionSpec(forecaster=HOLT)
    state = run(spec, ramp(0, 1, EVERY_15S))
    check(forecast(spec, state, 0, 0), 45, HOLT)


# ---------------------------------------------------------------------------------------------------
# fallbacks and their reasons
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "series", "now", "value", "method", "reason"),
    [
        pytest.param(PredictionSpec(), [], 0, 0, LAST, "no sample yet", id="no state at all"),
        pytest.param(
            PredictionSpec(forecaster=LINEAR),
            [(0, 4)],
            0,
            4,
            LAST,
            "fewer than 2 sample times",
            id="linear, one sample",
        ),
        pytest.param(
            PredictionSpec(forecaster=LINEAR),
            [(0, 4), (0, 6)],
            0,
            6,
            LAST,
            "fewer than 2 sample times",
            id="linear, one sample time",
        ),
        pytest.param(
            PredictionSpec(forecaster=HOLT), [(0, 4)], 0, 4, HOLT, "no trend yet", id="holt, one sample"
        ),
        pytest.param(
            PredictionSpec(forecaster=SEASONAL, season_s=600, season_bucket_s=300),
            ramp(0, 0.1, EVERY_15S),
            45,
            4.5 + 0.1 * 60,
            HOLT,
            "no history one season before the target, fell back to holt",
            id="seasonal, first season: holt",
        ),
        pytest.param(
            PredictionSpec(forecaster=SEASONAL, season_fallback=LAST, season_s=600, season_bucket_s=300),
            ramp(0, 0.1, EVERY_15S),
            45,
            4.5,
            LAST,
            "fell back to last",
            id="seasonal, first season: last",
        ),
        pytest.param(
            PredictionSpec(forecaster=SEASONAL, season_fallback=LINEAR, season_s=600, season_bucket_s=300),
            ramp(0, 0.1, EVERY_15S),
            45,
            4.5 + 0.1 * 60,
            LINEAR,
            "fell back to linear",
            id="seasonal, first season: linear",
        ),
        pytest.param(
            PredictionSpec(forecaster=SEASONAL, season_fallback=LINEAR, season_s=600, season_bucket_s=300),
            [(0, 4)],
            0,
            4,
            LAST,
            "fell back to linear; linear: fewer than 2 sample times in the window; used the last value",
            id="seasonal, first sample: linear falls back to last",
        ),
        # buckets [300, 600) and [600, 900) had no sample: closing [900, 1200) must not revive them
        pytest.param(
            PredictionSpec(forecaster=SEASONAL, season_fallback=LAST, season_s=600, season_bucket_s=300),
            [(0, 8), (299, 8), (950, 3), (1210, 2)],
            1210,
            2,
            LAST,
            "fell back to last",
            id="seasonal, buckets skipped by a gap",
        ),
        pytest.param(
            PredictionSpec(forecaster=SEASONAL, season_fallback=LAST, season_s=600, season_bucket_s=300),
            [(0, 8), (299, 8), (5000, 3)],
            5000,
            3,
            LAST,
            "fell back to last",
            id="seasonal, gap longer than a season",
        ),
        pytest.param(
            PredictionSpec(forecaster=SEASONAL, season_fallback=LAST, season_s=600, season_bucket_s=300),
            [(0, 8), (299, 8), (600, 1), (900, 5)],
            840,
            5,
            LAST,
            "fell back to last",
            id="seasonal, the ring slot of an empty bucket",
        ),
    ],
)
def test_fallbacks_say_why(
    spec: PredictionSpec, series: Series, now: float, value: float, method: ForecasterKind, reason: str
) -> None:
    state = run(spec, series) if series else None
    check(forecast(spec, state, now, 60), value, method, reason)


@pytest.mark.parametrize(
    ("before", "after", "reason"),
    [
        pytest.param(HOLT, LINEAR, "linear has no state yet", id="holt to linear"),
        pytest.param(LINEAR, HOLT, "holt has no state yet", id="linear to holt"),
        pytest.param(LAST, SEASONAL, "fell back to holt", id="last to seasonal"),
    ],
)
def test_changed_forecaster_falls_back_to_the_last_value(
    before: ForecasterKind, after: ForecasterKind, reason: str
) -> None:
    state = run(PredictionSpec(forecaster=before), ramp(1, 1, EVERY_15S))
    check(forecast(PredictionSpec(forecaster=after), state, 45, 60), 46, LAST, reason)


def test_changed_forecaster_keeps_only_the_parts_it_needs() -> None:
    state = run(PredictionSpec(forecaster=SEASONAL), ramp(1, 1, EVERY_15S))
    assert state.holt is not None and state.seasonal is not None
    state = observe(PredictionSpec(forecaster=LINEAR), state, 60, 61)
    assert (state.holt, state.seasonal) == (None, None)
    assert state.linear is not None and state.linear.samples == ((60.0, 61.0),)


def test_changed_season_shape_restarts_the_seasonal_history() -> None:
    daily = PredictionSpec(forecaster=SEASONAL, season_fallback=LAST, season_s=600, season_bucket_s=300)
    state = run(daily, [(0, 8), (300, 1), (600, 1)])
    check(forecast(daily, state, 600, 0), 8, SEASONAL)
    finer = replace(daily, season_bucket_s=60.0)
    state = observe(finer, state, 601, 1)
    assert state.seasonal is not None and len(state.seasonal.means) == 10
    check(forecast(finer, state, 601, 0), 1, LAST, "fell back to last")


# ---------------------------------------------------------------------------------------------------
# weekly and daily seasons, bounded state
# ---------------------------------------------------------------------------------------------------

DAY_S = 86_400.0
WEEK_S = 7 * DAY_S


def weekly_load(t: float) -> float:
    """Busy weekdays 9:00-17:00 (100), quiet otherwise (10); day 0 is a Monday."""
    day, second = divmod(t, DAY_S)
    return 100.0 if day % 7 < 5 and 9 * 3600 <= second < 17 * 3600 else 10.0


def test_weekly_season_forecasts_monday_morning_from_last_monday() -> None:
    spec = PredictionSpec(forecaster=SEASONAL, season_s=WEEK_S, season_fallback=LAST)
    times = [i * 60.0 for i in range(int((WEEK_S + 8.5 * 3600) / 60) + 1)]  # to next Monday 8:30
    state = run(spec, [(t, weekly_load(t)) for t in times])
    now = times[-1]
    check(forecast(spec, state, now, 1800), 100, SEASONAL)  # 8:30 + 30 min is after 9:00
    check(forecast(spec, state, now, 600), 10, SEASONAL)
    check(forecast(PredictionSpec(forecaster=LAST), state, now, 1800), 10, LAST)


def test_serialized_state_is_small() -> None:
    sizes = {}
    for name, season_s in (("daily", DAY_S), ("weekly", WEEK_S)):
        spec = PredictionSpec(forecaster=SEASONAL, season_s=season_s)
        state = run(spec, [(t, 1234.5678 + t % 977) for t in range(0, int(season_s) + 3600, 30)])
        assert state.seasonal is not None and None not in state.seasonal.means
        sizes[name] = len(json.dumps(state.to_dict(), separators=(",", ":")))
    # about 9 characters per bucket: 288 a day, 2016 a week (documented in docs/forecasting.md)
    assert sizes["daily"] < 4_000 < sizes["weekly"] < 24_000, sizes


def test_linear_window_stays_bounded() -> None:
    spec = PredictionSpec(forecaster=LINEAR, window_s=300)
    state = run(spec, [(i * 0.1, 1.0) for i in range(1000)])
    assert state.linear is not None and len(state.linear.samples) == MAX_WINDOW_SAMPLES
    state = run(spec, [(1000 + i * 10.0, 1.0) for i in range(100)], state)
    assert state.linear is not None and len(state.linear.samples) == 31  # 300 s at 10 s, both ends


def least_squares(points: Sequence[tuple[float, float]], at: float) -> float:
    """The reference fit, with exactly rounded sums (math.fsum) around the mean time."""
    n = len(points)
    t_mean = math.fsum(t for t, _ in points) / n
    y_mean = math.fsum(v for _, v in points) / n
    sxx = math.fsum((t - t_mean) ** 2 for t, _ in points)
    sxy = math.fsum((t - t_mean) * (v - y_mean) for t, v in points)
    return y_mean + sxy / sxx * (at - t_mean)


@pytest.mark.parametrize(
    "values",
    [
        pytest.param([5000.0 + 3000.0 * math.sin(i / 37.0) for i in range(20_000)], id="smooth, long run"),
        # subtracting a 9e15 spike from running sums would leave Σy off by ~2 once it left
        pytest.param([9e15 if i == 500 else float(i % 3) for i in range(2_000)], id="huge spike then small"),
    ],
)
def test_linear_sums_stay_accurate(values: list[float]) -> None:
    spec = PredictionSpec(forecaster=LINEAR, window_s=120)
    series = [(1.7e9 + i * 4.9, v) for i, v in enumerate(values)]
    state = run(spec, series)
    assert state.linear is not None
    now = series[-1][0]
    want = least_squares(state.linear.samples, now + 60)
    got = forecast(spec, state, now, 60)
    assert got.value == pytest.approx(max(want, 0.0), rel=1e-9, abs=1e-9 * max(values))
    assert now - state.linear.origin <= 2 * 120  # re-anchored: x stays small


# ---------------------------------------------------------------------------------------------------
# serialization
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(PredictionSpec(forecaster=LAST), id="last"),
        pytest.param(PredictionSpec(forecaster=LINEAR, window_s=60), id="linear"),
        pytest.param(PredictionSpec(forecaster=HOLT), id="holt"),
        pytest.param(PredictionSpec(forecaster=SEASONAL, season_s=600, season_bucket_s=300), id="seasonal"),
        pytest.param(
            PredictionSpec(forecaster=SEASONAL, season_fallback=LINEAR, season_s=600, season_bucket_s=300),
            id="seasonal+linear",
        ),
    ],
)
def test_round_trip_through_json_restores_the_same_state(spec: PredictionSpec) -> None:
    series = [(1.7e9 + i * 5.3, 40 + 15 * math.sin(i / 9) + (i % 7)) for i in range(400)]
    state = run(spec, series[:300])
    restored = ForecastState.from_dict(json.loads(json.dumps(state.to_dict(), allow_nan=False)))
    assert restored == state
    # a restarted controller carries on exactly where the old one stopped
    assert run(spec, series[300:], restored) == run(spec, series[300:], state)
    now = series[-1][0]
    assert forecast(spec, run(spec, series[300:], restored), now, 90) == forecast(
        spec, run(spec, series), now, 90
    )


def good_dict() -> dict[str, Any]:
    spec = PredictionSpec(forecaster=SEASONAL, season_fallback=LINEAR, season_s=600, season_bucket_s=300)
    state = run(spec, [(0, 1), (15, 2), (30, 3), (300, 5)])
    state = replace(state, holt=observe(PredictionSpec(), None, 0, 1).holt)
    return state.to_dict()


def edited(path: str, value: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(good_dict()))
    *parents, key = path.split(".")
    node = data
    for parent in parents:
        node = node[parent]
    if value is KeyError:
        del node[key]
    else:
        node[key] = value
    return data  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(edited("version", 2), r"state\.version must be 1, got 2", id="unknown version"),
        pytest.param(edited("last_at", KeyError), r"state\.last_at is missing", id="missing last_at"),
        pytest.param(
            edited("last_value", "7"), r"state\.last_value must be a finite number, got '7'", id="string"
        ),
        pytest.param(edited("last_value", True), r"state\.last_value must be a finite number", id="bool"),
        pytest.param(
            edited("holt.primed", "yes"), r"state\.holt\.primed must be true or false", id="holt primed"
        ),
        pytest.param(edited("holt", 3), r"state\.holt must be an object, got 3", id="holt not an object"),
        pytest.param(
            edited("linear.samples", [[0, 1], [15, 2], [5, 3], [300, 5]]),
            r"state\.linear\.samples\[2\] at 5\.0 is out of time order",
            id="samples out of order",
        ),
        pytest.param(
            edited("linear.samples", [[0, 1], [15, None]]),
            r"state\.linear\.samples\[1\]\[1\] must be a finite number, got None",
            id="sample value missing",
        ),
        pytest.param(
            edited("linear.samples", []), r"state\.linear\.samples must be a non-empty list", id="no samples"
        ),
        pytest.param(
            edited("linear.front", 9), r"state\.linear\.front must be <= 4 samples, got 9", id="front"
        ),
        pytest.param(
            edited("linear.front", -1), r"state\.linear\.front must be an integer >= 0", id="front < 0"
        ),
        pytest.param(
            edited("linear.origin", 1e9),
            r"state\.linear\.origin 1000000000\.0 is after samples\[0\]",
            id="origin",
        ),
        pytest.param(
            edited("linear.samples", [[0, 1], [15, 2]]),
            r"state\.linear\.samples must end at last_at=300\.0",
            id="stale",
        ),
        pytest.param(
            edited("seasonal.bucket", 7),
            r"state\.seasonal\.bucket must be the last sample's bucket 1, got 7",
            id="bucket",
        ),
        pytest.param(edited("seasonal.means", [None, "x"]), r"state\.seasonal\.means\[1\]", id="bucket mean"),
        pytest.param(
            edited("seasonal.open_count", 0),
            r"state\.seasonal\.open_count must be an integer >= 1",
            id="count",
        ),
        pytest.param(
            edited("seasonal.bucket_s", -300), r"state\.seasonal\.bucket_s must be > 0", id="bucket size"
        ),
    ],
)
def test_from_dict_names_the_bad_field(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ForecastState.from_dict(data)


def test_good_dict_parses() -> None:
    # the error table above edits this document, so it must be valid as it stands
    assert ForecastState.from_dict(good_dict()).to_dict() == good_dict()


# ---------------------------------------------------------------------------------------------------
# bad input, spec validation
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("at", "value", "message"),
    [
        pytest.param(math.nan, 1.0, "at must be a finite time in seconds, got nan", id="at nan"),
        pytest.param(math.inf, 1.0, "at must be a finite time in seconds, got inf", id="at inf"),
        pytest.param(1.0, math.nan, r"value must be a finite number, got nan at 1\.0", id="value nan"),
        pytest.param(1.0, -math.inf, "value must be a finite number, got -inf", id="value -inf"),
    ],
)
def test_observe_rejects_non_finite_input(at: float, value: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        observe(PredictionSpec(), None, at, value)


@pytest.mark.parametrize(
    ("now", "horizon_s", "message"),
    [
        pytest.param(math.nan, 1.0, "now must be a finite time in seconds, got nan", id="now nan"),
        pytest.param(0.0, -1.0, r"horizon_s must be finite and >= 0, got -1\.0", id="negative horizon"),
        pytest.param(0.0, math.inf, "horizon_s must be finite and >= 0, got inf", id="infinite horizon"),
        pytest.param(0.0, math.nan, "horizon_s must be finite and >= 0, got nan", id="nan horizon"),
    ],
)
def test_forecast_rejects_bad_time(now: float, horizon_s: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        forecast(PredictionSpec(), run(PredictionSpec(), [(0, 1)]), now, horizon_s)


def test_overflowing_extrapolation_uses_the_last_value() -> None:
    spec = PredictionSpec(forecaster=HOLT)
    state = run(spec, [(0, 0), (1, 1e100)])  # a trend of 1e100 per second
    check(forecast(spec, state, 1e300, 0), 1e100, LAST, "holt overflowed (inf); used the last value")


def test_sub_millisecond_gap_moves_holt_level_not_trend() -> None:
    spec = PredictionSpec(forecaster=HOLT)
    state = run(spec, [(0, 0), (15, 3)])  # primed: level 3, trend 0.2 per second
    state = observe(spec, state, 15.0005, 100)
    assert state.holt is not None and state.holt.trend == 0.2
    weight = 1 - 0.5 ** (0.0005 / 15)
    level = 3 + 0.2 * 0.0005 + weight * (100 - 3 - 0.2 * 0.0005)
    check(forecast(spec, state, 15.0005, 10), level + 2, HOLT)


def test_huge_values_saturate() -> None:
    spec = PredictionSpec(forecaster=LINEAR)
    state = run(spec, [(0, 1e300), (1, 1e300)])
    check(forecast(spec, state, 1, 10), MAX_ABS_VALUE, LINEAR)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param({"alpha": 0.0}, r"prediction\.alpha must be in \(0, 1\], got 0\.0", id="alpha 0"),
        pytest.param({"alpha": 1.5}, r"prediction\.alpha must be in \(0, 1\], got 1\.5", id="alpha > 1"),
        pytest.param({"beta": -0.1}, r"prediction\.beta must be in \[0, 1\], got -0\.1", id="beta < 0"),
        pytest.param({"window_s": 0.0}, r"prediction\.window_s must be > 0", id="window 0"),
        pytest.param(
            {"season_bucket_s": 0.5}, r"prediction\.season_bucket_s must be >= 1", id="bucket < 1 s"
        ),
        pytest.param(
            {"smoothing_period_s": math.nan}, r"prediction\.smoothing_period_s must be > 0", id="period nan"
        ),
        pytest.param(
            {"season_s": 1000.0},
            r"prediction\.season_s must be 1 to 100000 times season_bucket_s=300",
            id="ragged",
        ),
        pytest.param(
            {"season_s": 100.0}, r"prediction\.season_s must be 1 to 100000 times", id="season < bucket"
        ),
        pytest.param(
            {"season_fallback": SEASONAL},
            r"prediction\.season_fallback must be last, linear or holt",
            id="loop",
        ),
        pytest.param(
            {"lead_time_s": -5.0}, r"prediction\.lead_time_s must be None or in \[0, 1e7\]", id="lead"
        ),
    ],
)
def test_prediction_spec_rejects_bad_fields(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PredictionSpec(**fields)


# ---------------------------------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------------------------------

kinds = st.sampled_from(list(ForecasterKind))
any_value = st.floats(allow_nan=False, allow_infinity=False)
gaps = st.one_of(
    st.just(0.0),
    st.floats(min_value=0.0, max_value=1e-6),
    st.floats(min_value=0.0, max_value=600.0),
    st.floats(min_value=0.0, max_value=1e300),
)
starts = st.one_of(
    st.just(0.0), st.floats(min_value=-1e300, max_value=1e300), st.floats(min_value=-1e9, max_value=1e9)
)


def series_from(start: float, steps: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out, t = [], start
    for gap, value in steps:
        t = t + gap
        if not math.isfinite(t):
            break
        out.append((t, value))
    return out


@settings(max_examples=300, deadline=None)
@given(
    kind=kinds,
    fallback=st.sampled_from([LAST, LINEAR, HOLT]),
    start=starts,
    steps=st.lists(st.tuples(gaps, any_value), min_size=1, max_size=25),
    ahead=st.floats(min_value=-1e6, max_value=1e300),
    horizon_s=st.floats(min_value=0.0, max_value=1e7),
)
def test_forecast_is_finite_non_negative_and_serializable(
    kind: ForecasterKind,
    fallback: ForecasterKind,
    start: float,
    steps: list[tuple[float, float]],
    ahead: float,
    horizon_s: float,
) -> None:
    spec = PredictionSpec(forecaster=kind, season_fallback=fallback, season_s=600, season_bucket_s=60)
    series = series_from(start, steps)
    state = run(spec, series)
    now = series[-1][0] + ahead
    if not math.isfinite(now):
        now = series[-1][0]
    got = forecast(spec, state, now, horizon_s)
    assert math.isfinite(got.value) and got.value >= 0.0, got
    text = json.dumps(state.to_dict(), allow_nan=False)  # the state itself never holds inf/nan
    assert ForecastState.from_dict(json.loads(text)) == state


@settings(max_examples=200, deadline=None)
@given(start=starts, steps=st.lists(st.tuples(gaps, any_value), min_size=1, max_size=20))
def test_last_value_returns_the_last(start: float, steps: list[tuple[float, float]]) -> None:
    spec = PredictionSpec(forecaster=LAST)
    series = series_from(start, steps)
    got = forecast(spec, run(spec, series), series[-1][0], 60)
    last = min(max(series[-1][1], -MAX_ABS_VALUE), MAX_ABS_VALUE)
    assert got.value == max(last, 0.0)


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from([LINEAR, HOLT]),
    start=st.floats(min_value=-1e9, max_value=2e9),
    gaps_s=st.lists(st.floats(min_value=0.5, max_value=30.0), min_size=2, max_size=40),
    level=st.floats(min_value=0.0, max_value=1e6),
    slope=st.floats(min_value=-100.0, max_value=100.0),
    horizon_s=st.floats(min_value=0.0, max_value=900.0),
)
def test_trend_methods_are_exact_on_linear_data(
    kind: ForecasterKind, start: float, gaps_s: list[float], level: float, slope: float, horizon_s: float
) -> None:
    spec = PredictionSpec(forecaster=kind, window_s=600)
    times = [start]
    for gap in gaps_s:
        times.append(times[-1] + gap)
    state = run(spec, [(t, level + slope * (t - start)) for t in times])
    got = forecast(spec, state, times[-1], horizon_s)
    want = level + slope * (times[-1] + horizon_s - start)
    # relative to the data's scale: times near 2e9 s carry ~1e-7 s of rounding each
    scale = abs(level) + abs(slope) * (times[-1] - start + horizon_s) + 1.0
    assert got.value == pytest.approx(max(want, 0.0), abs=1e-6 * scale), (got, want)


# ---------------------------------------------------------------------------------------------------
# a real trace (skipped without ../shared): every method stays sane on bursty on/off traffic
# ---------------------------------------------------------------------------------------------------


def azure_arrivals_per_15s() -> list[tuple[float, float]]:
    path = TRACES / "azure_llm_2023_code.csv"
    if not path.exists():
        pytest.skip(f"{path} is not available")
    with path.open(newline="") as f:
        rows = csv.DictReader(f)
        stamps = [datetime.fromisoformat(row["TIMESTAMP"][:26]).timestamp() for row in rows]
    first = stamps[0]
    counts: dict[int, int] = {}
    for s in stamps:
        counts[int((s - first) // 15)] = counts.get(int((s - first) // 15), 0) + 1
    return [(k * 15.0, float(counts.get(k, 0))) for k in range(max(counts) + 1)]


@pytest.mark.parametrize("kind", [pytest.param(k, id=str(k)) for k in ForecasterKind])
def test_methods_on_the_azure_code_trace(kind: ForecasterKind) -> None:
    series = azure_arrivals_per_15s()
    spec = PredictionSpec(forecaster=kind, season_s=1800, season_bucket_s=60)
    state = None
    for at, value in series:
        state = observe(spec, state, at, value)
        got = forecast(spec, state, at, 60)
        assert math.isfinite(got.value) and got.value >= 0.0, (at, got)
    assert state is not None
    assert ForecastState.from_dict(json.loads(json.dumps(state.to_dict()))) == state
