"""The predictive stages' values (planner.py): the state a decision threads into the next one,
with its JSON form (statejson.py has the reading rules), and what a decision saw and decided
(Plan), for explain and the replay."""

from __future__ import annotations

import itertools
from typing import Any, final

from autoscaler.policy import latefeedback, speedlearn, statejson, survival
from autoscaler.policy.capacity import Demand, Sizing
from autoscaler.policy.demand import DemandState
from autoscaler.policy.panic import PanicState
from autoscaler.policy.prefilltail import PrefillTail
from autoscaler.policy.record import Record
from autoscaler.policy.scaledown import Found, Gaps, NeedHistory
from autoscaler.policy.speedlearn import SpeedState
from autoscaler.policy.stage import Stage
from autoscaler.policy.statejson import SECONDS, Reader, TimeCodec
from autoscaler.policy.survival import Survival

STATE_VERSION = 2  # 1 (positional lists) was never persisted by a release: it is refused
# The need history and the gaps keep one entry per replica level (scaledown.py): the history's
# counts fall strictly from its front, so it holds at most MAX_LEVELS + 1 entries, and the gaps
# one per level up to its peak. Levels above MAX_LEVELS (a reactive proposal far above
# maxReplicas, or a fleet of more than 4,096 replicas) are written as MAX_LEVELS: the JSON stays
# within ~0.3 MB however large the proposal (docs/controller.md, "The status's size").
MAX_LEVELS = 4096
MAX_GAP_S = 1e9  # a gap is at most the longest scale-down window (scaledown.recur): far below this
# |log(speed / profile)| of a replica: e^50 is beyond any engine; larger overflows math.exp
MAX_LOG_SPEED = 50.0


_NO_PANIC = PanicState(None, 0.0)


