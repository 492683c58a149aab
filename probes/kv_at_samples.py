"""Probe (session 31): the engines' KV cache usage at each tick the learned speed takes a sample, on
one trace, with the speed after it and (session 42) the requests waiting a replica and the mean
prompt (docs/policy.md, "Defaults and why": learned-speed sample).
The replay's predictive reads `infscale_kv_cache_usage` beside its own metrics here (the mean over
the pods, as the adapter's catalog serves it); its decisions are the policy's own. A probe, not part
of the policy.

    INFSCALE_COMPILED_CORE=false PYTHONPATH=. .venv/bin/python probes/kv_at_samples.py \\
        TRACE FORMAT RATE_SCALE SCENARIO SEED [START_S END_S]

e.g. `traces/servegen_language_m-small.tar.gz servegen 0.046 reference-70b 3 39600 50400` (the
holdouts at seed 3). Times are seconds from the scored window's start (negative: the warm-up).
"""

from __future__ import annotations

import sys
from dataclasses import fields
from typing import Any

from autoscaler.policy import planner, speedlearn
from autoscaler.policy.observation import MetricReading
from replay.cli import run_policy
from replay.policies import hpa
from replay.policies.params import PolicyParams
from replay.profiles import SCENARIOS
from replay.traces import load_trace
from replay.warmup import resolve_warmup

KV = "infscale_kv_cache_usage"


def fields_of(cls: Any) -> dict[str, Any]:
    return {f.name: f for f in fields(cls)}


def _usage(reading: MetricReading | None) -> float | None:
    if reading is None or not reading.values_milli:
        return None
    return max(reading.values_milli) / 1000.0


def main(argv: list[str]) -> None:
    path, fmt, scale, name, seed = argv[:5]
    start_s, end_s = (float(argv[5]), float(argv[6])) if len(argv) > 6 else (0.0, None)
    scenario = SCENARIOS[name]
    trace = load_trace(path, fmt, start_s=start_s, end_s=end_s, rate_scale=float(scale), seed=int(seed))
    params = PolicyParams()
    warmup = resolve_warmup(None, scenario, params.downscale_window_s)
    names = hpa.DecidePolicy.metric_names.fget
    assert names is not None
    hpa.DecidePolicy.metric_names = property(lambda self: (*names(self), KV))  # type: ignore[method-assign,assignment]
    epoch = fields_of(hpa.DecidePolicy)["epoch_s"].default + warmup  # decide()'s clock at the window's start
    clock = [0.0]
    plan, learn = planner.plan, planner._learn_speed

    def timed_plan(*args: Any, **kwargs: Any) -> Any:
        clock[0] = args[-1]
        return plan(*args, **kwargs)

    def reported_learn(cap: Any, state: Any, obs: Any, metrics: Any, *args: Any, **kwargs: Any) -> Any:
        new = learn(cap, state, obs, metrics, *args, **kwargs)
        if (new.samples, new.log_ratio) != (state.samples, state.log_ratio):
            usage = _usage(metrics.get(KV))
            speed = speedlearn.speed(new, cap.learn_prior_weight)
            queue, prompt, _, finished = args[:4]
            ready = obs.ready_pods or 0
            print(
                f"sample at {clock[0] - epoch:8.0f} s: speed x{speed:.2f}, KV cache usage {usage},"
                f" {queue / ready:.1f} waiting a replica, mean prompt {prompt / finished:.0f} tokens"
            )
        return new

    planner.plan = timed_plan  # type: ignore[assignment]
    planner._learn_speed = reported_learn  # type: ignore[assignment]
    result = run_policy(trace, scenario, "predictive", params, warmup_s=warmup)
    print(f"{int(result.requests.preemptions.sum()):,} preemptions")


if __name__ == "__main__":
    main(sys.argv[1:])
