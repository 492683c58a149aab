"""The demand's values (demand.py): the state a tick threads into the next one (DemandState, with
its arrivals' Series; statejson.py has its JSON form) and a tick's estimate (Estimate).

Records (record.py), not NamedTuples: a tick builds several, compiled, and a Record is built and
freed at a fraction of a NamedTuple's cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, final

from autoscaler.policy.capacity import Demand
from autoscaler.policy.lasting import Lasting
from autoscaler.policy.levelbins import Bins, Heights, Relative
from autoscaler.policy.mix import Mix
from autoscaler.policy.record import Record

if TYPE_CHECKING:
    from autoscaler.policy.statejson import TimeCodec

_NO_RELATIVE = Relative()
_NO_LASTING = Lasting()
_NO_HEIGHTS = Heights()


@final
class Series(Record):
    """A level and its trend (Holt's). A Record (record.py): a tick builds one or two."""

    FIELDS = ("level", "trend")

    level: float
    trend: float  # per second

    def __init__(self, level: float, trend: float) -> None:
        self.level = level
        self.trend = trend


@final
class DemandState(Record):
    """A Record (record.py), not a NamedTuple: a tick builds two (observe, band.track)."""

    FIELDS = (
        "at",
        "inflight",
        "mix",
        "requests",
        "primed",
        "pending",
        "error_quantile",
        "error_scale",
        "scored",
        "typical",
        "peaks",
        "typical_peak",
        "bins",
        "relative",
        "spread",
        "counted",
        "lasting",
        "heights",
    )

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
    peaks: tuple[tuple[float, float], ...]  # (time, load) with loads falling: window maxima
    # the level's peak over the scored horizon (peaks[0]), averaged as `typical` but rising at once
    # to a new peak: how high the bursts typically go (scaledown.slo_weight)
    typical_peak: float
    # per bin of the level a forecast was made at, its errors' mean |log ratio| and count, and the
    # tracked quantile of error / that scale: a bin's band (levelbins.py); () until scored
    bins: Bins
    relative: Relative
    # the arrivals' counts per tick against the level's one-step forecast, (squared residual, count)
    # averaged as `typical`: their ratio is the index of dispersion (dispersion()); (0, 0): none yet
    spread: tuple[float, float]
    # the gateway's arrivals count (observe's `arrived`) as a level and trend of its own, which its
    # counts are the dispersion's misses about; None: no reading last tick (or no counter)
    counted: Series | None
    # the arrivals over the requests' time in the system, which are what is in flight (lasting.py)
    lasting: Lasting
    # bin 0's errors as heights over the typical load, their quantile and the lean between them and
    # the log ratios (levelbins.Heights, band.track): bin 0 plans on the heights while it is above 0
    heights: Heights

    def __init__(
        self,
        at: float,
        inflight: float,
        mix: Mix,
        requests: Series,
        primed: bool,
        pending: tuple[tuple[float, float, float, int], ...],
        error_quantile: float,
        error_scale: float,
        scored: float,
        typical: Demand,
        peaks: tuple[tuple[float, float], ...] = (),
        typical_peak: float = 0.0,
        bins: Bins = (),
        relative: Relative = _NO_RELATIVE,
        spread: tuple[float, float] = (0.0, 0.0),
        counted: Series | None = None,
        lasting: Lasting = _NO_LASTING,
        heights: Heights = _NO_HEIGHTS,
    ) -> None:
        self.at = at
        self.inflight = inflight
        self.mix = mix
        self.requests = requests
        self.primed = primed
        self.pending = pending
        self.error_quantile = error_quantile
        self.error_scale = error_scale
        self.scored = scored
        self.typical = typical
        self.peaks = peaks
        self.typical_peak = typical_peak
        self.bins = bins
        self.relative = relative
        self.spread = spread
        self.counted = counted
        self.lasting = lasting
        self.heights = heights

    def to_dict(self, codec: TimeCodec | None = None) -> dict[str, Any]:
        """JSON-ready, times through `codec` (statejson.TimeCodec; default: seconds)."""
        from autoscaler.policy import statejson  # it reads this module's types

        return statejson.demand_to_dict(self, codec or statejson.SECONDS)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], codec: TimeCodec | None = None) -> DemandState:
        """Parse to_dict output; a malformed field raises ValueError naming it (statejson.py)."""
        from autoscaler.policy import statejson

        return statejson.demand_from_dict(data, codec or statejson.SECONDS)


@final
class Estimate(Record):
    """This tick's demand as the counters and the in-flight growth show it (not smoothed)."""

    FIELDS = ("now", "growth_per_s")

    now: Demand
    growth_per_s: float  # d(in flight)/dt that went into it

    def __init__(self, now: Demand, growth_per_s: float) -> None:
        self.now = now
        self.growth_per_s = growth_per_s
