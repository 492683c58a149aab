"""The joint budget on test_capacity_vs_replay's static fleets (docs/policy-history.md, session 21,
"The plateau"): the least n from capacity.size's least-loaded count up whose waits and TPOT tail
together, W(n) + T(n), fit the waits' budget (plateau_margin.joint_count), and the replay at that
count's n - 2 and n + 1 (the test's ±1: below the SLO at n - 2, at it at n + 1). Run from the
repository's root: .venv/bin/python probes/plateau_joint.py
"""

from __future__ import annotations

import sys

sys.path[:0] = ["tests/replay", "probes"]

from plateau_margin import joint_count, model  # noqa: E402
from test_capacity_vs_replay import ONE_GPU_8B, REFERENCE_70B, TOKEN_AWARE, attainment  # noqa: E402

# test_capacity_vs_replay's cases: rate, prompt, output, scenario, (prompts', outputs' shape)
CASES = [
    ("chat 60/s", 60.0, 1000.0, 200.0, REFERENCE_70B, (2.0, 2.0)),
    ("short 150/s", 150.0, 300.0, 100.0, REFERENCE_70B, (2.0, 2.0)),
    ("rag 15/s", 15.0, 3000.0, 600.0, REFERENCE_70B, (2.0, 2.0)),
    ("prompt-heavy 30/s", 30.0, 2000.0, 150.0, REFERENCE_70B, (2.0, 2.0)),
    ("4k length-aware", 8.0, 4000.0, 300.0, TOKEN_AWARE, (2.0, 2.0)),
    ("6k length-aware", 4.0, 6000.0, 200.0, TOKEN_AWARE, (2.0, 2.0)),
    ("8k length-aware", 3.0, 8000.0, 300.0, TOKEN_AWARE, (2.0, 2.0)),
    ("code-like 10/s", 10.0, 2048.0, 28.0, REFERENCE_70B, (1.0, 1.0)),
    ("3k 10-token 8B", 10.0, 3000.0, 10.0, ONE_GPU_8B, (1.0, 1.0)),
    ("chat 60/s cv2 2", 60.0, 1000.0, 200.0, REFERENCE_70B, (0.5, 0.5)),
    ("3k 20/s 8B cv2 2", 20.0, 3000.0, 100.0, ONE_GPU_8B, (0.5, 0.5)),
    ("4k length-aware cv2 0.25", 8.0, 4000.0, 300.0, TOKEN_AWARE, (4.0, 4.0)),
    ("code-like cv2 2", 10.0, 2048.0, 28.0, REFERENCE_70B, (0.5, 1.0)),
    ("long outputs 8B", 40.0, 1000.0, 1500.0, ONE_GPU_8B, (2.0, 1.0)),
]


def main() -> None:
    for name, lam, prompt, output, scenario, shapes in CASES:
        m = model(lam, prompt, output, scenario, shapes)
        n = joint_count(m)
        line = f"{name}: count {m.count}, joint {n}"
        if n != m.count:
            below = attainment(m.trace, scenario, n - 2)
            above = attainment(m.trace, scenario, n + 1)
            ok = below < 1.0 - m.eps <= above
            verdict = "±1" if ok else "not ±1"
            line += f"; replay {100 * below:.2f} % at {n - 2}, {100 * above:.2f} % at {n + 1} ({verdict})"
        print(line, flush=True)


if __name__ == "__main__":
    main()
