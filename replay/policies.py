"""Policies in the replay loop: a small protocol, and the policies a comparison can name.

Sits under replay/simulate.py, which calls `desired(now, obs)` every `period_s` with an Observation
built from the simulated cluster (metrics as scraped, with delay). The HPA, KEDA-like and infscale
predictive policies go through autoscaler.policy.decide — the controller's own decision code —
so what the replay shows is what the controller would do. Static, Knative-KPA-like and the
clairvoyant reference are replay-only comparisons.

The metric every reactive policy scales on is `inflight`: running + waiting requests per replica
(vLLM's num_requests_running + num_requests_waiting), an External metric with an AverageValue
target (requests per replica).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np
import numpy.typing as npt

from autoscaler.policy.decide import Decision, decide, record_rescale
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.spec import (
    AutoscalerSpec,
    FloorSpec,
    ForecasterKind,
    MetricSpec,
    PredictionSpec,
    TargetType,
)
from autoscaler.policy.state import PolicyState
from replay.profiles import Scenario
from replay.trace import Trace

METRIC = "infscale_inflight"  # as the adapter serves it: waiting + running requests
DEFAULT_TARGET_INFLIGHT = 16.0  # requests per replica: a quarter of reference-70b's 64 slots


class PolicyError(ValueError):
    """A policy name or parameter that cannot be built; the message names it."""


class ReplayPolicy(Protocol):
    name: str
    period_s: float  # how often the loop asks
    fresh_metrics: bool  # True: reads the engines directly (no scrape delay), as Knative's activator

    @property
    def initial_replicas(self) -> int:
        """Replicas ready at t = 0."""
        ...

    @property
    def lead_quantile(self) -> float | None:
        """Set: the lead time given to the policy is this quantile of the start-up times observed
        so far (the controller's learned cold starts, once 3 were seen); None: the cold-start model."""
        ...

    def desired(self, now: float, obs: Observation) -> int: ...


# --- static -------------------------------------------------------------------------------------


@dataclass(slots=True)
class StaticPolicy:
    replicas: int
    name: str = ""
    period_s: float = 15.0
    fresh_metrics: bool = False
    lead_quantile: float | None = None

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise PolicyError(f"static: replicas must be >= 1, got {self.replicas}")
        self.name = self.name or f"static-{self.replicas}"

    @property
    def initial_replicas(self) -> int:
        return self.replicas

    def desired(self, now: float, obs: Observation) -> int:
        return self.replicas


# --- through the controller's decide() ----------------------------------------------------------


@dataclass(slots=True)
class DecidePolicy:
    """The controller's decision code: decide(), then record_rescale() as after a successful write.

    `epoch_s` maps replay time 0 onto a Unix time (schedules read the wall clock from `now`); the
    observation's predicted ready times move with it.
    `decisions` keeps every (now, observation, decision) for reports and the parity test.
    """

    name: str
    spec: AutoscalerSpec
    period_s: float = 15.0
    epoch_s: float = 1_704_067_200.0  # 2024-01-01 00:00 UTC, a Monday
    poll_interval_s: float = 0.0  # > 0: KEDA-like, the metric is refreshed only this often
    fresh_metrics: bool = False
    initial_replicas: int = 1
    lead_quantile: float | None = None
    # False: drop the cluster's lead time from the observation so the spec's fixed one applies
    cluster_lead_time: bool = True
    state: PolicyState = field(default_factory=PolicyState)
    decisions: list[tuple[float, Observation, Decision]] = field(default_factory=list)
    _cached: tuple[float, Mapping[str, MetricReading]] | None = None

    def desired(self, now: float, obs: Observation) -> int:
        if self.poll_interval_s > 0:
            obs = self._polled(now, obs)
        if not self.cluster_lead_time:
            obs = replace(obs, lead_time_s=None)
        if obs.starting_ready_at:  # absolute times, on the same clock as `now`
            obs = replace(obs, starting_ready_at=tuple(self.epoch_s + x for x in obs.starting_ready_at))
        at = self.epoch_s + now
        decision, self.state = decide(self.spec, self.state, obs, at)
        if decision.desired_replicas != decision.current_replicas:
            self.state = record_rescale(
                self.spec, self.state, at, decision.current_replicas, decision.desired_replicas
            )
        self.decisions.append((now, obs, decision))
        return decision.desired_replicas

    def _polled(self, now: float, obs: Observation) -> Observation:
        """KEDA polls its scaler every pollingInterval and serves the cached value in between."""
        if self._cached is None or now - self._cached[0] >= self.poll_interval_s:
            self._cached = (now, obs.metrics)
            return obs
        polled_at, metrics = self._cached
        aged = {k: v._replace(age_s=v.age_s + now - polled_at) for k, v in metrics.items()}
        return replace(obs, metrics=aged)


def hpa_spec(scenario: Scenario, params: PolicyParams) -> AutoscalerSpec:
    """An HPA with upstream defaults (no `behavior`: the legacy path, as kube-controller-manager)
    on an AverageValue target of `inflight` per replica."""
    return AutoscalerSpec(
        max_replicas=scenario.max_replicas,
        min_replicas=scenario.min_replicas,
        metrics=(MetricSpec(METRIC, TargetType.AVERAGE_VALUE, round(params.target * 1000)),),
        tolerance=params.tolerance,
        downscale_stabilization_s=params.downscale_window_s,
    )


def predictive_spec(scenario: Scenario, params: PolicyParams) -> AutoscalerSpec:
    """infscale predictive: the HPA plus a forecast at the lead time (the params' fixed one, else
    the cold-start model's) and a warm floor."""
    return replace(
        hpa_spec(scenario, params),
        cold_start=scenario.cold_start,
        prediction=PredictionSpec(forecaster=params.forecaster, lead_time_s=params.lead_time_s),
        floors=FloorSpec(warm_min_replicas=params.warm_floor),
    )


# --- Knative KPA-like ---------------------------------------------------------------------------


@dataclass(slots=True)
class KpaLikePolicy:
    """Knative's KPA decider, simplified: concurrency averaged over a stable (60 s) and a panic
    (6 s) window, read every 2 s straight from the engines; panic mode starts when the panic
    window's want reaches 200 % of the ready replicas and holds scale-downs until a stable window
    passes without panic. Scale-down at most halves (max-scale-down-rate 2)."""

    target: float = DEFAULT_TARGET_INFLIGHT
    stable_window_s: float = 60.0
    panic_window_s: float = 6.0
    panic_threshold: float = 2.0
    max_scale_down_rate: float = 2.0
    min_replicas: int = 1
    max_replicas: int = 64
    name: str = "kpa"
    period_s: float = 2.0
    fresh_metrics: bool = True
    initial_replicas: int = 1
    lead_quantile: float | None = None
    _history: list[tuple[float, float]] = field(default_factory=list)
    _panic_since: float | None = None
    _max_panic: int = 0

    def desired(self, now: float, obs: Observation) -> int:
        reading = obs.metrics.get(METRIC)
        ready = max(obs.ready_pods or 0, 1)
        if reading is None or reading.values_milli is None:
            return obs.spec_replicas
        self._history.append((now, sum(reading.values_milli) / 1000.0))
        while self._history and self._history[0][0] <= now - self.stable_window_s:
            self._history.pop(0)
        stable = float(np.mean([v for _, v in self._history]))
        panic = float(np.mean([v for t, v in self._history if t > now - self.panic_window_s]))
        want_stable = math.ceil(stable / self.target)
        want_panic = math.ceil(panic / self.target)
        if want_panic / ready >= self.panic_threshold:
            if self._panic_since is None:
                self._max_panic = obs.spec_replicas
            self._panic_since = now
        elif self._panic_since is not None and now - self._panic_since >= self.stable_window_s:
            self._panic_since = None
            self._max_panic = 0
        if self._panic_since is not None:
            self._max_panic = max(self._max_panic, want_panic)
            want = self._max_panic
        else:
            want = max(want_stable, math.floor(obs.spec_replicas / self.max_scale_down_rate))
        return min(self.max_replicas, max(self.min_replicas, want))


# --- clairvoyant reference ----------------------------------------------------------------------


@dataclass(slots=True)
class ClairvoyantPolicy:
    """Knows every future arrival and its own cold start; see docs/replay.md for why it is a fair floor.

    needed(τ) = the larger of ceil(concurrency(τ) / target), concurrency computed from the trace with
    each request's service time at a full batch (prefill + output x step(max_running)), and the
    replicas that keep prefill under 70 % of each replica's time (averaged over a minute). At `now`
    it asks for max needed over [now, now + lead + period]: capacity for the worst moment before a
    replica started at the next decision could be ready, and never more.
    """

    needed: npt.NDArray[np.int64]  # per second of the trace
    lead_s: Callable[[], float]
    name: str = "clairvoyant"
    period_s: float = 15.0
    fresh_metrics: bool = False
    min_replicas: int = 1
    max_replicas: int = 64
    initial_replicas: int = 1
    lead_quantile: float | None = None

    def desired(self, now: float, obs: Observation) -> int:
        lo = int(now)
        hi = math.ceil(now + self.lead_s() + self.period_s) + 1
        window = self.needed[lo:hi]
        want = int(window.max()) if len(window) else self.min_replicas
        return min(self.max_replicas, max(self.min_replicas, want))


MAX_PREFILL_SHARE = 0.7  # of a replica's GPU time; the rest decodes (prefill stops decoding)
PREFILL_WINDOW_S = 60  # prefill work is averaged over a minute: short bursts queue, they do not add replicas


def needed_replicas(trace: Trace, scenario: Scenario, target: float) -> npt.NDArray[np.int64]:
    """Per second, the replicas the trace needs: enough to keep `target` requests in flight per
    replica, and enough prefill capacity that prefill takes at most MAX_PREFILL_SHARE of each
    replica's time (long prompts saturate the prefill server long before the slots fill)."""
    e = scenario.engine
    prefill_s = trace.input_tokens / e.prefill_tokens_per_s
    service = prefill_s + trace.output_tokens * e.step_s(e.max_running)
    horizon = math.ceil(trace.duration_s + float(service.max(initial=0.0))) + 2
    start = np.floor(trace.arrival_s).astype(np.int64)
    stop = np.floor(trace.arrival_s + service).astype(np.int64) + 1
    delta = np.bincount(start, minlength=horizon + 1) - np.bincount(stop, minlength=horizon + 1)
    concurrency = np.cumsum(delta)[:horizon]  # requests in flight at some point of each second
    work = np.bincount(start, weights=prefill_s, minlength=horizon)[:horizon]  # prefill seconds per second
    window = np.ones(PREFILL_WINDOW_S) / PREFILL_WINDOW_S
    half = PREFILL_WINDOW_S // 2  # centred moving average, as long as `work` even for short traces
    prefill_load = np.convolve(work, window, mode="full")[half : half + horizon]
    need = np.maximum(np.ceil(concurrency / target), np.ceil(prefill_load / MAX_PREFILL_SHARE - 1e-9))
    out: npt.NDArray[np.int64] = need.astype(np.int64)
    return out


# --- the table a comparison names -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PolicyParams:
    """Knobs a sweep varies; one value per field, applied to the policies that have it."""

    target: float = DEFAULT_TARGET_INFLIGHT
    tolerance: float = 0.1
    downscale_window_s: int = 300
    warm_floor: int = 0
    forecaster: ForecasterKind = ForecasterKind.HOLT
    lead_time_s: float | None = None  # None: the cold-start model, from the cluster's state
    lead_quantile: float | None = None  # set: that quantile of observed start-ups (after 3)
    static_replicas: int | None = None  # None: the trace's peak need at `target` (provision for peak)
    keda_poll_interval_s: float = 30.0

    def __post_init__(self) -> None:
        # every policy reads the target (warm start, static's peak, the clairvoyant's needs), not
        # only those that build an HPA metric from it
        if not (math.isfinite(self.target) and self.target > 0):
            raise PolicyError(f"target must be a finite number > 0, got {self.target!r}")
        if self.lead_quantile is not None and not 0.5 <= self.lead_quantile <= 0.99:
            raise PolicyError(f"lead_quantile must be within [0.5, 0.99], got {self.lead_quantile}")


POLICY_NAMES = ("static", "hpa", "keda", "kpa", "predictive", "clairvoyant")


def peak_replicas(trace: Trace, scenario: Scenario, target: float) -> int:
    need = needed_replicas(trace, scenario, target)
    return min(scenario.max_replicas, max(scenario.min_replicas, int(need.max(initial=0))))


def warm_start_replicas(trace: Trace, scenario: Scenario, target: float, first_s: float = 60.0) -> int:
    """Replicas for the trace's first minute at `target`: as if the autoscaler had been running."""
    if scenario.initial_replicas is not None:
        return scenario.initial_replicas
    # needed(τ) for τ < first_s reads only the arrivals before first_s + half the prefill window:
    # no need to size the whole trace (5 M requests for a day)
    upto = int(np.searchsorted(trace.arrival_s, first_s + PREFILL_WINDOW_S, side="left"))
    early = Trace(trace.name, trace.arrival_s[:upto], trace.input_tokens[:upto], trace.output_tokens[:upto])
    head = needed_replicas(early, scenario, target)[: int(first_s)]
    want = int(head.max()) if len(head) else scenario.min_replicas
    return min(scenario.max_replicas, max(scenario.min_replicas, want))


def build_policy(
    name: str, scenario: Scenario, trace: Trace, params: PolicyParams, lead_s: Callable[[], float]
) -> ReplayPolicy:
    """One policy by name; `lead_s` is the fleet's current time to ready (for the clairvoyant)."""
    base, _, arg = name.partition("-")
    if base == "static":
        n = (
            params.static_replicas
            if params.static_replicas is not None
            else peak_replicas(trace, scenario, params.target)
        )
        if arg:
            try:
                n = int(arg)
            except ValueError:
                raise PolicyError(f"policy {name!r}: expected static-N with N an integer") from None
        return StaticPolicy(n, name=f"static-{n}", period_s=scenario.sync_period_s)
    if arg:
        raise PolicyError(f"unknown policy {name!r} (known: {', '.join(POLICY_NAMES)}, static-N)")
    initial = warm_start_replicas(trace, scenario, params.target)
    if name in ("hpa", "keda"):
        spec = hpa_spec(scenario, params)
        poll = params.keda_poll_interval_s if name == "keda" else 0.0
        return DecidePolicy(
            name, spec, period_s=scenario.sync_period_s, poll_interval_s=poll, initial_replicas=initial
        )
    if name == "predictive":
        spec = predictive_spec(scenario, params)
        return DecidePolicy(
            "predictive",
            spec,
            period_s=scenario.sync_period_s,
            cluster_lead_time=params.lead_time_s is None,
            initial_replicas=max(initial, params.warm_floor),
            lead_quantile=params.lead_quantile,
        )
    if name == "kpa":
        return KpaLikePolicy(
            target=params.target,
            min_replicas=scenario.min_replicas,
            max_replicas=scenario.max_replicas,
            initial_replicas=initial,
        )
    if name == "clairvoyant":
        return ClairvoyantPolicy(
            needed_replicas(trace, scenario, params.target),
            lead_s,
            period_s=scenario.sync_period_s,
            min_replicas=scenario.min_replicas,
            max_replicas=scenario.max_replicas,
            initial_replicas=initial,
        )
    raise PolicyError(f"unknown policy {name!r} (known: {', '.join(POLICY_NAMES)}, static-N)")
