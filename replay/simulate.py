"""The replay run loop: one trace, one scenario, one policy -> per-request results and a timeline.

The only clock of a replay lives here. The loop runs in intervals that end at the metric
pipeline's next scrape, the next policy decision or the next fleet event (a node up, a pull or a
load done, a replica ready); each interval
  1. advances the fleet's lifecycle to its start (replicas become ready, loads progress),
  2. hands the scenario's metric pipeline (replay/metrics) the engines' counters and gauges if its
     next scrape is due,
  3. asks the policy if its period has come, with an Observation as a cluster shows it: the metrics
     it reads as the pipeline serves them then (staleness included), the pods' phases, the
     cold-start model's lead time,
  4. hands the interval's arrivals to the engine (replay/engine.py), which routes each at its own
     arrival time to the ready replica with the fewest outstanding requests and runs every
     replica's steps to the interval's end (arrivals find no ready replica only if every replica
     is draining or starting; they then wait at the gateway, their TTFT counting the wait),
  5. deletes drained replicas (at their last finish).
While the fleet is calm (no replica draining or loading weights from shared storage, nobody at the
gateway) the engines run through the scrapes before the next decision or fleet event in one call,
which hands back each scrape's rows as an interval ending there would have seen them (step 2 for
each, in order; the fleet has nothing to advance in between): the same run, fewer calls.
The run ends when every request has finished (or been dropped) and the trace is over, or
`max_tail_s` after the trace's end with requests still in the engines or at the gateway (a policy
that never serves them, or a fleet the engine livelocks): the run is then cut there and those
requests count as `unfinished` (not good) in its result, so such a policy loses on the tables
instead of stopping a league.

With `warmup_s` > 0 the loop plays the trace behind a warm-up prefix (replay/warmup.py: the
trace's first W seconds reflected onto [-W, 0), the whole shifted by +W), so each policy enters
the scored trace in its own steady state, engines mid-flight; the result is cut back to the
scored window (_scored): the prefix's requests count nowhere, GPU- and replica-seconds, cold
starts and scale events count from W, and times are the trace's again (the warm-up's decisions,
timeline points and replica spans keep their negative times).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from autoscaler.policy.observation import Observation
from autoscaler.policy.observe import ClusterFacts, Horizon, HorizonSource, observe
from replay.engine import Engine, RequestResults
from replay.fleet import Fleet
from replay.fleetrecords import Replica
from replay.metrics import ClusterScrape, MetricPipeline, build_pipeline, cluster_scrape, live_reading
from replay.policies import ReplayPolicy
from replay.policies.hpa import DecidePolicy
from replay.profiles import Scenario
from replay.trace import Trace
from replay.warmup import with_warmup

F64 = npt.NDArray[np.float64]
_NONE = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    """The fleet at one policy decision."""

    t_s: float
    desired: int
    ready: int
    starting: int
    draining: int
    arrivals_per_s: float  # over the last period
    inflight: int  # requests in the engines and at the gateway


@dataclass(frozen=True, slots=True)
class ReplicaSpan:
    """One replica's life, for the replica timeline (NaN: did not happen)."""

    id: int
    requested_s: float
    scheduled_s: float
    ready_s: float
    drain_s: float
    deleted_s: float
    cold: bool


@dataclass(frozen=True, slots=True)
class RunResult:
    policy: str
    scenario: Scenario
    trace_name: str
    arrival_s: F64
    input_tokens: npt.NDArray[np.int64]  # per request, as arrival_s
    output_tokens: npt.NDArray[np.int64]  # tokens generated (the trace's, offline)
    requests: RequestResults
    timeline: tuple[TimelinePoint, ...]
    replicas: tuple[ReplicaSpan, ...]
    end_s: float
    gpu_seconds: float
    replica_seconds: float
    scale_events: int
    cold_starts: int
    wall_seconds: float
    # a decide() policy's (now, observation, decision) records, for report.json's `decisions`
    decisions: tuple[tuple[float, Any, Any], ...] = ()
    # requests still in the engines or at the gateway when the run was cut `max_tail_s` after the
    # trace's end (0: every request finished or was dropped)
    unfinished: int = 0
    max_tail_s: float = math.inf
    warmup_s: float = 0.0  # seconds of warm-up played before the trace (replay/warmup.py)