@final
class PlannerState(Record):
    """A Record (record.py), not a NamedTuple: a decision builds one."""

    FIELDS = (
        "demand",
        "speed",
        "needs",
        "panic",
        "started_for",
        "gaps",
        "typical_capacity",
        "found",
        "prefill_tail",
        "output_tail",
        "late_evidence",
        "ttft_tail",
    )

    demand: DemandState | None
    speed: SpeedState
    needs: NeedHistory
    panic: PanicState
    started_for: float  # the mean demand's load when replicas were last started
    gaps: Gaps  # each level's last idle gap between needs (scaledown.recur)
    # the fleet's capacity at the SLO in load units, averaged as the demand's typical (scaledown weight)
    typical_capacity: float
    found: Found | None  # (time, replicas) found at first sight, while held (scaledown.hold_found)
    prefill_tail: PrefillTail | None  # the engines' prefill times' far tail (prefilltail.py)
    output_tail: Survival | None  # the engines' output lengths' survival (outputsteps.py)
    late_evidence: float  # the CUSUM of slow first tokens in nats (latefeedback.py)
    ttft_tail: Survival | None  # the engines' TTFT survival, the slow first tokens' usual share

    def __init__(
        self,
        demand: DemandState | None = None,
        speed: SpeedState = speedlearn.NO_SPEED,
        needs: NeedHistory = (),
        panic: PanicState = _NO_PANIC,
        started_for: float = 0.0,
        gaps: Gaps = (),
        typical_capacity: float = 0.0,
        found: Found | None = None,
        prefill_tail: PrefillTail | None = None,
        output_tail: Survival | None = None,
        late_evidence: float = 0.0,
        ttft_tail: Survival | None = None,
    ) -> None:
        self.demand = demand
        self.speed = speed
        self.needs = needs
        self.panic = panic
        self.started_for = started_for
        self.gaps = gaps
        self.typical_capacity = typical_capacity
        self.found = found
        self.prefill_tail = prefill_tail
        self.output_tail = output_tail
        self.late_evidence = late_evidence
        self.ttft_tail = ttft_tail

    def to_dict(self, codec: TimeCodec = SECONDS) -> dict[str, Any]:
        """JSON-ready, times through `codec`, within the bounds from_dict reads (bounded()). What
        is None is left out (a JSON merge patch would read null as "delete")."""
        s = self.bounded()
        t = codec.encode
        sp = s.speed
        out: dict[str, Any] = {"version": STATE_VERSION}
        if s.demand is not None:
            out["demand"] = statejson.demand_to_dict(s.demand, codec)
        panic_state = {"last": t(s.panic.last)}
        if s.panic.since is not None:
            panic_state["since"] = t(s.panic.since)
        if s.found is not None:
            out["found"] = {"at": t(s.found[0]), "replicas": s.found[1]}
        if s.prefill_tail is not None:
            out["prefillTail"] = _survival_to_dict(s.prefill_tail, codec)
        if s.output_tail is not None:
            out["outputTail"] = _survival_to_dict(s.output_tail, codec)
        if s.ttft_tail is not None:
            out["ttftTail"] = _survival_to_dict(s.ttft_tail, codec)
        return {
            **out,
            "speed": {
                "logRatio": sp.log_ratio,
                "samples": sp.samples,
                "saturatedTicks": sp.saturated_ticks,
                "ready": sp.ready,
                "queue": sp.queue,
                "backlogReady": sp.backlog_ready,
                "backlogTicks": sp.backlog_ticks,
            },
            "needs": [{"at": t(at), "replicas": n} for at, n in s.needs],
            "panic": panic_state,
            "startedFor": s.started_for,
            "gaps": list(s.gaps),
            "typicalCapacity": s.typical_capacity,
            "lateEvidence": s.late_evidence,
        }

    def bounded(self) -> PlannerState:
        """The state with its levels above MAX_LEVELS folded into MAX_LEVELS: the history's entries
        of at least MAX_LEVELS become one (the newest of them: when that level was last needed),
        the gaps of the levels above are dropped (scaledown.recur starts them afresh, as it does for
        levels above the peak). The same state whenever no need exceeded MAX_LEVELS."""
        needs, gaps, found = self.needs, self.gaps, self.found
        if found is not None and found[1] > MAX_LEVELS:
            found = (found[0], MAX_LEVELS)
        if (not needs or needs[0][1] <= MAX_LEVELS) and len(gaps) <= MAX_LEVELS and found is self.found:
            return self
        k = 0
        while k < len(needs) and needs[k][1] >= MAX_LEVELS:
            k += 1
        if k:
            needs = ((needs[k - 1][0], MAX_LEVELS), *needs[k:])
        return self._replace(needs=needs, gaps=gaps[:MAX_LEVELS], found=found)

    @classmethod
    def from_dict(cls, data: Any, codec: TimeCodec = SECONDS, path: str = "planner") -> PlannerState:
        """to_dict's output back; a malformed field raises ValueError naming its path and value.

        A field missing takes its default (a fresh start of that part), so a state written before
        a field existed still reads. The need history must be what scaledown.remember keeps (counts
        falling strictly from the front, at most MAX_LEVELS); the gaps beyond its peak are dropped,
        as scaledown.record drops them. Times are not required in order: a clock that stepped back
        leaves them so, and the policy reads them as they are."""
        r = Reader(data, path, codec)
        version = r.raw("version", None)
        if version != STATE_VERSION:
            raise r.fail("version", f"expected {STATE_VERSION}", version)
        fresh = cls()
        raw_demand = r.raw("demand", None)
        state_demand = None
        if raw_demand is not None:
            state_demand = statejson.demand_from_dict(raw_demand, codec, f"{path}.demand")
        speed = fresh.speed
        if "speed" in r.data:
            sp = r.child("speed")
            speed = SpeedState(
                sp.number("logRatio", low=-MAX_LOG_SPEED, high=MAX_LOG_SPEED),
                sp.number("samples", low=0.0, high=speedlearn.MAX_SPEED_SAMPLES),
                sp.integer("saturatedTicks", default=0),
                sp.integer("ready", default=0),
                sp.number("queue", low=0.0) if "queue" in sp.data else 0.0,
                sp.integer("backlogReady", default=0),
                sp.integer("backlogTicks", default=0),
            )
        needs: list[tuple[float, int]] = []
        for e in r.items("needs", MAX_LEVELS + 1, default=[]):
            at, n = e.moment("at"), e.integer("replicas", high=MAX_LEVELS)
            if needs and n >= needs[-1][1]:
                raise e.fail("replicas", "expected the counts falling from the front", n)
            needs.append((at, n))
        state_panic = fresh.panic
        if "panic" in r.data:
            p = r.child("panic")
            state_panic = PanicState(p.time("since", nullable=True), p.moment("last"))
        started_for = r.number("startedFor") if "startedFor" in r.data else fresh.started_for
        gaps = r.numbers("gaps", MAX_LEVELS, low=0.0, high=MAX_GAP_S, default=[])
        peak = needs[0][1] if needs else 0
        typical_capacity = fresh.typical_capacity
        if "typicalCapacity" in r.data:
            typical_capacity = r.number("typicalCapacity", low=0.0)
        found = None
        if "found" in r.data:
            f = r.child("found")
            found = (f.moment("at"), f.integer("replicas", high=MAX_LEVELS))
        prefill_tail = output_tail = ttft_tail = None
        if "prefillTail" in r.data:
            prefill_tail = _read_survival(r.child("prefillTail"), survival.SECONDS.most)
        if "outputTail" in r.data:
            output_tail = _read_survival(r.child("outputTail"), survival.TOKENS.most)
        if "ttftTail" in r.data:
            ttft_tail = _read_survival(r.child("ttftTail"), survival.SECONDS.most)
        late_evidence = fresh.late_evidence
        if "lateEvidence" in r.data:  # below the alarm: above it, the stage would have restarted it
            late_evidence = r.number("lateEvidence", low=0.0, high=latefeedback.ALARM)
        return cls(
            state_demand,
            speed,
            tuple(needs),
            state_panic,
            started_for,
            tuple(gaps[:peak]),
            typical_capacity,
            found,
            prefill_tail,
            output_tail,
            late_evidence,
            ttft_tail,
        )


