"""plan()'s stage rows (demand, capacity, horizon, panic, scale-up), apart from planner.py's flow."""

from __future__ import annotations

from typing import Final

from autoscaler.policy import (
    burstsize,
    flatcalls,
    latefeedback,
    panic,
    scaleup,
)
from autoscaler.policy.capacity import Demand, Sizing
from autoscaler.policy.capacityfacts import CapacityFacts
from autoscaler.policy.clusterview import Cluster
from autoscaler.policy.demand import DemandState, Estimate
from autoscaler.policy.lookahead import Lookahead
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.panic import PanicState
from autoscaler.policy.planstate import PlannerState
from autoscaler.policy.spec import ColdStartSpec
from autoscaler.policy.speedlearn import SpeedState
from autoscaler.policy.stage import Stage
from autoscaler.policy.survival import Survival

# the stages' messages, formatted only when read (stage.Stage)
_DEMAND_MESSAGE: Final = (
    "arrivals {:.3g}/s (finished {:.3g} + in-flight growth {:+.3g}), prompt {:.4g} tok/s,"
    " output {:.4g} tok/s; in {:.0f} s: {:.3g}/s, upper {:.3g}/s (band x{:.3g}{}){}"
)
# where the level averages longer than alpha's window (demand.level_alpha_at): the clause says so
_SLOWER_LEVEL: Final = (
    "; the level at {:.2g} a period, not alpha's {:.2g}: alpha's window holds under {:,.0f} requests'"
    " worth of counts"
)
# where bin 0 plans on its heights (band.band_width): the band's clause says so
_ON_HEIGHTS: Final = ", below the typical load read as a height over it"
_CAPACITY_MESSAGE: Final = (
    "per replica at the SLO: prefill {:,.0f} tok/s, decode {:,.0f} tok/s, {:.3g} req/s at this mix"
    " (speed x{:.2f}); {:.3g}/s needs {}; arrivals' dispersion over the TTFT target {:.3g}"
    " (ca² {:.3g} a replica; bursts held at {:.3g}/s{}, {:.3g}/s over the requests' time in the system){}{}"
)
# where the late curve priced the hold: its own rate a replica, which its prompts are counted at
_CURVE_RATE: Final = " (the late curve's {:.3g}/s a replica)"
# where the TTFT binds at the band's upper (Lookahead.queue_utilization): the count prices the load
# past it at the prefill queue's own tail (lateband.queued_width), not as all late
_QUEUED: Final = "; the load past the count late at the prefill queue's tail, u_C {:.2f} a replica"
# where the engines' prefill-time histograms show prefills past the TTFT target (prefilltail.py):
# the holds one long prompt puts on a replica, which the light-load tail waits out
_HELD: Final = "; {:.3g} % of prefills hold a replica past the TTFT target (the engines' histograms)"
# where the prefill-time histogram's reading failed or is no histogram: the last tail is kept
_TAIL_UNREAD: Final = "; the prefill-time histogram not read ({}), its last tail kept"
# where the engines' output-length histograms are read (outputsteps.py): the TPOT tail's short answers
_SHORT: Final = "; {:.3g} % of requests decode in 4 steps or fewer (the engines' histograms)"
_OUTPUTS_UNREAD: Final = "; the output-length histogram not read ({}), its last shape kept"
_HORIZON_MESSAGE: Final = (
    "replica {} of those asked for now is ready in {:.0f} s ({} loading now, {} round(s))"
)
_LATE_MESSAGE: Final = (
    "{:.0f} of {:.0f} first tokens past {:g} s in the last {:.0f} s ({:.2f} %; {:.2f} % allowed, the"
    " sizing's budget at the hour's slow to late or the hour's share): evidence {:.1f} >= {:.1f} that"
    " the odds are twice that; one replica above the {}"
)
_BACKLOG_MESSAGE: Final = (
    "{} replica(s) hold a backlog standing {:.0f} s: its {:.0f} waiting requests are {:.1f} s of"
    " prefill a ready replica, past the {:g} s TTFT target; the {} the arrivals need counted beside them"
)
_PANIC_MESSAGE: Final = (
    "{:.3g}/s now is over {:g}x the band's {:.3g}/s: {} needed, {} can be ready within {:.0f} s"
)


_BINDING_REASONS: Final[dict[str, str]] = {"idle": "Idle"}


def _binding_reason(binding: str) -> str:
    """The capacity stage's reason: the binding constraint as a word (TTFTBinds, ...)."""
    reason = _BINDING_REASONS.get(binding)
    if reason is None:
        reason = _BINDING_REASONS[binding] = f"{binding.upper()}Binds"
    return reason


