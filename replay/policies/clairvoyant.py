"""`clairvoyant`: the reference bound. It knows every arrival and runs the replay itself: it
searches, by simulating the whole trace on the scenario's fleet and engine, for the replica
schedule with the fewest GPU-hours whose SLO attainment meets `goal` (docs/replay.md, "The
clairvoyant bound", says what it bounds and by how much).

The schedule family searched, one knob m > 0:
  ready(τ) = ceil(m × need(τ))     need: sizing.need_load, the trace's own per-second need
  closed                          a dip shorter than keeping costs is kept (keep-vs-recreate)
  requested by exact lead times   at each decision, the replicas ready(τ) asks for over the time
                                  until k more started now are ready (the fleet's own start-up
                                  machine on a copy: contention for storage, the gate, caches)
m is found by geometric bisection on the simulated attainment; then the flat fleets that could be
cheaper (no start-up to pay: short or flat traces) by bisection on their size. The cheapest
schedule that met the goal is kept (the highest attainment if none did).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from autoscaler.policy.observation import Observation
from replay.fleet import Fleet
from replay.policies.base import DEFAULT_CLAIRVOYANT_GOAL, PolicyContext
from replay.policies.sizing import need_load
from replay.profiles import Scenario
from replay.trace import Trace

I64 = npt.NDArray[np.int64]
BISECTION_STEPS = 6  # on log m over [M_LOW, m_high]: 2^-6 of the span, ~3.6 % of m
M_LOW = 0.1  # a tenth of the target's replicas: 160 requests in flight per 64-slot replica
M_START = 1.0  # need_load at the policies' own target
M_GROWTH = 2.0  # while the goal is not met at m_high (at most MAX_GROWTHS times)
MAX_GROWTHS = 3
MAX_LEAD_ROUNDS = 4  # lead of k more -> k: a fixed point in a few rounds (k only grows)


def ready_in_s(fleet: Fleet, k: int) -> float:
    """Seconds until the last of k more replicas started now is ready: scale_to on a copy of the
    fleet, run event by event (placement, shared-storage contention, the load gate, caches)."""
    twin = copy.deepcopy(fleet)
    first = len(twin.replicas)
    twin.scale_to(twin.active_count + k)
    new = twin.replicas[first:]
    while any(math.isnan(r.ready_s) for r in new):
        at = twin.next_event_s()
        if not math.isfinite(at):
            return math.inf
        twin.advance(at)
    return max(r.ready_s for r in new) - fleet.now


def close_gaps(ready: I64, keep_s: Callable[[int], float]) -> I64:
    """Per level j, a run of seconds below j between two at or above it is raised to j when it is
    no longer than keep_s(k), k the replicas the run's end would have to start again: idle
    replicas cost less than deleting them and starting k others, which hold their GPUs for a
    whole start-up (longer when k share the storage) before they serve."""
    out = ready.copy()
    for j in range(1, int(ready.max(initial=0)) + 1):
        up = np.flatnonzero(ready >= j)
        if len(up) < 2:
            continue
        gaps = np.diff(up)
        for i in np.flatnonzero(gaps > 1):
            lo, hi = up[i] + 1, up[i + 1]
            if hi - lo <= keep_s(int(ready[hi]) - int(ready[lo:hi].min())):
                out[lo:hi] = np.maximum(out[lo:hi], j)
    return out


@dataclass(slots=True)
class SchedulePolicy:
    """Executes a plan of ready replicas per second: at `now` it asks for the most the plan needs
    before k more replicas started now could be ready (plus one period: the next decision is the
    next chance), k found as a fixed point with the fleet's exact lead time of k."""

    plan: I64  # ready replicas wanted per second
    lead_s: Callable[[], float]  # one more replica's
    fleet: Callable[[], Fleet | None]
    name: str = "clairvoyant"
    period_s: float = 15.0
    min_replicas: int = 1
    max_replicas: int = 64
    initial_replicas: int = 1
    fresh_metrics: bool = False
    metric_names: tuple[str, ...] = ()
    lead_quantile: float | None = None
    reads_cold_start: bool = False  # its lead times come from the fleet itself, not the observation

    def desired(self, now: float, obs: Observation) -> int:
        want = self._most(now, self.lead_s())
        fleet = self.fleet()
        for _ in range(MAX_LEAD_ROUNDS):
            k = want - obs.status_replicas
            if fleet is None or k < 2:
                break
            more = self._most(now, ready_in_s(fleet, k))
            if more == want:
                break
            want = more
        return want

    def _most(self, now: float, lead_s: float) -> int:
        lo = int(now)
        hi = math.ceil(now + min(lead_s, 1e7) + self.period_s) + 1
        window = self.plan[lo:hi]
        want = int(window.max()) if len(window) else self.min_replicas
        return min(self.max_replicas, max(self.min_replicas, want))


