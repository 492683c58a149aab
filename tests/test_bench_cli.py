"""The benches' command lines: `python -m bench.policy_instructions` names a bad count before any
valgrind run (it reached int() and ended in a traceback); `python -m bench` names a bench or an
option it does not know, and --help lists the benches, running none."""

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


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, timeout=120)


def test_bench_names_what_it_does_not_know_and_runs_nothing() -> None:
    done = bench("nonsense")
    assert done.returncode == 2
    assert "no bench named 'nonsense'" in done.stderr and "policy" in done.stderr
    assert "==" not in done.stdout  # no bench started (it used to run none and exit 0)
    done = bench("policy", "--fast")
    assert done.returncode == 2
    assert "unknown option '--fast'" in done.stderr


def test_bench_help_lists_the_benches_and_runs_none() -> None:
    done = bench("--help")
    assert done.returncode == 0
    assert "benches: " in done.stdout and "league" in done.stdout
    assert "==" not in done.stdout  # it used to take --help for a bench's option and run them all
