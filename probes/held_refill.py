"""Probe (session 47): how many requests the least-loaded router sends to a replica while one long
prefill holds it, by time into the hold, against leastloaded.held_share's linear rate.

held_share reads a hold as a replica that serves none while the router keeps it level with the
others: λ/(n·(n − u)) arrivals a second join it and wait past the slack, for as long as the hold
lasts past it. On a synthetic mix (Poisson arrivals, exponential prompts and outputs, a share of
prompts replaced by one long prompt) on static fleets of reference-70b, this prints per hold the
requests routed to the held replica within t seconds of its admission, the late ones (waiting past
the slack), and the linear model's count at the hold's mean excess.

    PYTHONPATH=. .venv/bin/python probes/held_refill.py RATE PROMPT LONG OUTPUT SHARE N [N ...]

`9.8 665 24000 140 0.0009 2 3` is tests/replay/test_held_wait_vs_replay.py's mix (4-s holds, 3.5 s
in the system: the linear rate holds); `35 213 40000 31 0.0006 2 3` is a short-answer mix with
9.5-s holds (0.8 s in the system), where the held replica's own decodes keep finishing during the
hold (a chunked prefill leaves each step's decodes in it), the router refills it and the rate falls
off as its count reaches the others' level (docs/policy.md, "What is left").
"""

from __future__ import annotations

import sys

import numpy as np

from autoscaler.policy.replicarates import prefill_rate_of
from replay.policies import StaticPolicy
from replay.policies.predictive import replica_profile, slo_target
from replay.profiles import REFERENCE_70B
from replay.simulate import simulate
from replay.trace import Trace

GRID_S = (0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0)


def _terms(n: int, lam: float, p: float, o: float) -> tuple[float, float]:
    """capacity.py's slack and mean prefill seconds at the mean prompt on n replicas (as
    tests/replay/test_light_traffic_wait_vs_replay.py's prefill_terms)."""
    profile = replica_profile(REFERENCE_70B.engine)
    slo = slo_target(REFERENCE_70B)
    base = profile.step_base_s
    a = profile.prefill_s_per_token + profile.prefill_s_per_attention_pair * 0.5 * (p + 1.0)
    d = profile.decode_s_per_request + profile.decode_s_per_context_token * (p + o)
    w = a * p + d * o
    service = p / prefill_rate_of(profile, lam / n, o, base, w, a, d)
    step = base / max(1.0 - lam * w / n, 1e-3)
    return max(slo.ttft_s - service - step, 0.25 * service), service


def main(argv: list[str]) -> None:
    rate, prompt, long_prompt, output, share = (float(x) for x in argv[:5])
    rng = np.random.default_rng(11)
    n_req = int(rate * 3600)
    arrival = np.cumsum(rng.exponential(1.0 / rate, n_req))
    prompts = np.maximum(1, rng.exponential(prompt, n_req)).astype(np.int64)
    outputs = np.maximum(1, rng.exponential(output, n_req)).astype(np.int64)
    held = rng.random(n_req) < share
    trace = Trace("holds", arrival, np.where(held, int(long_prompt), prompts), outputs)
    for n in (int(x) for x in argv[5:]):
        slack, service = _terms(n, rate, prompt, output)
        result = simulate(trace, REFERENCE_70B, StaticPolicy(n), warmup_s=300.0, max_tail_s=1e6)
        rq, at = result.requests, result.arrival_s
        sent, late, excess = [], [], []
        for i in np.flatnonzero(held):
            start, end = rq.admitted_s[i], rq.first_token_s[i]
            if not np.isfinite(start):
                continue
            joined = (rq.replica == rq.replica[i]) & (at > start) & (at < end) & ~held
            sent.append([int((at[joined] - start < g).sum()) for g in GRID_S])
            late.append(int(((rq.admitted_s - at > slack) & joined).sum()))
            excess.append(max(end - start - slack, 0.0))
        u = rate * service / n
        linear = rate / (n * (n - u))  # held_share's rate: its u·residual / (n - u) per second of excess
        in_system = float(np.mean(rq.finished_s - at))
        print(
            f"n {n}: {len(late)} holds, {np.mean(excess):.2f} s past the slack ({slack:.2f} s); "
            f"{in_system:.2f} s in the system; late per hold {np.mean(late):.1f}, "
            f"held_share's {linear * np.mean(excess):.1f} ({linear:.2f}/s)"
        )
        routed = np.mean(sent, axis=0)
        print(
            "   routed to the held replica by t:",
            " ".join(f"{g:g}s {v:.1f}" for g, v in zip(GRID_S, routed, strict=True)),
        )
        print("   held_share's linear count by t: ", " ".join(f"{g:g}s {linear * g:.1f}" for g in GRID_S))


if __name__ == "__main__":
    main(sys.argv[1:])
