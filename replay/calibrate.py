"""`infscale replay calibrate`: an online run (replay/online/) against the offline simulation of the
same requests, and an engine profile fitted from what was measured.

    infscale replay calibrate --online online-out/ --profile fast-test --out calib/
    infscale replay calibrate --online online-out/ --fit --out calib/   # + calib/fitted-profile.yaml

Reads ONLINE/requests.jsonl and ONLINE/report.json, simulates the same requests (scheduled times,
prompt and output lengths as sent) on a static fleet of as many replicas as there were endpoints,
with the given engine profile, and writes OUT/calibrate.json (schema infscale.replay.calibrate/v2),
OUT/calibrate.md and OUT/calibrate.png (TTFT and e2e side by side).

The fit itself is replay/profilefit.py.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from replay.online.records import RequestRecord, Status, in_schedule_order, read_records, trace_of
from replay.profilefit import FIT_FIELDS, Fit, fit_profile, fitted_yaml
from replay.profiles import Scenario
from replay.scenariofile import get_scenario
from replay.simulate import RunResult

SCHEMA = "infscale.replay.calibrate/v2"
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def simulate_offline(records: Sequence[RequestRecord], scenario: Scenario, endpoints: int) -> RunResult:
    """The offline replay of exactly the requests that were sent, on `endpoints` always-ready replicas."""
    from replay.cli import run_policy
    from replay.policies import PolicyParams

    sent = _sent(records)
    if not sent:
        raise ValueError("no request was sent in the online run: nothing to compare")
    trace = trace_of(sent, "online-slice")
    scenario = replace(
        scenario,
        initial_replicas=endpoints,
        min_replicas=1,
        max_replicas=max(endpoints, scenario.max_replicas),
    )
    return run_policy(trace, scenario, f"static-{endpoints}", PolicyParams())


@dataclass(frozen=True, slots=True)
class Paired:
    """Per request present in both runs (online OK, offline finished), in trace order."""

    index: npt.NDArray[np.int64]
    ttft_online: F64
    ttft_offline: F64
    e2e_online: F64
    e2e_offline: F64


def _sent(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    """The requests the online run sent, in the order of the offline twin's trace (`trace_of`)."""
    return in_schedule_order(r for r in records if r.status is not Status.NOT_SENT)


def pair(records: Sequence[RequestRecord], offline: RunResult) -> Paired:
    """Online and offline latencies side by side: the k-th request sent is the twin's k-th request."""
    sent = _sent(records)
    req = offline.requests
    ttft_off = req.first_token_s - offline.arrival_s
    e2e_off = req.finished_s - offline.arrival_s
    keep = [
        k
        for k, r in enumerate(sent)
        if r.status is Status.OK and math.isfinite(ttft_off[k]) and math.isfinite(e2e_off[k])
    ]
    return Paired(
        index=np.array([sent[k].index for k in keep], dtype=np.int64),
        ttft_online=np.array([sent[k].ttft_s for k in keep]),
        ttft_offline=ttft_off[keep],
        e2e_online=np.array([sent[k].e2e_s for k in keep]),
        e2e_offline=e2e_off[keep],
    )


def compare(p: Paired) -> dict[str, Any]:
    """Per metric: online, offline, difference (online - offline) and relative difference; and the
    per-request absolute differences."""
    if not len(p.index):
        raise ValueError("no request finished in both the online run and the simulation")
    metrics: dict[str, dict[str, float]] = {}
    for name, on, off in (("ttft", p.ttft_online, p.ttft_offline), ("e2e", p.e2e_online, p.e2e_offline)):
        for q in (50, 95, 99):
            metrics[f"{name}_p{q}_s"] = _row(float(np.percentile(on, q)), float(np.percentile(off, q)))
        metrics[f"{name}_mean_s"] = _row(float(on.mean()), float(off.mean()))
    d_ttft = np.abs(p.ttft_online - p.ttft_offline)
    d_e2e = np.abs(p.e2e_online - p.e2e_offline)
    return {
        "requests_compared": len(p.index),
        "metrics": metrics,
        "per_request": {
            "ttft_abs_diff_p50_s": float(np.percentile(d_ttft, 50)),
            "ttft_abs_diff_p95_s": float(np.percentile(d_ttft, 95)),
            "ttft_abs_diff_max_s": float(d_ttft.max()),
            "e2e_abs_diff_p50_s": float(np.percentile(d_e2e, 50)),
            "e2e_abs_diff_p95_s": float(np.percentile(d_e2e, 95)),
            "e2e_abs_diff_max_s": float(d_e2e.max()),
        },
    }


def _row(online: float, offline: float) -> dict[str, float]:
    diff = online - offline
    return {
        "online": online,
        "offline": offline,
        "diff": diff,
        "rel_diff": diff / offline if offline > 0 else math.nan,
    }


# --- report --------------------------------------------------------------------------------------


