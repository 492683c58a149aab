"""Run every benchmark in this folder, one after the other: `python -m bench` (or `make bench`).

`python -m bench NAME... [--python] [--mypyc]` runs the benches whose names hold a NAME (bench_policy
reads the options); `python -m bench attack [NAME] [OPTIONS]` runs the attacks of bench/attack/
instead; `python -m bench --help` lists the benches. A NAME no bench's name holds, or an option
none reads, is an error."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

OPTIONS = ("--python", "--mypyc")  # bench_policy's; the others take none


def main() -> int:
    if sys.argv[1:2] == ["attack"]:
        from bench.attack import main as attack

        return attack(sys.argv[2:])
    names = sorted(
        m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name.startswith("bench_")
    )
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__.strip() + "\n\nbenches: " + ", ".join(n.removeprefix("bench_") for n in names))
        return 0
    options = [arg for arg in sys.argv[1:] if arg.startswith("-")]  # the benches' own, read by them
    unknown = [arg for arg in options if arg not in OPTIONS]
    if unknown:
        known = ", ".join(OPTIONS)
        print(f"python -m bench: unknown option {unknown[0]!r} (known: {known})", file=sys.stderr)
        return 2
    picks = [arg for arg in sys.argv[1:] if not arg.startswith("-")]
    chosen = [n for n in names if not picks or any(arg in n for arg in picks)]
    if picks and not chosen:  # a word no bench's name holds (others may be a bench's own: `replay real`)
        known = ", ".join(n.removeprefix("bench_") for n in names)
        asked = " or ".join(map(repr, picks))
        print(f"python -m bench: no bench named {asked} (known: {known})", file=sys.stderr)
        return 2
    if "--mypyc" in sys.argv and chosen != ["bench_policy"]:
        # the policy bench's switch only: the replay's benches time the sources
        # (`infscale --compiled-core replay ...` runs a replay compiled)
        print("--mypyc: with `python -m bench policy` only", file=sys.stderr)
        return 2
    for name in chosen:
        print(f"== {name} ==", flush=True)
        module = importlib.import_module(f"bench.{name}")
        module.main()
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
