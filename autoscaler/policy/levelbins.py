"""The band by the level a forecast was made at: Mondrian bins with errors normalized by their bin.

One quantile of the log errors pooled over every forecast (band.error_quantile) multiplies the
forecasts made inside a burst by the errors of those made in the idle gaps between bursts, which
are scored against the next burst (Azure code × 5.5: a band of ×10–17, the fleet at maxReplicas
where the level never passed a quarter of the band's upper). Here each forecast belongs to a bin
by its level against the typical load when it was made (bin_of), each bin keeps the mean absolute
error of its forecasts (its scale), and one quantile is tracked of the errors *divided by their
bin's scale* (locally weighted conformal prediction): a bin's band is that quantile times its
scale. The scale is a mean, learned from a few errors and forgotten as fast both ways; a 0.98
quantile rests on ~50 errors for each one above it, so it is pooled over every bin (a quantile per
bin held the first quarter hour's errors for the hour: docs/policy-history.md, "The band by the level a
forecast was made at").

Pure: values in, values out. Errors are demand.py's log ratios, clipped to ±MAX_ERROR there.
"""

from __future__ import annotations

from typing import Final, final

from autoscaler.policy.record import Record

BINS: Final = 2  # made below the typical load, and at or above it
SCALE_WEIGHT: Final = 0.05  # a bin's mean |error| moves by this share of each error (demand's error_scale)
MAX_RATIO: Final = 8.0  # |error / scale| beyond 8 counts as 8: the first errors of a bin set its scale
MAX_SCORED: Final = 1000.0  # counts of scored errors stop here: they only weigh against a prior (demand.py)


@final
class Relative(Record):
    """The tracked quantile of error / its bin's scale (a stochastic approximation, as demand's).
    A Record (record.py), not a NamedTuple: score() builds one a tick."""

    FIELDS = ("quantile", "scale", "scored")

    quantile: float
    scale: float  # smoothed |ratio|: the tracker's step
    scored: float

    def __init__(self, quantile: float = 0.0, scale: float = 0.0, scored: float = 0.0) -> None:
        self.quantile = quantile
        self.scale = scale
        self.scored = scored


# per bin (scale: the mean |log error| of its forecasts, scored: how many)
Bins = tuple[tuple[float, float], ...]


@final
class Heights(Record):
    """Bin 0's errors as heights over the typical load, (peak - forecast) / typical, beside their
    log ratios (band.track): the heights' tracked quantile (as demand's pooled tracker), the
    running mean and variance of the log band's quantile loss less the heights' band's on the same
    forecasts, in typical loads, and `lean`, that mean less its standard error times the band's
    quantile's deviate: above 0, bin 0 plans on the heights (band.band_width). A Record, as
    Relative."""

    FIELDS = ("quantile", "scale", "scored", "mean", "variance", "lean")

    quantile: float
    scale: float  # smoothed |height|: the tracker's step
    scored: float
    mean: float
    variance: float
    lean: float

    def __init__(
        self,
        quantile: float = 0.0,
        scale: float = 0.0,
        scored: float = 0.0,
        mean: float = 0.0,
        variance: float = 0.0,
        lean: float = 0.0,
    ) -> None:
        self.quantile = quantile
        self.scale = scale
        self.scored = scored
        self.mean = mean
        self.variance = variance
        self.lean = lean


def bin_of(forecast_load: float, typical_load: float) -> int:
    """The bin of a forecast: made below the typical load (an idle gap, a burst's tail) or not."""
    return 0 if forecast_load < typical_load else 1


def quantile(bins: Bins, relative: Relative, b: int) -> tuple[float, float] | None:
    """(bin b's error quantile, the errors it rests on), None until it has both a scale and a
    ratio scored."""
    if b >= len(bins) or relative.scored <= 0.0:
        return None
    scale, scored = bins[b]
    if scored <= 0.0:
        return None
    n = relative.scored  # min(scored, n) without the builtin's call (a tick asks for several)
    return relative.quantile * scale, n if n < scored else scored


def score(bins: Bins, relative: Relative, b: int, e: float, q: float, above: bool) -> tuple[Bins, Relative]:
    """The bins and the ratio tracker after bin b scored the log error e at quantile q; `above`:
    e is known to be above bin b's band (early scoring, band.track). A bin's first error sets its
    scale and is not a ratio yet."""
    if len(bins) <= b:
        bins = (*bins, *((0.0, 0.0),) * (b + 1 - len(bins)))
    scale, scored = bins[b]
    if scored > 0.0 and scale > 1e-9:
        r = e / scale
        r = MAX_RATIO if r > MAX_RATIO else -MAX_RATIO if r < -MAX_RATIO else r
        rq, rs, rn = relative.quantile, relative.scale, relative.scored
        rs += SCALE_WEIGHT * (abs(r) - rs) if rn else abs(r)
        rq += (0.1 * rs + 1e-3) * (q - (1.0 if not above and r <= rq else 0.0))
        relative = Relative(rq, rs, rn + 1.0 if rn < MAX_SCORED else rn)
    scale += SCALE_WEIGHT * (abs(e) - scale) if scored else abs(e)
    entry = (scale, scored + 1.0 if scored < MAX_SCORED else scored)
    # concatenated, not starred: a compiled build gathers starred items into a list, then a tuple
    return bins[:b] + (entry,) + bins[b + 1 :], relative  # noqa: RUF005