@dataclass(frozen=True, slots=True)
class Trial:
    m: float  # the need-shaped plan's knob (NaN for a flat one)
    attainment: float
    gpu_seconds: float
    plan: I64
    flat: int = 0  # > 0: the flat fleet of that many replicas


@dataclass(slots=True)
class ClairvoyantPolicy:
    """The search runs on first use (building the policy stays cheap: a league checks every name
    first). `trials` keeps every schedule it simulated."""

    trace: Trace
    scenario: Scenario
    target: float
    lead_s: Callable[[], float]
    fleet: Callable[[], Fleet | None]
    goal: float = DEFAULT_CLAIRVOYANT_GOAL
    name: str = "clairvoyant"
    period_s: float = 15.0
    fresh_metrics: bool = False
    metric_names: tuple[str, ...] = ()
    lead_quantile: float | None = None
    reads_cold_start: bool = False
    warmup_s: float = 0.0  # `trace` is the loop's, behind a warm-up of this long; `scored` the trace
    scored: Trace | None = None
    trials: list[Trial] = field(default_factory=list)
    _chosen: SchedulePolicy | None = None

    @property
    def initial_replicas(self) -> int:
        return self.chosen.initial_replicas

    def desired(self, now: float, obs: Observation) -> int:
        return self.chosen.desired(now, obs)

    @property
    def chosen(self) -> SchedulePolicy:
        if self._chosen is None:
            best = search(
                self.trace, self.scenario, self.target, self.goal, self.trials, self.warmup_s, self.scored
            )
            self._chosen = schedule(best.plan, self.scenario, self.lead_s, self.fleet)
        return self._chosen


def schedule(
    plan: I64, scenario: Scenario, lead_s: Callable[[], float], fleet: Callable[[], Fleet | None]
) -> SchedulePolicy:
    first = plan[: math.ceil(cold_leads(scenario)(1)) + 1]
    initial = int(first.max()) if len(first) else scenario.min_replicas
    return SchedulePolicy(
        plan,
        lead_s,
        fleet,
        period_s=scenario.sync_period_s,
        min_replicas=scenario.min_replicas,
        max_replicas=scenario.max_replicas,
        initial_replicas=min(scenario.max_replicas, max(scenario.min_replicas, initial)),
    )


def cold_leads(scenario: Scenario) -> Callable[[int], float]:
    """k -> seconds until the last of k replicas started together on an empty cluster is ready
    (plus one period: the decision that starts them): what recreating k replicas costs."""
    empty = Fleet(scenario.cold_start, initial_ready=0, node_idle_remove_s=scenario.node_idle_remove_s)
    known: dict[int, float] = {}

    def lead(k: int) -> float:
        k = max(1, min(k, scenario.max_replicas))
        if k not in known:
            known[k] = ready_in_s(empty, k) + scenario.sync_period_s
        return known[k]

    return lead


def plan_for(
    need: npt.NDArray[np.float64], m: float, scenario: Scenario, keep_s: Callable[[int], float]
) -> I64:
    ready = np.clip(np.ceil(m * need - 1e-9), scenario.min_replicas, scenario.max_replicas).astype(np.int64)
    return close_gaps(ready, keep_s)


def simulate_plan(
    trace: Trace, scenario: Scenario, plan: I64, warmup_s: float = 0.0, scored: Trace | None = None
) -> tuple[float, float]:
    """(SLO attainment, GPU-seconds) of the plan, replayed on the scenario's own fleet; with a
    warm-up, `trace` is the one the loop plays (the plan's clock) and the figures `scored`'s."""
    from replay.simulate import simulate
    from replay.slo import judge

    holder: list[Fleet] = []
    policy = schedule(plan, scenario, lambda: holder[0].lead_time_s(), lambda: holder[0])
    fleet = Fleet(
        scenario.cold_start,
        initial_ready=policy.initial_replicas,
        node_idle_remove_s=scenario.node_idle_remove_s,
    )
    holder.append(fleet)
    if warmup_s > 0:
        assert scored is not None
        trace, played = scored, trace
        result = simulate(trace, scenario, policy, fleet=fleet, warmup_s=warmup_s, played=played)
    else:
        result = simulate(trace, scenario, policy, fleet=fleet)
    if result.unfinished:  # a plan that never serves some requests is no candidate
        return 0.0, math.inf
    req = result.requests
    v = judge(
        scenario.slo,
        trace.arrival_s,
        req.first_token_s,
        req.finished_s,
        trace.input_tokens,
        trace.output_tokens,
    )
    attainment = float(np.count_nonzero(v.good)) / len(trace) if len(trace) else 1.0
    return attainment, result.gpu_seconds


