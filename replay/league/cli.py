"""`infscale replay league`: the command (replay/cli.py lists it).

infscale replay league                                   # the embedded trace, every policy
infscale replay league --trace ../shared/traces          # every trace in a folder, at its rate scales
infscale replay league --trace t.csv --policies hpa,predictive --startups none   # a quick subset
infscale replay league --trace servegen_language_m-mid.tar.gz --start-s 39600 --end-s 50400   # a window
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from replay import cliargs
from replay.league import DEFAULT_POLICIES, LeagueSpec, league
from replay.league.markdown import markdown
from replay.league.runner import default_workers
from replay.league.sources import SourceError, TraceSource, sources
from replay.league.startup import DEFAULT_STARTUPS_S, StartupError, StartupMode
from replay.outdir import OutDirError, check_out_dir, write_error
from replay.policies import PolicyError, PolicyParams
from replay.profiles import SCENARIOS, ProfileError
from replay.report import to_json, write_documents
from replay.scenariofile import get_scenario
from replay.slo import SLO_PRESETS
from replay.traces import TraceError, options_from_pairs
from replay.warmup import add_warmup_argument, parse_warmup

FILES = ("league.json", "league.md", "league-frontier.png", "league-startup.png", "report.html")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trace",
        type=Path,
        action="append",
        default=[],
        help="a trace file or a folder of them (repeatable; default: the embedded synthetic trace)",
    )
    p.add_argument("--format", default=None, help="trace format of every file (default: from the file name)")
    p.add_argument("--start-s", type=float, default=None, help="keep every trace from this second")
    p.add_argument("--end-s", type=float, default=None, help="... to this second")
    p.add_argument(
        "--trace-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="format option for every trace (as in replay run); a shared trace given other options than its "
        "own is scaled by the auto rule",
    )
    p.add_argument(
        "--rate-scales",
        default=None,
        metavar="K1,K2|auto",
        help="rate scales for every trace (default: the shared traces' own, else auto: the scales at which "
        "the busiest minute needs 1/4 and 3/4 of max_replicas)",
    )
    p.add_argument(
        "--scenario",
        action="append",
        default=[],
        help=f"built-in ({', '.join(SCENARIOS)}) or a file (repeatable; default: every built-in)",
    )
    p.add_argument("--policies", default=",".join(DEFAULT_POLICIES), help="comma-separated (default: all)")
    p.add_argument(
        "--startups",
        default=",".join(f"{x:g}" for x in DEFAULT_STARTUPS_S),
        metavar="S1,S2|none",
        help="start-up sweep: cold start of one replica on a cold cluster, seconds (none: no sweep)",
    )
    p.add_argument("--startup-mode", choices=[m.value for m in StartupMode], default=StartupMode.DILATE.value)
    p.add_argument(
        "--sweep-scale",
        choices=("low", "high", "all"),
        default="low",
        help="the start-up sweep runs at each trace's lowest, highest or every rate scale (default low)",
    )
    p.add_argument("--target", type=float, default=None, help="in-flight requests per replica (default 16)")
    p.add_argument(
        "--clairvoyant-goal",
        type=float,
        default=None,
        metavar="G",
        help="the attainment the clairvoyant's cheapest schedule meets (default 0.99): higher traces "
        "the SLO/GPU-hour frontier above the SLO",
    )
    p.add_argument("--slo-preset", choices=sorted(SLO_PRESETS), default=None, help="judge by this SLO")
    p.add_argument(
        "--late-stage",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="predictive reads the engines' TTFT histograms, its late stage (default: on)",
    )
    p.add_argument("--seed", type=cliargs.seed, default=0, help="seed of synthesis and rate scaling")
    p.add_argument("--workers", type=int, default=default_workers(), help="local processes (default: cores)")
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run the cases as Ray tasks (infscale[ray]); ADDRESS of a cluster, none: a local one",
    )
    p.add_argument(
        "--out", type=Path, default=Path("league-out"), help="report directory (default league-out)"
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--quiet", action="store_true", help="no progress bar, no tables on stdout")
    add_warmup_argument(p)


def run(args: argparse.Namespace) -> int:
    try:
        spec = _spec(args)
        check_out_dir(args.out, files=FILES)
        doc = league(spec, progress=not args.quiet)
    except (SourceError, StartupError, ProfileError, PolicyError, TraceError, OutDirError, ValueError) as e:
        print(f"infscale replay league: error: {e}", file=sys.stderr)
        return 2
    try:
        written = write(args.out, doc, plots=not args.no_plots)
    except OSError as e:
        print(f"infscale replay league: error: {write_error(e)}", file=sys.stderr)
        return 1
    if getattr(args, "output", "text") == "json":  # every replay command's --output json: the document
        print(to_json(doc))
        return 0
    if not args.quiet:
        print(markdown(doc))
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _spec(args: argparse.Namespace) -> LeagueSpec:
    names = args.scenario or list(SCENARIOS)
    scenarios = tuple(get_scenario(n) for n in names)
    if args.slo_preset is not None:
        scenarios = tuple(replace(s, slo=SLO_PRESETS[args.slo_preset]) for s in scenarios)
    params = PolicyParams(late_stage=args.late_stage)
    if args.target is not None:
        params = replace(params, target=args.target)
    if args.clairvoyant_goal is not None:
        params = replace(params, clairvoyant_goal=args.clairvoyant_goal)  # PolicyParams checks it
    srcs = _with_options(sources(args.trace, args.format), args)
    rate_scales = None
    if args.rate_scales == "auto":
        srcs = [replace(s, rate_scales=None) for s in srcs]
    elif args.rate_scales is not None:
        rate_scales = _floats(args.rate_scales, "--rate-scales")
    startups = () if args.startups.strip() == "none" else _floats(args.startups, "--startups")
    policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
    return LeagueSpec(
        tuple(srcs),
        scenarios,
        policies,
        params,
        rate_scales=rate_scales,
        startups_s=startups,
        startup_mode=StartupMode(args.startup_mode),
        sweep_scale=args.sweep_scale,
        seed=args.seed,
        workers=max(1, args.workers),
        ray_address=args.ray,
        warmup_s=parse_warmup(args.warmup_s),
    )


def _with_options(srcs: list[TraceSource], args: argparse.Namespace) -> list[TraceSource]:
    """The window and format options given on the command line, over each source's own. A shared
    trace's frozen rate scales belong to its own options: with others, the auto rule chooses."""
    given: dict[str, Any] = options_from_pairs(args.trace_option)
    for name, value in (("start_s", args.start_s), ("end_s", args.end_s)):
        if value is not None:
            given[name] = value
    if not given:
        return srcs
    if srcs and srcs[0].path is None:
        raise SourceError("--start-s/--end-s/--trace-option need --trace")
    out = []
    for source in srcs:
        options = {**source.options, **given}
        scales = source.rate_scales if options == dict(source.options) else None
        out.append(replace(source, options=options, rate_scales=scales))
    return out


