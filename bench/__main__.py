"""Run every benchmark in this folder, one after the other: `python -m bench` (or `make bench`).

`python -m bench attack [NAME] [OPTIONS]` runs the attacks of bench/attack/ instead."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> int:
    if sys.argv[1:2] == ["attack"]:
        from bench.attack import main as attack

        return attack(sys.argv[2:])
    names = sorted(
        m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name.startswith("bench_")
    )
    chosen = [n for n in names if not sys.argv[1:] or any(arg in n for arg in sys.argv[1:])]
    for name in chosen:
        print(f"== {name} ==", flush=True)
        module = importlib.import_module(f"bench.{name}")
        module.main()
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
