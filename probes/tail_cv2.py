"""Probe (session 20): ServeGen m-large × 0.048 on reference-70b (the league's window, seed 0) with
the lengths' second moment read differently, to test that the residual tail's excess there is the
lengths' cv² of the mix window (~400 requests, where one 24,000-token prompt adds 2-3 to the cv²):

    as-is      the policy as it is
    mix:N      the mix (prompt, output, prompt²) over N requests (mix.MIX_REQUESTS; 400)
    cv2:X      the lengths' cv² X at every sizing (a diagnostic read off the trace, not a rule)

    PYTHONPATH=<tree> .venv/bin/python probes/tail_cv2.py reference-70b 0.048 mix:4000
"""

from __future__ import annotations

import contextlib
import os
import sys

from autoscaler.policy import demand, flatdemand, lengths

TRACES = os.environ.get("TRACES", "traces")  # the folder holding the traces (docs/traces.md)


def patch(mode: str) -> None:
    if mode.startswith("mix:"):
        n = float(mode[4:])
        demand.MIX_REQUESTS = n  # type: ignore[misc]
        flatdemand.MIX_REQUESTS = n  # type: ignore[misc]
    elif mode.startswith("cv2:"):
        fixed = float(mode[4:])
        spread = lengths.spread

        def at_fixed(profile, p, cv2):  # type: ignore[no-untyped-def]
            return spread(profile, p, None if cv2 is None else fixed)

        lengths.spread = at_fixed  # type: ignore[assignment]


if __name__ == "__main__":
    from infscale.cli import main

    scenario, scale, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    patch(mode)
    trace = f"{TRACES}/servegen_language_m-large.tar.gz"
    out = f"/tmp/tail_cv2_{scenario}_{mode.replace(':', '_')}"
    with contextlib.suppress(SystemExit):
        main(
            [
                *("replay", "run", "--policy", "predictive", "--trace", trace, "--format", "servegen"),
                *("--scenario", scenario, "--rate-scale", scale, "--seed", "0", "--no-plots", "--quiet"),
                *("--out", out, "--start-s", "39600", "--end-s", "50400"),
            ]
        )
    with open(f"{out}/report.md") as f:
        print(next(line for line in f if line.startswith("| predictive")))