def simulate(
    trace: Trace,
    scenario: Scenario,
    policy: ReplayPolicy,
    *,
    fleet: Fleet | None = None,
    on_progress: Callable[[float], None] | None = None,
    max_tail_s: float = 3_600.0,
    warmup_s: float = 0.0,
    played: Trace | None = None,
) -> RunResult:
    """Replay `trace` on `scenario` with `policy` deciding; `fleet` may be passed to share it with
    the policy (the clairvoyant reads its lead time). A run still serving requests `max_tail_s`
    after the trace's end is cut there, with those requests `unfinished` in its result.
    `warmup_s` > 0: the loop plays `played` (with_warmup(trace, warmup_s) unless given: the policy
    was built on it, its clock starts with the warm-up) and the result is the scored window's."""
    wall_start = time.perf_counter()
    scored = trace
    if warmup_s > 0:
        trace = played if played is not None else with_warmup(scored, warmup_s)
    engine = Engine(scenario.engine, trace)
    if fleet is None:
        fleet = Fleet(
            scenario.cold_start,
            initial_ready=policy.initial_replicas,
            node_idle_remove_s=scenario.node_idle_remove_s,
        )
    arrival = trace.arrival_s
    n = len(trace)
    pipeline = build_pipeline(scenario.metrics, policy.period_s)
    next_decision = 0.0
    desired = fleet.active_count
    timeline: list[TimelinePoint] = []
    scale_events = 0
    gateway = _NONE
    next_arrival = 0
    last_decision_arrivals = 0
    t = 0.0
    hard_end = trace.duration_s + max_tail_s
    unfinished = 0
    while True:
        fleet.advance(t)
        n_replicas = len(fleet.replicas)
        while t >= pipeline.next_scrape_s:  # at its scheduled time: ticks end there
            pipeline.scrape(
                _cluster(pipeline.next_scrape_s, engine, fleet, n_replicas, arrival, len(gateway))
            )
        if t >= next_decision:
            obs = _observe(t, fleet, engine, pipeline, policy, desired, n_replicas, arrival, len(gateway))
            want = policy.desired(t, obs)
            if want != desired:
                if t >= warmup_s:  # the warm-up's changes are not the scored trace's
                    scale_events += 1
                desired = want
            fleet.scale_to(desired)
            period = policy.period_s
            timeline.append(
                TimelinePoint(
                    t,
                    desired,
                    len(fleet.ready_ids),
                    len(fleet.starting()),
                    len(fleet.draining_ids),
                    (next_arrival - last_decision_arrivals) / period if t > 0 else 0.0,
                    engine.in_flight + len(gateway),
                )
            )
            last_decision_arrivals = next_arrival
            next_decision += period
            if on_progress is not None:
                on_progress(t)
            n_replicas = len(fleet.replicas)

        lifecycle = fleet.next_event_s()
        far = min(next_decision, lifecycle if lifecycle > t else math.inf)
        end = min(pipeline.next_scrape_s, far)
        ready = fleet.ready_ids
        stops: list[float] = []
        calm = len(ready) and not len(gateway) and not (fleet.any_draining or fleet.loading)
        if end < far and calm and int(arrival.searchsorted(far, side="left")) < n:
            # nothing but scrapes before `far` and more arrivals after it: the engines run through
            # the scrapes in one call, which hands back each one's rows (the same as ending the
            # interval at each: the fleet does not change, and its advance() only sets the time)
            stops = pipeline.scrapes_before(far)
            end = far
        upto = int(arrival.searchsorted(end, side="left"))
        ids = np.arange(next_arrival, upto, dtype=np.int64)
        next_arrival = upto
        if len(gateway):
            ids = np.concatenate((gateway, ids))
        gateway = _NONE
        if len(ids) and not len(ready):
            gateway, ids = ids, _NONE
        rows = engine.run(end, ids, ready, stops=np.array(stops) if stops else None)
        if rows is not None:
            for at, pods in zip(stops, rows, strict=True):
                arrived = int(arrival.searchsorted(at, side="right"))
                pipeline.scrape(cluster_scrape(at, pods, ready, fleet.draining_array, arrived, 0))
        if fleet.any_draining:  # deleted when their last request finished
            fleet.advance(end)
            fleet.finish_draining(engine.outstanding(len(fleet.replicas)), engine.last_finish_s)
        t = end
        if next_arrival >= n and engine.in_flight == 0 and not len(gateway):
            break
        if t > hard_end:  # a stall: cut here, the requests left count as unfinished
            unfinished = engine.in_flight + len(gateway) + n - next_arrival
            break
    fleet.advance(t)
    replicas = tuple(_span(r) for r in fleet.replicas)
    result = RunResult(
        policy=policy.name,
        scenario=scenario,
        trace_name=trace.name,
        arrival_s=arrival,
        input_tokens=trace.input_tokens,
        output_tokens=trace.output_tokens,
        requests=engine.results(),
        timeline=tuple(timeline),
        replicas=replicas,
        end_s=t,
        gpu_seconds=fleet.gpu_seconds(t, start=warmup_s),
        replica_seconds=fleet.replica_seconds(t, start=warmup_s),
        scale_events=scale_events,
        cold_starts=sum(1 for r in fleet.replicas if r.cold and r.requested_s >= warmup_s),
        wall_seconds=time.perf_counter() - wall_start,
        decisions=tuple(getattr(policy, "decisions", ())),
        unfinished=unfinished,
        max_tail_s=max_tail_s,
    )
    return _scored(result, scored, warmup_s) if warmup_s > 0 else result


