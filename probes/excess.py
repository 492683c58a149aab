"""Where predictive's GPU-hours above the clairvoyant's go, on one league case (docs/policy-history.md,
"Small fleets").

    TRACES=DIR .venv/bin/python probes/excess.py CASE OUT [KNOCK]     (DIR: the traces, docs/traces.md)
        CASE: conv_fl, conv_8b or sg_8b (the league's Azure conv x 3.4 on fast-load-70b / one-gpu-8b,
        ServeGen m-large x 0.15 on one-gpu-8b), seed 0; KNOCK (a counterfactual, predictive's
        mechanism knocked out in this process): margin (the band's upper is the mean forecast),
        recurrence (scaledown.keep without the levels' gaps: λ·B where recurrence kept B) or hold
        (no rent or buy: what is not needed now is released, no release margin)

Replays predictive and the clairvoyant (`infscale replay compare`, the league's window and seed),
recording at each decision the need at the band's upper forecast and at the mean one (the sizing of
both at the horizons the tick sized). Then, every 5 s of the scored window, the replicas predictive
holds above the clairvoyant's are laid to, in this order: replicas held but not serving (loading or
draining) above the clairvoyant's; the scale-down's hold (the kept count above the need, by its
reason); the band's margin (the need at the upper forecast above both the need at the mean and the
clairvoyant's ready count); the sizing at the mean. Steps where predictive holds fewer are "saved".
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import sys
from collections import defaultdict
from typing import Any

from autoscaler.policy import lookahead, scaledown, scaledownstage

TRACES = os.environ.get("TRACES", "traces")  # the folder holding the traces (docs/traces.md)
CASES = {
    "conv_fl": ("azure_llm_2023_conv.csv", "azure", "3.4", "fast-load-70b", ()),
    "conv_8b": ("azure_llm_2023_conv.csv", "azure", "3.4", "one-gpu-8b", ()),
    "sg_8b": (
        "servegen_language_m-large.tar.gz",
        "servegen",
        "0.15",
        "one-gpu-8b",
        ("--start-s", "39600", "--end-s", "50400"),
    ),
}
STEP_S = 5.0
_needs: dict[float, tuple[int, int]] = {}  # decision time (the policy's clock) -> (at upper, at mean)
_stage = scaledownstage.stage


def _recording(ahead: Any, *args: Any, **kwargs: Any) -> Any:
    """scaledownstage.stage, first recording the tick's needs (the stage runs on every tick that
    starts nothing; a tick that starts replicas needs them: its excess is the need's)."""
    horizons = list(ahead._sized) or [0.0]
    upper = max(ahead.sized(ahead.forecast_at(h)[1]).replicas for h in horizons)
    mean = max(ahead.sized(ahead.forecast_at(h)[0]).replicas for h in horizons)
    _needs[args[8]] = (upper, mean)  # args[8]: now
    return _stage(ahead, *args, **kwargs)


def _held(report: dict[str, Any], t: float) -> tuple[int, int]:
    held = ready = 0
    for r in report["replicas"]:
        scheduled = r["scheduled_s"] is not None and r["scheduled_s"] <= t
        if scheduled and (r["deleted_s"] is None or r["deleted_s"] > t):
            held += 1
            serving = r["ready_s"] is not None and r["ready_s"] <= t
            if serving and (r["drain_s"] is None or r["drain_s"] > t):
                ready += 1
    return held, ready


