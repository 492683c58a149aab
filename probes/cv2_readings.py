"""Probe (session 20): the lengths' cv² the policy reads at each sizing of one league case (every
lengths.spread call), its quantiles and mean, to compare how the mix's 400-request mean square
and a steadier one read the same trace (run it in each tree).

    cd <tree> && PYTHONPATH=. $REPO/.venv/bin/python probes/cv2_readings.py \
        mooncake_fast25_synthetic.jsonl mooncake 0.52 reference-70b
    (... servegen_language_m-large.tar.gz servegen 0.048 reference-70b 39600 50400: the league's window)
"""

from __future__ import annotations

import contextlib
import os
import sys

from autoscaler.policy import lengths

TRACES = os.environ.get("TRACES", "traces")  # the folder holding the traces (docs/traces.md)

readings: list[float] = []
_spread = lengths.spread


def spread(profile, p, cv2):  # type: ignore[no-untyped-def]
    if cv2 is not None:
        readings.append(cv2)
    return _spread(profile, p, cv2)


lengths.spread = spread  # type: ignore[assignment]

if __name__ == "__main__":
    from infscale.cli import main

    name, fmt, scale, scenario = sys.argv[1:5]
    window = ["--start-s", sys.argv[5], "--end-s", sys.argv[6]] if len(sys.argv) > 6 else []
    with contextlib.suppress(SystemExit):
        main(
            [
                *("replay", "run", "--policy", "predictive", "--trace", f"{TRACES}/{name}"),
                *("--format", fmt, "--scenario", scenario, "--rate-scale", scale, "--seed", "0"),
                *("--no-plots", "--quiet", "--out", f"/tmp/cv2_readings_{fmt}", *window),
            ]
        )
    v = sorted(readings)
    cut = [v[int(f * (len(v) - 1))] for f in (0.1, 0.25, 0.5, 0.75, 0.9)]
    print(f"{len(v)} readings; 10 / 25 / 50 / 75 / 90 %: " + " / ".join(f"{c:.2f}" for c in cut), end="")
    print(f"; mean {sum(v) / len(v):.2f}")
