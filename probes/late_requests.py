"""Probe (session 21): which requests a policy makes late, split into those whose prefill alone on an
idle replica is past the TTFT target (late on any fleet) and the rest (late for the fleet), for
predictive, predictive with the late share spending the whole allowance (idle misses read as 0: the
count of session 20) and static-peak, on one trace. A probe, not part of the policy.

    PYTHONPATH=. .venv/bin/python probes/late_requests.py [TRACE FORMAT RATE_SCALE SCENARIO SEED]

(default: Mooncake x 1.5 on one-gpu-8b at seed 1, policy-history.md "The late share's allowance
less the prompts no fleet serves in time").
"""

from __future__ import annotations

import os
import sys

import numpy as np
import numpy.typing as npt

from autoscaler.policy import lookahead
from replay.cli import run_policy
from replay.policies.params import PolicyParams
from replay.profiles import SCENARIOS
from replay.simulate import RunResult
from replay.traces import load_trace
from replay.warmup import resolve_warmup

TRACES = os.environ.get("TRACES", "traces")  # the folder holding the traces (docs/traces.md)

DEFAULT = (f"{TRACES}/mooncake_fast25_synthetic.jsonl", "mooncake", "1.5", "one-gpu-8b", "1")


def _late(result: RunResult, ttft_s: float) -> npt.NDArray[np.bool_]:
    ttft = result.requests.first_token_s - result.arrival_s
    return ~(ttft <= ttft_s)  # NaN (never served) counts as late


def main(argv: list[str]) -> None:
    path, fmt, scale, name, seed = argv if argv else DEFAULT
    scenario = SCENARIOS[name]
    trace = load_trace(path, fmt, rate_scale=float(scale), seed=int(seed))
    params = PolicyParams()
    warmup = resolve_warmup(None, scenario, params.downscale_window_s)
    ttft_s = scenario.slo.ttft_s
    alone = scenario.engine.prefill_alone_s(trace.input_tokens.astype(float)) > ttft_s
    runs: dict[str, npt.NDArray[np.bool_]] = {}
    runs["predictive"] = _late(run_policy(trace, scenario, "predictive", params, warmup_s=warmup), ttft_s)
    kept = lookahead.Lookahead.idle_misses
    lookahead.Lookahead.idle_misses = lambda self: 0.0  # type: ignore[method-assign]
    try:
        late = run_policy(trace, scenario, "predictive", params, warmup_s=warmup)
    finally:
        lookahead.Lookahead.idle_misses = kept  # type: ignore[method-assign]
    runs["late share, whole allowance"] = _late(late, ttft_s)
    runs["static-peak"] = _late(run_policy(trace, scenario, "static-peak", params, warmup_s=warmup), ttft_s)
    n, past = len(trace.arrival_s), int(alone.sum())
    print(f"{n:,} requests, {past:,} past {ttft_s:g} s alone on an idle replica")
    for label, late_mask in runs.items():
        print(
            f"{label}: {int(late_mask.sum()):,} late, {int((late_mask & alone).sum()):,} of them past the"
            f" target alone, {int((late_mask & ~alone).sum())} late for the fleet"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
