"""Probe (session 45): where a static fleet's TPOT-only misses come from on ServeGen m-large's league
window: on the replica a long prefill (a hold) is running on, while it runs (stalled), in the
decodes that start within 10 s after it (post), or elsewhere; with the TTFT-late requests split
the same way, and the outputs of those that miss (docs/policy-history.md, session 45).

    PYTHONPATH=. .venv/bin/python probes/tpot_misses.py N [SCALE START END SCENARIO]

e.g. `3 0.15 2700 7200 reference-70b` (and N = 4); needs ../shared's traces.
"""

from __future__ import annotations

import sys

import numpy as np
from held_static import HOLD_S, TPOT_S, TTFT_S, static_run  # this folder's (run as a script)

POST_S = 10.0  # decodes starting this soon after a hold's first token, on its replica


def main(argv: list[str]) -> None:
    args = [*argv, *["0.15", "0", "1e9", "reference-70b"][len(argv) - 1 :]]
    n = int(args[0])
    scale, start, end = (float(a) for a in args[1:4])
    q, arrival, outputs, ttft, tpot, solo = static_run(n, scale, args[4])
    scored = (arrival >= start) & (arrival < end)
    holds = np.flatnonzero((solo > HOLD_S) & (arrival >= start - 60.0) & (arrival < end + 60.0))
    where = np.zeros(len(arrival), dtype=np.int8)  # 0 elsewhere, 1 stalled, 2 post
    for h in holds:
        mine = q.replica == q.replica[h]
        began, first = q.admitted_s[h], q.first_token_s[h]
        stalled = mine & (q.first_token_s < first) & (q.finished_s > began) & (where == 0)
        post = mine & (q.first_token_s >= first) & (q.first_token_s < first + POST_S) & (where == 0)
        where[stalled] = 1
        where[post] = 2
    count = int(scored.sum())
    held = int((scored[holds]).sum())
    ttft_late = scored & (ttft > TTFT_S)
    tpot_only = scored & (tpot > TPOT_S) & ~(ttft > TTFT_S)
    print(
        f"n {n} x{scale:g}: {count} requests, {held} holds; TTFT-late {100 * ttft_late.sum() / count:.3f} %, "
        f"TPOT-only late {100 * tpot_only.sum() / count:.3f} %"
    )
    for code, name in ((1, "stalled"), (2, "post"), (0, "elsewhere")):
        late = tpot_only & (where == code)
        outs = f", outputs p50 {np.median(outputs[late]):.0f}" if late.any() else ""
        print(
            f"  {name:9s} TPOT-only {late.sum():6d} ({late.sum() / max(held, 1):.1f} a hold){outs}; "
            f"TTFT-late {(ttft_late & (where == code)).sum():6d}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
