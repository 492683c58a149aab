"""Replay a case with the predictive stages knocked out in this process (a probe, not a policy).

`.venv/bin/python probes/az_knocks.py KNOCKS -- <infscale replay compare args>`; KNOCKS a comma list
(or `none`) of:
  typical   the bursts' hold about the typical rate alone (not the level where higher)
  nohold    no bursts' hold
  norec     the scale-down keeps no level for its recurrence (no gaps)
  nolife    the requests in flight held at the need's own rate (the prompts alone at the hold)
  ahead     the bursts' hold about the mean forecast at the sizing's horizon (not the level now)
  b1        the bursts' budget the SLO's tail itself (BURST_BUDGET 1)
  holdfloor the bursts' hold a floor on the count after the scale-down, not a need recorded
  tmix      the bursts' hold sized at the typical demand's mix (its 10-minute tokens per request)
  norecord  the need history records the plan without the bursts' hold (the count still holds it)
  smix      the bursts' hold sized at the prompt mean over the lengths' spread window (~2,000 requests)
  add0      bin 0's band read as a height above the level: mean + typical·(width − 1)

`typical`, `nolife`, `ahead` and `tmix`/`smix` re-size the hold by session 23's wall
(burstsize.hold_rate), not by main's priced hold (burstprice.py, session 24): on main they compare
with that older hold, not knock one stage out of today's.
"""

from __future__ import annotations

import sys

from autoscaler.policy import band, burstsize, levelbins, lookahead, scaledown

knocks = set(sys.argv[1].split(","))
argv = sys.argv[sys.argv.index("--") + 1 :]

if "b1" in knocks:
    burstsize.BURST_BUDGET = 1.0  # type: ignore[misc]

if "typical" in knocks or "nohold" in knocks or "nolife" in knocks:
    _init = lookahead.Lookahead.__init__

    def _init2(self, cap, observed, speed, limit, count_s=None):  # type: ignore[no-untyped-def]
        _init(self, cap, observed, speed, limit, count_s)
        if "nohold" in knocks:
            self.hold = self.lifetime_hold = 0.0
            return
        if "nolife" in knocks:
            self.lifetime_hold = 0.0
            return
        if self.hold <= 0.0:
            return
        rate = observed.typical.requests
        budget = burstsize.BURST_BUDGET * cap.tail
        self.hold = hold = burstsize.hold_rate(rate, self.spread, cap.ttft_s, budget)
        lasted = observed.lasting
        self.lifetime_hold = hold
        from autoscaler.policy import demand, lasting

        if hold > 0.0 and 0.0 < demand.tick_s(observed) < lasted.time_s:
            in_flight = burstsize.hold_rate(rate, lasting.index(lasted, rate), lasted.time_s, cap.tail)
            if in_flight < hold:
                self.lifetime_hold = in_flight

    lookahead.Lookahead.__init__ = _init2  # type: ignore[method-assign]

if "norec" in knocks:
    _keep = scaledown.keep

    def _keep2(have, need_now, need_ahead, history, now, recreate_s, gaps=(), slo_weight=1.0, drain=0.0):  # type: ignore[no-untyped-def]
        return _keep(have, need_now, need_ahead, history, now, recreate_s, (), slo_weight, drain)

    scaledown.keep = _keep2  # type: ignore[assignment]

if "add0" in knocks:
    _widened = band.widened

    def _widened2(state, mean, mean_load, typical, width):  # type: ignore[no-untyped-def]
        if levelbins.bin_of(mean_load, typical) == 0:
            high = mean_load + typical * (width - 1.0)
            if mean_load > 1e-12:
                return mean.scaled(high / mean_load)
            if typical > 1e-12 and high > 0.0:
                return state.typical.scaled(high / typical)
            return mean
        return _widened(state, mean, mean_load, typical, width)

    band.widened = _widened2  # type: ignore[assignment]

if "ahead" in knocks:
    from autoscaler.policy import demand as _demand
    from autoscaler.policy import lasting as _lasting

    def _sizing_at(self, h):  # type: ignore[no-untyped-def]
        got = self._sized.get(h)
        if got is None:
            hold, life = self.hold, self.lifetime_hold
            if hold > 0.0:
                obs = self._observed
                rate = obs.typical.requests
                mean = self.forecast_at(h)[0]
                if mean.requests > rate:
                    rate = mean.requests
                budget = burstsize.BURST_BUDGET * self.tail
                self.hold = burstsize.hold_rate(rate, self.spread, self.slo.ttft_s, budget)
                self.lifetime_hold = self.hold
                lasted = obs.lasting
                if 0.0 < _demand.tick_s(obs) < lasted.time_s:
                    f = burstsize.hold_rate(rate, _lasting.index(lasted, rate), lasted.time_s, self.tail)
                    if f < self.hold:
                        self.lifetime_hold = f
            got = self._sized[h] = self.sized(self.planned_at(h))
            self.hold, self.lifetime_hold = hold, life
        return got

    lookahead.Lookahead.sizing_at = _sizing_at  # type: ignore[method-assign]

