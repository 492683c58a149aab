"""`infscale replay run|compare|sweep`: the replay from the command line.

    infscale replay compare                      # every policy on the embedded default trace
    infscale replay run --policy hpa --trace azure_llm_2023_conv.csv --format azure --out out/
    infscale replay sweep --policy predictive --grid target=8,12,16 --grid warm_floor=0,4 --slo 0.99

Each writes DIR/report.json (schema in replay/report.py), DIR/report.md and the PNG plots; sweep
also writes DIR/sweep.json and prints the cheapest configuration meeting the SLO as an HPA
`behavior` block and as infscale policy settings.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

from autoscaler.hpaspec import ColdStartModel
from autoscaler.policy.spec import ForecasterKind
from replay import report as rep
from replay.fleet import Fleet
from replay.outdir import check_out_dir, write_error
from replay.policies import METRIC, POLICY_NAMES, PolicyError, PolicyParams, build_policy
from replay.profiles import SCENARIOS, ProfileError, Scenario, get_scenario
from replay.simulate import RunResult, SimulationStalled, simulate
from replay.slo import SLO_PRESETS
from replay.trace import Trace

FORMATS = ("azure", "mooncake", "burstgpt", "servegen", "csv", "jsonl")
# subcommands that live in their own module (add_arguments/run, as infscale/cli.py's table)
MODULE_COMMANDS: dict[str, tuple[str, str]] = {
    "online": ("replay.online", "replay a trace against live OpenAI-compatible endpoints"),
    "calibrate": ("replay.calibrate", "compare an online run with the offline simulation; fit a profile"),
}
DEFAULT_COMPARE = "static,hpa,keda,kpa,predictive,clairvoyant"


class CliError(Exception):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(
        dest="replay_command", metavar="{run,compare,sweep,online,calibrate}", required=True
    )
    run_p = sub.add_parser("run", help="replay one policy")
    run_p.add_argument("--policy", default="predictive", help=f"one of {', '.join(POLICY_NAMES)}, static-N")
    cmp_p = sub.add_parser("compare", help="replay several policies side by side")
    cmp_p.add_argument(
        "--policies", default=DEFAULT_COMPARE, help=f"comma-separated (default {DEFAULT_COMPARE})"
    )
    sweep_p = sub.add_parser("sweep", help="a grid over policy parameters, in parallel processes")
    sweep_p.add_argument("--policy", default="predictive", help="the policy whose parameters vary")
    sweep_p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="PARAM=V1,V2,...",
        help="values of one parameter (repeatable); parameters: "
        + ", ".join(f.name for f in fields(PolicyParams)),
    )
    sweep_p.add_argument(
        "--slo",
        type=float,
        default=0.99,
        help="slo_attainment to reach: the share of good requests, TTFT and TPOT met (default 0.99)",
    )
    sweep_p.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="processes (default: cores)"
    )
    for p in (run_p, cmp_p, sweep_p):
        _common(p)
    for name, (module, help_text) in MODULE_COMMANDS.items():
        importlib.import_module(module).add_arguments(
            sub.add_parser(name, help=help_text, description=help_text)
        )


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", type=Path, help="trace file (default: the embedded synthetic trace)")
    p.add_argument("--format", choices=FORMATS, help="trace format (required with --trace)")
    p.add_argument("--trace-option", action="append", default=[], metavar="KEY=VALUE", help="format option")
    p.add_argument("--start-s", type=float, default=0.0, help="keep the trace from this second")
    p.add_argument("--end-s", type=float, default=None, help="... to this second")
    p.add_argument(
        "--scenario", default="reference-70b", help=f"built-in ({', '.join(SCENARIOS)}) or YAML/JSON file"
    )
    p.add_argument(
        "--slo-preset",
        choices=sorted(SLO_PRESETS),
        default=None,
        help="judge requests by this SLO instead of the scenario's (replay/slo.py)",
    )
    p.add_argument("--rate-scale", type=float, default=1.0, help="multiply the arrival rate by K")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic trace and of rate scaling")
    p.add_argument(
        "--tick", type=float, default=None, help="time step while a replica is busy (scenario default)"
    )
    p.add_argument(
        "--quiet-tick",
        type=float,
        default=None,
        help="time step while no replica is busy; = --tick: full fidelity",
    )
    p.add_argument(
        "--initial-replicas", type=int, default=None, help="ready at t=0 (default: sized for minute 1)"
    )
    p.add_argument(
        "--target", type=float, default=None, help="in-flight requests per replica the policies aim at"
    )
    p.add_argument("--static-replicas", type=int, default=None, help="N of the `static` policy")
    p.add_argument(
        "--out", type=Path, default=Path("replay-out"), help="report directory (default replay-out)"
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    if args.replay_command in MODULE_COMMANDS:
        code: int = importlib.import_module(MODULE_COMMANDS[args.replay_command][0]).run(args)
        return code
    try:
        return _run(args)
    except (CliError, ProfileError, PolicyError, ValueError) as e:
        print(f"infscale replay: error: {e}", file=sys.stderr)
        return 2
    except SimulationStalled as e:  # a finding about the policy, not a usage error
        print(f"infscale replay: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # writing the output after the work (checked before it started)
        print(f"infscale replay: error: {write_error(e)}", file=sys.stderr)
        return 1


REPORT_FILES = ("report.json", "report.md", "timeline.png", "frontier.png")
SWEEP_FILES = ("sweep.json", "frontier.png")


def _run(args: argparse.Namespace) -> int:
    check_out_dir(args.out, files=SWEEP_FILES if args.replay_command == "sweep" else REPORT_FILES)
    scenario = get_scenario(args.scenario)
    if args.tick is not None:
        scenario = replace(scenario, tick_s=args.tick)
    if args.quiet_tick is not None:
        scenario = replace(scenario, quiet_tick_s=args.quiet_tick)
    if args.initial_replicas is not None:
        scenario = replace(scenario, initial_replicas=args.initial_replicas)
    if args.slo_preset is not None:
        scenario = replace(scenario, slo=SLO_PRESETS[args.slo_preset])
    trace = load(args)
    params = PolicyParams()
    if args.target is not None:
        params = replace(params, target=args.target)
    if args.static_replicas is not None:
        params = replace(params, static_replicas=args.static_replicas)
    if args.replay_command == "sweep":
        return _sweep(args, trace, scenario, params)
    names = (
        [args.policy]
        if args.replay_command == "run"
        else [n.strip() for n in args.policies.split(",") if n.strip()]
    )
    if not names:
        raise CliError("--policies: give at least one policy")
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise CliError(f"--policies: {', '.join(twice)} listed twice")
    for name in names:  # fail on a bad name before the first long run
        build_policy(name, scenario, trace, params, lambda: 0.0)
    results = [run_policy(trace, scenario, name, params, progress=not args.quiet) for name in names]
    report = rep.build_report(trace, results, seed=args.seed)
    written = rep.write_report(args.out, report, plots=not args.no_plots)
    print(rep.markdown(report))
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def load(args: argparse.Namespace) -> Trace:
    from replay.traces import default_trace, load_trace, options_from_pairs, scale_rate, time_window

    if args.trace is None:
        if args.format or args.trace_option:
            raise CliError("--format/--trace-option need --trace")
        trace = default_trace(args.seed)
        if args.start_s or args.end_s is not None:
            trace = time_window(trace, args.start_s, args.end_s)
        if args.rate_scale != 1.0:
            trace = scale_rate(trace, args.rate_scale, seed=args.seed)
    else:
        if args.format is None:
            raise CliError(f"--format is required with --trace (one of {', '.join(FORMATS)})")
        trace = load_trace(
            args.trace,
            args.format,
            start_s=args.start_s,
            end_s=args.end_s,
            rate_scale=args.rate_scale,
            seed=args.seed,
            **options_from_pairs(args.trace_option),
        )
    if not len(trace):
        raise CliError(f"trace {trace.name!r} has no request in the chosen window")
    return trace


def run_policy(
    trace: Trace, scenario: Scenario, name: str, params: PolicyParams, *, progress: bool = False
) -> RunResult:
    """Build the policy and its fleet, replay, with a progress bar on long runs when asked."""
    holder: list[Fleet] = []
    policy = build_policy(name, scenario, trace, params, lambda: holder[0].lead_time_s())
    fleet = Fleet(
        scenario.cold_start,
        initial_ready=policy.initial_replicas,
        node_idle_remove_s=scenario.node_idle_remove_s,
    )
    holder.append(fleet)
    on_progress: Callable[[float], None] | None = None
    bar: Any = None
    if progress and sys.stderr.isatty() and len(trace) > 100_000:
        from tqdm import tqdm

        bar = tqdm(total=round(trace.duration_s), desc=name, unit="sim s", leave=False)

        def on_progress(t: float) -> None:
            bar.update(max(0, min(round(t), bar.total) - bar.n))

    try:
        return simulate(trace, scenario, policy, fleet=fleet, on_progress=on_progress)
    finally:
        if bar is not None:
            bar.close()


# --- sweep ---------------------------------------------------------------------------------------


def parse_grid(items: Sequence[str]) -> list[dict[str, Any]]:
    """`["target=8,16", "warm_floor=0,2"]` -> every combination, typed like PolicyParams."""
    known = {f.name: f for f in fields(PolicyParams)}
    axes: list[tuple[str, list[Any]]] = []
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or key not in known:
            raise CliError(f"--grid {item!r}: expected PARAM=V1,V2 with PARAM one of {', '.join(known)}")
        parsed = [_param(key, v.strip()) for v in values.split(",") if v.strip()]
        if not parsed:  # else the grid would be empty: "no configuration meets the SLO"
            raise CliError(f"--grid {item!r}: give at least one value")
        axes.append((key, parsed))
    if not axes:
        raise CliError("sweep: give at least one --grid PARAM=V1,V2,...")
    return [
        dict(zip([k for k, _ in axes], combo, strict=True))
        for combo in itertools.product(*(v for _, v in axes))
    ]


def _param(key: str, text: str) -> Any:
    try:
        if key == "forecaster":
            return ForecasterKind(text)
        if key == "scale_to_zero":
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if key in ("lead_time_s", "lead_quantile", "static_replicas"):
            return (
                None
                if text in ("model", "none")
                else (int(text) if key == "static_replicas" else float(text))
            )
        if key in ("downscale_window_s", "warm_floor"):
            return int(text)
        return float(text)
    except ValueError:
        raise CliError(f"--grid {key}: cannot read {text!r}") from None


_SWEEP: tuple[Trace, Scenario, str, PolicyParams] | None = None


def _init_worker(trace: Trace, scenario: Scenario, policy: str, base: PolicyParams) -> None:
    global _SWEEP
    _SWEEP = (trace, scenario, policy, base)


def _sweep_point(changes: dict[str, Any]) -> dict[str, Any]:
    assert _SWEEP is not None
    trace, scenario, policy, base = _SWEEP
    cpu = time.process_time()
    result = run_policy(trace, scenario, policy, replace(base, **changes))
    return {
        "params": {k: str(v) if isinstance(v, ForecasterKind) else v for k, v in changes.items()},
        **rep.policy_summary(result),
        "cpu_seconds": time.process_time() - cpu,  # of this configuration, in its worker
    }


def sweep(
    trace: Trace,
    scenario: Scenario,
    policy: str,
    base: PolicyParams,
    grid: list[dict[str, Any]],
    workers: int,
) -> list[dict[str, Any]]:
    """Every grid point's summary, in grid order; `workers` processes share the points."""
    if workers <= 1:
        _init_worker(trace, scenario, policy, base)
        return [_sweep_point(g) for g in grid]
    with ProcessPoolExecutor(
        workers, initializer=_init_worker, initargs=(trace, scenario, policy, base)
    ) as pool:
        return list(pool.map(_sweep_point, grid))


