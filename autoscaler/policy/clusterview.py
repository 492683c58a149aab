"""The cluster as the predictive stages see it, and the cold-start model's answers on it.

The horizon (horizon.py), the scale-up's stagger (scaleup.py) and panic (panic.py) all ask the
cold-start model (coldstart.py) "when would k replicas started now be ready?" of the same five
facts of the observation. Pure; the answers are cached on their (hashable) inputs, as a cluster
looks the same most ticks.
"""

from __future__ import annotations

from functools import lru_cache

from autoscaler.policy import coldstart, memo
from autoscaler.policy.coldstart import ReplicaReadiness
from autoscaler.policy.spec import ColdStartSpec

# (free GPUs per node, nodes with the image, nodes with the weights, GB left per loader in progress,
#  seconds until each starting replica not loading yet begins its load, (seconds until up, free
#  GPUs) of each node on its way with room for a replica)
Cluster = tuple[
    tuple[int, ...],
    tuple[int, ...],
    tuple[int, ...],
    tuple[float, ...],
    tuple[float, ...],
    tuple[tuple[float, int], ...],
]


@lru_cache(maxsize=4096)
def readiness(cold: ColdStartSpec, k: int, cluster: Cluster) -> tuple[ReplicaReadiness, ...]:
    """Per replica, the path to ready of k replicas started now (coldstart.predict_ready), their
    loads sharing the storage with the loads in progress and, from when each begins, with those of
    replicas still on their way to theirs, which reach a load gate ahead of ours. Replicas no up
    node fits wait for a node on its way with room before new nodes, as the scheduler binds them."""
    free, image, weights, loading, upcoming, coming = cluster
    # a node with the image ran a replica, which compiled there and filled a cluster cache: taken
    # as cold, the first replica's compile was a miss, and the caller's correction of the model's
    # first replica (horizon.find) carried that miss's 37 s to the later ones (fast-load-70b)
    compiled, warm = coldstart.compiled_after(cold, image)
    return coldstart.predict_ready(
        cold,
        k,
        free_gpus_per_node=free,
        image_cached_nodes=image,
        weights_cached=weights,
        loading_remaining_gb=loading,
        coming_nodes=coming,
        upcoming_loads_s=upcoming,
        compile_cached_nodes=compiled,
        compile_cache_warm=warm,
    )


def marginal_ready_s(cold: ColdStartSpec, k: int, cluster: Cluster) -> float:
    """Seconds until the last of k replicas started now is ready (k >= 1); cached per cold-start
    spec by identity (memo.py: the horizon asks it every tick, and hashing the frozen spec for
    readiness's cache cost more than the answer), on (k, cluster)."""
    table = memo.by_identity(_marginal, cold, _new_table, 64)
    key = (k, cluster)
    got = table.get(key)
    if got is None:
        got = memo.remember(table, key, max(r.ready_s for r in readiness(cold, k, cluster)), 4096)
    return got


_marginal: memo.Table = {}


def _new_table(cold: ColdStartSpec) -> dict[tuple[int, Cluster], float]:
    return {}
