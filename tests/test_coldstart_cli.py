"""`infscale coldstart` (autoscaler/coldstart_cli.py): the cold-start model's table, breakdown and
JSON, its flags for the cluster, and its errors (exit 2, the flag named); the model itself is
tests/test_coldstart.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infscale.cli import main

REPO = Path(__file__).resolve().parent.parent

SEED_ARGS = ["coldstart", "--weights-gb", "140", "--storage-gbps", "10"]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(args)
    except SystemExit as stop:  # argparse's own usage errors
        code = int(stop.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli([*SEED_ARGS, "--replicas", "8"], capsys)
    assert code == 0
    headline, summary, header, *rows = out.splitlines()
    assert "8 replica(s) of 140 GB from 10 GB/s shared" in headline
    assert summary.startswith("first ready at 112.0 s, all ready at 112.0 s")
    assert header.split()[:2] == ["replica", "node"] and header.split()[-1] == "ready"
    assert len(rows) == 8
    assert [r.split()[-1] for r in rows] == ["112.0"] * 8
    assert len({len(line) for line in (header, *rows)}) == 1  # aligned: every line equally wide


def test_cli_table_breakdown(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "--replicas",
        "1",
        "--gpus-per-replica",
        "8",
        "--free-gpus",
        "4,4,4,4",
        "--node-provision-s",
        "300",
    ]
    args += ["--image-pull-s", "60", "--warmup-s", "45"]
    code, out, _ = run_cli([*SEED_ARGS, *args], capsys)
    assert code == 0
    # replica, node, provision, pull, init, gate, load from, load start, load, waiting, compile,
    # cache, warm-up, ready
    expected = ("0", "new-4", "300.0", "60.0", "0.0", "0.0", "shared", "360.0", "14.0", "0.0", "0.0", "-")
    assert tuple(out.splitlines()[-1].split()) == (*expected, "45.0", "419.0")


def test_cli_table_shows_the_gate_and_the_compile_cache(capsys: pytest.CaptureFixture[str]) -> None:
    phases = ["--engine-init-s", "20", "--compile-s", "45", "--compile-cached-s", "8", "--warmup-s", "5"]
    args = [*phases, "--compile-cache", "cluster", "--max-concurrent-loads", "1", "--replicas", "8"]
    code, out, _ = run_cli([*SEED_ARGS, *args], capsys)
    assert code == 0
    headline, summary, _, *rows = out.splitlines()
    assert (
        "load gate: 1 slot(s), load" in headline and "compile 45 s, 8 s cached (cache: cluster)" in headline
    )
    # one slot: loads 20-34, 34-48, ...; the first compile (miss) fills the shared cache at 79, so
    # the loads ending at 34, 48 and 62 compile 45 s, those from 90 on 8 s (76 + 14 = 90)
    got = [(r.split()[5], r.split()[11], r.split()[-1]) for r in rows]
    assert got == [
        ("0.0", "miss", "84.0"),
        ("14.0", "miss", "98.0"),
        ("28.0", "miss", "112.0"),
        ("42.0", "miss", "126.0"),
        ("56.0", "hit", "103.0"),
        ("70.0", "hit", "117.0"),
        ("84.0", "hit", "131.0"),
        ("98.0", "hit", "145.0"),
    ]
    assert summary.startswith("first ready at 84.0 s, all ready at 145.0 s")


def test_cli_cluster_flags_for_caches_and_peers(capsys: pytest.CaptureFixture[str]) -> None:
    spec = ["--compile-s", "45", "--compile-cached-s", "8", "--compile-cache", "node", "--peer-gbps", "35"]
    state = ["--free-gpus", "8", "--image-cached-nodes", "all", "--compile-cached-nodes", "0"]
    code, out, _ = run_cli([*SEED_ARGS, *spec, *state, "--peer-sources", "1", "--json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert (doc["compile_cached_nodes"], doc["peer_sources"], doc["compile_cache_warm"]) == ([0], 1, False)
    (replica,) = doc["replicas"]
    assert (replica["tier"], replica["load_s"], replica["compile_hit"]) == ("peer", 4.0, True)
    assert replica["ready_s"] == pytest.approx(140 / 35 + 8)


def test_cli_nothing_to_start(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli([*SEED_ARGS, "--replicas", "0"], capsys)
    assert (code, out.splitlines()[-1]) == (0, "nothing to start")
    code, out, _ = run_cli([*SEED_ARGS, "--replicas", "0", "--json"], capsys)
    assert (code, json.loads(out)["replicas"], json.loads(out)["all_ready_s"]) == (0, [], None)


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "--replicas",
        "3",
        "--free-gpus",
        "1,1",
        "--image-cached-nodes",
        "all",
        "--loading-gb",
        "70",
        "--json",
    ]
    code, out, _ = run_cli([*SEED_ARGS, *args], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["spec"]["weights_gb"] == 140 and doc["image_cached_nodes"] == [0, 1]
    replicas = doc["replicas"]
    assert [(r["node"], r["new_node"]) for r in replicas] == [(0, False), (1, False), (2, True)]
    # four at 2.5 GB/s: the old loader's 70 GB end at 28 s; the three then have 70 left at 10/3: 21 s
    assert [r["ready_s"] for r in replicas] == pytest.approx([49.0] * 3)
    assert doc["all_ready_s"] == pytest.approx(49.0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--storage-gbps", "0"], "--storage-gbps must be a finite number > 0", id="zero bandwidth"
        ),
        pytest.param(["--weights-gb", "-1"], "--weights-gb must be a finite number >= 0", id="negative size"),
        pytest.param(
            ["--gpus-per-replica", "16"], "--gpus-per-replica must be <= gpus_per_node (8)", id="too big"
        ),
        pytest.param(["--per-loader-gbps", "-2"], "--per-loader-gbps must be", id="negative cap"),
        pytest.param(["--replicas", "-1"], "--replicas must be >= 0", id="negative replicas"),
        pytest.param(["--free-gpus", "8,-1"], "--free-gpus (entry 1) must be >= 0", id="negative free GPUs"),
        pytest.param(
            ["--free-gpus", "8,x"], "argument --free-gpus: expected comma-separated", id="not a number"
        ),
        pytest.param(["--loading-gb", "nan"], "--loading-gb (entry 0) must be a finite", id="NaN remaining"),
        pytest.param(
            ["--free-gpus", "8", "--weights-cached-nodes", "0"],
            "--weights-cached-nodes must be empty",
            id="weights cached without a cache speed",
        ),
        pytest.param(
            ["--image-cached-nodes", "0"], "--image-cached-nodes must be a node index", id="unknown node"
        ),
        pytest.param(["--warmup-s", "soon"], "argument --warmup-s: invalid float value", id="not a float"),
        pytest.param(["--compile-cache", "disk"], "argument --compile-cache: invalid choice", id="bad cache"),
        pytest.param(
            ["--compile-s", "8", "--compile-cached-s", "45"],
            "--compile-cached-s must be <= compile_s (8)",
            id="a hit slower than a miss",
        ),
        pytest.param(["--max-concurrent-loads", "0"], "--max-concurrent-loads must be", id="no slot"),
        pytest.param(["--peer-sources", "-1"], "--peer-sources must be >= 0", id="negative peers"),
        pytest.param(
            ["--free-gpus", "8", "--compile-cached-nodes", "0"],
            "--compile-cached-nodes must be empty unless compile_cache is node",
            id="compile artifacts without a node cache",
        ),
    ],
)
def test_cli_bad_input_exits_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli([*SEED_ARGS, *args], capsys)  # later flags override the seed's
    assert code == 2
    assert message in err
    assert out == ""


def test_cli_missing_required_flag_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["coldstart", "--storage-gbps", "10"], capsys)
    assert code == 2 and "--weights-gb" in err


def test_console_entry_point_runs() -> None:
    """The real process, as a user runs it: `python -m infscale coldstart ...`."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ok = subprocess.run(
        [sys.executable, "-m", "infscale", *SEED_ARGS, "--replicas", "8", "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert {r["ready_s"] for r in json.loads(ok.stdout)["replicas"]} == {112.0}
    bad = subprocess.run(
        [sys.executable, "-m", "infscale", *SEED_ARGS, "--storage-gbps", "0"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        check=False,
    )
    assert bad.returncode == 2 and "--storage-gbps" in bad.stderr
