"""Cluster facts -> Observation: the one step before decide(), shared by the controller and the replay.

The live controller reads the facts from its caches (/scale, pods, nodes, metrics), the replay from
its simulated fleet; both call `observe()`, so for the same cluster the policy sees the same
Observation, and tests/controller/test_parity.py compares the code that could differ (pods and
metrics through the fake kube-apiserver against the replay's facts).

The horizon (how far ahead the policy forecasts) is chosen here too:

  neither prediction nor capacity, or a fixed    the policy core's own rule (None here)
  leadTimeSeconds
  source ColdStartModel                          the cold-start model (decide() asks it, unless the
                                                 caller projects it: facts.model_lead_time_s)
  source ObservedStartups                        the `quantile` of observed loads, 0 until there are
                                                 `min_samples`
  source Auto (default)                          the observed quantile once `min_samples` were seen,
                                                 the model before (0 without a model)

An observed load is scheduled -> Ready (pull, weight load, warm-up); a replica that finds no node
with room also waits for one, so the observed horizon adds the model's node provisioning then.
Replicas starting now are predicted ready at their scheduling time plus a typical load: the observed
median once there are `min_samples`, else the model's time for one replica on a node with room.

The replay runs the policy core's start-up machine for its fleet, so it knows more than pods show:
it passes its projections (facts.projected_ready_at, facts.model_lead_time_s); its start-ups are
scheduled -> Ready, as the controller learns them from pods.

Pure: facts in, frozen values out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache

from autoscaler.policy import coldstart
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.spec import AutoscalerSpec, ColdStartSpec


class HorizonSource(StrEnum):
    AUTO = "Auto"  # the observed quantile once enough startups were seen, the cold-start model before
    COLD_START_MODEL = "ColdStartModel"  # always the model (spec.coldStart)
    OBSERVED = "ObservedStartups"  # always the observed quantile (no horizon until enough samples)


# Three startups: the fewest for which a p90 is more than the largest sample, and what a user sees
# on a first scale-up of three replicas; below it the model (or nothing) is the better guess.
DEFAULT_MIN_STARTUP_SAMPLES = 3
DEFAULT_HORIZON_QUANTILE = (
    0.9  # most replicas are ready by then: forecasting to the p50 is late half the time
)


@dataclass(frozen=True, slots=True)
class Horizon:
    source: HorizonSource = HorizonSource.AUTO
    quantile: float = DEFAULT_HORIZON_QUANTILE
    min_samples: int = DEFAULT_MIN_STARTUP_SAMPLES


@dataclass(frozen=True, slots=True)
class StartingReplica:
    """A replica that exists and is not ready yet, as its pod shows it."""

    created_at: float
    scheduled_at: float | None = None  # None: not bound to a node yet
    unschedulable: bool = False  # the scheduler said no node fits: it waits for a new node


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What the cluster shows about one scale target at one moment."""

    spec_replicas: int
    status_replicas: int
    ready_pods: int | None  # None: no pod matched the selector (or the pods are unknown)
    metrics: Mapping[str, MetricReading] = field(default_factory=dict)
    starting: tuple[StartingReplica, ...] = ()
    load_samples_s: tuple[float, ...] = ()  # scheduled -> Ready of past startups, oldest first
    gpus_per_replica: int = 0  # whole GPUs one replica needs on one node (0: none)
    free_gpus_per_node: tuple[int, ...] | None = None  # None: capacity unknown
    image_cached_nodes: tuple[int, ...] = ()  # indices into free_gpus_per_node
    weights_cached_nodes: tuple[int, ...] = ()
    loading_remaining_gb: tuple[float, ...] = ()  # known only to the replay today
    upcoming_loads_s: tuple[float, ...] = ()  # known only to the replay (Observation.upcoming_loads_s)
    coming_nodes: tuple[tuple[float, int], ...] = ()  # known only to the replay (Observation.coming_nodes)
    # What a caller with a start-up machine of its own (the replay's fleet) projects instead of the
    # rules below; None: the rules. The ready times of the replicas in `starting` (any order), and
    # the time to ready of one more started now (else decide() asks the cold-start model).
    projected_ready_at: tuple[float, ...] | None = None
    model_lead_time_s: float | None = None


def quantile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default); needs at least one value."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("quantile of no values")
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True, slots=True)
class Fit:
    requested: int  # new replicas asked for
    fitting: int  # of them, how many fit on existing nodes
    gpus_per_replica: int

    @property
    def short(self) -> int:
        return self.requested - self.fitting


def fit(free_gpus: Iterable[int], gpus_per_replica: int, k: int) -> Fit:
    """A replica needs G whole GPUs on one node: node i holds free_i // G more (4+4+4+4 holds no 8)."""
    if gpus_per_replica <= 0:  # no GPUs asked: anything fits
        return Fit(k, k, gpus_per_replica)
    free = free_gpus if isinstance(free_gpus, tuple) else tuple(free_gpus)
    return Fit(k, min(k, _room(free, gpus_per_replica)), gpus_per_replica)


