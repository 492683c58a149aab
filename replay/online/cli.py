"""`infscale replay online`'s command line: flags to an OnlineConfig, the run, the report."""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import fields
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from replay import cliargs
from replay.online.driver import run_online
from replay.online.records import Api, OnlineConfig, PromptStyle, Status, write_records
from replay.online.results import build_online_report, markdown
from replay.profiles import ProfileError
from replay.scenariofile import get_scenario
from replay.trace import Trace


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--endpoint",
        action="append",
        required=True,
        metavar="URL",
        help="base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000 "
        "(repeatable, or comma-separated)",
    )
    p.add_argument("--trace", type=Path, help="trace file (default: the embedded synthetic trace)")
    p.add_argument("--format", help="trace format (required with --trace)")
    p.add_argument("--trace-option", action="append", default=[], metavar="KEY=VALUE", help="format option")
    p.add_argument("--start-s", type=float, default=0.0, help="keep the trace from this second")
    p.add_argument("--end-s", type=float, default=None, help="... to this second")
    p.add_argument("--rate-scale", type=float, default=1.0, help="multiply the arrival rate by K (loader)")
    p.add_argument(
        "--seed", type=cliargs.seed, default=0, help="seed of the synthetic trace and of rate scaling"
    )
    p.add_argument("--max-input-tokens", type=int, default=None, help="cap each prompt at N tokens")
    p.add_argument("--max-output-tokens", type=int, default=None, help="cap each max_tokens at N")
    p.add_argument(
        "--no-ignore-eos", action="store_true", help="do not send ignore_eos (e.g. strict servers)"
    )
    # OnlineConfig's fields: only flags given reach it, so its defaults are the only ones
    for name, kind, help_text in _CONFIG_FLAGS:
        default = _config_default(name)
        choices = [m.value for m in kind] if isinstance(kind, type) and issubclass(kind, StrEnum) else None
        p.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            type=str if choices else kind,
            choices=choices,
            default=argparse.SUPPRESS,
            help=f"{help_text} (default {'none' if default is None else getattr(default, 'value', default)})",
        )
    p.add_argument("--scenario", default="reference-70b", help="scenario whose SLO judges the requests")
    p.add_argument(
        "--gpus-per-endpoint",
        type=int,
        default=None,
        metavar="N",
        help="GPUs behind each endpoint, for GPU-hours (default: unknown, reported as n/a)",
    )
    p.add_argument(
        "--out", type=Path, default=Path("online-out"), help="report directory (default online-out)"
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")


_CONFIG_FLAGS: tuple[tuple[str, Any, str], ...] = (
    ("speedup", float, "send at trace time / K"),
    ("model", str, "model name; none: the first one the first endpoint's /v1/models lists"),
    ("api", Api, "which OpenAI API"),
    ("prompt", PromptStyle, "prompt of N words, or N token ids (exact; vLLM/SGLang completions)"),
    ("max_in_flight", int, "requests in flight at most; a send past it waits"),
    ("max_duration_s", float, "stop sending after this many seconds, cancel what is in flight"),
    ("timeout_s", float, "per-request timeout"),
    ("api_key", str, "bearer token, if the server wants one"),
)


def _config_default(name: str) -> Any:
    return next(f.default for f in fields(OnlineConfig) if f.name == name)


def config_from_args(args: argparse.Namespace) -> OnlineConfig:
    endpoints = tuple(u.strip() for item in args.endpoint for u in item.split(",") if u.strip())
    given: dict[str, Any] = {name: getattr(args, name) for name, _, _ in _CONFIG_FLAGS if hasattr(args, name)}
    if "api" in given:
        given["api"] = Api(given["api"])
    if "prompt" in given:
        given["prompt"] = PromptStyle(given["prompt"])
    return OnlineConfig(endpoints=endpoints, ignore_eos=not args.no_ignore_eos, **given)


def cap_tokens(trace: Trace, max_input: int | None, max_output: int | None) -> Trace:
    for flag, cap in (("--max-input-tokens", max_input), ("--max-output-tokens", max_output)):
        if cap is not None and cap < 1:
            raise ValueError(f"{flag} must be >= 1, got {cap}")
    inp = trace.input_tokens if max_input is None else np.minimum(trace.input_tokens, max_input)
    out = trace.output_tokens if max_output is None else np.minimum(trace.output_tokens, max_output)
    return Trace(trace.name, trace.arrival_s, inp, out)


def run(args: argparse.Namespace) -> int:
    from replay import report as rep
    from replay.cli import REPORT_FILES, CliError, load
    from replay.outdir import check_out_dir, write_error
    from replay.traces import TraceError

    try:
        check_out_dir(args.out, files=(*REPORT_FILES, "requests.jsonl"))
        if args.gpus_per_endpoint is not None and args.gpus_per_endpoint < 1:
            raise ValueError(f"--gpus-per-endpoint must be >= 1, got {args.gpus_per_endpoint}")
        config = config_from_args(args)
        scenario = get_scenario(args.scenario)
        trace = cap_tokens(load(args), args.max_input_tokens, args.max_output_tokens)
    except (CliError, ProfileError, TraceError, ValueError) as e:
        print(f"infscale replay online: error: {e}", file=sys.stderr)
        return 2
    print(
        f"replaying {len(trace):,} requests over {trace.duration_s / config.speedup:.1f} s against "
        f"{len(config.endpoints)} endpoint(s)",
        file=sys.stderr,
    )
    try:
        result = asyncio.run(run_online(trace, config))
    except ValueError as e:
        print(f"infscale replay online: error: {e}", file=sys.stderr)
        return 2
    report = build_online_report(trace, result, scenario, gpus_per_endpoint=args.gpus_per_endpoint)
    try:
        written = rep.write_report(args.out, report, plots=not args.no_plots)
        (args.out / "report.md").write_text(markdown(report), encoding="utf-8")
        written.append(write_records(args.out / "requests.jsonl", result.records))
    except OSError as e:
        print(f"infscale replay online: error: {write_error(e)}", file=sys.stderr)
        return 1
    section = report["online"]
    if getattr(args, "output", "text") == "json":
        from replay.report import to_json

        print(to_json(report))
        print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
        return 0 if all(r.status is Status.OK for r in result.records) else 1
    print(markdown(report))
    print(
        f"requests by status: {section['requests_by_status']}; send lag p99 {section['send_lag_p99_s']:.3f} s"
    )
    print("wrote " + ", ".join(str(p) for p in written))
    for message, count in list(section["errors"].items())[:3]:  # e.g. an endpoint that refuses everything
        print(f"infscale replay online: {count} request(s) failed: {message}", file=sys.stderr)
    failed = sum(1 for r in result.records if r.status is not Status.OK)
    return 0 if failed == 0 else 1
