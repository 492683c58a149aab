"""Cost of one cold-start prediction, as the policy and the replay's fleet pay it.

Run: `python -m bench.bench_coldstart` (or `python -m bench coldstart`). Single process, one core.
Goal: tens of µs for `lead_time_s` (the forecast horizon; the policy memoises it, as a cluster looks
the same most ticks) and at most a few hundred µs for the full per-replica breakdown of k <= 8 or
a fleet's projection of 16 replicas starting (once per decision, only while replicas start).
Numbers are the best of 5 repeats, which filters out noise from other processes on the machine.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable
from dataclasses import replace

from autoscaler.policy.coldstart import lead_time_s, predict_ready, project_ready, shared_load_finish_times
from autoscaler.policy.spec import ColdStartSpec, CompileCache
from replay.fleet import Fleet
from replay.profiles import REFERENCE_70B

SEED = ColdStartSpec(weights_gb=140, storage_gbps=10)
FULL = ColdStartSpec(
    weights_gb=140,
    storage_gbps=10,
    per_loader_gbps=4,
    local_cache_gbps=20,
    image_pull_s=30,
    warmup_s=45,
    node_provision_s=300,
    gpus_per_replica=2,
)
FREE = (4, 2, 0, 8, 1)
IMAGE = (0, 3)
WEIGHTS = (3,)
LOADING = (70.0, 35.0)
PHASES = replace(
    FULL,
    engine_init_s=30,
    compile_s=55,
    compile_cached_s=18,
    compile_cache=CompileCache.CLUSTER,
    max_concurrent_loads=2,
)


def busy_fleet() -> Fleet:
    """reference-70b with 8 warm replicas, 16 more asked for 150 s ago: loading and waiting."""
    fleet = Fleet(REFERENCE_70B.cold_start, initial_ready=8, node_idle_remove_s=600)
    fleet.advance(10.0)
    fleet.scale_to(24)
    fleet.advance(160.0)
    return fleet


BUSY = busy_fleet()


def fresh_lead_time(fleet: Fleet) -> float:
    fleet._lead_time = None  # the fleet reuses its last answer while nothing changes
    return fleet.lead_time_s()


CASES: dict[str, Callable[[], object]] = {
    "lead_time_s, seed, cold cluster": lambda: lead_time_s(SEED),
    "lead_time_s, 5 nodes, caches, 2 loading": lambda: lead_time_s(
        FULL,
        free_gpus_per_node=FREE,
        image_cached_nodes=IMAGE,
        weights_cached=WEIGHTS,
        loading_remaining_gb=LOADING,
    ),
    "predict_ready k=1, seed": lambda: predict_ready(SEED, 1),
    "predict_ready k=8, seed": lambda: predict_ready(SEED, 8),
    "predict_ready k=8, 5 nodes, caches, 2 loading": lambda: predict_ready(
        FULL,
        8,
        free_gpus_per_node=FREE,
        image_cached_nodes=IMAGE,
        weights_cached=WEIGHTS,
        loading_remaining_gb=LOADING,
    ),
    "predict_ready k=8, phases, compile cache, gate of 2": lambda: predict_ready(
        PHASES, 8, free_gpus_per_node=FREE, image_cached_nodes=IMAGE, loading_remaining_gb=LOADING
    ),
    "fleet: projection of 16 starting (project_ready)": lambda: project_ready(BUSY._machine),
    "fleet: lead time behind 16 starting": lambda: fresh_lead_time(BUSY),
    "shared_load_finish_times, 8 staggered": lambda: shared_load_finish_times(
        [140.0] * 8, [0.0, 1.0, 2.0, 3.0, 30.0, 30.0, 330.0, 330.0], storage_gbps=10, per_loader_gbps=4
    ),
}


def main() -> None:
    for name, call in CASES.items():
        number = 2_000
        best = min(timeit.repeat(call, number=number, repeat=5)) / number
        print(f"{name:50s} {best * 1e6:8.1f} µs")


if __name__ == "__main__":
    main()