def _floats(text: str, flag: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise SourceError(f"{flag}: expected numbers separated by commas, got {text!r}") from None
    if not values:
        raise SourceError(f"{flag}: give at least one value")
    return values


def write(out: Path, doc: dict[str, object], *, plots: bool = True) -> list[Path]:
    written = write_documents(out, "league", doc, markdown)
    if plots:
        from replay.plots import plot_league_frontiers, plot_league_startup

        written.append(plot_league_frontiers(out / "league-frontier.png", doc))
        if doc["sweeps"]:
            written.append(plot_league_startup(out / "league-startup.png", doc))
    from replay.html import write_html

    figures = [p for p in written if p.suffix == ".png"]
    written.append(write_html(out / "report.html", "infscale replay league", html_sections(doc), figures))
    return written


def html_sections(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The league as report.html shows it: one table per case and per sweep, as league.md has them
    (the generic page drops lists, so `beaten by` and the sweep's points become columns)."""
    page: dict[str, Any] = {k: v for k, v in doc.items() if isinstance(v, str | int | float)}
    for t in doc["tables"]:
        case = f"{t['trace']} × {t['rate_scale']:g} on {t['scenario']}"
        page[case] = [{**e, "beaten_by": ", ".join(e.get("beaten_by") or ()) or "—"} for e in t["policies"]]
    for s in doc["sweeps"]:
        case = f"start-up sweep: {s['trace']} × {s['rate_scale']:g} on {s['scenario']}"
        page[case] = [
            {
                "policy": p["policy"],
                **{f"{pt['startup_s']:g} s": pt["slo_attainment"] for pt in p["points"]},
                "collapses_at_s": "holds" if p["collapses_at_s"] is None else p["collapses_at_s"],
            }
            for p in s["policies"]
        ]
    return page
