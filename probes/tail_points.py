"""Probe (session 20): at each sizing of ServeGen m-large × 0.048 on reference-70b (the league's
window, 11:00-14:00 of day 1) where the residual tail's steady count is above main's, the TTFT
search's inputs of both (leastloaded.servers' arguments at the last search), saved for
tail_static.py to replay static fleets at those points.

    .venv/bin/python probes/tail_points.py reference-70b 0.048 /tmp/tail_points.json
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

from autoscaler.policy import burstsize, leastloaded

TRACES = os.environ.get("TRACES", "traces")  # the folder holding the traces (docs/traces.md)

_orig_size = burstsize.size
_orig_servers = leastloaded.servers
calls: list[tuple[Any, ...]] = []
points: list[dict[str, Any]] = []
total = [0]
cv2s: list[float] = []  # the lengths' cv² at every sizing


def servers(*args: Any, **kw: Any) -> int:
    got = _orig_servers(*args, **kw)
    calls.append((args, kw, got))
    return got


def steady(profile, slo, need, speed, limit, spread, shape):  # type: ignore[no-untyped-def]
    calls.clear()
    got = burstsize.thinned(profile, slo, need, speed, limit, spread, shape)
    last = calls[-1] if calls else None
    return got, last


def size(profile, slo, need, speed, limit, spread, shape, hold=0.0, lifetime_hold=None):  # type: ignore[no-untyped-def]
    got = _orig_size(profile, slo, need, speed, limit, spread, shape, hold, lifetime_hold)
    if shape.get("residual_tail", False):
        total[0] += 1
        cv2s.append(shape.get("lengths_cv2", 1.0))
        old_shape = {k: v for k, v in shape.items() if k != "residual_tail"}
        new, new_call = steady(profile, slo, need, speed, limit, spread, shape)
        old, old_call = steady(profile, slo, need, speed, limit, spread, old_shape)
        if new.replicas > old.replicas and new_call is not None and old_call is not None:
            points.append(
                {
                    "requests": need.requests,
                    "prompt": need.prompt_tokens / need.requests,
                    "output": need.output_tokens / need.requests,
                    "spread": spread,
                    "lengths_cv2": shape.get("lengths_cv2", 1.0),
                    "service_cv2": shape.get("service_cv2", 1.0),
                    "old": old.replicas,
                    "new": new.replicas,
                    "old_u": old.utilization,
                    "new_u": new.utilization,
                    "old_args": [list(old_call[0]), old_call[1]],
                    "new_args": [list(new_call[0]), new_call[1]],
                    "slo_ttft": slo.ttft_s,
                    "speed": speed,
                }
            )
    return got


burstsize.size = size  # type: ignore[assignment]
leastloaded.servers = servers  # type: ignore[assignment]

if __name__ == "__main__":
    from infscale.cli import main

    scenario, scale, out = sys.argv[1], sys.argv[2], sys.argv[3]
    trace = f"{TRACES}/servegen_language_m-large.tar.gz"
    with contextlib.suppress(SystemExit):
        main(
            [
                *("replay", "run", "--policy", "predictive", "--trace", trace, "--format", "servegen"),
                *("--scenario", scenario, "--rate-scale", scale, "--seed", "0", "--no-plots", "--quiet"),
                *("--out", f"/tmp/tail_points_{scenario}", "--start-s", "39600", "--end-s", "50400"),
            ]
        )

    def jsonable(v: Any) -> Any:
        if isinstance(v, tuple):
            return [jsonable(x) for x in v]
        if isinstance(v, list):
            return [jsonable(x) for x in v]
        if isinstance(v, dict):
            return {k: jsonable(x) for k, x in v.items()}
        return v

    with open(out, "w") as f:
        json.dump(jsonable(points), f)
    print(
        f"sizings with the lengths published: {total[0]};",
        f"the residual's steady count above main's: {len(points)}",
    )
    for name, vs in (("every sizing", cv2s), ("those", [q["lengths_cv2"] for q in points])):
        v = sorted(vs)
        cut = [v[int(f * (len(v) - 1))] for f in (0.1, 0.5, 0.9)]
        print(f"the lengths' cv² at {name}: 10 / 50 / 90 % {cut[0]:.2f} / {cut[1]:.2f} / {cut[2]:.2f}")