def _scored(result: RunResult, trace: Trace, warmup_s: float) -> RunResult:
    """The run of a prefixed trace as the scored trace's: its requests only (the prefix's come
    first), every time shifted back by the warm-up (counts from W were taken by the loop)."""
    skip = len(result.arrival_s) - len(trace)
    req = result.requests
    requests = RequestResults(
        replica=req.replica[skip:],
        admitted_s=req.admitted_s[skip:] - warmup_s,
        first_token_s=req.first_token_s[skip:] - warmup_s,
        finished_s=req.finished_s[skip:] - warmup_s,
        dropped=req.dropped[skip:],
        preemptions=req.preemptions[skip:],
        prefix_hit_tokens=req.prefix_hit_tokens[skip:],
    )
    unfinished = 0
    if result.unfinished:  # the scored requests among those the cut left
        unfinished = int(np.count_nonzero(np.isnan(requests.finished_s) & ~requests.dropped))
    return dataclasses.replace(
        result,
        arrival_s=trace.arrival_s,
        input_tokens=trace.input_tokens,
        output_tokens=trace.output_tokens,
        requests=requests,
        timeline=tuple(dataclasses.replace(p, t_s=p.t_s - warmup_s) for p in result.timeline),
        replicas=tuple(_shifted_span(r, warmup_s) for r in result.replicas),
        end_s=result.end_s - warmup_s,
        decisions=tuple(_shifted_record(r, warmup_s) for r in result.decisions),
        unfinished=unfinished,
        warmup_s=warmup_s,
    )


def _shifted_span(r: ReplicaSpan, by: float) -> ReplicaSpan:
    return ReplicaSpan(
        r.id, r.requested_s - by, r.scheduled_s - by, r.ready_s - by, r.drain_s - by, r.deleted_s - by, r.cold
    )


