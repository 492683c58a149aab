"""Probe (session 44): where a static fleet's late requests come from on ServeGen m-large's league
window: the long prefills (holds) each late cluster starts at, and the requests late within a
hold's reach, at n replicas. Prints, over [start, end) of the scored window, the share that misses
the SLO, the share within `reach` seconds before a hold to 2 s after its first token, and per hold
the TTFT-late and TPOT-only-late requests (docs/policy.md, "The prefill times' far tail").

    PYTHONPATH=. .venv/bin/python probes/held_static.py N [SCALE START END REACH SCENARIO]

e.g. `1 0.048 3300 7200 30 reference-70b` (and N = 2, 3, 4); needs ../shared's traces.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from replay.policies.static import StaticPolicy
from replay.profiles import SCENARIOS
from replay.simulate import simulate
from replay.traces import load_trace

TRACE = "../shared/traces/servegen_language_m-large.tar.gz"
WINDOW = {"start_s": 39_600.0, "end_s": 50_400.0}  # the league's (replay/league/sources.py)
HOLD_S = 1.5  # a prefill this long (the model's solo time) is a hold
TTFT_S, TPOT_S = 2.0, 0.2


def static_run(n: int, scale: float, scenario_name: str) -> tuple[Any, ...]:
    """m-large's league window at `scale` on a static fleet of n: the requests' results, arrivals,
    outputs, TTFTs and TPOTs, and each prompt's prefill time alone on a replica (its solo time)."""
    scenario = SCENARIOS[scenario_name]
    trace = load_trace(TRACE, "servegen", rate_scale=scale, seed=0, **WINDOW)  # type: ignore[arg-type]
    result = simulate(trace, scenario, StaticPolicy(n), warmup_s=1800.0)
    q, arrival, engine = result.requests, result.arrival_s, scenario.engine
    prompts = result.input_tokens.astype(float)
    outputs = result.output_tokens
    ttft = q.first_token_s - arrival
    tpot = (q.finished_s - q.first_token_s) / np.maximum(outputs - 1, 1)
    solo = engine.prefill_token_s * prompts + engine.prefill_attention_s * prompts * prompts / 2.0
    return q, arrival, outputs, ttft, tpot, solo


def main(argv: list[str]) -> None:
    args = [*argv, *["0.048", "0", "1e9", "30", "reference-70b"][len(argv) - 1 :]]
    n = int(args[0])
    scale, start, end, reach = (float(a) for a in args[1:5])
    q, arrival, _, ttft, tpot, solo = static_run(n, scale, args[5])
    bad = (ttft > TTFT_S) | (tpot > TPOT_S)
    scored = (arrival >= start) & (arrival < end)
    holds = np.flatnonzero(scored & (solo > HOLD_S))
    near = np.zeros(len(arrival), dtype=bool)
    for i in holds:
        near |= (arrival >= arrival[i] - reach) & (arrival <= q.first_token_s[i] + 2.0)
    count = scored.sum()
    ttft_late, tpot_only = ttft > TTFT_S, (tpot > TPOT_S) & ~(ttft > TTFT_S)
    print(
        f"n {n}: {count} requests, "
        f"{100 * bad[scored].mean():.3f} % miss the SLO; {len(holds)} holds; "
        f"{100 * (bad & near & scored).sum() / count:.3f} % within their reach, "
        f"{100 * (bad & ~near & scored).sum() / count:.3f} % elsewhere"
    )
    if len(holds):
        print(
            f"  a hold: {(ttft_late & near & scored).sum() / len(holds):.1f} TTFT-late, "
            f"{(tpot_only & near & scored).sum() / len(holds):.1f} TPOT-only late; prefill measured "
            f"{np.mean(q.first_token_s[holds] - q.admitted_s[holds]):.2f} s, "
            f"solo {np.mean(solo[holds]):.2f} s"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
