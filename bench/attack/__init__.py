"""The attacks of issue 13, rerun as repeatable commands: `python -m bench attack [NAME ...]`.

Each attack is a module here with `main(argv) -> int` that prints its figures and a last line
saying whether its goals were met (exit 1 if not). Without a name, every attack runs in turn.
They start real processes and run for tens of seconds each, so they are not part of a plain
`python -m bench`.
"""

from __future__ import annotations

import importlib
import sys

# name -> (module, one line)
ATTACKS: dict[str, tuple[str, str]] = {
    "slowloris": ("bench.attack.slowloris", "TLS connections that never finish their head"),
    "flood": ("bench.attack.flood", "engine pods with 260,000 series, or new ones every scrape"),
    "auth": ("bench.attack.auth", "bypass attempts, a random-token flood, forged log lines"),
    "fuzz": ("bench.attack.fuzz", "10,000 fuzzed requests through the routes"),
    "namespaces": ("bench.attack.namespaces", "20,660 namespaces against the answer cache"),
    "traces": ("bench.attack.traces", "300 mutated trace files through infscale replay run"),
    "values": (
        "bench.attack.values",
        "negative, infinite, out-of-range and malformed values beside healthy ones",
    ),
}


def main(argv: list[str]) -> int:
    names = [a for a in argv if not a.startswith("-")][:1] or list(ATTACKS)
    rest = argv[1:] if argv and not argv[0].startswith("-") else argv
    unknown = [n for n in names if n not in ATTACKS]
    if unknown:
        print(f"unknown attack {unknown[0]!r}; attacks: {', '.join(ATTACKS)}", file=sys.stderr)
        return 2
    failed = 0
    for name in names:
        module, description = ATTACKS[name]
        print(f"== attack {name}: {description} ==", flush=True)
        failed += importlib.import_module(module).main(rest if len(names) == 1 else []) != 0
        print()
    return 1 if failed else 0