def _survival_to_dict(tail: Survival, codec: TimeCodec) -> dict[str, Any]:
    return {
        "at": codec.encode(tail.at),
        "bounds": list(tail.bounds),
        "over": list(tail.over),
        "total": tail.total,
    }


def _read_survival(r: Reader, high: float) -> Survival:
    """A histogram's survival as to_dict wrote it: bounds increasing, finite and at most `high`
    (at most survival.MAX_BOUNDS of them), as many averages as bounds, none above the total."""
    bounds = r.numbers("bounds", survival.MAX_BOUNDS, low=1e-9, high=high)
    if any(b >= c for b, c in itertools.pairwise(bounds)):
        raise r.fail("bounds", "expected increasing bounds", bounds)
    total = r.number("total", low=0.0)
    over = r.numbers("over", survival.MAX_BOUNDS, low=0.0, high=total)
    if len(over) != len(bounds):
        raise r.fail("over", f"expected {len(bounds)} values, one a bound", over)
    return Survival(r.moment("at"), tuple(bounds), tuple(over), total)


@final
class Plan(Record):
    """What the predictive stages saw and decided, for explain and the replay's decisions."""

    FIELDS = (
        "demand_now",
        "forecast",
        "upper",
        "band",
        "horizon_s",
        "sizing",
        "speed",
        "needed",
        "keep",
        "start_now",
        "panic",
    )

    demand_now: Demand  # this tick's estimate from the counters and the in-flight growth
    forecast: Demand  # the mean forecast at the horizon
    upper: Demand  # its upper band (the quantile planned on)
    band: float  # upper / mean
    horizon_s: float  # the marginal replica's ready time
    sizing: Sizing  # for `upper`: replicas, binding constraint, capacity per replica
    speed: float  # learned, relative to the profile
    needed: int  # replicas needed at the horizon (before the reactive floor and panic)
    keep: int  # what rent-or-buy keeps (= current when not scaling down)
    start_now: int  # replicas this decision starts
    panic: bool

    def __init__(
        self,
        demand_now: Demand,
        forecast: Demand,
        upper: Demand,
        band: float,
        horizon_s: float,
        sizing: Sizing,
        speed: float,
        needed: int,
        keep: int,
        start_now: int,
        panic: bool,
    ) -> None:
        self.demand_now = demand_now
        self.forecast = forecast
        self.upper = upper
        self.band = band
        self.horizon_s = horizon_s
        self.sizing = sizing
        self.speed = speed
        self.needed = needed
        self.keep = keep
        self.start_now = start_now
        self.panic = panic


@final
class Outcome(Record):
    """What planner.plan returns to decide."""

    FIELDS = ("stages", "replicas", "plan", "state")

    stages: tuple[Stage, ...]
    replicas: int | None  # the recommendation; None: no demand data, the reactive path decides
    plan: Plan | None
    state: PlannerState

    def __init__(
        self, stages: tuple[Stage, ...], replicas: int | None, plan: Plan | None, state: PlannerState
    ) -> None:
        self.stages = stages
        self.replicas = replicas
        self.plan = plan
        self.state = state
