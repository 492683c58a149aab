"""`infscale replay calibrate`: an online run (replay/online/) against the offline simulation of the
same requests, and an engine profile fitted from what was measured.

    infscale replay calibrate --online online-out/ --profile fast-test --out calib/
    infscale replay calibrate --online online-out/ --fit --out calib/   # + calib/fitted-profile.yaml

Reads ONLINE/requests.jsonl and ONLINE/report.json, simulates the same requests (scheduled times,
prompt and output lengths as sent) on a static fleet of as many replicas as there were endpoints,
with the given engine profile, and writes OUT/calibrate.json (schema infscale.replay.calibrate/v2),
OUT/calibrate.md and OUT/calibrate.png (TTFT and e2e side by side).

The fit (`fit_profile`) finds the step-time coefficients (EngineProfile.step_s: base, per prefill
token, per attention pair, per decoding request, per context token) and a fixed per-request
overhead (HTTP, tokenization: added to TTFT and e2e) that make the offline engine reproduce every
request's measured TTFT and end-to-end latency: damped Gauss-Newton (Levenberg-Marquardt) on the
log of each coefficient, each evaluation one exact simulation of the run (each request on the
endpoint it was sent to). A coefficient the run cannot tell (no long prompts: the attention term;
one context length: the context term) keeps the base profile's value. The scheduler's limits
(max_num_seqs, token budget, KV) are not identifiable from latencies and keep the base's values.
Fit from a run well below saturation: queueing inside a real engine is where models differ most.
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
import yaml

from replay.online.records import RequestRecord, Status, in_schedule_order, read_records, trace_of
from replay.profiles import EngineProfile, ProfileError, Scenario, get_scenario
from replay.scheduler import reference_run
from replay.simulate import RunResult

SCHEMA = "infscale.replay.calibrate/v2"
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


class FitError(ValueError):
    """Too little of the right data to fit a profile; the message says what to change."""


# --- offline twin --------------------------------------------------------------------------------


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


# --- fitting -------------------------------------------------------------------------------------


FIT_FIELDS = ("step_base_s", "prefill_token_s", "prefill_attention_s", "decode_request_s", "decode_context_s")


@dataclass(frozen=True, slots=True)
class Fit:
    profile: EngineProfile
    overhead_s: float  # fixed time per request outside the engine model (HTTP, tokenization)
    requests: int
    fitted: tuple[str, ...]  # the coefficients the run determined; the others kept the base's value
    rms_s: float  # residual of the per-request TTFT and e2e


def fit_profile(records: Sequence[RequestRecord], base: EngineProfile, iterations: int = 10) -> Fit:
    ok = [r for r in records if r.status is Status.OK and r.generated_tokens >= 1]
    if not ok:
        raise FitError("no successful request to fit from")
    ep = np.array([r.endpoint for r in ok])
    sent = np.array([r.sent_s for r in ok])
    first = np.array([r.first_token_s for r in ok])
    fin = np.array([r.finished_s for r in ok])
    gen = np.array([r.generated_tokens for r in ok], dtype=np.int64)
    inp = np.array([r.input_tokens for r in ok], dtype=np.int64)
    if int((gen >= 3).sum()) < 3:
        raise FitError(
            f"need >= 3 requests with >= 3 generated tokens for the decode fit, got {int((gen >= 3).sum())}"
        )
    idle = _idle_at_send(ep, sent, fin)
    if idle.sum() < 3:  # a run that never drains is one long queue: fit from a lighter one
        raise FitError(
            f"need >= 3 requests sent to an idle endpoint, got {int(idle.sum())}: replay at a lower "
            "rate (--speedup < 1 or --rate-scale < 1)"
        )
    order = np.argsort(sent, kind="stable")
    sent, first, fin, gen, inp, ep = sent[order], first[order], fin[order], gen[order], inp[order], ep[order]
    observed = np.concatenate((first - sent, fin - sent))
    profile = base
    theta = np.array([getattr(base, f) for f in FIT_FIELDS])
    overhead, live = 0.0, np.ones(len(FIT_FIELDS), dtype=bool)
    for _ in range(iterations):
        # every request's latencies as sums of the steps they spanned, with the step compositions of
        # a run at the current estimate: linear in the coefficients (the step time is)
        features = _latency_features(profile, sent, inp, gen, ep)
        design = np.column_stack((features, np.ones(len(observed))))
        norms = np.linalg.norm(design, axis=0)
        live = norms[:-1] > 1e-9 * norms[-1]
        keep = np.append(live, True)
        fixed = features[:, ~live] @ theta[~live]
        solution, *_ = np.linalg.lstsq(design[:, keep] / norms[keep], observed - fixed, rcond=None)
        solution = solution / norms[keep]
        new = theta.copy()
        new[live] = np.maximum(solution[:-1], 0.0)
        overhead = float(solution[-1])
        done = bool(np.allclose(new, theta, rtol=1e-3, atol=0))
        theta = new
        try:
            profile = _with(base, theta)
        except ProfileError as e:
            raise FitError(f"fitted values out of range: {e}") from e
        if done:
            break
    residual = _latency_features(profile, sent, inp, gen, ep) @ theta + overhead - observed
    fitted = tuple(f for f, keep in zip(FIT_FIELDS, live, strict=True) if keep)
    return Fit(profile, overhead, len(ok), fitted, float(np.sqrt(np.mean(residual**2))))


def _latency_features(profile: EngineProfile, sent: F64, inp: I64, gen: I64, ep: I64) -> F64:
    """Per request (TTFT rows, then e2e rows): the steps of its endpoint from its send to its first
    token (to its end), summed as (1, prefill tokens, attention pairs, decodes, context tokens); the
    step in progress when it arrived counts for the part of it the request waited."""
    steps: list[list[tuple[float, float, int, int, int, int]]] = [[] for _ in range(int(ep.max()) + 1)]
    run = reference_run(
        profile,
        (sent - sent[0]).tolist(),
        inp.tolist(),
        gen.tolist(),
        replicas=len(steps),
        targets=ep.tolist(),
        on_step=lambda k, s: steps[k].append(
            (s.start_s, s.end_s, s.prefill_tokens, s.attention_pairs, s.decode_requests, s.context_tokens)
        ),
    )
    arrival = sent - sent[0]
    out = np.zeros((2 * len(sent), len(FIT_FIELDS)))
    for k, rows in enumerate(steps):
        mine = np.flatnonzero(ep == k)
        if not rows or not len(mine):
            continue
        table = np.array(rows, dtype=np.float64)  # in time order
        start, end = table[:, 0], table[:, 1]
        feats = np.column_stack((np.ones(len(table)), table[:, 2:6]))
        cum = np.vstack((np.zeros(feats.shape[1]), np.cumsum(feats, axis=0)))
        lo = np.searchsorted(end, arrival[mine], side="right")  # the step in progress (or next)
        wait = np.clip((end[lo] - arrival[mine]) / (end[lo] - start[lo]), 0.0, 1.0)
        for offset, until in (
            (0, np.asarray(run.first_token_s)[mine]),
            (len(sent), np.asarray(run.finished_s)[mine]),
        ):
            hi = np.searchsorted(start, until, side="left")  # steps that started before it
            out[offset + mine] = cum[hi] - cum[lo + 1] + wait[:, None] * feats[lo]
    return out


def _idle_at_send(ep: F64, sent: F64, fin: F64) -> npt.NDArray[np.bool_]:
    """Requests sent while nothing else was in flight on their endpoint."""
    out = np.zeros(len(ep), dtype=bool)
    for i in range(len(ep)):
        same = ep == ep[i]
        others = int(np.count_nonzero((sent[same] <= sent[i]) & (fin[same] > sent[i]))) - 1
        out[i] = others == 0
    return out


def _with(base: EngineProfile, theta: F64) -> EngineProfile:
    values: dict[str, Any] = {f: float(v) for f, v in zip(FIT_FIELDS, theta, strict=True)}
    return replace(base, **values)


def fitted_yaml(fit: Fit, name: str) -> str:
    doc = {"base": "reference-70b", "name": name, "engine": asdict(fit.profile)}
    return (
        f"# fitted by `infscale replay calibrate --fit` from {fit.requests} requests "
        f"({', '.join(fit.fitted)}; the rest kept); fixed overhead {fit.overhead_s * 1000:.1f} ms "
        "per request is outside the engine model\n" + yaml.safe_dump(doc, sort_keys=False)
    )


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
    from replay.report import to_json

    args.out.mkdir(parents=True, exist_ok=True)
    written = [args.out / "calibrate.json", args.out / "calibrate.md"]
    written[0].write_text(to_json(doc) + "\n", encoding="utf-8")
    written[1].write_text(markdown(doc), encoding="utf-8")
    if not args.no_plots:
        written.append(plot(args.out / "calibrate.png", paired, f"{args.online} vs offline {name}"))
    if fit is not None:
        path = args.out / "fitted-profile.yaml"
        path.write_text(fitted_yaml(fit, f"fitted-{name}"), encoding="utf-8")
        written.append(path)
    return written
