"""The load predictors of NVIDIA Dynamo's SLA planner (ai-dynamo/dynamo
components/src/dynamo/planner/core/load/predictors.py), without their heavy dependencies:

- `constant`: the last value (exactly Dynamo's ConstantPredictor).
- `kalman`: Dynamo's KalmanPredictor, a local linear trend (level, trend) with its defaults
  q_level 1.0, q_trend 0.1, r 10.0, at least 5 points before it forecasts (filterpy's
  predict/update equations written out; exact).
- `arima`: Dynamo fits pmdarima.auto_arima; here an approximation of it: AR(p) on the series
  differenced d times, p in 0..3 and d in 0..1 chosen by AIC (least squares), Dynamo's guards
  kept (fewer than 5 points: the last value; constant data: that value; forecasts >= 0). No
  moving-average terms and no seasonal search.
- `prophet` is not implemented (it needs Prophet and a Stan toolchain).

Every predictor skips the leading run of zeros (Dynamo's idle-period skip) and treats a
non-finite reading as 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np


class PredictorKind(StrEnum):
    CONSTANT = "constant"
    ARIMA = "arima"
    KALMAN = "kalman"


@dataclass(slots=True)
class _Buffer:
    values: list[float] = field(default_factory=list)
    seen_nonzero: bool = False

    def add(self, value: float) -> bool:
        """Dynamo's add_data_point: False when the value was skipped (a leading zero)."""
        if not math.isfinite(value):
            value = 0.0
        if value == 0 and not self.seen_nonzero:
            return False
        if value != 0:
            self.seen_nonzero = True
        self.values.append(value)
        return True

    def last(self) -> float:
        return self.values[-1] if self.values else 0.0


@dataclass(slots=True)
class ConstantPredictor:
    buf: _Buffer = field(default_factory=_Buffer)

    def add(self, value: float) -> None:
        self.buf.add(value)

    def predict_next(self) -> float:
        return self.buf.last()


@dataclass(slots=True)
class KalmanPredictor:
    """x = [level, trend]; F = [[1, 1], [0, 1]]; H = [1, 0]; P0 = 1000 I."""

    q_level: float = 1.0
    q_trend: float = 0.1
    r: float = 10.0
    buf: _Buffer = field(default_factory=_Buffer)
    x: np.ndarray = field(default_factory=lambda: np.zeros(2))
    p: np.ndarray = field(default_factory=lambda: np.eye(2) * 1000.0)
    initialized: bool = False
    cached: float | None = None  # the forecast made for this step (not advanced twice)

    _F = np.array([[1.0, 1.0], [0.0, 1.0]])

    def _predict(self) -> None:
        self.x = self._F @ self.x
        self.p = self._F @ self.p @ self._F.T + np.diag([self.q_level, self.q_trend])

    def add(self, value: float) -> None:
        if not self.buf.add(value):
            return
        z = self.buf.values[-1]
        if not self.initialized:
            self.x = np.array([z, 0.0])
            self.initialized = True
        else:
            if self.cached is None:
                self._predict()
            s = self.p[0, 0] + self.r  # H P H' + R
            k = self.p[:, 0] / s  # P H' / S
            self.x = self.x + k * (z - self.x[0])
            i_kh = np.eye(2) - np.outer(k, [1.0, 0.0])
            self.p = i_kh @ self.p @ i_kh.T + np.outer(k, k) * self.r  # filterpy's Joseph form
        self.cached = None

    def predict_next(self) -> float:
        if not self.initialized:  # (Dynamo's Kalman forecasts from the first point on)
            return self.buf.last()
        if self.cached is None:
            self._predict()
            self.cached = float(self.x[0])
        return self.cached


@dataclass(slots=True)
class ArimaPredictor:
    min_points: int = 5
    max_p: int = 3
    buf: _Buffer = field(default_factory=_Buffer)

    def add(self, value: float) -> None:
        if self.buf.add(value):
            self.buf.values[-1] = max(0.0, self.buf.values[-1])

    def predict_next(self) -> float:
        y = np.array(self.buf.values)
        if len(y) < self.min_points:
            return self.buf.last()
        if np.all(y == y[0]):
            return float(y[0])
        best: tuple[float, float] | None = None  # (aic, forecast)
        for d in (0, 1):
            series = np.diff(y, n=d) if d else y
            for p in range(self.max_p + 1):
                fit = _ar_fit(series, p)
                if fit is None:
                    continue
                aic, nxt = fit
                forecast = nxt + (y[-1] if d else 0.0)
                if best is None or aic < best[0]:
                    best = (aic, forecast)
        return max(0.0, best[1]) if best is not None else self.buf.last()


def _ar_fit(series: np.ndarray, p: int) -> tuple[float, float] | None:
    """Least-squares AR(p) with a constant: (AIC, one-step forecast), None if too short."""
    n = len(series) - p
    if n < p + 2:
        return None
    cols = [np.ones(n)] + [series[p - i - 1 : p - i - 1 + n] for i in range(p)]
    a = np.column_stack(cols)
    target = series[p:]
    coef, *_ = np.linalg.lstsq(a, target, rcond=None)
    resid = target - a @ coef
    sigma2 = max(float(resid @ resid) / n, 1e-12)
    aic = n * math.log(sigma2) + 2 * (p + 1)
    last = np.concatenate(([1.0], series[::-1][:p]))
    return aic, float(last @ coef)


Predictor = ConstantPredictor | KalmanPredictor | ArimaPredictor


def make(kind: PredictorKind) -> Predictor:
    if kind == PredictorKind.CONSTANT:
        return ConstantPredictor()
    if kind == PredictorKind.KALMAN:
        return KalmanPredictor()
    return ArimaPredictor()