def plot(path: Path, p: Paired, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for ax, name, on, off in (
        (axes[0], "TTFT", p.ttft_online, p.ttft_offline),
        (axes[1], "e2e latency", p.e2e_online, p.e2e_offline),
    ):
        for values, label, color in ((on, "online", "tab:blue"), (off, "offline", "tab:orange")):
            xs = np.sort(values)
            ax.step(xs, np.arange(1, len(xs) + 1) / len(xs), where="post", label=label, color=color)
        ax.set_xlabel(f"{name} (s)")
        ax.set_ylabel("share of requests")
        ax.set_title(f"{name}: CDF")
        ax.legend(fontsize=8)
    ax = axes[2]
    ax.scatter(p.ttft_offline, p.ttft_online, s=6)
    hi = float(max(p.ttft_offline.max(), p.ttft_online.max()))
    ax.plot([0, hi], [0, hi], color="0.5", lw=0.8)
    ax.set_xlabel("offline TTFT (s)")
    ax.set_ylabel("online TTFT (s)")
    ax.set_title("TTFT per request")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        f"# Calibration: {doc['online_dir']} against the offline engine `{doc['profile_name']}`",
        "",
        f"{doc['requests_compared']} requests in both runs, {doc['endpoints']} endpoint(s).",
        "",
        "| metric | online | offline | online - offline | relative |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in doc["metrics"].items():
        lines.append(
            f"| {name} | {row['online']:.4f} | {row['offline']:.4f} | {row['diff']:+.4f} "
            f"| {row['rel_diff']:+.1%} |"
        )
    pr = doc["per_request"]
    lines += [
        "",
        f"Per request |TTFT online - offline|: p50 {pr['ttft_abs_diff_p50_s'] * 1000:.1f} ms, "
        f"p95 {pr['ttft_abs_diff_p95_s'] * 1000:.1f} ms; "
        f"|e2e|: p50 {pr['e2e_abs_diff_p50_s'] * 1000:.1f} ms, "
        f"p95 {pr['e2e_abs_diff_p95_s'] * 1000:.1f} ms.",
    ]
    if "fit" in doc:
        f = doc["fit"]
        lines += [
            "",
            "Fitted engine profile: " + ", ".join(f"{k} {f['engine'][k]:g}" for k in FIT_FIELDS) + ".",
            f"Fitted from the run: {', '.join(f['fitted'])}. Fixed overhead per request "
            f"{f['overhead_s'] * 1000:.1f} ms; residual {f['rms_s'] * 1000:.2f} ms per latency.",
        ]
    return "\n".join(lines) + "\n"


def calibrate(
    online_dir: Path, scenario: Scenario, profile_name: str, *, fit: bool
) -> tuple[dict[str, Any], Paired, Fit | None]:
    records = read_records(online_dir / "requests.jsonl")
    endpoints = _endpoints(online_dir, records)
    offline = simulate_offline(records, scenario, endpoints)
    paired = pair(records, offline)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "online_dir": str(online_dir),
        "profile_name": profile_name,
        "engine": asdict(scenario.engine),
        "endpoints": endpoints,
        **compare(paired),
    }
    result = None
    if fit:
        result = fit_profile(records, scenario.engine)
        doc["fit"] = {
            "engine": asdict(result.profile),
            "overhead_s": result.overhead_s,
            "requests": result.requests,
            "fitted": list(result.fitted),
            "rms_s": result.rms_s,
        }
    return doc, paired, result


def _endpoints(online_dir: Path, records: Sequence[RequestRecord]) -> int:
    report = online_dir / "report.json"
    if report.is_file():
        try:
            return len(json.loads(report.read_text(encoding="utf-8"))["online"]["endpoints"])
        except (KeyError, TypeError, json.JSONDecodeError) as e:
            raise ValueError(f"{report}: not an online report (no online.endpoints): {e}") from e
    return max(r.endpoint for r in records) + 1


CALIBRATE_FILES = ("calibrate.json", "calibrate.md", "calibrate.png", "fitted-profile.yaml")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--online", type=Path, required=True, help="directory of an `infscale replay online` run")
    p.add_argument("--scenario", default="reference-70b", help="scenario (SLO, engine) of the offline twin")
    p.add_argument("--profile", default=None, help="engine profile (default: the scenario's engine)")
    p.add_argument("--fit", action="store_true", help="also fit an engine profile (OUT/fitted-profile.yaml)")
    p.add_argument("--out", type=Path, default=Path("calibrate-out"), help="output directory")
    p.add_argument("--no-plots", action="store_true", help="skip calibrate.png")


def run(args: argparse.Namespace) -> int:
    from replay.emulate.profiles import get_engine_profile
    from replay.outdir import check_out_dir, write_error

    try:
        check_out_dir(args.out, files=CALIBRATE_FILES)
        scenario = get_scenario(args.scenario)
        name = args.profile or scenario.name
        if args.profile is not None:
            scenario = replace(scenario, engine=get_engine_profile(args.profile))
        doc, paired, fit = calibrate(args.online, scenario, name, fit=args.fit)
    except (ValueError, OSError) as e:  # ProfileError, FitError are ValueErrors
        print(f"infscale replay calibrate: error: {e}", file=sys.stderr)
        return 2
    try:
        written = _write(args, doc, paired, fit, name)
    except OSError as e:
        print(f"infscale replay calibrate: error: {write_error(e)}", file=sys.stderr)
        return 1
    if getattr(args, "output", "text") == "json":
        from replay.report import to_json

        print(to_json(doc))
        print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
        return 0
    print(markdown(doc))
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _write(
    args: argparse.Namespace, doc: dict[str, Any], paired: Paired, fit: Fit | None, name: str
) -> list[Path]:
    from replay.report import write_documents

    written = write_documents(args.out, "calibrate", doc, markdown)
    if not args.no_plots:
        written.append(plot(args.out / "calibrate.png", paired, f"{args.online} vs offline {name}"))
    if fit is not None:
        path = args.out / "fitted-profile.yaml"
        path.write_text(fitted_yaml(fit, f"fitted-{name}"), encoding="utf-8")
        written.append(path)
    return written
