# PYTHON_ARGCOMPLETE_OK
"""`infscale` console script: one table of subcommands, each imported only when it runs.

A subcommand module exposes `add_arguments(parser)` and `run(args) -> int` (the exit code).
Lazy imports keep `infscale coldstart` from paying for aiohttp or matplotlib. Conventions every
command gets from here without asking: `--version`, shell completion (argcomplete: the line being
completed picks which one command module is imported), and a settings error that escapes a
command printed as one line per problem naming the option (common/settings_errors.py).
"""

from __future__ import annotations

import argparse
import importlib
import os
import shlex
import sys
from collections.abc import Sequence
from importlib import metadata

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "explain": (
        "autoscaler.explain",
        "explain an HPA's scaling decision, stage by stage (kubectl get hpa -o yaml, or a what-if document)",
    ),
    "controller": ("autoscaler.controller.cli", "run the predictive controller (InferenceAutoscalers)"),
    "loadgate": (
        "autoscaler.loadgate_cli",
        "a native sidecar: hold one of N load slots (Leases) until the engine is ready",
    ),
    "coldstart": ("autoscaler.coldstart_cli", "predict replica ready times under shared storage bandwidth"),
    "adapter": ("adapter.cli", "serve engine queue/batch/KV-cache signals to HPAs as external metrics"),
    "replay": (
        "replay.cli",
        "replay a request trace through a simulated fleet with the policies in the loop",
    ),
    "emulate": ("replay.emulate.cli", "an LLM engine without a GPU: OpenAI API, batching, engine metrics"),
    "completion": ("infscale.completion", "print the shell completion script (bash, zsh, fish)"),
}


def version() -> str:
    try:
        return metadata.version("infscale")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="infscale", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"infscale {version()}")
    parser.add_argument(
        "--compiled-core",
        action="store_true",
        default=argparse.SUPPRESS,  # no attribute unless given: a command passes its own options on
        help="run the policy core's mypyc build (`make compiled`), as INFSCALE_COMPILED_CORE=true does",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, help_text) in COMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == wanted:  # only the chosen command's module is imported
            importlib.import_module(module).add_arguments(sub_parser)
    return parser


def _completing() -> list[str] | None:
    """The words before the cursor when argcomplete calls us (it sets _ARGCOMPLETE and COMP_LINE)."""
    if "_ARGCOMPLETE" not in os.environ:
        return None
    line = os.environ.get("COMP_LINE", "")
    point = int(os.environ.get("COMP_POINT", len(line)))
    try:
        words = shlex.split(line[:point])
    except ValueError:  # an open quote
        words = line[:point].split()
    done = words[1:] if line[:point].endswith(" ") else words[1:-1]  # the last word is being typed
    return done


def _load_core(args_list: list[str]) -> str | None:
    """The policy core's compiled build loaded if --compiled-core (before the command) or
    INFSCALE_COMPILED_CORE asks for it, before a command's module imports the core; what is wrong
    if it cannot be (no fall back to the sources when asked for)."""
    command = next((i for i, a in enumerate(args_list) if not a.startswith("-")), len(args_list))
    flag = "--compiled-core" in args_list[:command]
    if not flag and not any(name.startswith("INFSCALE_COMPILED_CORE") for name in os.environ):
        return None  # the sources, without importing pydantic for nothing
    from pydantic import ValidationError

    from autoscaler.compiledcore import CompiledCoreError, activate_from_settings
    from common.settings_errors import describe

    try:
        activate_from_settings(flag)
    except CompiledCoreError as exc:
        return str(exc)
    except ValidationError as exc:
        names = {"compiled_core": "INFSCALE_COMPILED_CORE", "compiled_core_dir": "INFSCALE_COMPILED_CORE_DIR"}
        return "; ".join(describe(exc, names))
    return None


def _reader_gone() -> int:
    """stdout's reader went away (`infscale replay explain ... | head`): nothing more to write, and
    no traceback for it. stdout is pointed at devnull so the interpreter's flush at exit does not
    raise again (the recipe of Python's signal module docs); 1, as that recipe exits."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # a stdout without a descriptor (a test's)
        pass
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    completing = _completing()
    problem = None if completing is not None else _load_core(args_list)
    if problem is not None:
        print(f"infscale: {problem}", file=sys.stderr)
        return 2
    parser = build_parser(args_list if completing is None else completing)
    if completing is not None:
        import argcomplete

        argcomplete.autocomplete(parser, exit_method=sys.exit)  # prints the candidates and exits
    args = parser.parse_args(args_list)
    vars(args).pop("compiled_core", None)  # loaded above already; a command reads its own options only
    module = importlib.import_module(COMMANDS[args.command][0])
    try:
        code: int = module.run(args)
        sys.stdout.flush()  # here, not at exit: a reader gone away is answered below
    except BrokenPipeError:
        return _reader_gone()
    except Exception as exc:
        pydantic = sys.modules.get("pydantic")  # a ValidationError means pydantic is loaded already
        if pydantic is None or not isinstance(exc, pydantic.ValidationError):
            raise
        from common.settings_errors import describe  # a command that did not catch its own

        for line in describe(exc):
            print(f"infscale {args.command}: {line}", file=sys.stderr)
        return 2
    return code
