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
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from replay import cliargs
from replay import report as rep
from replay import sweep as sweep_cli
from replay.fleet import Fleet
from replay.outdir import check_out_dir, write_error
from replay.policies import POLICY_NAMES, PolicyError, PolicyParams, build_policy
from replay.profiles import SCENARIOS, ProfileError, Scenario
from replay.scenariofile import get_scenario
from replay.simulate import RunResult, simulate
from replay.slo import SLO_PRESETS
from replay.sweep import parse_grid as parse_grid  # re-exported: tests, bench
from replay.sweep import sweep as sweep
from replay.trace import Trace
from replay.warmup import add_warmup_argument, parse_warmup, resolve_warmup, with_warmup

FORMATS = ("azure", "mooncake", "burstgpt", "servegen", "csv", "jsonl")
# subcommands that live in their own module (add_arguments/run, as infscale/cli.py's table)
MODULE_COMMANDS: dict[str, tuple[str, str]] = {
    "online": ("replay.online.cli", "replay a trace against live OpenAI-compatible endpoints"),
    "calibrate": ("replay.calibrate", "compare an online run with the offline simulation; fit a profile"),
    "scenarios": (
        "replay.scenarios_cli",
        "list the scenarios with their key numbers (weights, load path, start-up)",
    ),
    "explain": ("replay.decisions", "the stage table of a report's decision nearest a time"),
    "league": (
        "replay.league.cli",
        "every policy on every trace, rate scale and scenario, with a start-up sweep",
    ),
    "stationary": (
        "replay.stationary",
        "predictive in the loop on Poisson traffic at a constant rate, against the least static fleet",
    ),
}
DEFAULT_COMPARE = "static,hpa,keda,kpa,predictive,clairvoyant"


