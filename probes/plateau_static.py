"""The plateau of static fleets where no fleet reaches 99 % (docs/policy.md, "How accurate the
capacity model is", "With the lengths' spread"): per count, the replay's SLO, TTFT and TPOT
attainment beside the model's counts (random and least-loaded router) and the prompts too long for
the TTFT on an idle replica (idlemiss.idle_misses). Run from the repository's root:
    .venv/bin/python probes/plateau_static.py CASE N [N ...]   (CASE 2k, 8k, mooncake-8b or mooncake-70b)
"""

from __future__ import annotations

import sys

sys.path[:0] = ["tests/replay", "probes"]

from plateau_margin import CASES  # noqa: E402
from test_capacity_vs_replay import (  # noqa: E402
    Demand,
    StaticPolicy,
    lengths,
    replica_profile,
    report,
    simulate,
    size,
    slo_target,
    stationary,
)

from autoscaler.policy import idlemiss  # noqa: E402


def main() -> None:
    rate, prompt, output, scenario, shape = CASES[sys.argv[1]]
    trace = stationary(rate, prompt, output, shape=shape)
    x = trace.input_tokens.astype(float)
    demand = Demand(rate, rate * float(x.mean()), rate * float(trace.output_tokens.mean()))
    slo, profile = slo_target(scenario), replica_profile(scenario.engine)
    spread = lengths.spread(profile, float(x.mean()), float((x * x).mean() / x.mean() ** 2 - 1.0))
    p, o = demand.prompt_tokens / rate, demand.output_tokens / rate
    print(
        sys.argv[1],
        "model random",
        size(profile, slo, demand, **spread).replicas,
        "least-loaded",
        size(profile, slo, demand, **spread, least_loaded=True).replicas,
        "idle misses {:.4f}".format(idlemiss.idle_misses(profile, slo, p, o, 1.0, spread["lengths_cv2"])),
        flush=True,
    )
    for n in map(int, sys.argv[2:]):
        s = report.policy_summary(simulate(trace, scenario, StaticPolicy(n), max_tail_s=1e6))
        print(
            f"  n={n} slo={100 * s['slo_attainment']:.2f} ttft={100 * s['ttft_attainment']:.2f} "
            f"tpot={100 * s['tpot_attainment']:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
