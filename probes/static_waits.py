"""Probe (session 33): the share of requests whose wait passes the TTFT slack on static fleets of a
trace's window, under Poisson arrivals at the window's mean rate (its own (prompt, output) pairs
resampled) and under the window's own arrivals, beside capacity.size's count at the window's mix
(least-loaded router, Poisson): how many replicas the steady model asks for, and what the bursts
add in the replay. A probe, not part of the policy.

    PYTHONPATH=. .venv/bin/python probes/static_waits.py TRACE FORMAT RATE_SCALE SEED START_S END_S N [N ...]

e.g. `traces/servegen_reason_deepseek-r1.tar.gz servegen 0.097 1 25200 39600 2 3 4 5 6 8 10 13`
(DeepSeek-R1's quiet hours on reference-70b, policy-history.md, session 33).
"""

from __future__ import annotations

import sys

import numpy as np

from autoscaler.policy import capacity, lengths, replicarates
from autoscaler.policy.capacity import Demand
from replay.policies import StaticPolicy
from replay.policies.predictive import replica_profile, slo_target
from replay.profiles import REFERENCE_70B
from replay.simulate import simulate
from replay.trace import Trace
from replay.traces import load_trace

WARMUP_S = 300.0


def waits_past_slack(trace: Trace, n: int, rate: float, p: float, o: float) -> float:
    """The share of requests after the warm-up whose wait passes the slack capacity.py sizes at n."""
    profile = replica_profile(REFERENCE_70B.engine)
    slo = slo_target(REFERENCE_70B)
    base = profile.step_base_s
    work = replicarates.work_per_request(profile, p, o, 1.0)
    prefill = replicarates.prefill_rate(profile, rate / n, p, o, base, work, 1.0)
    slack = slo.ttft_s - p / prefill - base / max(1e-3, 1.0 - rate / n * work)
    result = simulate(trace, REFERENCE_70B, StaticPolicy(n), warmup_s=WARMUP_S, max_tail_s=1e6)
    arrival = trace.arrival_s
    keep = arrival >= arrival[0] + WARMUP_S
    return float(np.mean((result.requests.admitted_s - arrival)[keep] > slack))


def main(argv: list[str]) -> None:
    path, fmt, scale, seed, start, end, *ns = argv
    window = load_trace(
        path, fmt, rate_scale=float(scale), seed=int(seed), start_s=float(start), end_s=float(end)
    )
    x, y, arrival = window.input_tokens.astype(float), window.output_tokens.astype(float), window.arrival_s
    rate = len(arrival) / float(arrival[-1] - arrival[0])
    p, o = float(x.mean()), float(y.mean())
    cv2, out_cv2 = float(x.var()) / p**2, float(y.var()) / o**2
    profile = replica_profile(REFERENCE_70B.engine)
    shape = lengths.with_outputs(lengths.spread(profile, p, cv2), out_cv2)
    sized = capacity.size(
        profile, slo_target(REFERENCE_70B), Demand(rate, rate * p, rate * o), least_loaded=True, **shape
    )
    print(
        f"window: {rate:.3f} req/s, prompts {p:.0f} tokens of cv² {cv2:.2f} (longest {x.max():.0f}),"
        f" outputs {o:.0f}; prefill cs² {shape['service_cv2']:.1f}; capacity.size's count {sized.replicas}"
    )
    rng = np.random.default_rng(int(seed))
    count = int(rate * float(arrival[-1] - arrival[0]))
    poisson = np.cumsum(rng.exponential(1.0 / rate, count))
    pick = rng.integers(0, len(x), count)
    resampled = Trace("poisson", poisson, window.input_tokens[pick], window.output_tokens[pick])
    print("| replicas | Poisson at the window's rate | the window's own arrivals |")
    print("|---:|---:|---:|")
    for n in (int(v) for v in ns):
        poisson_share = waits_past_slack(resampled, n, rate, p, o)
        own_share = waits_past_slack(window, n, rate, p, o)
        print(f"| {n} | {100 * poisson_share:.2f} % | {100 * own_share:.2f} % |")


if __name__ == "__main__":
    main(sys.argv[1:])