def _shifted_record(record: Any, by: float) -> Any:
    """A decision record at trace time: (now, observation, decision), or a record with `t_s`."""
    if hasattr(record, "_replace") and hasattr(record, "t_s"):  # a NamedTuple (KEDA's syncs)
        return record._replace(t_s=record.t_s - by)
    if isinstance(record, tuple) and record and isinstance(record[0], float | int):
        return (record[0] - by, *record[1:])
    if dataclasses.is_dataclass(record) and not isinstance(record, type) and hasattr(record, "t_s"):
        return dataclasses.replace(record, t_s=record.t_s - by)
    return record


def _cluster(
    t: float, engine: Engine, fleet: Fleet, n_replicas: int, arrival: F64, pending: int
) -> ClusterScrape:
    """What a scrape at `t` can read: the serving pods' engines, and the gateway's arrivals so far
    and the requests it holds (while no replica is ready)."""
    draining = fleet.draining_array
    arrived = int(arrival.searchsorted(t, side="right"))
    ready = fleet.ready_ids
    return cluster_scrape(t, engine.pod_rows(n_replicas, ready, draining), ready, draining, arrived, pending)


def _observe(
    now: float,
    fleet: Fleet,
    engine: Engine,
    pipeline: MetricPipeline,
    policy: ReplayPolicy,
    desired: int,
    n_replicas: int,
    arrival: F64,
    pending: int,
) -> Observation:
    """The fleet's facts through the policy core's observation builder, as the controller's pods,
    scale and metrics go through it (autoscaler/policy/observe.py)."""
    if policy.fresh_metrics:  # the ready pods only, as a scrape of the endpoints (Knative's) sees them
        live = _cluster(now, engine, fleet, n_replicas, arrival, pending)
        metrics = {name: live_reading(live, name) for name in policy.metric_names}
    else:
        metrics = {name: pipeline.read(name, now) for name in policy.metric_names}
    spec = policy.spec if isinstance(policy, DecidePolicy) else None
    quantile = policy.lead_quantile
    horizon = Horizon(HorizonSource.COLD_START_MODEL) if quantile is None else Horizon(quantile=quantile)
    serving = len(fleet.ready_ids) + len(fleet.draining_ids)  # draining replicas still serve
    if not getattr(policy, "reads_cold_start", True):  # the start-up machine's projections cost most
        plain = ClusterFacts(desired, fleet.active_count, serving, metrics)
        return observe(spec, horizon, plain, now)
    nodes = fleet.node_state(fleet.live_nodes())
    facts = ClusterFacts(
        spec_replicas=desired,
        status_replicas=fleet.active_count,
        ready_pods=serving,
        metrics=metrics,
        load_samples_s=_load_samples_s(fleet) if quantile is not None else (),
        gpus_per_replica=fleet.spec.gpus_per_replica,
        # what the cold-start model needs of the cluster (the controller reads the same from nodes
        # and pods): free GPUs, caches, loads in progress and loads about to begin
        free_gpus_per_node=tuple(nodes["free_gpus_per_node"]),
        image_cached_nodes=tuple(sorted(nodes["image_cached_nodes"])),
        weights_cached_nodes=tuple(sorted(nodes["weights_cached"])),
        loading_remaining_gb=tuple(fleet.loading_remaining_gb),
        upcoming_loads_s=fleet.upcoming_loads_s(),
        coming_nodes=fleet.coming_nodes(),
        projected_ready_at=fleet.predicted_ready_at(),
        model_lead_time_s=fleet.lead_time_s() if spec is not None else None,  # it reads a horizon
    )
    return observe(spec, horizon, facts, now)


def _load_samples_s(fleet: Fleet) -> tuple[float, ...]:
    """Scheduled -> Ready of the replicas started during the run, as the controller learns them from
    pods (the builder adds a node's provisioning when a replica would not fit)."""
    done = sorted((r.ready_s, r.ready_s - r.scheduled_s) for r in fleet.replicas if r.cold and r.ready_s >= 0)
    return tuple(load for _, load in done)


def _span(r: Replica) -> ReplicaSpan:
    return ReplicaSpan(r.id, r.requested_s, r.scheduled_s, r.ready_s, r.drain_s, r.deleted_s, r.cold)
