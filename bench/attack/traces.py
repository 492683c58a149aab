"""Mutated trace files through `infscale replay run`: every one must end in a replay or a clear
error, never a traceback, a hang or a runaway allocation.

`python -m bench attack traces [--traces 300] [--seed 0] [--timeout-s 180]`

Five small valid traces (Azure CSV with date-times, a generic CSV, generic JSONL, Mooncake JSONL,
BurstGPT CSV) are mutated the ways issue 13 found harmful and then some: token counts of 10¹²,
negative or 5,000 digits; timestamps in year 9999 or 0001, 10¹³ ms, NaN; JSON nested 100,000 deep;
fullwidth digits, `1_000`; a header column twice; bytes flipped, lines cut, dropped, duplicated;
invalid UTF-8; empty files. Each runs `infscale replay run --policy static-2` in a forked child
(imports already paid) with a timeout. Printed: how many replayed, were refused with a message
(exit 2), tracebacks, hangs, the slowest run and the largest child RSS.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing
import multiprocessing.connection
import random
import resource
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from bench.attack.harness import load_average

Mutation = Callable[[str, random.Random], str]


def _bases() -> dict[str, tuple[str, str]]:
    """name -> (format, text) of the five valid traces (200 requests over ~10 minutes)."""
    rng = random.Random(7)
    rows = [(i * 3.0 + rng.random(), rng.randint(10, 4000), rng.randint(5, 500)) for i in range(200)]
    azure = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2023-11-16 18:{int(t // 60):02d}:{t % 60:010.7f},{i},{o}\n" for t, i, o in rows
    )
    generic = "timestamp,input_tokens,output_tokens\n" + "".join(
        f"{1.7e9 + t:.3f},{i},{o}\n" for t, i, o in rows
    )
    jsonl = "".join(
        f'{{"timestamp": {t:.3f}, "input_tokens": {i}, "output_tokens": {o}}}\n' for t, i, o in rows
    )
    mooncake = "".join(
        f'{{"timestamp": {int(t * 1000)}, "input_length": {i}, "output_length": {o}, '
        f'"hash_ids": [{i % 7}, {i}]}}\n'
        for t, i, o in rows
    )
    burstgpt = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" + "".join(
        f"{t:.0f},GPT-4,{i},{o},{i + o},Conversation log\n" for t, i, o in rows
    )
    return {
        "azure.csv": ("azure", azure),
        "log.csv": ("csv", generic),
        "log.jsonl": ("jsonl", jsonl),
        "mooncake.jsonl": ("mooncake", mooncake),
        "burstgpt.csv": ("burstgpt", burstgpt),
    }


def _line(text: str, rng: random.Random) -> tuple[list[str], int]:
    lines = text.split("\n")
    return lines, rng.randrange(1, max(2, len(lines) - 1))


def _replace_number(value: str) -> Mutation:
    """Put `value` where a number of the row was (a CSV cell or a JSON value)."""

    def mutate(text: str, rng: random.Random) -> str:
        lines, i = _line(text, rng)
        if lines[i].startswith("{"):
            parts = lines[i].split(": ")
            k = rng.randrange(1, len(parts))
            tail = parts[k].split(",", 1)
            parts[k] = value + ("," + tail[1] if len(tail) > 1 else ("}" if parts[k].endswith("}") else ""))
            lines[i] = ": ".join(parts)
        else:
            cells = lines[i].split(",")
            cells[rng.randrange(len(cells))] = value
            lines[i] = ",".join(cells)
        return "\n".join(lines)

    return mutate


def _cut(text: str, rng: random.Random) -> str:
    lines, i = _line(text, rng)
    lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
    return "\n".join(lines)


def _drop_or_duplicate(text: str, rng: random.Random) -> str:
    lines, i = _line(text, rng)
    if rng.random() < 0.5:
        lines.insert(i, lines[i])
    else:
        del lines[i]
    return "\n".join(lines)


def _flip(text: str, rng: random.Random) -> str:
    j = rng.randrange(len(text))
    return (
        text[:j]
        + rng.choice(["\x00", "\ufeff", '"', "{", "]", "\r", ",", "\udcff", "9" * 400])
        + text[j + 1 :]
    )


def _header_twice(text: str, rng: random.Random) -> str:
    head, _, rest = text.partition("\n")
    if head.startswith("{"):  # JSONL: a key twice instead
        return text.replace(":", ': 1, "timestamp":', 1)
    first = head.split(",")[rng.randrange(len(head.split(",")))]
    return f"{head},{first}\n" + "\n".join(f"{line},1" if line else line for line in rest.split("\n"))


def _nested(text: str, rng: random.Random) -> str:
    lines, i = _line(text, rng)
    lines[i] = '{"timestamp": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    return "\n".join(lines)


MUTATIONS: dict[str, Mutation] = {
    "1e12 tokens": _replace_number("1000000000000"),
    "negative": _replace_number("-5"),
    "5,000 digits": _replace_number("7" * 5000),
    "1e30": _replace_number("1e30"),
    "NaN": _replace_number("NaN"),
    "Infinity": _replace_number("Infinity"),
    "1e13 (ms as s)": _replace_number("10000000000000"),
    "year 9999": _replace_number("9999-12-31 23:59:59.0000000"),
    "year 0001": _replace_number("0001-01-01 00:00:00.0000000"),
    "fullwidth digits": _replace_number("１２"),
    "1_000": _replace_number("1_000"),
    "a string": _replace_number('"12"'),
    "empty cell": _replace_number(""),
    "JSON 100,000 deep": _nested,
    "header twice": _header_twice,
    "line cut": _cut,
    "line dropped or doubled": _drop_or_duplicate,
    "a byte changed": _flip,
    "empty file": lambda text, rng: "",
    "header only": lambda text, rng: text.split("\n", 1)[0] + "\n",
}


def _child(argv: list[str], conn: multiprocessing.connection.Connection) -> None:
    from infscale.cli import main

    stderr = io.StringIO()
    code: object = None
    crash = ""
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse
            code = exc.code
        except BaseException:
            crash = traceback.format_exc()
    text = stderr.getvalue()
    if "Traceback (most recent call last)" in text and not crash:
        crash = text
    conn.send((code, crash[-3000:], text[-500:]))


def _run_one(argv: list[str], timeout_s: float) -> tuple[str, float, str]:
    parent, child = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.get_context("fork").Process(target=_child, args=(argv, child))
    started = time.monotonic()
    process.start()
    child.close()
    if not parent.poll(timeout_s):
        process.kill()
        process.join()
        return "hang", time.monotonic() - started, ""
    code, crash, err = parent.recv()
    process.join()
    elapsed = time.monotonic() - started
    if crash:
        return "traceback", elapsed, crash
    return {0: "replayed", 2: "refused", 1: "exit 1"}.get(code, f"exit {code}"), elapsed, err


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench attack traces")
    parser.add_argument("--traces", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout-s", type=float, default=180.0)
    args = parser.parse_args(argv)
    print(f"load average {load_average()}")
    import infscale.cli  # noqa: F401  (imported once, before the forks)
    import replay.cli  # noqa: F401

    rng = random.Random(args.seed)
    bases = _bases()
    outcomes: Counter[str] = Counter()
    by_mutation: dict[str, Counter[str]] = {}
    crashes: list[str] = []
    slowest = (0.0, "")
    with tempfile.TemporaryDirectory(prefix="infscale-mutations-") as tmp:
        for k in range(args.traces):
            mutation = list(MUTATIONS)[k % len(MUTATIONS)]
            name = list(bases)[(k // len(MUTATIONS)) % len(bases)]
            fmt, text = bases[name]
            mutated = MUTATIONS[mutation](text, rng)
            path = Path(tmp) / f"{k:03d}-{name}"
            path.write_bytes(mutated.encode("utf-8", errors="surrogateescape"))
            out = Path(tmp) / f"out-{k}"
            argv_k = ["replay", "run", "--policy", "static-2", "--trace", str(path), "--format", fmt,
                      "--no-plots", "--quiet", "--out", str(out)]  # fmt: skip
            outcome, seconds, detail = _run_one(argv_k, args.timeout_s)
            outcomes[outcome] += 1
            by_mutation.setdefault(mutation, Counter())[outcome] += 1
            if outcome in ("traceback", "hang"):
                crashes.append(f"{path.name} ({mutation}): {outcome} {detail[-300:]}")
            if seconds > slowest[0]:
                slowest = (seconds, f"{path.name} ({mutation}, {outcome})")
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"traces: {args.traces} mutated traces (seed {args.seed}) through `infscale replay run`:")
    print(f"  {dict(outcomes)}")
    for mutation, counts in by_mutation.items():
        print(f"  {mutation:24} {dict(counts)}")
    print(f"  slowest: {slowest[0]:.1f} s ({slowest[1]}); largest child RSS {peak_mb:.0f} MB")
    for line in crashes[:5]:
        print(f"  ! {line}")
    ok = outcomes["traceback"] == 0 and outcomes["hang"] == 0
    print("goals (0 tracebacks, 0 hangs):", "met" if ok else "NOT met")
    return 0 if ok else 1
