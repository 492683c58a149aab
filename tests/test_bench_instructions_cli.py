"""`python -m bench.policy_instructions`'s command line: a bad count is an error that names it,
before any valgrind run (the count used to reach int() and end in a traceback)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.policy_instructions", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("arg", "says"),
    [
        ("many", "expected a count of decisions, got 'many'"),
        ("-3", "expected a count of decisions >= 0, got -3"),
    ],
)
def test_a_bad_count_is_named(arg: str, says: str) -> None:
    done = run(arg)
    assert done.returncode == 2
    assert says in done.stderr
    assert "Traceback" not in done.stderr


def test_help_says_what_it_counts() -> None:
    done = run("--help")
    assert done.returncode == 0
    assert "instructions a predictive decision" in done.stdout
    assert "--mypyc" in done.stdout
