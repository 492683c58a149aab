"""Probe (sessions 45-46): the per-request TPOT tail with the outputs' decode steps from vLLM's
request_generation_tokens buckets (outputsteps.py, which the predictive policy reads from the
replay's `infscale_output_length_bucket_rate` since session 46) against the geometric around the
mean output, on ServeGen m-large's league window (docs/policy-history.md, sessions 45 and 46).

    PYTHONPATH=. .venv/bin/python probes/output_shape_oracle.py SCALE X [X ...]

prints the share over the TPOT target one reference-70b replica has at X req/s, geometric against
the steps (the higher of the two, as tpottail._miss takes them).
"""

from __future__ import annotations

import math
import sys

import numpy as np

from autoscaler.policy import lengths, outputsteps, survival, tpottail
from autoscaler.policy.observation import MetricReading
from replay.metrics.signals import OUTPUT_LENGTH_BOUNDS

TRACE = "../shared/traces/servegen_language_m-large.tar.gz"


def steps_of(outputs: np.ndarray) -> outputsteps.OutputSteps | None:
    """The steps a whole trace's histogram gives, as the policy reads them."""
    les = (*(repr(float(b)) for b in OUTPUT_LENGTH_BOUNDS), "+Inf")
    counts = tuple(math.ceil(float(np.sum(outputs <= float(le))) * 1000) for le in les)
    reading = MetricReading(counts, labels=tuple({"le": le} for le in les))
    return outputsteps.of(survival.track(None, reading, 0.0, 15.0, outputsteps.UNITS)[0])


def tail_table(scale: float, rates: list[float]) -> None:
    from replay.policies.predictive import replica_profile
    from replay.profiles import SCENARIOS
    from replay.traces import load_trace

    profile = replica_profile(SCENARIOS["reference-70b"].engine)
    trace = load_trace(TRACE, "servegen", rate_scale=scale, seed=0, start_s=39_600.0, end_s=50_400.0)
    prompts = np.asarray(trace.input_tokens, dtype=float)
    outputs = np.asarray(trace.output_tokens, dtype=float)
    p, o = float(prompts.mean()), float(outputs.mean())
    cv2, out_cv2 = float(prompts.var()) / p / p, float(outputs.var()) / o / o
    steps = steps_of(outputs)
    base = profile.step_base_s
    a = profile.prefill_s_per_token + profile.prefill_s_per_attention_pair * 0.5 * (p + 1.0)
    d = profile.decode_s_per_request + profile.decode_s_per_context_token * (
        p + lengths.context_share(out_cv2) * o
    )
    budget, seqs, unit = (
        float(profile.max_batched_tokens or 0),
        float(profile.max_num_seqs),
        tpottail.units(cv2),
    )

    def miss(x: float, steps: outputsteps.OutputSteps | None = None) -> float:
        return tpottail.miss(
            base, a, d, a * p + d * o, True, budget, False, seqs, 0.2, 0.01, p, o, 2.0, unit, x, steps
        )

    short = 100 * float((outputs <= 4).mean())
    print(
        f"m-large x{scale:g}: prompts {p:.0f} (cv² {cv2:.2f}), "
        f"outputs {o:.0f} (cv² {out_cv2:.2f}), {short:.1f} % <= 4"
    )
    for x in rates:
        geometric = miss(x)
        shaped = miss(x, steps)
        print(
            f"  {x:g} req/s a replica: TPOT misses {100 * geometric:.3f} % (geometric), "
            f"{100 * shaped:.3f} % (the histogram's steps)"
        )


if __name__ == "__main__":
    tail_table(float(sys.argv[1]), [float(x) for x in sys.argv[2:]])
