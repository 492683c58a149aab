"""One tick's forecast and sizing h seconds ahead (planner.py's demand, capacity and horizon).

The horizon's fixed point (horizon.find) asks for the need at several times, the stages after it
for the forecast and the need at the horizon, now and a break-even ahead: a Lookahead works each
time out once a tick, from the capacity spec's facts (capacityfacts.py: its load among them, the
unit the band scores its errors in).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final, final

from autoscaler.policy import (
    band,
    burstprice,
    burstsize,
    capacity,
    demand,
    flatahead,
    idlemiss,
    lasting,
    lateband,
    latecurve,
    lengths,
    levelbins,
    prefilltail,
)
from autoscaler.policy.capacity import Demand, Sizing
from autoscaler.policy.capacityfacts import CapacityFacts
from autoscaler.policy.demand import DemandState
from autoscaler.policy.flatcalls import Boxed
from autoscaler.policy.mix import lengths_cv2_of, outputs_cv2_of
from autoscaler.policy.outputsteps import OutputSteps
from autoscaler.policy.prefilltail import PrefillTail

_NO_BIN: Final = (0.0, 0.0)  # a bin not scored yet, as flatahead takes it


@final
class _Horizon:
    """What a tick read at one horizon: the forecast (its mean, the mean's load and the band's
    upper), and once asked for, the demand the count is sized at and its sizing."""

    __slots__ = ("h", "mean", "mean_load", "planned", "sized", "upper")

    def __init__(self, h: float, mean: Demand, upper: Demand, mean_load: float) -> None:
        self.h = h
        self.mean = mean
        self.upper = upper
        self.mean_load = mean_load
        self.planned: Demand | None = None
        self.sized: Sizing | None = None


_NONE: Final = _Horizon(math.nan, Demand(0.0, 0.0, 0.0), Demand(0.0, 0.0, 0.0), 0.0)  # no horizon read yet


class Lookahead:
    """The forecast (mean, upper band) and the sizing of the upper band h seconds after this
    tick's sample, each h once a tick, read from the demand state before this tick's errors are
    scored (band.track, in planner.py), at the learned speed, at most `limit` replicas."""

    __slots__ = (
        "_at",
        "_demand",
        "_engine",
        "_forecasting",
        "_last",
        "_lost",
        "_observed",
        "_utilization",
        "_widths",
        "hold",
        "hold_per_replica",
        "level",
        "lifetime_hold",
        "limit",
        "load",
        "mean_now",
        "profile",
        "shape",
        "slo",
        "speed",
        "spread",
        "tail",
        "typical_load",
        "z",
    )

    def __init__(
        self,
        cap: CapacityFacts,
        observed: DemandState,
        speed: float,
        limit: int,
        count_s: float | None = None,
        prefill_tail: PrefillTail | None = None,
        output_steps: OutputSteps | None = None,
    ) -> None:
        d = cap.demand
        profile = cap.profile
        self._demand = d
        self._observed = observed
        self.load = load = cap.load
        flat = flatahead.kernels
        if flat is None:
            self.typical_load = load(observed.typical)
            # the level (track leaves the series as they are) and its load, the band's scoring unit
            self.mean_now = demand.expected(d, observed, 0.0)
            self.level = load(self.mean_now)
            self.spread = demand.dispersion(observed, cap.ttft_s)  # the arrivals' (burstsize.py)
            self._widths: list[float | None] = [None] * levelbins.BINS  # the band's, by bin (band.upper)
            self._forecasting: tuple[Callable[..., Any], tuple[float, ...]] | None = None
        else:  # the same, and both bins' widths, in one compiled call
            start, forecast = flat
            self._start(start, forecast, cap)
        self.profile = profile
        self._engine = cap.engine
        self.slo = cap.slo
        self.tail = cap.tail
        self.z = cap.peak_z  # the band's quantile as the level's deviate
        self.speed = speed
        self.limit = limit
        shape = lengths.spread(profile, observed.mix.prompt, lengths_cv2_of(observed.mix))
        shape = lengths.with_outputs(shape, outputs_cv2_of(observed.mix))
        if cap.least_loaded:
            shape = lengths.Shape(**shape, least_loaded=True, arrivals_index=self.spread)
        if prefill_tail is not None and prefill_tail.total > 0.0:
            shape = lengths.Shape(**shape, prefill_tail=prefill_tail)
        if output_steps is not None:
            shape = lengths.Shape(**shape, output_steps=output_steps)
        self.shape = shape
        # the requests/s held for bursts (burstsize.hold_rate): about the typical rate, over which
        # the dispersion is counted, or the level where that is higher; none for an idle target
        # (its dispersion does not decay while no request comes: a tick of 0 expected and 0
        # counted says nothing of bursts)
        rate = observed.typical.requests
        if self.mean_now.requests > rate:
            rate = self.mean_now.requests
        idle = self.typical_load < burstsize.IDLE_LOAD and self.level < burstsize.IDLE_LOAD
        hold = 0.0
        self.hold_per_replica = 0.0  # the late curve's r, where it priced the hold (burstsize.size)
        if not idle:  # priced by the capacity model's own late share where it has one (latecurve.py)
            # the seconds the rate the dispersion counts was read over (the metric's window; the
            # tick's where it has none): its excess persists over them (latecurve.persistence)
            persist = count_s if count_s is not None and count_s > 0.0 else demand.tick_s(observed)
            mix = observed.mix
            key, late = latecurve.curve_for(
                cap.curve_specs,
                profile,
                cap.slo,
                mix.prompt,
                mix.output,
                speed,
                shape.get("lengths_cv2", 1.0),
                shape.get("service_cv2", capacity.SERVICE_CV2),
                persist,
                shape.get("outputs_cv2", 1.0),
                shape.get("output_steps"),
            )
            if late is not None:
                hold = burstprice.hold_rate(
                    rate,
                    self.spread,
                    cap.ttft_s,
                    burstprice.BUDGET * cap.tail,
                    key,
                    late,
                )
                self.hold_per_replica = late[4]
            else:
                hold = burstsize.hold_rate(rate, self.spread, cap.ttft_s, burstsize.BURST_BUDGET * cap.tail)
        self.hold = hold
        # ... and in flight, the arrivals over the requests' time in the system, held over it where
        # the counts read it (longer than a tick), at the SLO's own tail: past the KV ceiling a
        # replica preempts, no share of the window is merely late (burstsize.py, lifetime)
        lasted = observed.lasting
        self.lifetime_hold = hold
        if hold > 0.0 and 0.0 < demand.tick_s(observed) < lasted.time_s:
            in_flight = burstsize.hold_rate(rate, lasting.index(lasted, rate), lasted.time_s, cap.tail)
            if in_flight < hold:
                self.lifetime_hold = in_flight
        self._at: dict[float, _Horizon] = {}  # what the tick read at each horizon asked for
        self._last = _NONE  # the horizon read last
        self._lost: float | None = None
        self._utilization: float | None = None

    def _start(self, start: Callable[..., Any], forecast: Callable[..., Any], cap: CapacityFacts) -> None:
        """__init__'s typical load, level, its load, dispersion and both bins' band widths by
        `start`, flatahead.start's compiled copy; forecast_at's by `forecast`, flatahead.forecast's."""
        observed = self._observed
        bins: Boxed = observed.bins  # its pairs read as objects too (below)
        n = len(bins)
        # the arguments one by one, their tuples read as objects (flatcalls.py)
        boxed: Boxed = cap.terms
        relative, heights = observed.relative, observed.heights
        first: Boxed = bins[0] if n else _NO_BIN
        second: Boxed = bins[1] if n > 1 else _NO_BIN
        a0, a1, b0, c0, k, min_rate = boxed
        damping_s, prior_weight, prior_error = cap.band
        p, o = observed.mix.prompt, observed.mix.output
        rl, rt = observed.requests.level, observed.requests.trend
        typical = observed.typical
        tr, tp, to = typical.requests, typical.prompt_tokens, typical.output_tokens
        s2, sn = observed.spread  # a pair of floats: unpacked, not boxed into a new tuple first
        s0, n0 = first
        s1, n1 = second
        rq, rn, hq, lean = relative.quantile, relative.scored, heights.quantile, heights.lean
        out: Boxed = start(
            a0, a1, b0, c0, k, min_rate, rl, rt, p, o, tr, tp, to, s2, sn, cap.ttft_s,
            prior_weight, prior_error, observed.scored, observed.error_quantile,
            n, s0, n0, s1, n1, rq, rn, hq, lean,
        )  # fmt: skip
        typical_load = self.typical_load = out[0]
        self.mean_now = Demand(out[1], out[2], out[3])
        self.level = out[4]
        self.spread = out[5]
        width0, width1 = out[6], out[7]
        self._widths = [width0, width1]
        # forecast's copy, and its arguments after the horizon: the same at every horizon of the tick
        forecasting = (
            a0, a1, b0, c0, k, min_rate, damping_s, rl, rt, p, o, typical_load, tr, tp, to, width0, width1,
            lean,
        )  # fmt: skip
        self._forecasting = forecast, forecasting

    def forecast_at(self, h: float) -> tuple[Demand, Demand]:
        """(mean, upper band) h seconds ahead."""
        at = self._horizon(h)
        return at.mean, at.upper

    def _horizon(self, h: float) -> _Horizon:
        """The forecast h seconds ahead, read once a tick (one float-keyed lookup for all it keeps;
        the horizon read last compared first: a tick asks for one horizon several times in a row)."""
        last = self._last
        if last.h == h:
            return last
        got = self._at.get(h)
        if got is None:
            fused = self._forecasting
            if fused is not None:  # the same in one compiled call (flatahead.forecast)
                # one tuple of the arguments: `h, *fused[1]` a compiled call gathers in a list first
                out: Boxed = fused[0](*((h,) + fused[1]))
                got = _Horizon(h, Demand(out[0], out[1], out[2]), Demand(out[4], out[5], out[6]), out[3])
                self._at[h] = self._last = got
                return got
            d = self._demand
            if h == 0.0:
                mean, mean_load = self.mean_now, self.level
            else:
                mean = demand.expected(d, self._observed, h)
                mean_load = self.load(mean)
            # band.upper, its width exp(quantile) worked out once a tick for each bin
            typical = self.typical_load
            b = levelbins.bin_of(mean_load, typical)
            width = self._widths[b]
            if width is None:
                width = self._widths[b] = band.band_width(d, self._observed, mean_load, typical)
            got = _Horizon(h, mean, band.widened(self._observed, mean, mean_load, typical, width), mean_load)
            self._at[h] = got
        self._last = got
        return got

    def mean_load_at(self, h: float) -> float:
        """load() of the mean forecast h seconds ahead (forecast_at's)."""
        return self._horizon(h).mean_load

    def upper_at(self, h: float) -> Demand:
        return self._horizon(h).upper

    def planned_at(self, h: float) -> Demand:
        """The demand h seconds ahead the count is sized at: the least capacity whose expected late
        share under the band's distribution fits the SLO's unused allowance (lateband.py), at
        most the band's upper."""
        return self._planned(self._horizon(h))

    def _planned(self, at: _Horizon) -> Demand:
        got = at.planned
        if got is None:
            mean, upper, mean_load = at.mean, at.upper, at.mean_load
            typical = self.typical_load
            b = levelbins.bin_of(mean_load, typical)
            width = self._widths[b]
            if width is None:  # forecast_at read the other bin's
                width = self._widths[b] = band.band_width(self._demand, self._observed, mean_load, typical)
            total = mean_load + typical
            share = typical / total if total > 0.0 else 1.0
            q = math.log(width) if width > 1.0 else 0.0
            u = self.queue_utilization()
            if u is None:
                late = lateband.width(q, self.z, share, self.tail, self.idle_misses())
            else:
                late = lateband.queued_width(q, self.z, share, self.tail, u)
            got = upper if late is None else band.widened(self._observed, mean, mean_load, typical, late)
            at.planned = got
        return got

    def held_past(self) -> float:
        """The share of prefills past the TTFT target in the engines' prefill-time histograms
        (prefilltail.py; 0 without them): the capacity stage's words."""
        tail = self.shape.get("prefill_tail")
        return 0.0 if tail is None else prefilltail.past_share(tail, self.slo.ttft_s)

    def short_outputs(self) -> float | None:
        """The share of requests of 1-4 decode steps in the engines' output-length histograms
        (outputsteps.py; None without them): the capacity stage's words."""
        steps = self.shape.get("output_steps")
        if steps is None:
            return None
        return sum(m for d, m in zip(steps.steps, steps.masses, strict=True) if d <= 4.0)

    def queue_utilization(self) -> float | None:
        """The prefill utilization u_C a replica runs at where the count's TTFT tail meets the SLO,
        at the band's upper now (its sizing without the bursts' hold), when the TTFT binds there:
        the queue the overshoot past the count meets (lateband.queued_width). None where another
        bound (TPOT, batch, KV) sets the count or no demand is read: the fluid overshoot."""
        got = self._utilization
        if got is None:
            now = self.upper_at(0.0)
            u = -1.0
            if now.requests > 0.0:
                s = self.burst(now)
                if s.binding == "ttft" and s.prefill_tokens_per_s > 0.0:
                    u = s.requests_per_s * (now.prompt_tokens / now.requests) / s.prefill_tokens_per_s
            got = self._utilization = u
        return got if got >= 0.0 else None

    def idle_misses(self) -> float:
        """The share of requests no fleet serves in time (their prefill alone past the TTFT, at the
        observed mix, or the share the engines' prefill-time histograms show past it where more):
        the late share's allowance they spend first (lateband.py)."""
        lost = self._lost
        if lost is None:
            mix = self._observed.mix
            cv2 = self.shape.get("lengths_cv2", 1.0)
            lost = idlemiss.idle_misses(
                self._engine,
                self.slo,
                mix.prompt,
                mix.output,
                self.speed,
                cv2,
                self.shape.get("outputs_cv2", 1.0),
            )
            measured = prefilltail.missed(
                self.shape.get("prefill_tail"), self.slo.ttft_s, self.slo.ttft_tokens_per_s
            )
            if measured > lost:
                lost = measured
            self._lost = lost
        return lost

    def sizing_at(self, h: float) -> Sizing:
        at = self._horizon(h)
        got = at.sized
        if got is None:
            got = at.sized = self.sized(self._planned(at))
        return got

    def sized(self, d: Demand) -> Sizing:
        """A demand sized under the tick's targets, at least the bursts' hold (as at any horizon)."""
        return burstsize.size(
            self.profile,
            self.slo,
            d,
            self.speed,
            self.limit,
            self.spread,
            self.shape,
            self.hold,
            self.lifetime_hold,
            self.hold_per_replica,
        )

    def need_at(self, h: float) -> int:
        return self.sizing_at(h).replicas

    def burst(self, now: Demand) -> Sizing:
        """The sizing of a demand measured now (a panic's), under the same targets (a burst seen,
        no hold for the next one)."""
        return burstsize.size(self.profile, self.slo, now, self.speed, self.limit, self.spread, self.shape)
