"""Cost of one cold-start prediction, as the policy pays it every tick.

Run: `python -m bench.bench_coldstart` (or `python -m bench coldstart`). Single process, one core.
Goal: a few µs for `lead_time_s` (the forecast horizon, every tick of a predictive policy) and
tens of µs at most for the full per-replica breakdown of k <= 8 (only ticks that scale up).
Numbers are the best of 5 repeats, which filters out noise from other processes on the machine.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable

from autoscaler.policy.coldstart import lead_time_s, predict_ready, shared_load_finish_times
from autoscaler.policy.spec import ColdStartSpec

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
    "shared_load_finish_times, 8 staggered": lambda: shared_load_finish_times(
        [140.0] * 8, [0.0, 1.0, 2.0, 3.0, 30.0, 30.0, 330.0, 330.0], storage_gbps=10, per_loader_gbps=4
    ),
}


def main() -> None:
    for name, call in CASES.items():
        number = 20_000
        best = min(timeit.repeat(call, number=number, repeat=5)) / number
        print(f"{name:50s} {best * 1e6:8.1f} µs")


if __name__ == "__main__":
    main()
