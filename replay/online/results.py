"""An online run in the offline report's shape (replay/report.py, policy name `online`), and what
only an online run has: the endpoints, the send lag, and vLLM's benchmark_serving metrics."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from replay.engine import RequestResults
from replay.online.records import OnlineResult, Status
from replay.profiles import Scenario
from replay.simulate import ReplicaSpan, RunResult, TimelinePoint
from replay.trace import Trace

POLICY = "online"


# --- results in the offline report's shape --------------------------------------------------------


def to_run_result(
    result: OnlineResult,
    trace_name: str,
    scenario: Scenario,
    period_s: float = 1.0,
    *,
    gpus_per_endpoint: int | None = None,
) -> RunResult:
    """The online run as a RunResult, so replay/report.py writes it in the offline schema.

    Per request: arrival = when it was sent, first token and finish as measured, dropped = not
    completed; no admission time is visible from outside (queue-wait percentiles are null). The fleet
    is the endpoints, ready for the whole run: GPU-hours count `gpus_per_endpoint` per endpoint,
    and are unknown (NaN, null in report.json) without it: the endpoints' GPUs are not visible."""
    recs = result.records
    n_ep = len(result.config.endpoints)
    ok = np.array([r.status is Status.OK for r in recs], dtype=bool)
    sent = np.array([r.sent_s if math.isfinite(r.sent_s) else r.scheduled_s for r in recs])
    first = np.array([r.first_token_s for r in recs])
    finished = np.array([r.finished_s for r in recs])
    first[~ok] = math.nan
    finished[~ok] = math.nan
    requests = RequestResults(
        replica=np.array([r.endpoint for r in recs], dtype=np.int64),
        admitted_s=np.full(len(recs), math.nan),
        first_token_s=first,
        finished_s=finished,
        dropped=~ok,
        preemptions=np.zeros(len(recs), dtype=np.int64),  # not observable from the client
        prefix_hit_tokens=np.zeros(len(recs), dtype=np.int64),
    )
    # the run's own length (until its last finish, or until --max-duration-s cancelled what was in
    # flight): the trace times of requests never sent do not extend it
    last = max((t for r in recs for t in (r.sent_s, r.finished_s) if math.isfinite(t)), default=0.0)
    end_s = max(last, result.wall_seconds)
    timeline = timeline_of(sent, finished, n_ep, period_s, end_s)
    replicas = tuple(ReplicaSpan(e, 0.0, 0.0, 0.0, math.nan, end_s, False) for e in range(n_ep))
    gpus = math.nan if gpus_per_endpoint is None else gpus_per_endpoint
    return RunResult(
        policy=POLICY,
        scenario=scenario,
        trace_name=trace_name,
        arrival_s=sent,
        input_tokens=np.array([r.input_tokens for r in recs], dtype=np.int64),
        # what came back (TPOT divides by it), the asked count where nothing did
        output_tokens=np.array(
            [r.generated_tokens if r.generated_tokens > 0 else r.output_tokens for r in recs], dtype=np.int64
        ),
        requests=requests,
        timeline=timeline,
        replicas=replicas,
        end_s=end_s,
        gpu_seconds=n_ep * gpus * end_s,
        replica_seconds=n_ep * end_s,
        scale_events=0,
        cold_starts=0,
        wall_seconds=result.wall_seconds,
    )


def timeline_of(
    sent: np.ndarray[Any, Any], finished: np.ndarray[Any, Any], replicas: int, period_s: float, end_s: float
) -> tuple[TimelinePoint, ...]:
    """Every period: arrivals per second over the last period and requests in flight (sent, not done;
    a failed request counts as done when sent)."""
    done = np.where(np.isfinite(finished), finished, sent)
    s_sorted, d_sorted = np.sort(sent), np.sort(done)
    points = []
    steps = math.floor(end_s / period_s) + 1
    for k in range(steps):
        t = k * period_s
        started = int(np.searchsorted(s_sorted, t, side="right"))
        ended = int(np.searchsorted(d_sorted, t, side="right"))
        before = int(np.searchsorted(s_sorted, t - period_s, side="right"))
        rate = (started - before) / period_s if k > 0 else 0.0
        points.append(TimelinePoint(t, replicas, replicas, 0, 0, rate, started - ended))
    return tuple(points)


