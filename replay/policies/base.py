"""What every replay policy is: the protocol the run loop calls, the metric it reads, its errors,
and the context a policy is built from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from autoscaler.policy.observation import Observation
from replay.profiles import Scenario
from replay.trace import Trace

if TYPE_CHECKING:
    from replay.fleet import Fleet
    from replay.policies.params import PolicyParams

METRIC = "infscale_inflight"  # as the adapter serves it: waiting + running requests
# requests held at the gateway while no replica is ready (Knative's activator, KEDA's HTTP
# interceptor): the signal that can wake a fleet scaled to zero
GATEWAY_METRIC = "infscale_gateway_pending"
DEFAULT_TARGET_INFLIGHT = 16.0  # requests per replica: a quarter of reference-70b's 64 slots
# MLPerf's server scenario holds the 99th percentile of TTFT and of TPOT to the SLO (replay/slo.py):
# the clairvoyant bound is the cheapest fleet under which 99 % of requests meet both
DEFAULT_CLAIRVOYANT_GOAL = 0.99


class PolicyError(ValueError):
    """A policy name or parameter that cannot be built; the message names it."""


class ReplayPolicy(Protocol):
    """Called by replay/simulate.py every `period_s` with an Observation of the simulated cluster."""

    name: str
    period_s: float  # how often the loop asks
    fresh_metrics: bool  # True: reads the engines directly (no scrape delay), as Knative's activator

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The external metrics the loop reads for it at each call, through the scenario's metric
        pipeline (replay/metrics/signals.py: infscale_inflight, the queue, batch and KV gauges, the
        request, token and arrival rates)."""
        ...

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


# A policy may say `reads_cold_start = False` (an attribute or property; absent means True): the
# run loop then leaves the observation's cold-start facts empty (starting_ready_at, lead_time_s,
# the nodes, loads in progress and to come) instead of running the start-up machine on a copy at
# every decision (most of a reactive replay's Python).


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """Everything a policy may be built from. `lead_s` is the fleet's current time to ready of one
    more replica and `fleet` the fleet itself (None outside a run): only the clairvoyant reads
    them, the others see the cluster through observations. `trace` is the trace as the loop
    plays it, on the loop's clock: behind its warm-up prefix of `warmup_s` seconds if any
    (replay/warmup.py; the warm start sizes for its first minute); `scored` the trace the run is
    judged on (None: `trace`), which the static fleets are sized for."""

    scenario: Scenario
    trace: Trace
    params: PolicyParams
    lead_s: Callable[[], float]
    fleet: Callable[[], Fleet | None] = lambda: None
    warmup_s: float = 0.0
    scored: Trace | None = None

    @property
    def scored_trace(self) -> Trace:
        return self.trace if self.scored is None else self.scored
