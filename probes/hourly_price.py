"""Probe (session 34): what one price per late request would buy on a trace whose mix changes by
the hour, against a tail held every moment. Each hour of the trace is replayed on static fleets
of 1..N replicas (the hour before's last WARMUP_S seconds played first, unscored), counting the
requests that miss the SLO; then

  flat n       one fleet for the whole day (the clairvoyant's kind of schedule),
  price π      each hour the n that minimizes late(n) + π·n: a replica is kept in an hour while it
               saves more than π late requests there (one price at every moment),

each as late requests and replica-hours summed over the day. Static fleets, no cold starts between
hours: a bound on what the allocation alone buys, not a policy. A probe, not part of the policy.

    PYTHONPATH=. .venv/bin/python probes/hourly_price.py TRACE FORMAT RATE_SCALE SCENARIO SEED MAX_N

e.g. `traces/servegen_reason_deepseek-r1.tar.gz servegen 0.077 reference-70b 0 12` (DeepSeek-R1 at
its lower holdout rate, docs/policy-history.md, session 34).
"""

from __future__ import annotations

import sys

import numpy as np

from replay.policies import StaticPolicy
from replay.profiles import SCENARIOS
from replay.simulate import simulate
from replay.slo import judge
from replay.traces import load_trace

HOUR_S = 3600.0
WARMUP_S = 600.0  # the hour before's tail, played first so an hour does not start on idle engines
PRICES = (1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 15.0, 20.0, 30.0, 50.0, 100.0)  # late requests a replica-hour


def late_by_hour(path: str, fmt: str, scale: float, seed: int, name: str, max_n: int) -> np.ndarray:
    """late[h, n - 1]: the requests of hour h that miss the SLO on a static fleet of n."""
    scenario = SCENARIOS[name]
    day = load_trace(path, fmt, rate_scale=scale, seed=seed)
    hours = int(np.ceil(float(day.arrival_s[-1]) / HOUR_S))
    late = np.zeros((hours, max_n), dtype=np.int64)
    for h in range(hours):
        start = max(0.0, h * HOUR_S - WARMUP_S)
        window = load_trace(path, fmt, rate_scale=scale, seed=seed, start_s=start, end_s=(h + 1) * HOUR_S)
        scored = window.arrival_s >= h * HOUR_S - start
        for n in range(1, max_n + 1):
            result = simulate(window, scenario, StaticPolicy(n), max_tail_s=1e6)
            verdicts = judge(
                scenario.slo,
                window.arrival_s,
                result.requests.first_token_s,
                result.requests.finished_s,
                window.input_tokens,
                result.output_tokens,
            )
            late[h, n - 1] = int(np.sum(~verdicts.good & scored))
    return late


def main(argv: list[str]) -> None:
    path, fmt, scale, name, seed, max_n = argv
    late = late_by_hour(path, fmt, float(scale), int(seed), name, int(max_n))
    gpus = SCENARIOS[name].cold_start.gpus_per_replica
    hours, top = late.shape
    print(f"{hours} hours, static fleets 1..{top}, {gpus} GPUs a replica")
    print("| schedule | late | replica-h | GPU-h | replicas by hour |")
    print("|---|---:|---:|---:|---|")
    for n in range(1, top + 1):
        print(f"| flat {n} | {int(late[:, n - 1].sum()):,} | {hours * n} | {hours * n * gpus:,} | |")
    counts = np.arange(1, top + 1)
    for price in PRICES:
        pick = np.argmin(late + price * counts[None, :], axis=1)
        total = int(late[np.arange(hours), pick].sum())
        n = pick + 1
        print(
            f"| price {price:g} | {total:,} | {int(n.sum())} | {int(n.sum()) * gpus:,} |"
            f" {' '.join(str(int(x)) for x in n)} |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