@lru_cache(maxsize=64)
def _room(free_gpus: tuple[int, ...], gpus_per_replica: int) -> int:
    """Asked several times a decision over every node; a cluster looks the same most of the time."""
    return sum(free // gpus_per_replica for free in free_gpus)


@lru_cache(maxsize=256)
def typical_load_s(spec: ColdStartSpec) -> float:
    """The model's scheduled -> Ready for one replica on a node with room and the image."""
    return coldstart.lead_time_s(spec, free_gpus_per_node=(spec.gpus_per_node,), image_cached_nodes=(0,))


@dataclass(frozen=True, slots=True)
class HorizonView:
    """The horizon facts of one target, derived once and read by observe() and the caller's reports."""

    observed_load_s: float | None  # the horizon quantile of observed loads, once enough samples
    expected_load_s: float  # a typical replica's scheduled -> Ready, for replicas already starting
    provision_s: float  # the model's node provisioning (0 without a model)
    lead_time_s: float | None  # the Observation's horizon; None: decide() applies its own rule

    def fit(self, facts: ClusterFacts, k: int) -> Fit:
        return fit(facts.free_gpus_per_node or (), facts.gpus_per_replica, k)


def horizon_view(spec: AutoscalerSpec | None, horizon: Horizon, facts: ClusterFacts) -> HorizonView:
    """`spec` None: a policy without one (the replay's KPA, static): no horizon, no cold start."""
    cold = spec.cold_start if spec is not None else None
    samples = facts.load_samples_s
    enough = len(samples) >= horizon.min_samples
    observed = quantile(samples, horizon.quantile) if enough else None
    if enough:
        expected = quantile(samples, 0.5)
    elif cold is not None:
        expected = typical_load_s(cold)
    else:
        expected = 0.0
    provision = cold.node_provision_s if cold else 0.0
    return HorizonView(observed, expected, provision, _lead_time_s(spec, horizon, facts, observed, provision))


def _lead_time_s(
    spec: AutoscalerSpec | None,
    horizon: Horizon,
    facts: ClusterFacts,
    observed: float | None,
    provision_s: float,
) -> float | None:
    if spec is None:
        return None
    prediction = spec.prediction
    if prediction is not None and prediction.lead_time_s is not None:
        return None  # the spec's fixed horizon
    if prediction is None and spec.capacity is None:
        return None  # nothing looks ahead
    if horizon.source is HorizonSource.COLD_START_MODEL:
        return facts.model_lead_time_s
    if observed is None:
        if horizon.source is HorizonSource.OBSERVED or spec.cold_start is None:
            return 0.0
        return facts.model_lead_time_s
    known = facts.free_gpus_per_node is not None
    short = (
        known
        and facts.gpus_per_replica > 0
        and fit(facts.free_gpus_per_node or (), facts.gpus_per_replica, 1).short > 0
    )
    return observed + (provision_s if short else 0.0)


def observe(spec: AutoscalerSpec | None, horizon: Horizon, facts: ClusterFacts, now: float) -> Observation:
    """The Observation decide() takes, from what the cluster shows at `now`."""
    return observe_with(spec, facts, horizon_view(spec, horizon, facts), now)


def observe_with(
    spec: AutoscalerSpec | None, facts: ClusterFacts, view: HorizonView, now: float
) -> Observation:
    """`observe` with the horizon already worked out (the controller reports it as well)."""
    starting: list[float] = []
    if facts.projected_ready_at is not None:
        starting = list(facts.projected_ready_at)
    for replica in facts.starting if facts.projected_ready_at is None else ():
        if replica.scheduled_at is not None:
            at = replica.scheduled_at + view.expected_load_s
        elif replica.unschedulable:  # waits for a node first
            at = now + view.provision_s + view.expected_load_s
        else:
            at = now + view.expected_load_s
        starting.append(max(at, now))
    cold = spec is not None and spec.cold_start is not None
    return Observation(
        spec_replicas=facts.spec_replicas,
        status_replicas=facts.status_replicas,
        ready_pods=facts.ready_pods,
        metrics=facts.metrics,
        starting_ready_at=tuple(sorted(starting)),
        lead_time_s=view.lead_time_s,
        free_gpus_per_node=(facts.free_gpus_per_node or ()) if cold else (),
        image_cached_nodes=facts.image_cached_nodes if cold else (),
        weights_cached_nodes=facts.weights_cached_nodes if cold else (),
        loading_remaining_gb=facts.loading_remaining_gb if cold else (),
        upcoming_loads_s=facts.upcoming_loads_s if cold else (),
        coming_nodes=facts.coming_nodes if cold else (),
    )
