"""Replay reports: report.json (schema below) and a Markdown summary; the plots are replay/plots.py.

Sits at the end of the pipeline: it reads RunResults (replay/simulate.py) and never simulates.

report.json, schema "infscale.replay.report/v2" (times in seconds, NaN written as null):

    {
      "schema": "infscale.replay.report/v2",
      "trace": {"name": str, "requests": int, "duration_s": float},
      "scenario": {...every Scenario field, engine, cold_start and slo nested...},
      "seed": int | null,
      "wall_seconds": float,                      # all policies, simulation only
      "simulated_requests_per_second": float,     # requests x policies / wall_seconds
      "simulated_seconds_per_wall_second": float,
      "policies": {
        "<policy>": {
          "slo_attainment": float,                # share of ALL requests that are good: TTFT and TPOT met
          "ttft_attainment", "tpot_attainment": float,   # share of ALL requests meeting each target
          "ttft_p50_s", "ttft_p95_s", "ttft_p99_s": float,
          "tpot_p50_s", "tpot_p95_s", "tpot_p99_s": float,   # requests with 2+ output tokens
          "queue_wait_p50_s", "queue_wait_p95_s", "queue_wait_p99_s": float,
          "e2e_p50_s", "e2e_p99_s": float,
          "goodput_rps": float,                   # good requests / the trace's arrival span
          "goodput_per_gpu_hour": float,          # good requests / gpu_hours
          "gpu_hours": float,                     # GPUs held, scheduling to deletion (loading included)
          "replica_seconds": float,               # replicas existing, request to deletion
          "mean_ready_replicas": float,
          "scale_events": int,                    # times the desired count changed
          "cold_starts": int,                     # replicas started during the run
          "requests_total", "requests_finished", "requests_dropped": int,
          "requests_unfinished": int,             # still served when the run was cut (not good), below
          "preemptions": int,                     # KV preemptions (recompute) in the engines
          "prefix_cache_hit_rate": float | null,  # null: the scenario models no prefix cache
          "end_s": float,                         # when the last request finished
          "warmup_s": float,                      # warm-up played before t = 0 (replay/warmup.py;
                                                  # its decisions, timeline and replicas at t < 0)
          "wall_seconds": float, "simulated_requests_per_second": float,
          "timeline": [{"t_s", "desired", "ready", "starting", "draining", "arrivals_per_s", "inflight"}],
          "replicas": [{"id", "requested_s", "scheduled_s", "ready_s", "drain_s", "deleted_s", "cold"}],
          "ttft_over_time": [{"t_s", "requests", "ttft_p99_s"}],  # per minute of arrival, finished requests
          "decisions": [{                         # every decision of a decide() policy (hpa, keda,
            "t_s", "current", "desired",          # predictive; [] for the others): replay/decisions.py
            "stages": [{"name", "before", "after", "reason", "message"}],
            "lead_time_s": float,
            "plan": {                             # the predictive stages, when they ran
              "demand_now": {"requests_per_s", "prompt_tokens_per_s", "output_tokens_per_s"},
              "forecast": {...the same three, "upper": {...}, "band": float},   # at the horizon
              "horizon_s": float,                 # the marginal replica's ready time
              "capacity_per_replica": {"prefill_tokens_per_s", "decode_tokens_per_s",
                                       "requests_per_s", "binding", "utilization", "speed"},
              "needed", "keep", "start_now": int, "panic": bool}}]
        }
      }
    }

Verdicts per request are replay/slo.py's (scenario.slo): dropped requests miss both targets, a
1-token output meets any TPOT target. Percentiles are over finished requests. A run still serving
requests an hour after the trace's end (simulate's max_tail_s: a policy that never serves them, a
fleet the engine livelocks) is cut there: `requests_unfinished` counts those requests (total =
finished + dropped + unfinished), each a miss of both targets, and end_s is the cut. v2 (from v1):
slo_attainment now needs TPOT as well as TTFT; scenario.slo_ttft_s became scenario.slo; the
attainment, TPOT, goodput, preemption and prefix-cache keys are new. Keys are only ever added
within a schema version.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from replay.cells import ms
from replay.decisions import decisions_json
from replay.simulate import RunResult
from replay.slo import judge
from replay.trace import Trace

SCHEMA = "infscale.replay.report/v2"
Doc = TypeVar("Doc", bound=Mapping[str, Any])  # a report document, as each command shapes it


def policy_summary(result: RunResult) -> dict[str, Any]:
    """The headline numbers of one run (no timeline)."""
    req = result.requests
    arrival = result.arrival_s
    v = judge(
        result.scenario.slo,
        arrival,
        req.first_token_s,
        req.finished_s,
        result.input_tokens,
        result.output_tokens,
    )
    wait = req.admitted_s - arrival
    e2e = req.finished_s - arrival
    total = len(arrival)
    finished = int(np.isfinite(req.finished_s).sum())
    good = int(np.count_nonzero(v.good))
    duration = max(result.end_s, 1e-9)
    # the offered load's window, the same for every policy on the trace (the drain tail is not)
    span = float(arrival.max() - arrival.min()) if total else 0.0
    span = span if span > 0 else duration
    gpu_hours = result.gpu_seconds / 3600.0
    ready_seconds = _ready_seconds(result)
    return {
        "slo_attainment": good / total if total else 1.0,
        "ttft_attainment": int(np.count_nonzero(v.ttft_met)) / total if total else 1.0,
        "tpot_attainment": int(np.count_nonzero(v.tpot_met)) / total if total else 1.0,
        **_percentiles("ttft", v.ttft_s, (50, 95, 99)),
        **_percentiles("tpot", v.tpot_s, (50, 95, 99)),
        **_percentiles("queue_wait", wait, (50, 95, 99)),
        **_percentiles("e2e", e2e, (50, 99)),
        "goodput_rps": good / span,
        "goodput_per_gpu_hour": good / gpu_hours if gpu_hours > 0 else math.nan,
        "gpu_hours": gpu_hours,
        "replica_seconds": result.replica_seconds,
        "mean_ready_replicas": ready_seconds / duration,
        "scale_events": result.scale_events,
        "cold_starts": result.cold_starts,
        "requests_total": total,
        "requests_finished": finished,
        "requests_dropped": int(req.dropped.sum()),
        "requests_unfinished": result.unfinished,
        "preemptions": int(req.preemptions.sum()),
        "prefix_cache_hit_rate": _prefix_hit_rate(result),
        "end_s": result.end_s,
        "warmup_s": result.warmup_s,
        "wall_seconds": result.wall_seconds,
        "simulated_requests_per_second": total / result.wall_seconds if result.wall_seconds > 0 else math.inf,
    }


def _prefix_hit_rate(result: RunResult) -> float:
    """Prompt tokens served from the prefix cache over the prompt tokens of admitted requests
    (NaN when the scenario has no prefix cache; 0 on a trace without prefix block ids)."""
    if not result.scenario.engine.prefix_caching:
        return math.nan
    req = result.requests
    admitted = np.isfinite(req.admitted_s)
    prompts = float(result.input_tokens[admitted].sum())
    return float(req.prefix_hit_tokens[admitted].sum()) / prompts if prompts > 0 else math.nan


def policy_report(result: RunResult) -> dict[str, Any]:
    return {
        **policy_summary(result),
        "timeline": [asdict(p) for p in result.timeline],
        "replicas": [asdict(r) for r in result.replicas],
        "ttft_over_time": ttft_over_time(result),
        "decisions": decisions_json(result.decisions),
    }


TTFT_BIN_S = 60.0


def ttft_over_time(result: RunResult, bin_s: float = TTFT_BIN_S) -> list[dict[str, Any]]:
    """TTFT p99 per minute of arrival, over the requests that got a first token (as the report's
    percentiles): [{"t_s", "requests", "ttft_p99_s"}], t_s the bin's start."""
    arrival = result.arrival_s
    ttft = result.requests.first_token_s - arrival
    done = np.isfinite(ttft)
    bins = np.floor(arrival[done] / bin_s).astype(np.int64)
    values = ttft[done]
    if not len(bins):
        return []
    order = np.argsort(bins, kind="stable")
    bins, values = bins[order], values[order]
    starts = np.flatnonzero(np.r_[True, bins[1:] != bins[:-1]])
    ends = np.r_[starts[1:], len(bins)]
    return [
        {
            "t_s": float(bins[a] * bin_s),
            "requests": int(b - a),
            "ttft_p99_s": float(np.percentile(values[a:b], 99)),
        }
        for a, b in zip(starts, ends, strict=True)
    ]