if "holdfloor" in knocks:
    from autoscaler.policy import decide as _decide
    from autoscaler.policy import planner as _planner

    _made: list[object] = []
    _init_h = lookahead.Lookahead.__init__

    def _init_h2(self, cap, observed, speed, limit, count_s=None):  # type: ignore[no-untyped-def]
        _init_h(self, cap, observed, speed, limit, count_s)
        _made.append((self, self.hold, self.lifetime_hold))
        self.hold = self.lifetime_hold = 0.0

    lookahead.Lookahead.__init__ = _init_h2  # type: ignore[method-assign]
    _plan = _planner.plan

    def _plan2(spec, cap, state, obs, reactive, lead_s, now):  # type: ignore[no-untyped-def]
        _made.clear()
        out = _plan(spec, cap, state, obs, reactive, lead_s, now)
        if out.replicas is None or out.plan is None or not _made:
            return out
        ahead, hold, life = _made[0]
        if hold <= 0.0:
            return out
        h = out.plan.horizon_s
        floor = burstsize.size(
            ahead.profile,
            ahead.slo,
            ahead.planned_at(h),
            ahead.speed,
            ahead.limit,
            ahead.spread,
            ahead.shape,
            hold,
            life,
        ).replicas
        if floor > out.replicas:
            return out._replace(replicas=floor)
        return out

    _planner.plan = _plan2  # type: ignore[assignment]
    _decide.planner.plan = _plan2  # type: ignore[attr-defined]

if "tmix" in knocks or "smix" in knocks:
    from autoscaler.policy import capacity as _capacity

    def _sized(self, d):  # type: ignore[no-untyped-def]
        got = burstsize.size(self.profile, self.slo, d, self.speed, self.limit, self.spread, self.shape)
        hold, life = self.hold, self.lifetime_hold
        r = d.requests
        if hold <= r or r <= 0.0:
            return got
        base = self._observed.typical
        if "smix" in knocks:  # the prompt per request over the spread's ~2,000 requests
            sp = self._observed.mix.spread_prompt
            base = d if not sp > 0.0 else type(d)(d.requests, d.requests * sp, d.output_tokens)
        if not base.requests > 0.0:
            base = d
        lasting = life if life <= hold else hold
        if lasting < r:
            lasting = r
        held = _capacity.size(
            self.profile,
            self.slo,
            base.scaled(lasting / base.requests),
            self.speed,
            self.limit,
            prefill_burst=hold / lasting,
            **self.shape,
        )
        return held if held.replicas > got.replicas else got

    lookahead.Lookahead.sized = _sized  # type: ignore[method-assign]

if "norecord" in knocks:
    from autoscaler.policy import horizon as _horizon

    _last: dict[str, object] = {}
    _init_r = lookahead.Lookahead.__init__

    def _init_r2(self, cap, observed, speed, limit, count_s=None):  # type: ignore[no-untyped-def]
        _init_r(self, cap, observed, speed, limit, count_s)
        _last["ahead"] = self

    lookahead.Lookahead.__init__ = _init_r2  # type: ignore[method-assign]
    _find = _horizon.find

    def _find2(*args, **kwargs):  # type: ignore[no-untyped-def]
        got = _find(*args, **kwargs)
        _last["h"] = got[0]
        return got

    _horizon.find = _find2  # type: ignore[assignment]
    _record = scaledown.record

    def _record2(history, gaps, now, need, keep_s):  # type: ignore[no-untyped-def]
        ahead = _last.get("ahead")
        h = _last.get("h")
        if ahead is not None and h is not None:
            a = ahead
            with_hold = a.sizing_at(h).replicas  # type: ignore[attr-defined]
            if need == with_hold:  # the plan's own count (no floor or panic above it)
                need = burstsize.size(
                    a.profile,
                    a.slo,
                    a.planned_at(h),
                    a.speed,
                    a.limit,
                    a.spread,
                    a.shape,  # type: ignore[attr-defined]
                ).replicas
        return _record(history, gaps, now, need, keep_s)

    scaledown.record = _record2  # type: ignore[assignment]

from infscale.cli import main  # noqa: E402

sys.exit(main(["replay", "compare", *argv]))