def _capacity_message(
    prefill: float,
    decode: float,
    requests: float,
    speed: float,
    sized: float,
    needed: int,
    spread: float,
    replica_cv2: float,
    hold: float,
    hold_per_replica: float,
    lifetime_hold: float,
    utilization: float | None,
    held_past: float = 0.0,
    tail_problem: str = "",
    short_outputs: float | None = None,
    outputs_problem: str = "",
) -> str:
    """The capacity stage's message, its clauses chosen when it is read (Stage.message): a
    decision builds it and most are never read."""
    curve = _CURVE_RATE.format(hold_per_replica) if hold_per_replica > 0.0 else ""
    queued = "" if utilization is None else _QUEUED.format(utilization)
    held = _HELD.format(100.0 * held_past) if held_past > 0.0 else ""
    if tail_problem:
        held += _TAIL_UNREAD.format(tail_problem)
    if short_outputs is not None:
        held += _SHORT.format(100.0 * short_outputs)
    if outputs_problem:
        held += _OUTPUTS_UNREAD.format(outputs_problem)
    return _CAPACITY_MESSAGE.format(
        prefill,
        decode,
        requests,
        speed,
        sized,
        needed,
        spread,
        replica_cv2,
        hold,
        curve,
        lifetime_hold,
        queued,
        held,
    )


def forecast_stages(
    have: int,
    needed: int,
    finished: float,
    est: Estimate,
    horizon_s: float,
    mean: Demand,
    upper: Demand,
    widening: float,
    at_horizon: Sizing,
    ahead: Lookahead,
    rounds: int,
    obs: Observation,
    on_heights: bool = False,
    slower_level: tuple[float, float, float] | None = None,
    tail_problem: str = "",
    outputs_problem: str = "",
) -> list[Stage]:
    """The demand, capacity and horizon stages' rows; `on_heights`: the upper is bin 0's height
    over the typical load (band.band_width), not its log band; `slower_level`: (the level's weight
    a period, alpha, levelRequests) where the weight is below alpha (demand.level_alpha_at);
    `tail_problem`, `outputs_problem`: why the prefill-time and output-length histograms were not
    read this tick (survival.track)."""
    now = est.now
    r, pt, gt = now.requests, now.prompt_tokens, now.output_tokens
    return [
        Stage(
            "demand",
            have,
            have,
            "DemandForecast",
            _DEMAND_MESSAGE,
            (
                r,
                finished,
                est.growth_per_s,
                pt,
                gt,
                horizon_s,
                mean.requests,
                upper.requests,
                widening,
                _ON_HEIGHTS if on_heights else "",
                "" if slower_level is None else _SLOWER_LEVEL.format(*slower_level),
            ),
        ),
        Stage(
            "capacity",
            have,
            needed,
            _binding_reason(at_horizon.binding),
            _capacity_message,
            (
                at_horizon.prefill_tokens_per_s,
                at_horizon.decode_tokens_per_s,
                at_horizon.requests_per_s,
                ahead.speed,
                ahead.planned_at(horizon_s).requests,  # the demand sized: the late share's
                needed,
                ahead.spread,
                burstsize.replica_cv2(ahead.spread, at_horizon.replicas),
                ahead.hold,
                ahead.hold_per_replica,
                ahead.lifetime_hold,
                ahead.queue_utilization(),
                ahead.held_past(),
                tail_problem,
                ahead.short_outputs(),
                outputs_problem,
            ),
        ),
        Stage(
            "horizon",
            needed,
            needed,
            "MarginalReplica",
            _HORIZON_MESSAGE,
            (needed - have if needed - have > 1 else 1, horizon_s, len(obs.loading_remaining_gb), rounds),
        ),
    ]


def panic_stage(
    cap: CapacityFacts,
    cold: ColdStartSpec | None,
    cluster: Cluster,
    ahead: Lookahead,
    prior: DemandState | None,
    panic_state: PanicState,
    est: Estimate,
    have: int,
    target: int,
    now: float,
) -> tuple[PanicState, int, bool, Stage | None]:
    """(panic state, replicas a burst starts at once, in panic, the stage when it fires): this
    tick's demand far above what the band allowed for it."""
    if prior is None or not prior.primed:
        return panic_state, 0, False, None
    # band.upper over demand.expected since the last sample, and the loads, in one call
    threshold = cap.panic_threshold
    triggered, allowed = flatcalls.above_band(cap.terms, cap.band, prior, now, est.now, threshold)
    if triggered:  # sized only when the load is over the band (most ticks it is not)
        burst = ahead.burst(est.now)
        triggered = burst.replicas > have
    panic_state = panic.update(panic_state, now, triggered, cap.panic_window_s)
    in_panic = panic_state.since is not None
    if not triggered:
        return panic_state, 0, in_panic, None
    within = panic.relevance_s(panic_state, now, cap.panic_window_s)
    burst_extra = panic.in_time(cold, min(burst.replicas, ahead.limit) - have, cluster, within)
    burst_stage = Stage(
        "panic",
        target,
        max(target, have + burst_extra),
        "BurstAboveBand",
        _PANIC_MESSAGE,
        (est.now.requests, threshold, allowed, burst.replicas, burst_extra, within),
    )
    return panic_state, burst_extra, in_panic, burst_stage


