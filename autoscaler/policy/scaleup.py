"""Contention-aware scale-up: how many of the replicas a deficit needs to start now.

Replicas loading weights from one shared storage split its bandwidth (coldstart.py): k started
together all finish at about k × W ÷ B, while started one after another the first is ready after
W ÷ B. Node provisioning, image pulls and engine start-up do not share anything, so starting
early is free for them; only the loads compete. Hence:

- with a load gate (at most N loaders at once, the loaders queueing for a slot), every missing
  replica starts now: the gate staggers the loads and the other phases overlap;
- without one, the policy staggers them itself, one decision period at a time. The k-th replica
  starts now only if that makes the sum of ready times (its own, the k-1 before it and the loaders
  already in progress) smaller than starting it one period later, when the loads ahead of it have
  moved on. Starting a load the storage cannot serve in time buys only GPU-hours.
- replicas placed where the weights are cached read them locally and start at once.

The first replica waits only for loads already in progress (never for nothing). Pure and cached
per cluster.
"""

from __future__ import annotations

from functools import lru_cache

from autoscaler.policy import coldstart
from autoscaler.policy.horizon import Cluster, readiness
from autoscaler.policy.spec import ColdStartSpec


@lru_cache(maxsize=4096)
def starts_now(cold: ColdStartSpec, deficit: int, cluster: Cluster, period_s: float) -> tuple[int, str]:
    """(replicas to start now, why) of `deficit` missing ones, decisions coming every period_s."""
    if deficit <= 0:
        return 0, "nothing missing"
    if cold.max_concurrent_loads is not None:
        return deficit, "the load gate staggers the loads"
    if (cluster[3] or cluster[4]) and not _better_now(cold, 1, cluster, period_s):
        ahead = len(cluster[3]) + len(cluster[4])
        return (
            0,
            f"the {ahead} load(s) in progress or about to start have the storage;"
            " the next starts when it frees",
        )
    k = 1
    while k < deficit:
        if not _better_now(cold, k + 1, cluster, period_s):
            break
        k += 1
    if k == deficit:
        return k, "no replica waits for the storage longer than a decision period"
    return k, f"the storage serves {k} load(s) in time; the rest start at later decisions"


def _better_now(cold: ColdStartSpec, k: int, cluster: Cluster, period_s: float) -> bool:
    """Is starting the k-th replica now better than one period later (sum of ready times)?"""
    plan = readiness(cold, k, cluster)
    last = plan[-1]
    if last.from_cache:
        return True  # a local read takes nothing from the others
    shared = [r for r in plan if not r.from_cache]
    size = cold.weights_gb
    loading = (*cluster[3], *[size] * len(cluster[4]))  # as the horizon counts them: loading now
    starts = [r.load_start_s for r in shared]

    def total(delay: float) -> float:
        finish = coldstart.shared_load_finish_times(
            [*loading, *[size] * len(shared)],
            [*[0.0] * len(loading), *starts[:-1], starts[-1] + delay],
            storage_gbps=cold.storage_gbps,
            per_loader_gbps=cold.per_loader_gbps,
        )
        # after its load a replica still has the fixed phases the model put after it
        after = sum(r.ready_s - r.load_start_s - r.load_s for r in shared)
        return sum(finish) + after

    return total(0.0) <= total(period_s)
