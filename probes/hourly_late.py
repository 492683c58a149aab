"""Probe (session 31): where a policy's late requests fall hour by hour (or by BUCKET_S) on one
trace, against the replicas it runs. Per policy: the requests late for their TTFT, those late for
the fleet (their prefill alone on an idle replica fits the target), how many of those reached a
replica within a minute of its becoming ready (a start's fill), and per bucket the fleet's late
requests, the requests and the mean ready replicas. A probe, not part of the policy.

    PYTHONPATH=. .venv/bin/python probes/hourly_late.py TRACE FORMAT RATE_SCALE SCENARIO SEED POLICIES \
        [START_S END_S [BUCKET_S]]

e.g. `traces/servegen_reason_deepseek-r1.tar.gz servegen 0.097 reference-70b 1
predictive,hpa,clairvoyant` (the holdouts at seed 1, docs/policy.md "Traffic it was not tuned on");
START_S and END_S as `--start-s` and `--end-s` (the m-mid and m-small holdouts: 39600 50400). TRACE
`embedded` is the embedded synthetic trace of that seed (`make demo`'s; FORMAT and RATE_SCALE ignored):
`embedded - 1 reference-70b 0 predictive,hpa,clairvoyant 0 7200 600`.
"""

from __future__ import annotations

import sys

import numpy as np

from replay.cli import run_policy
from replay.policies.params import PolicyParams
from replay.profiles import SCENARIOS
from replay.traces import default_trace, load_trace
from replay.warmup import resolve_warmup

FILL_S = 60.0  # a request routed this soon after its replica became ready is part of the start's fill


def main(argv: list[str]) -> None:
    path, fmt, scale, name, seed, policies = argv[:6]
    start_s, end_s = (float(argv[6]), float(argv[7])) if len(argv) > 7 else (0.0, None)
    bucket_s = float(argv[8]) if len(argv) > 8 else 3600.0
    scenario = SCENARIOS[name]
    if path == "embedded":  # the embedded synthetic trace (replay.traces.default_trace), FORMAT ignored
        trace = default_trace(int(seed))
    else:
        trace = load_trace(path, fmt, start_s=start_s, end_s=end_s, rate_scale=float(scale), seed=int(seed))
    params = PolicyParams()
    warmup = resolve_warmup(None, scenario, params.downscale_window_s)
    ttft_s = scenario.slo.ttft_s
    alone = scenario.engine.prefill_alone_s(trace.input_tokens.astype(float)) > ttft_s
    hours = np.floor(trace.arrival_s / bucket_s).astype(int)
    n_hours = int(hours.max()) + 1
    print(f"{len(hours):,} requests, {int(alone.sum()):,} past {ttft_s:g} s alone on an idle replica")
    print(f"requests per {bucket_s:g} s: " + " ".join(str(x) for x in np.bincount(hours, minlength=n_hours)))
    for policy in policies.split(","):
        result = run_policy(trace, scenario, policy, params, warmup_s=warmup)
        late = ~(result.requests.first_token_s - result.arrival_s <= ttft_s)  # NaN: never served, late
        fleet = late & ~alone
        ready = {r.id: r.ready_s for r in result.replicas}
        routed = result.requests.replica
        start = np.array([ready.get(int(r), np.nan) for r in routed])  # -1 (never routed): NaN
        since = result.arrival_s - start
        fill = fleet & (since >= 0.0) & (since < FILL_S)
        t = np.array([p.t_s for p in result.timeline])
        up = np.array([p.ready for p in result.timeline], dtype=float)
        in_hour = [(t >= 0.0) & (t // bucket_s == h) for h in range(n_hours)]
        per_hour_ready = [up[m].mean() if m.any() else 0.0 for m in in_hour]
        late_per_hour = np.bincount(hours[fleet], minlength=n_hours)
        print(
            f"{policy}: late {int(late.sum()):,}, for the fleet {int(fleet.sum()):,}"
            f" ({int(fill.sum()):,} within {FILL_S:g} s of their replica's start),"
            f" {result.cold_starts} cold starts, {result.gpu_seconds / 3600.0:.1f} GPU-h"
        )
        print("  late for the fleet per bucket: " + " ".join(str(x) for x in late_per_hour))
        print("  mean ready per bucket:         " + " ".join(f"{x:.1f}" for x in per_hour_ready))


if __name__ == "__main__":
    main(sys.argv[1:])
