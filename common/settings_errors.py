"""Settings errors as a user reads them: one line per problem, naming the option and what it takes.

pydantic's own text (`1 validation error for CatalogSettings ... [type=value_error, input_value=...]
For further information visit https://errors.pydantic.dev/...`) names a model the user never
wrote and a URL they do not need. Here a top-level field `engine` is the flag `--engine`, a nested
one is its path in the settings file (`scrape.interval_s`), and a choice lists the allowed values:

    --engine: 'tgii' is not one of vllm, tgi, sglang
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

_QUOTED = re.compile(r"'([^']*)'")


def option_name(loc: Iterable[Any], flags: Mapping[str, str] | None = None) -> str:
    """`("engine",)` -> `--engine` (or the command's own flag for that field, `tick_s` ->
    `--tick-seconds`); a nested field keeps its dotted path in the file (`scrape.interval_s`)."""
    parts = [str(p) for p in loc]
    if not parts:
        return "settings"
    if len(parts) == 1:
        return (flags or {}).get(parts[0]) or "--" + parts[0].replace("_", "-")
    return ".".join(f"[{p}]" if p.isdigit() else p for p in parts).replace(".[", "[")


def describe(exc: ValidationError, flags: Mapping[str, str] | None = None) -> list[str]:
    """One line per error: `OPTION: message`, with the allowed values of a choice. `flags` maps a
    field to its flag where the two are not spelled alike."""
    lines = []
    for err in exc.errors(include_url=False):
        message = str(err["msg"]).removeprefix("Value error, ")
        expected = (err.get("ctx") or {}).get("expected")
        if err["type"] in ("literal_error", "enum") and expected:
            allowed = ", ".join(_QUOTED.findall(str(expected))) or str(expected)
            message = f"{err['input']!r} is not one of {allowed}"
        lines.append(f"{option_name(err['loc'], flags)}: {message}")
    return lines


def report(command: str, exc: ValidationError, flags: Mapping[str, str] | None = None) -> int:
    """`describe` on stderr, each line after the command's name (`infscale controller: --tick-seconds:
    ...`); returns 2, the exit status of a usage error, for `return report(...)`."""
    for line in describe(exc, flags):
        print(f"{command}: {line}", file=sys.stderr)
    return 2


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str | int) -> None:
    """The commands' log lines on stderr: time, level, logger, message."""
    logging.basicConfig(
        level=level.upper() if isinstance(level, str) else level, format=LOG_FORMAT, stream=sys.stderr
    )