def _sweep(args: argparse.Namespace, trace: Trace, scenario: Scenario, params: PolicyParams) -> int:
    grid = parse_grid(args.grid)
    for g in grid:
        build_policy(args.policy, scenario, trace, replace(params, **g), lambda: 0.0)
    start = time.perf_counter()
    points = sweep(trace, scenario, args.policy, params, grid, max(1, args.workers))
    wall = time.perf_counter() - start
    front = rep.pareto_front(points)
    meeting = [p for p in points if p["slo_attainment"] >= args.slo]
    best = min(meeting, key=lambda p: p["gpu_hours"]) if meeting else None
    doc = {
        "schema": "infscale.replay.sweep/v1",
        "policy": args.policy,
        "slo_attainment_goal": args.slo,
        "wall_seconds": wall,
        "points": points,
        "pareto_front": front,
        "cheapest_meeting_slo": best,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sweep.json").write_text(rep.to_json(doc) + "\n", encoding="utf-8")
    if not args.no_plots:
        summary = {"scenario": asdict(scenario), "policies": {}}
        from replay import plots

        plots.plot_frontier(args.out / "frontier.png", summary, points)
    print(f"{len(points)} configurations of {args.policy} in {wall:.1f} s on {args.workers} processes")
    print("Pareto front (GPU-hours, SLO attainment, parameters):")
    for p in front:
        print(f"  {p['gpu_hours']:8.1f}  {p['slo_attainment']:.4f}  {p['params']}")
    if best is None:
        print(f"no configuration meets SLO attainment >= {args.slo}")
        return 1
    changes: dict[str, Any] = {k: None if v is None else _param(k, str(v)) for k, v in best["params"].items()}
    chosen = replace(params, **changes)
    print(
        f"\ncheapest meeting SLO attainment >= {args.slo}: {best['gpu_hours']:.1f} GPU-hours, "
        f"{best['slo_attainment']:.4f}\n"
    )
    print(hpa_yaml(scenario, chosen))
    print(settings_yaml(scenario, chosen))
    return 0


def _spec_head(scenario: Scenario, p: PolicyParams) -> str:
    """The replica bounds and the metric, as both the HPA and the InferenceAutoscaler spell them."""
    target = f'"{p.target:g}"'  # a Quantity string
    return f"""spec:
  minReplicas: {scenario.min_replicas}
  maxReplicas: {scenario.max_replicas}
  metrics:
  - type: External
    external:
      metric:
        name: {METRIC}
      target:
        type: AverageValue
        averageValue: {target}"""


def hpa_yaml(scenario: Scenario, p: PolicyParams) -> str:
    """The reactive part of a configuration as an autoscaling/v2 HPA spec with a `behavior` block
    (upstream's default rate policies written out, the swept windows and tolerances filled in)."""
    return f"""# HPA (autoscaling/v2): the reactive part; per-direction tolerance needs Kubernetes >= 1.33
{_spec_head(scenario, p)}
  behavior:
    scaleUp:
      stabilizationWindowSeconds: 0
      tolerance: {p.tolerance:g}
      selectPolicy: Max
      policies:
      - {{type: Pods, value: 4, periodSeconds: 15}}
      - {{type: Percent, value: 100, periodSeconds: 15}}
    scaleDown:
      stabilizationWindowSeconds: {p.downscale_window_s}
      tolerance: {p.tolerance:g}
      selectPolicy: Max
      policies:
      - {{type: Percent, value: 100, periodSeconds: 15}}
"""


def settings_yaml(scenario: Scenario, p: PolicyParams) -> str:
    """The configuration as the spec of an InferenceAutoscaler (deploy/controller/crd.yaml)."""
    block = ColdStartModel.document_of(scenario.cold_start)
    if p.lead_time_s is not None:
        horizon = f"leadTimeSeconds: {p.lead_time_s:g}"
    elif p.lead_quantile is not None:
        horizon = f"horizon: {{source: Auto, quantile: {p.lead_quantile:g}}}"
    else:
        horizon = "horizon: {source: ColdStartModel}"
    cold = [
        f"{key}: {value:g}" if isinstance(value, float) else f"{key}: {value}" for key, value in block.items()
    ]
    return f"""# infscale InferenceAutoscaler (infscale.io/v1alpha1): spec fields to merge into yours
{_spec_head(scenario, p)}
  behavior:
    scaleUp: {{tolerance: {p.tolerance:g}}}
    scaleDown: {{stabilizationWindowSeconds: {p.downscale_window_s}, tolerance: {p.tolerance:g}}}
  coldStart: {{{", ".join(cold)}}}
  prediction: {{forecaster: {p.forecaster}, {horizon}}}
  floors: {{warmMinReplicas: {p.warm_floor}}}
"""