def backlog_stage(
    cap: CapacityFacts,
    speed: SpeedState,
    waiting: float | None,
    ready: int | None,
    prompt: float,
    at_horizon: Sizing,
    needed: int,
    target: int,
    limit: int,
    lead_s: float,
) -> Stage | None:
    """The arrivals counted beside the replicas that hold a standing backlog, where its waiting
    requests alone are more than the TTFT target of prefill a ready replica and it has stood longer
    than one replica's lead (None otherwise). An engine's waiting queue is its own (speedlearn.py): those
    replicas serve the backlog, not the arrivals, and a backlog that fills their KV caches makes
    them slower still (preemptions recompute), so the count the arrivals need must run beside
    them, or the backlog grows while the count says enough (docs/policy.md, "Defaults and why").
    `waiting`: the waiting total (None unread)."""
    held = speed.backlog_ready
    stood_s = (speed.backlog_ticks - 1) * cap.decision_period_s  # since the first tick that saw it
    prefill = at_horizon.prefill_tokens_per_s
    if not held or stood_s <= lead_s or prefill <= 0.0 or not ready or waiting is None:
        return None
    wait_s = waiting * prompt / (ready * prefill)  # its prefill, a ready replica's share
    if not wait_s > cap.ttft_s:
        return None
    beside = held + needed
    if beside > limit:
        beside = limit
    if beside <= target:
        return None
    return Stage(
        "backlog",
        target,
        beside,
        "BacklogHeld",
        _BACKLOG_MESSAGE,
        (held, stood_s, waiting, wait_s, cap.ttft_s, needed),
    )


def late_stage(
    cap: CapacityFacts,
    reading: MetricReading | None,
    tail: Survival | None,
    before: float,
    window_s: float,
    idle_misses: float,
    have: int,
    target: int,
    limit: int,
) -> tuple[Stage | None, float]:
    """The TTFT histogram's evidence after this tick (latefeedback.py), its first tokens slow
    against `tail`, the same histogram's hour until this tick; at its alarm the stage that asks for
    one replica above the count `have` (None otherwise, or where `target` already asks for more).
    The evidence stays as it was while the histogram is not read; a reading that is no histogram
    gets a row saying why, the count as it was. Below latefeedback.FEWEST_REPLICAS there is no
    evidence: it starts from 0 once the fleet has them."""
    counted, why = latefeedback.count(reading, cap.slo_ttft_s, window_s)
    if counted is None:
        if not why:
            return None, before
        return Stage("late", target, target, "TTFTHistogramUnread", "{}; the evidence kept", (why,)), before
    if have < latefeedback.FEWEST_REPLICAS:
        return None, 0.0
    hour = latefeedback.usual(tail, counted.bound_s, cap.slo_ttft_s)
    allowed = latefeedback.allowance(1.0 - cap.tail, idle_misses, hour)
    after = latefeedback.evidence(before, counted, allowed)
    if after < latefeedback.ALARM:
        return None, after
    more = have + 1 if have < limit else limit
    if more <= target:  # asked for already: the episode confirmed all the same
        return None, latefeedback.MOST_WINDOW
    late, total = counted.late, counted.total
    words = (
        late,
        total,
        counted.bound_s,
        window_s,
        100.0 * late / total,
        100.0 * allowed,
        after,
        latefeedback.ALARM,
        have,
    )
    return Stage("late", target, more, "LateFirstTokens", _LATE_MESSAGE, words), latefeedback.MOST_WINDOW


def scale_up_stage(
    cold: ColdStartSpec | None,
    cluster: Cluster,
    period: float,
    state: PlannerState,
    prior: DemandState | None,
    have: int,
    target: int,
    floor: int,
    burst_extra: int,
    limit: int,
) -> Stage:
    """The scale-up stage, target (more than `have`) to what runs once those started now are up.

    The forecast's need starts replicas once two decisions in a row have seen it: a replica
    started for one tick's peak of a noisy estimate is ready a horizon later, when that peak is
    long gone, and waiting one decision delays a real step by one period of a horizon of
    several. A burst over the band (panic) and the reactive floor (a standing queue) do not wait."""
    confirmed = target
    # a first sight's reading (prior not primed) had no in-flight reading before it: no growth
    if not burst_extra and state.needs and prior is not None and prior.primed:
        before = state.needs[-1][1]  # the need of the decision before (remember() keeps it)
        if before < target:
            confirmed = before if before > floor else floor  # max(), min() below: no builtin call
    deficit = (limit if limit < confirmed else confirmed) - have
    # Unconfirmed only when the wait is what holds replicas back (not maxReplicas: a
    # reactive floor above it leaves no deficit on the first decision, with no need before)
    if confirmed != target and deficit <= 0:
        return Stage(
            "scale-up",
            target,
            have,
            "Unconfirmed",
            "{} needed at the horizon, {} at the decision before: started when a second decision needs them",
            (target, state.needs[-1][1]),
        )
    start, why = scaleup.starts_now(cold, deficit, cluster, period) if cold else (deficit, "")
    if burst_extra > start:  # a burst does not wait: what can be ready in time starts at once
        start = burst_extra
        why = f"panic: the {burst_extra} replica(s) ready in time start at once"
    reason = "StaggeredStart" if start < deficit else "StartAll"
    if confirmed < target:
        why = f"{why}; {target - confirmed} more when the next decision needs them too"
    return Stage("scale-up", target, have + start, reason, why, ())
