"""Instructions a predictive decision, the measure that does not move with the machine's load.

Run: `python -m bench.policy_instructions` (valgrind installed): runs this module under callgrind
twice, with 0 and with TICKS decisions, and prints the difference over TICKS. Each run first builds
the bench's observations over its first TICKS ticks (bench_policy's first pass: the caches warm,
as before the bench's decide-alone pass), then makes `N` decisions (decide() and record_rescale())
over them: `python -m bench.policy_instructions N` is that run alone. The sizing is compiled as
in `python -m bench policy` (bench_policy.install_sizing); `--python` measures the pure-Python path,
`--mypyc` the core's compiled build (autoscaler/compiledcore.py, `make compiled`), with either.
docs/policy.md, "Performance".
"""

from __future__ import annotations

import argparse
import gc
import re
import subprocess
import sys

from autoscaler.policy.decide import decide, record_rescale
from autoscaler.policy.state import PolicyState
from bench import bench_policy as b

TICKS = 2_000
MODULE = "bench.policy_instructions"


def decisions(n: int, argv: list[str]) -> None:
    """The bench's predictive row: its first pass over TICKS ticks, then n decisions alone."""
    b.install_sizing(argv)
    spec = b.SCENARIOS[b.PREDICTIVE]
    loads = b.observations(TICKS)
    _, counts = b._run_building(spec, loads)
    observed = [b.observation(q, batch, r) for (q, batch), r in zip(loads, counts, strict=False)]
    gc.freeze()
    state = PolicyState()
    replicas = observed[0].spec_replicas
    for i, obs in enumerate(observed[:n]):
        now = b.START + i * 15.0
        decision, state = decide(spec, state, obs, now)
        if decision.desired_replicas != replicas:
            state = record_rescale(spec, state, now, replicas, decision.desired_replicas)
            replicas = decision.desired_replicas


def instructions(n: int, argv: list[str]) -> int:
    """Instructions callgrind counts for a run of `n` decisions (the whole process)."""
    run = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-m",
            MODULE,
            str(n),
            *argv,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", run.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in callgrind's output:\n{run.stderr[-2000:]}")
    return int(found.group(1))


def _arguments(args: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=f"python -m {MODULE}",
        description="instructions a predictive decision, counted by callgrind (valgrind installed)",
    )
    p.add_argument(
        "decisions",
        nargs="?",
        type=_count,
        help="make this many decisions in this process and stop (what each callgrind run does)",
    )
    p.add_argument("--python", action="store_true", help="the sizing in pure Python, not compiled by numba")
    p.add_argument("--mypyc", action="store_true", help="the core's mypyc build (make compiled)")
    return p.parse_args(args)


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a count of decisions, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a count of decisions >= 0, got {n}")
    return n


def main() -> None:
    args = _arguments(sys.argv[1:])
    argv = [flag for flag, on in (("--python", args.python), ("--mypyc", args.mypyc)) if on]
    if args.decisions is not None:
        decisions(args.decisions, argv)
        return
    # a run first fills numba's on-disk cache, under valgrind: numba keys it by the CPU, and
    # valgrind's emulated one is not the machine's (a run outside it filled another entry), so a
    # source changed since the last run was compiled inside the first measured run (~9M a decision);
    # over the measured ticks, not none: the tick's kernels compile at their first use in a tick, and
    # any change to the core makes them stale (replay/kernel/jit.py), +16,000 a decision once here
    if "--python" not in argv:
        warm = ["valgrind", "--tool=none", sys.executable, "-m", MODULE, str(TICKS), *argv]
        subprocess.run(warm, check=True, capture_output=True)
    per = (instructions(TICKS, argv) - instructions(0, argv)) / TICKS
    path = "pure Python" if "--python" in argv else "the sizing compiled"
    if "--mypyc" in argv:
        path = "the core by mypyc, " + ("no numba kernels" if "--python" in argv else "the sizing by numba")
    print(f"{per:,.0f} instructions a predictive decision ({path}; callgrind, the first {TICKS:,} ticks)")


if __name__ == "__main__":
    main()
