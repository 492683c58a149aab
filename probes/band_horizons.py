"""Which forecasts move the band on one replay: every error the pooled tracker scores (band.track,
band._score), with the horizon of the forecast it scores and the quantile's step (docs/policy-history.md,
session 27, "A bin's first error held the band"). A probe, not part of the policy.

    .venv/bin/python probes/band_horizons.py OUT -- replay compare ... --policies predictive ...

Prints, for the warm-up and the scored window, by the scored forecast's horizon class (< 100 s: a
warm node; >= 100 s: a node to provision), the errors scored, their mean, the share above the
quantile as it stood, and the quantile's summed steps; then every 60 s the pooled quantile, the
bins' scales, the ratios' quantile and bin 0's heights.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections import defaultdict
from typing import Any

from autoscaler.policy import band

_track = band.track
_score = band._score
_calls: list[tuple[float, float, float, bool]] = []  # (e, q before, q after, above) of the pooled tracker
rows: list[tuple[float, float, float, float, float, bool]] = []  # (now, horizon, e, q0, q1, early)
path: list[tuple[float, float, float, Any]] = []  # (now, q, horizon planned, state after)


def _scoring(
    e: float,
    q: float,
    scale: float,
    scored: float,
    spec: Any,
    above: bool = False,
    bound: float = band.MAX_ERROR,
) -> Any:
    out = _score(e, q, scale, scored, spec, above, bound)
    if bound == band.MAX_ERROR:
        _calls.append((e, q, out[0], above))
    return out


def _tracking(
    spec: Any, state: Any, now: float, level_now: float, horizon_s: float, *args: Any, **kw: Any
) -> Any:
    before = state.pending
    _calls.clear()
    out = _track(spec, state, now, level_now, horizon_s, *args, **kw)
    due = [p for p in before if p[1] <= now and p[2] >= 0.0]
    after = {p[0]: p for p in out.pending}
    early = [p for p in before if p[1] > now and p[2] >= 0.0 and p[0] in after and after[p[0]][2] < 0.0]
    early.sort(key=lambda p: -p[0])
    scored = due + early
    for i, (e, q0, q1, _above) in enumerate(_calls):
        h = scored[i][1] - scored[i][0] if i < len(scored) else float("nan")
        rows.append((now, h, e, q0, q1, i >= len(due)))
    path.append((now, out.error_quantile, horizon_s, out))
    return out


def main() -> None:
    out = sys.argv[1]
    args = sys.argv[sys.argv.index("--") + 1 :]
    band.track = _tracking  # planner.py calls it through the module
    band._score = _scoring
    from infscale.cli import main as cli

    sys.argv = ["infscale", *args, "--no-plots", "--quiet", "--out", out]
    with contextlib.suppress(SystemExit):
        cli()
    with open(f"{out}/report.json") as f:
        report = json.load(f)
    p = report["policies"]["predictive"]
    # the policy's clock against the report's: the first decision
    t0 = path[0][0] - p["decisions"][0]["t_s"]
    print(f"SLO {p['slo_attainment']:.2%}, {p['gpu_hours']:.1f} GPU-h, {p['cold_starts']} cold starts")
    agg: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0, 0.0, 0])
    for now, h, e, q0, q1, early in rows:
        phase = "warm-up" if now - t0 < 0 else "window"
        cls = "h<100" if h < 100 else "h>=100"
        a = agg[(phase, cls)]
        a[0] += 1
        a[1] += e
        a[2] += e > q0
        a[3] += q1 - q0
        a[4] += early
    for (phase, cls), (n, se, up, dq, ne) in sorted(agg.items()):
        print(
            f"{phase:8s} {cls:7s} scored {n:4d} mean e {se / n:+.3f} above q {up:3d} ({up / n:.1%})"
            f" early {ne:3d} sum dq {dq:+.3f}"
        )
    last = -1e9
    for now, q, h, st in path:
        if now - last >= 60:
            bins = " ".join(f"b{i} scale {sc:.3f} n {n:.0f}" for i, (sc, n) in enumerate(st.bins))
            rel = st.relative
            hts = st.heights
            print(
                f"{now - t0:8.0f} q {q:.3f} (x{math.exp(q):.2f}) planned h {h:.0f} | {bins}"
                f" | rel q {rel.quantile:.2f} n {rel.scored:.0f} | heights q {hts.quantile:.2f}"
                f" lean {hts.lean:+.3f} | typical {st.typical.requests:.2f}"
            )
            last = now


if __name__ == "__main__":
    main()