def attribute(p: dict[str, Any], c: dict[str, Any], needs: dict[float, tuple[int, int]]) -> dict[str, float]:
    """Replica-seconds by cause (module docstring); needs keyed by the report's decision times."""
    out: dict[str, float] = defaultdict(float)
    times = [x["t_s"] for x in p["decisions"]]
    t = 0.0
    while t < p["end_s"]:
        hp, rp = _held(p, t)
        hc, rc = _held(c, t)
        x = p["decisions"][bisect.bisect_right(times, t) - 1]
        plan = x.get("plan") or {}
        e = hp - hc
        if e < 0:
            out["saved (predictive below the clairvoyant)"] += e * STEP_S
        elif e > 0:
            idle = min(e, max((hp - rp) - (hc - rc), 0))
            out["held, not serving (loading or draining)"] += idle * STEP_S
            e -= idle
            need, keep = plan.get("needed", x["desired"]), plan.get("keep", x["desired"])
            upper, mean = needs.get(x["t_s"], (need, need))
            need = max(need, upper)
            hold = min(e, max(0, keep - need, rp - max(need, rc)))
            if hold:
                reason = next(s["reason"] for s in x["stages"] if s["name"] == "scale-down")
                out[f"scale-down hold: {reason}"] += hold * STEP_S
                e -= hold
            margin = min(e, max(0, need - max(mean, rc)))
            out["the band's margin (need at upper above the need at the mean)"] += margin * STEP_S
            if e > margin:
                out["the sizing at the mean"] += (e - margin) * STEP_S
        t += STEP_S
    return out


def knock(what: str) -> None:
    """Knock one mechanism out of predictive (module docstring), by replacing its function here."""
    if what == "margin":
        forecast_at = lookahead.Lookahead.forecast_at

        def at_mean(self: lookahead.Lookahead, h: float) -> Any:
            mean, _ = forecast_at(self, h)
            return mean, mean

        lookahead.Lookahead.forecast_at = at_mean  # type: ignore[method-assign]
    elif what in ("recurrence", "hold"):
        keep = scaledown.keep

        def kept(have: int, need_now: int, need_ahead: int, *args: Any) -> scaledown.Keep:
            if what == "hold" and need_now < have:
                return scaledown.Keep(need_now, "ReleaseIdle", "released: rent or buy knocked out")
            history, now, recreate, *rest = args
            return keep(have, need_now, need_ahead, history, now, recreate, (), *rest[1:])

        scaledown.keep = kept  # type: ignore[assignment]
        if what == "hold":
            scaledownstage.RELEASE_MARGIN = -1.0  # type: ignore[misc]
    elif what != "none":
        raise SystemExit(f"unknown KNOCK {what!r}")


def main(case: str, out: str, what: str = "none") -> None:
    name, fmt, scale, scenario, extra = CASES[case]
    knock(what)
    scaledownstage.stage = _recording  # planner.py calls it through the module
    from infscale.cli import main as cli

    sys.argv = [
        "infscale", "replay", "compare", "--policies", "predictive,clairvoyant", "--trace",
        f"{TRACES}/{name}", "--format", fmt, "--rate-scale", scale, "--scenario", scenario, *extra,
        "--seed", "0", "--no-plots", "--quiet", "--out", out,
    ]  # fmt: skip
    with contextlib.suppress(SystemExit):
        cli()
    with open(f"{out}/report.json") as f:
        report = json.load(f)
    p, c = report["policies"]["predictive"], report["policies"]["clairvoyant"]
    # the policy's clock is the trace's epoch: the offset that matches the most decision times
    times = [x["t_s"] for x in p["decisions"]]
    first = min(_needs)
    offset = max((first - t for t in times[:40]), key=lambda o: sum(1 for t in times if t + o in _needs))
    needs = {t: _needs[t + offset] for t in times if t + offset in _needs}
    gpus = round(p["gpu_hours"] * 3600.0 / p["replica_seconds"]) if p["replica_seconds"] else 1
    rows = attribute(p, c, needs)
    print(
        f"predictive {p['slo_attainment']:.2%} {p['gpu_hours']:.2f} GPU-h, clairvoyant"
        f" {c['slo_attainment']:.2%} {c['gpu_hours']:.2f}: {p['gpu_hours'] - c['gpu_hours']:+.2f}"
        f" ({sum(rows.values()) * gpus / 3600.0:+.2f} in {STEP_S:g} s steps)"
    )
    scored = [v for t, v in needs.items() if t >= 0.0]
    above = sum(1 for upper, mean in scored if upper > mean)
    print(f"decisions whose need at the upper is above the need at the mean: {above} of {len(scored)}")
    for k, v in sorted(rows.items(), key=lambda kv: -abs(kv[1])):
        print(f"| {k} | {v * gpus / 3600.0:+.2f} |")


if __name__ == "__main__":
    main(*sys.argv[1:4])