def feasible_share(trace: Trace, scenario: Scenario) -> float:
    """The share of requests that can meet the SLO at all: on an idle replica, their prefill alone
    within the TTFT target and a decode step alone (batch 1, at their final context) within the
    TPOT target. No fleet serves the others in time (Mooncake's 60k-token prompts at 2 s)."""
    if not len(trace):
        return 1.0
    e, slo = scenario.engine, scenario.slo
    ok = e.prefill_alone_s(trace.input_tokens) <= slo.ttft_target_s(trace.input_tokens)
    if slo.tpot_s is not None:
        context, at = np.unique(trace.input_tokens + trace.output_tokens, return_inverse=True)
        step = np.array([e.decode_step_s(1, float(c)) for c in context])[at]
        ok &= (trace.output_tokens <= 1) | (step <= slo.tpot_s)
    return float(np.count_nonzero(ok)) / len(trace)


def search(
    trace: Trace,
    scenario: Scenario,
    target: float,
    goal: float,
    trials: list[Trial],
    warmup_s: float = 0.0,
    scored: Trace | None = None,
) -> Trial:
    """The cheapest simulated schedule of the family whose attainment meets `goal` of the requests
    that can meet the SLO at all (feasible_share); if none does, the one with the highest
    attainment. Every simulated schedule is appended to `trials`. With a warm-up the plan covers
    `trace` (the prefixed trace the loop plays) and is judged on `scored`, as every policy."""
    judged = trace if scored is None else scored
    goal *= feasible_share(judged, scenario)
    need = need_load(trace, scenario, target)
    keep_s = cold_leads(scenario)

    def trial(m: float) -> Trial:
        plan = plan_for(need, m, scenario, keep_s)
        attainment, gpu_s = simulate_plan(trace, scenario, plan, warmup_s, scored)
        t = Trial(m, attainment, gpu_s, plan)
        trials.append(t)
        return t

    high = trial(M_START)
    for _ in range(MAX_GROWTHS):
        if high.attainment >= goal or int(high.plan.min()) >= scenario.max_replicas:
            break
        high = trial(high.m * M_GROWTH)
    if high.attainment >= goal:
        low_m, high_m = M_LOW, high.m
        low = trial(low_m)
        if low.attainment < goal:
            for _ in range(BISECTION_STEPS):
                mid = trial(math.sqrt(low_m * high_m))
                if mid.attainment >= goal:
                    high_m = mid.m
                else:
                    low_m = mid.m
    met = [t for t in trials if t.attainment >= goal]
    if met:
        cheapest_s = min(t.gpu_seconds for t in met)
        _search_flat(trace, scenario, goal, cheapest_s, len(need), trials, warmup_s, scored)
        met = [t for t in trials if t.attainment >= goal]
        return min(met, key=lambda t: (t.gpu_seconds, -t.attainment))
    return max(trials, key=lambda t: (t.attainment, -t.gpu_seconds))


def _search_flat(
    trace: Trace,
    scenario: Scenario,
    goal: float,
    cheapest_s: float,
    length: int,
    trials: list[Trial],
    warmup_s: float = 0.0,
    scored: Trace | None = None,
) -> None:
    """Flat fleets are schedules of the same actuator too, with no start-up to pay: on a short or
    flat trace they can be cheaper than any need-shaped plan. Only those that could cost less
    than `cheapest_s` GPU-seconds are tried: the largest first, then a bisection for the fewest
    replicas meeting the goal."""
    gpus = scenario.cold_start.gpus_per_replica
    judged = trace if scored is None else scored  # GPU-seconds count over its span
    most = min(scenario.max_replicas, int(cheapest_s // (gpus * max(judged.duration_s, 1.0))))
    if most < scenario.min_replicas:
        return

    def trial(n: int) -> Trial:
        plan = np.full(length, n, dtype=np.int64)
        attainment, gpu_s = simulate_plan(trace, scenario, plan, warmup_s, scored)
        t = Trial(math.nan, attainment, gpu_s, plan, flat=n)
        trials.append(t)
        return t

    if trial(most).attainment < goal:
        return
    low, high = scenario.min_replicas - 1, most  # low fails (or is below the minimum), high meets
    while high - low > 1:
        mid = (low + high) // 2
        if trial(mid).attainment >= goal:
            high = mid
        else:
            low = mid


def build(ctx: PolicyContext) -> ClairvoyantPolicy:
    return ClairvoyantPolicy(
        ctx.trace,
        ctx.scenario,
        ctx.params.target,
        ctx.lead_s,
        ctx.fleet,
        goal=ctx.params.clairvoyant_goal,
        period_s=ctx.scenario.sync_period_s,
        warmup_s=ctx.warmup_s,
        scored=ctx.scored,
    )
