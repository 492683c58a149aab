"""Every command in README.md's ```sh blocks runs and exits 0, as a user would paste it.

Found, not listed: a command added to the README later is run without anyone editing this test.
What is not run, and why, is decided by the command's first word:
  make      `make test` is this suite and `make demo` is `infscale replay compare` (run below);
  kubectl   needs a cluster (these machines have kubectl but no kube-apiserver);
and a line that pipes `kubectl` into infscale needs the cluster too. The other lines of the
same block still run.

To stay quick, a replay over the embedded 2-hour trace runs on its first 5 minutes (`--end-s 300`
is added when the command sets no window) without plots; the commands are otherwise unchanged,
with the working directory a scratch folder that sees the checkout's examples/ and deploy/.
A block whose lines end in `&` starts those servers, runs the rest (retrying for a few seconds
while the servers come up) and stops them.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
NEEDS_CLUSTER = ("kubectl",)
NOT_RUN = {"make": "make test is this suite; make demo is infscale replay compare, run here"}
START_UP_S = 20.0


def blocks() -> list[list[str]]:
    text = README.read_text(encoding="utf-8")
    found = []
    for body in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        lines = [line.strip() for line in body.splitlines()]
        found.append([line for line in lines if line and not line.startswith("#")])
    return found


def _id(block: list[str]) -> str:
    return block[0][:60]


def _not_run(words: list[str]) -> str | None:
    """Why this command is not run here, or None."""
    if not words:
        return "empty"
    if words[0] in NEEDS_CLUSTER or "kubectl" in words:
        return "needs a Kubernetes cluster"
    return NOT_RUN.get(words[0])


def _quick(words: list[str], scratch: Path) -> list[str]:
    if words[:2] == ["infscale", "replay"] and len(words) > 2 and words[2] in ("run", "compare", "sweep"):
        if "--trace" not in words and "--end-s" not in words:
            words = [*words, "--end-s", "300"]
        words = [*words, "--no-plots", "--quiet"]
        if "--out" not in words:
            words = [*words, "--out", str(scratch / "replay-out")]
    return words


def _env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)  # the venv's infscale first
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}


def _ports_free(block: list[str]) -> bool:
    for port in re.findall(r"127\.0\.0\.1:(\d+)", " ".join(block)):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", int(port))) == 0:
                return False
    return True


@pytest.mark.parametrize("block", [pytest.param(b, id=_id(b)) for b in blocks()])
def test_readme_block_runs(block: list[str], tmp_path: Path) -> None:
    commands = [shlex.split(line, comments=True) for line in block]
    runnable = [_not_run(words) is None for words in commands]
    if not any(runnable):
        pytest.skip("; ".join(sorted({str(_not_run(w)) for w in commands})))
    for name in ("examples", "deploy"):
        (tmp_path / name).symlink_to(ROOT / name)
    servers = [w[:-1] for w, ok in zip(commands, runnable, strict=True) if ok and w[-1] == "&"]
    if servers and not _ports_free(block):
        pytest.skip("a port the example listens on is taken on this machine")
    started: list[subprocess.Popen[bytes]] = []
    try:
        for words in servers:
            started.append(
                subprocess.Popen(
                    words,
                    cwd=tmp_path,
                    env=_env(),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        for line, words, ok in zip(block, commands, runnable, strict=True):
            if not ok or words[-1] == "&":
                continue
            # infscale commands run as parsed (and shortened); anything else (eval "$(...)") through bash
            argv = _quick(words, tmp_path) if words[0] == "infscale" else ["bash", "-c", line]
            deadline = time.monotonic() + (START_UP_S if started else 0)
            while True:
                done = subprocess.run(
                    argv, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300
                )
                if done.returncode == 0 or time.monotonic() > deadline:
                    break
                time.sleep(0.5)  # the servers above are still starting
            assert done.returncode == 0, (
                f"{line}\nexit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            )
    finally:
        for proc in started:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)


def test_user_docs_name_no_private_paths() -> None:
    """README.md and docs/ are read by users, who have no ../shared: traces are named by their
    public source (docs/traces.md, "Getting the traces")."""
    offenders = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in [README, *sorted((ROOT / "docs").glob("*.md"))]
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "../shared" in line or "/work/" in line
    ]
    assert not offenders, "\n".join(offenders)
