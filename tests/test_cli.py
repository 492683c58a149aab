"""The console script's conventions, for every command (new ones included, through COMMANDS):
--version, shell completion, settings errors as one line naming the option, compressed traces
recognised, --output json on the replay commands, percentages that never round up to 100 %, times
in milliseconds."""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infscale.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[1]


def infscale(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "infscale", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
        timeout=60,
    )


_COMPLETER = """
import json, os, sys
from infscale.cli import main
lines, results, out = json.loads(sys.argv[1]), {}, sys.argv[2]
for line in lines:
    os.environ.update({"_ARGCOMPLETE": "1", "_ARGCOMPLETE_SHELL": "bash", "COMP_LINE": line,
                       "COMP_POINT": str(len(line)), "_ARGCOMPLETE_STDOUT_FILENAME": out + ".one"})
    try:
        main([])
    except SystemExit:
        pass
    with open(out + ".one") as f:
        results[line] = [c.strip() for c in f.read().split("\\v") if c.strip()]
with open(out, "w") as f:
    json.dump(results, f)
"""


def complete_all(lines: list[str], tmp_path: Path) -> dict[str, list[str]]:
    """What a tab press after each line offers, asked as argcomplete's shell hook asks: in one
    child process (argcomplete takes over the process's output streams while it answers)."""
    out = tmp_path / "completions.json"
    done = subprocess.run(
        [sys.executable, "-c", _COMPLETER, json.dumps(lines), str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    results: dict[str, list[str]] = json.loads(out.read_text())
    return results


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"infscale {version('infscale')}"


def test_completion_of_every_command_option_and_choice(tmp_path: Path) -> None:
    """A command added to COMMANDS later is completed (its own options too) without its author
    doing anything."""
    own = [f"infscale {command} -" for command in sorted(COMMANDS)]
    got = complete_all(
        [
            "infscale ",
            "infscale rep",
            "infscale replay s",
            "infscale replay sweep --tar",
            "infscale explain -o ",
            *own,
        ],
        tmp_path,
    )
    assert set(got["infscale "]) >= set(COMMANDS)
    assert got["infscale rep"] == ["replay"]
    assert "sweep" in got["infscale replay s"]
    assert "--target-ref" in got["infscale replay sweep --tar"]
    assert set(got["infscale explain -o "]) == {"table", "json", "yaml"}
    for line in own:
        assert "--help" in got[line], line


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script(shell: str) -> None:
    done = infscale("completion", shell)
    assert done.returncode == 0
    assert "infscale" in done.stdout and "_ARGCOMPLETE" in done.stdout


@pytest.mark.parametrize(
    ("argv", "env", "want"),
    [
        pytest.param(
            ["adapter", "--insecure-dev", "--endpoints", "http://127.0.0.1:9/metrics", "--engine", "tgii"],
            {},
            "infscale adapter: --engine: unknown engine 'tgii'; known engines: gateway-api",
            id="adapter flag",
        ),
        pytest.param(
            ["emulate"],
            {"INFSCALE_EMULATE_ENGINE": "tgii"},
            "infscale emulate: --engine: 'tgii' is not one of vllm, tgi, sglang",
            id="emulate environment variable",
        ),
        pytest.param(
            ["controller", "--tick-seconds", "-1"],
            {},
            "infscale controller: --tick-seconds: Input should be greater than 0",
            id="controller flag",
        ),
        pytest.param(
            ["loadgate"],
            {"INFSCALE_LOADGATE_SLOTS": "0"},
            "infscale loadgate: --slots: Input should be greater than or equal to 1",
            id="loadgate environment variable",
        ),
    ],
)
def test_settings_error_is_one_line_naming_the_option(
    argv: list[str], env: dict[str, str], want: str
) -> None:
    done = infscale(*argv, env=env)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(want)
    assert "pydantic" not in done.stderr and "http" not in lines[0].split("known")[0]


def test_settings_errors_describe_nested_fields_and_choices() -> None:
    from typing import Literal

    from pydantic import BaseModel, ValidationError

    from common.settings_errors import describe

    class Scrape(BaseModel):
        interval_s: float

    class Settings(BaseModel):
        engine: Literal["vllm", "tgi"]
        scrape: Scrape

    with pytest.raises(ValidationError) as exc:
        Settings.model_validate({"engine": "tgii", "scrape": {"interval_s": "often"}})
    assert describe(exc.value) == [
        "--engine: 'tgii' is not one of vllm, tgi",
        "scrape.interval_s: Input should be a valid number, unable to parse string as a number",
    ]


@pytest.mark.parametrize(
    ("fmt", "name"),
    [
        ("azure", "t.csv"),
        ("burstgpt", "t.csv"),
        ("csv", "t.csv"),
        ("mooncake", "t.jsonl"),
        ("jsonl", "t.jsonl"),
    ],
)
def test_a_gzip_trace_gets_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, name: str
) -> None:
    path = tmp_path / name
    path.write_bytes(gzip.compress(b"TIMESTAMP,ContextTokens,GeneratedTokens\n"))
    assert (
        main(
            [
                "replay",
                "run",
                "--policy",
                "hpa",
                "--trace",
                str(path),
                "--format",
                fmt,
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert f"{name}: is gzip-compressed (magic bytes 1f 8b); unpack it first: gunzip -k {name}" in err


def test_replay_output_json_is_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["replay", "compare", "--policies", "static,hpa", "--end-s", "300", "--no-plots", "--quiet"]
    assert main([*argv, "--out", str(tmp_path), "-o", "json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == json.loads((tmp_path / "report.json").read_text())


@pytest.mark.parametrize(
    ("share", "digits", "want"),
    [
        (0.9995, 1, "99.9%"),
        (0.99995, 2, "99.99%"),
        (1.0, 1, "100.0%"),
        (0.123, 1, "12.3%"),
        (0.0, 2, "0.00%"),
    ],
)
def test_percent_never_rounds_up_to_100(share: float, digits: int, want: str) -> None:
    from replay.report import percent

    assert percent(share, digits) == want


@pytest.mark.parametrize(
    ("seconds", "want"),
    [(0.0424, "42 ms"), (0.0426, "43 ms"), (1.5, "1500 ms"), (None, "n/a"), (math.nan, "n/a")],
)
def test_milliseconds_are_whole_or_n_a(seconds: float | None, want: str) -> None:
    from replay.cells import ms

    assert ms(seconds) == want


def test_every_replay_command_takes_output_and_reads_it() -> None:
    """`--output json` is every replay command's convention: the built-in ones and each module in
    replay.cli.MODULE_COMMANDS (a new one gets the flag from replay/cli.py and must read
    args.output in its run(): json prints its document on stdout)."""
    import argparse
    import importlib
    import inspect

    from replay import cli as replay_cli

    parser = argparse.ArgumentParser()
    replay_cli.add_arguments(parser)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, subparser in sub.choices.items():
        flags = {s for a in subparser._actions for s in a.option_strings}
        assert "--output" in flags, f"replay {name} has no --output"
    for name, (module, _) in replay_cli.MODULE_COMMANDS.items():
        source = inspect.getsource(importlib.import_module(module).run)
        assert "output" in source, f"replay {name}: run() ignores args.output"


def test_a_reader_that_goes_away_ends_the_command_without_a_traceback() -> None:
    """`infscale ... | head`: the pipe's reader closes before the command has written; the command
    ends with 1 and says nothing, where it printed BrokenPipeError's traceback (and again at exit)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "infscale", "completion", "bash"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # gone before the first write
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1
    assert err == ""