def build_report(trace: Trace, results: Sequence[RunResult], *, seed: int | None) -> dict[str, Any]:
    if not results:
        raise ValueError("a report needs at least one run")
    wall = sum(r.wall_seconds for r in results)
    simulated = sum(r.end_s for r in results)
    scenario = results[0].scenario
    return {
        "schema": SCHEMA,
        "trace": {"name": trace.name, "requests": len(trace), "duration_s": trace.duration_s},
        "scenario": asdict(scenario),
        "seed": seed,
        "wall_seconds": wall,
        "simulated_requests_per_second": len(trace) * len(results) / wall if wall > 0 else math.inf,
        "simulated_seconds_per_wall_second": simulated / wall if wall > 0 else math.inf,
        "policies": {r.policy: policy_report(r) for r in results},
    }


def to_json(report: Mapping[str, Any]) -> str:
    return json.dumps(_nulls(report), indent=1, allow_nan=False)


def markdown(report: Mapping[str, Any]) -> str:
    sc = report["scenario"]
    lines = [
        f"# Replay: {report['trace']['name']} on {sc['name']}",
        "",
        f"{report['trace']['requests']:,} requests over {report['trace']['duration_s'] / 3600:.2f} h; "
        f"SLO {slo_text(sc)} (a request is good when it meets both). "
        f"Simulated {report['simulated_requests_per_second']:,.0f} "
        f"requests/s, {report['simulated_seconds_per_wall_second']:,.0f}x real time.",
        "",
        "| policy | SLO met | TTFT met | TPOT met | TTFT p50 | p99 | TPOT p50 | p99 | good/GPU-h | GPU-hours "
        "| scale events | cold starts | dropped |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, p in report["policies"].items():
        lines.append(
            f"| {name} | {percent(p['slo_attainment'], 2)} | {percent(p['ttft_attainment'], 2)} | "
            f"{percent(p['tpot_attainment'], 2)} | {_s(p['ttft_p50_s'])} | {_s(p['ttft_p99_s'])} | "
            f"{ms(p['tpot_p50_s'])} | {ms(p['tpot_p99_s'])} | "
            f"{_n(p['goodput_per_gpu_hour'])} | {p['gpu_hours']:.1f} | "
            f"{p['scale_events']} | {p['cold_starts']} | {p['requests_dropped']} |"
        )
    lines += [
        "",
        "GPU-hours count every replica's GPUs from scheduling to deletion, loading included; "
        "good/GPU-h is good requests per GPU-hour.",
        "",
    ]
    for name, p in report["policies"].items():
        if p.get("requests_unfinished"):
            lines += [
                f"**{name}: {p['requests_unfinished']:,} requests unfinished** when the run was cut at "
                f"{p['end_s']:,.0f} s, long after the trace ended (counted as not good).",
                "",
            ]
    return "\n".join(lines)


def slo_text(scenario: Mapping[str, Any]) -> str:
    """The scenario's SLO in words, from its report.json form (`scenario.slo`)."""
    slo = scenario["slo"]
    ttft = f"TTFT <= {slo['ttft_s']:g} s"
    if slo.get("ttft_tokens_per_s") is not None:
        ttft += f" + prompt / {slo['ttft_tokens_per_s']:g} tokens/s"
    return ttft if slo.get("tpot_s") is None else f"{ttft}, TPOT <= {slo['tpot_s'] * 1000:g} ms"


def write_documents(out: Path, name: str, doc: Doc, render: Callable[[Doc], str]) -> list[Path]:
    """`out`/name.json (the document as to_json writes it) and `out`/name.md (render(doc)), the
    folder made first: what every command's report starts with (report, league, calibrate)."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / f"{name}.json", out / f"{name}.md"]
    written[0].write_text(to_json(doc) + "\n", encoding="utf-8")
    written[1].write_text(render(doc), encoding="utf-8")
    return written


def write_report(out: Path, report: Mapping[str, Any], *, plots: bool = True) -> list[Path]:
    written = write_documents(out, "report", report, markdown)
    if plots:
        from replay import plots as figures  # matplotlib is imported only when plots are drawn

        written += figures.draw_all(out, report)
    from replay.html import write_html

    title = f"Replay: {report['trace']['name']} on {report['scenario']['name']}"
    written.append(write_html(out / "report.html", title, report, [p for p in written if p.suffix == ".png"]))
    return written


def pareto_front(points: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Points no other point beats on both cost (lower GPU-hours) and SLO attainment, by cost."""
    front: list[Mapping[str, Any]] = []
    best = -math.inf
    for p in sorted(points, key=lambda p: (p["gpu_hours"], -p["slo_attainment"])):
        if p["slo_attainment"] > best:
            front.append(p)
            best = p["slo_attainment"]
    return front


# --- helpers -------------------------------------------------------------------------------------


def _percentiles(prefix: str, values: np.ndarray[Any, Any], qs: tuple[int, ...]) -> dict[str, float]:
    done = values[np.isfinite(values)]
    if not len(done):
        return {f"{prefix}_p{q}_s": math.nan for q in qs}
    got = np.percentile(done, qs)
    return {f"{prefix}_p{q}_s": float(v) for q, v in zip(qs, got, strict=True)}


def _ready_seconds(result: RunResult) -> float:
    total = 0.0
    for r in result.replicas:
        if math.isnan(r.ready_s):
            continue
        stop = r.drain_s if not math.isnan(r.drain_s) else r.deleted_s
        stop = result.end_s if math.isnan(stop) else stop
        total += max(0.0, stop - max(r.ready_s, 0.0))  # the warm-up's (t < 0) is not the trace's
    return total


def percent(share: float, digits: int = 1) -> str:
    """A share as a percentage that never rounds up to 100 % (99.95 % is "99.9%", not "100.0%"):
    an SLO missed by one request in 2,000 must not read as met."""
    if math.isnan(share):
        return "n/a"
    text = f"{share * 100:.{digits}f}"
    if share < 1.0 and float(text) >= 100.0:
        text = f"{math.floor(share * 100 * 10**digits) / 10**digits:.{digits}f}"
    return text + "%"


def _s(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f} s"


def _n(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:,.0f}"


def _nulls(x: Any) -> Any:
    if isinstance(x, float):
        return None if not math.isfinite(x) else x
    if isinstance(x, Mapping):
        return {str(k): _nulls(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_nulls(v) for v in x]
    if isinstance(x, frozenset | set):
        return sorted(_nulls(v) for v in x)
    return x
