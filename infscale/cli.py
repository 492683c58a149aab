"""`infscale` console script: one table of subcommands, each imported only when it runs.

A subcommand module exposes `add_arguments(parser)` and `run(args) -> int` (the exit code).
Lazy imports keep `infscale coldstart` from paying for aiohttp or matplotlib.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "explain": (
        "autoscaler.explain",
        "explain an HPA's scaling decision, stage by stage (kubectl get hpa -o yaml, or a what-if document)",
    ),
    "controller": ("autoscaler.controller.cli", "run the predictive controller (InferenceAutoscalers)"),
    "coldstart": ("autoscaler.coldstart_cli", "predict replica ready times under shared storage bandwidth"),
    "adapter": ("adapter.cli", "serve engine queue/batch/KV-cache signals to HPAs as external metrics"),
    "replay": (
        "replay.cli",
        "replay a request trace through a simulated fleet with the policies in the loop",
    ),
    "emulate": ("replay.emulate.cli", "an LLM engine without a GPU: OpenAI API, batching, engine metrics"),
}


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="infscale", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, help_text) in COMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == wanted:  # only the chosen command's module is imported
            importlib.import_module(module).add_arguments(sub_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(args_list).parse_args(args_list)
    module = importlib.import_module(COMMANDS[args.command][0])
    code: int = module.run(args)
    return code