class CliError(Exception):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(
        dest="replay_command",
        metavar="{run,compare,sweep,league,explain,online,calibrate,scenarios,stationary}",
        required=True,
    )
    run_p = sub.add_parser("run", help="replay one policy")
    run_p.add_argument("--policy", default="predictive", help=f"one of {', '.join(POLICY_NAMES)}, static-N")
    cmp_p = sub.add_parser("compare", help="replay several policies side by side")
    cmp_p.add_argument(
        "--policies", default=DEFAULT_COMPARE, help=f"comma-separated (default {DEFAULT_COMPARE})"
    )
    sweep_p = sub.add_parser("sweep", help="a grid over policy parameters, in parallel processes")
    sweep_cli.add_arguments(sweep_p)
    for p in (run_p, cmp_p, sweep_p):
        _common(p)
    for name, (module, help_text) in MODULE_COMMANDS.items():
        module_parser = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module).add_arguments(module_parser)
        if not any("--output" in a.option_strings for a in module_parser._actions):
            add_output_argument(module_parser)  # the module reads args.output (json: its document)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", type=Path, help="trace file (default: the embedded synthetic trace)")
    p.add_argument("--format", choices=FORMATS, help="trace format (required with --trace)")
    p.add_argument(
        "--trace-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="format option (any format: output_scale=K, every output length x K)",
    )
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
    p.add_argument(
        "--seed", type=cliargs.seed, default=0, help="seed of the synthetic trace and of rate scaling"
    )
    p.add_argument(
        "--initial-replicas", type=int, default=None, help="ready at t=0 (default: sized for minute 1)"
    )
    p.add_argument(
        "--max-concurrent-loads",
        type=int,
        default=None,
        metavar="N",
        help="a load gate: at most N replicas loading weights at once (default: the scenario's)",
    )
    p.add_argument(
        "--target", type=float, default=None, help="in-flight requests per replica the policies aim at"
    )
    p.add_argument("--static-replicas", type=int, default=None, help="N of the `static` policy")
    p.add_argument(
        "--late-stage",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="predictive reads the engines' TTFT histograms, its late stage (default: on)",
    )
    p.add_argument(
        "--out", type=Path, default=Path("replay-out"), help="report directory (default replay-out)"
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_warmup_argument(p)
    add_output_argument(p)


def add_output_argument(p: argparse.ArgumentParser) -> None:
    """`--output text|json`: json prints the command's whole document (report.json's) on stdout."""
    p.add_argument(
        "--output",
        "-o",
        choices=("text", "json"),
        default="text",
        help="text (a table, default) or json (the report document, on stdout)",
    )


def run(args: argparse.Namespace) -> int:
    if args.replay_command in MODULE_COMMANDS:
        code: int = importlib.import_module(MODULE_COMMANDS[args.replay_command][0]).run(args)
        return code
    try:
        return _run(args)
    except (CliError, ProfileError, PolicyError, ValueError) as e:
        print(f"infscale replay: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # writing the output after the work (checked before it started)
        print(f"infscale replay: error: {write_error(e)}", file=sys.stderr)
        return 1


REPORT_FILES = ("report.json", "report.md", "report.html", "timeline.png", "frontier.png")
SWEEP_FILES = ("sweep.json", "report.html", "frontier.png")


def policy_params(args: argparse.Namespace) -> PolicyParams:
    """The policies' parameters a run, compare or sweep command line sets."""
    params = PolicyParams(late_stage=args.late_stage)
    if args.target is not None:
        params = replace(params, target=args.target)
    if args.static_replicas is not None:
        params = replace(params, static_replicas=args.static_replicas)
    return params


def _run(args: argparse.Namespace) -> int:
    check_out_dir(args.out, files=SWEEP_FILES if args.replay_command == "sweep" else REPORT_FILES)
    scenario = get_scenario(args.scenario)
    if args.initial_replicas is not None:
        scenario = replace(scenario, initial_replicas=args.initial_replicas)
    if args.slo_preset is not None:
        scenario = replace(scenario, slo=SLO_PRESETS[args.slo_preset])
    if args.max_concurrent_loads is not None:
        gated = replace(scenario.cold_start, max_concurrent_loads=args.max_concurrent_loads)
        scenario = replace(scenario, cold_start=gated)  # checked by Scenario: an error names the field
    trace = load(args)
    params = policy_params(args)
    warmup_s = resolve_warmup(parse_warmup(args.warmup_s), scenario, params.downscale_window_s)
    if args.replay_command == "sweep":
        return sweep_cli.run(args, trace, scenario, params, warmup_s)
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
    quiet = args.quiet
    results = [run_policy(trace, scenario, n, params, progress=not quiet, warmup_s=warmup_s) for n in names]
    report = rep.build_report(trace, results, seed=args.seed)
    written = rep.write_report(args.out, report, plots=not args.no_plots)
    if args.output == "json":
        print(rep.to_json(report))
    else:
        print(rep.markdown(report))
    print(
        "wrote " + ", ".join(str(p) for p in written),
        file=sys.stderr if args.output == "json" else sys.stdout,
    )
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
    trace: Trace,
    scenario: Scenario,
    name: str,
    params: PolicyParams,
    *,
    progress: bool = False,
    warmup_s: float = 0.0,
) -> RunResult:
    """Build the policy and its fleet, replay, with a progress bar on long runs when asked; with
    `warmup_s` > 0 behind a warm-up prefix (replay/warmup.py), the policy built on the prefixed trace."""
    holder: list[Fleet] = []
    played = with_warmup(trace, warmup_s)
    policy = build_policy(
        name,
        scenario,
        played,
        params,
        lambda: holder[0].lead_time_s(),
        lambda: holder[0],
        warmup_s=warmup_s,
        scored=trace if warmup_s > 0 else None,
    )
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

        bar = tqdm(total=round(played.duration_s), desc=name, unit="sim s", leave=False)

        def on_progress(t: float) -> None:
            bar.update(max(0, min(round(t), bar.total) - bar.n))

    try:
        result = simulate(
            trace, scenario, policy, fleet=fleet, on_progress=on_progress, warmup_s=warmup_s, played=played
        )
    finally:
        if bar is not None:
            bar.close()
    if result.unfinished:
        print(stall_warning(result), file=sys.stderr, flush=True)
    return result


def stall_warning(result: RunResult) -> str:
    """The line a run cut with requests still unserved prints (they count as not good)."""
    return (
        f"infscale replay: warning: policy {result.policy}: {result.unfinished:,} requests unfinished "
        f"{result.max_tail_s:,.0f} s after the trace ended; the run was cut at {result.end_s:,.0f} s "
        "and they count as not good (requests_unfinished in report.json)"
    )
