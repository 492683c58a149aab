"""The demand level's own sampling noise, which the band must not score as demand.

The level is an exponential average of per-tick arrival counts (demand.py). Even at a constant
rate λ those counts are Poisson, so the level wanders around λ, and the peak of the level over a
forecast's horizon (what band.track scores the forecast against) sits above λ by the noise's
maximum alone. At a few requests a second that excess is the band's width: Mooncake × 0.52 on
reference-70b (2 req/s, 30 a tick) planned on ×1.3–1.5 of a rate that hardly moves. The queueing
tail in capacity.py already sizes for Poisson arrivals at a rate, so the noise is paid twice.

`peak_excess` is the expected excess of that maximum, relative to λ: the level's standard deviation
(a Poisson count's, λ / dt, times the smoothing's share w / (2 − w)) times the mean of the largest of
n_eff independent normals (Blom's approximation), n_eff = 1 + the horizon's ticks × w / (2 − w) (the
ticks the smoothing decorrelates). The correlated level's true maximum is higher (a simulation puts
this at 67–92 % of it, tests/test_levelnoise.py): what is removed is never more than the noise.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Final

from autoscaler.policy import memo

_STANDARD = NormalDist()
_largest: Final[dict[float, float]] = {}  # the Blom quantile by n_eff rounded to 1/64


def peak_excess(alpha: float, period_s: float, rate: float, horizon_s: float) -> float:
    """The expected excess of the level's maximum over `horizon_s`, relative to the rate, for a
    level smoothed with weight `alpha` a `period_s` tick over Poisson counts at `rate` per second;
    0 at no rate or no horizon."""
    if rate <= 0.0 or horizon_s <= 0.0:
        return 0.0
    share = alpha / (2.0 - alpha)  # the level's variance over one count's (an exponential average)
    n = round((1.0 + horizon_s / period_s * share) * 64.0) / 64.0
    z = _largest.get(n)
    if z is None:
        z = memo.remember(_largest, n, _STANDARD.inv_cdf((n - 0.375) / (n + 0.25)), 4096)
    return z * math.sqrt(share / (rate * period_s))