def online_section(result: OnlineResult) -> dict[str, Any]:
    """What only an online run has: the endpoints, the send lag, the failures by message."""
    recs = result.records
    sent = [r for r in recs if math.isfinite(r.sent_s)]
    lag = np.array([r.sent_s - r.scheduled_s for r in sent]) if sent else np.zeros(0)
    by_status = Counter(r.status.value for r in recs)
    errors = Counter(r.error for r in recs if r.error and r.status in (Status.ERROR, Status.TRANSPORT))
    ok = [r for r in recs if r.status is Status.OK]
    c = result.config
    return {
        "endpoints": list(c.endpoints),
        "model": result.model,
        "started_unix_s": result.started_unix_s,
        "api": c.api.value,
        "prompt": c.prompt.value,
        "speedup": c.speedup,
        "max_in_flight": c.max_in_flight,
        "max_duration_s": c.max_duration_s,
        "requests_by_status": dict(by_status),
        "errors": dict(errors.most_common(20)),
        "send_lag_p50_s": float(np.percentile(lag, 50)) if len(lag) else math.nan,
        "send_lag_p99_s": float(np.percentile(lag, 99)) if len(lag) else math.nan,
        "send_lag_max_s": float(lag.max()) if len(lag) else math.nan,
        "generated_tokens_short": sum(1 for r in ok if r.generated_tokens < r.output_tokens),
        "requests_per_endpoint": [sum(1 for r in sent if r.endpoint == e) for e in range(len(c.endpoints))],
    }


def serving_metrics(result: OnlineResult) -> dict[str, Any]:
    """What vLLM's benchmark_serving reports, by its definitions, over the completed requests:
    throughputs over the run's wall time; TTFT; TPOT = (e2e - TTFT) / (output tokens - 1) per
    request with more than one token; ITL = every gap between successive chunks with text; E2E.
    Latencies in milliseconds (mean, median, p99), as it prints them."""
    ok = [r for r in result.records if r.status is Status.OK]
    duration = result.wall_seconds
    inputs = sum(r.input_tokens for r in ok)
    outputs = sum(r.generated_tokens for r in ok)

    def stats(name: str, values: Sequence[float]) -> dict[str, float]:
        arr = np.asarray(values, dtype=float) * 1000.0
        if not len(arr):
            return {f"mean_{name}_ms": math.nan, f"median_{name}_ms": math.nan, f"p99_{name}_ms": math.nan}
        return {
            f"mean_{name}_ms": float(arr.mean()),
            f"median_{name}_ms": float(np.median(arr)),
            f"p99_{name}_ms": float(np.percentile(arr, 99)),
        }

    tpot = [(r.e2e_s - r.ttft_s) / (r.generated_tokens - 1) for r in ok if r.generated_tokens > 1]
    return {
        "completed": len(ok),
        "duration_s": duration,
        "total_input_tokens": inputs,
        "total_output_tokens": outputs,
        "request_throughput": len(ok) / duration if duration > 0 else math.nan,
        "output_throughput": outputs / duration if duration > 0 else math.nan,
        "total_token_throughput": (inputs + outputs) / duration if duration > 0 else math.nan,
        **stats("ttft", [r.ttft_s for r in ok]),
        **stats("tpot", tpot),
        **stats("itl", [gap for r in ok for gap in r.itl_s]),
        **stats("e2el", [r.e2e_s for r in ok]),
    }


def markdown(report: Mapping[str, Any]) -> str:
    """The online run in wall-clock terms (the offline report's header speaks of simulation)."""
    from replay.report import percent

    section, p = report["online"], report["policies"][POLICY]
    serving = section["serving"]
    gpu_hours = p["gpu_hours"]
    gpu = (
        "n/a (pass --gpus-per-endpoint)"
        if gpu_hours is None or not math.isfinite(gpu_hours)
        else f"{gpu_hours:.3f}"
    )

    def ms(key: str) -> str:
        value = serving[key]
        return "n/a" if value is None or not math.isfinite(value) else f"{value:,.1f}"

    lines = [
        f"# Online replay: {report['trace']['name']} against {len(section['endpoints'])} endpoint(s)",
        "",
        f"Model {section['model']}; {serving['completed']:,} of {p['requests_total']:,} requests completed"
        f" in {serving['duration_s']:.1f} s of wall time: {serving['request_throughput']:.2f} requests/s, "
        f"{serving['output_throughput']:,.1f} output tokens/s, {serving['total_token_throughput']:,.1f} "
        f"tokens/s in and out. SLO met: {percent(p['slo_attainment'], 2)}. GPU-hours: {gpu}.",
        "",
        "| metric (ms) | mean | median | p99 |",
        "|---|---:|---:|---:|",
    ]
    for name, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2E latency")):
        lines.append(
            f"| {label} | {ms(f'mean_{name}_ms')} | {ms(f'median_{name}_ms')} | {ms(f'p99_{name}_ms')} |"
        )
    lines += [
        "",
        "As vLLM's benchmark_serving defines them: TPOT per request excludes the first token; ITL is every",
        "gap between chunks with text; throughputs are over the run's wall time.",
        "",
    ]
    return "\n".join(lines)


def build_online_report(
    trace: Trace, result: OnlineResult, scenario: Scenario, *, gpus_per_endpoint: int | None = None
) -> dict[str, Any]:
    from replay import report as rep

    run_result = to_run_result(result, trace.name, scenario, gpus_per_endpoint=gpus_per_endpoint)
    report = rep.build_report(trace, [run_result], seed=None)
    report["online"] = {**online_section(result), "serving": serving_metrics(result)}
    return report
