"""The built-in scenarios (replay/profiles.py) and `infscale replay scenarios`: their cold-start
numbers worked out by hand, the listing and its JSON, the `infscale coldstart` command it prints,
user files with the new cold-start fields, and a short replay of every scenario."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from autoscaler.policy.coldstart import predict_ready
from autoscaler.policy.spec import CompileCache, GateScope
from infscale.cli import main
from replay.cli import run_policy
from replay.policies import PolicyParams
from replay.profiles import SCENARIOS, ProfileError
from replay.scenariofile import get_scenario
from replay.traces.synthetic import SyntheticSpec, synthetic_trace

# (one replica on a cold cluster, eight together on a cold cluster), by hand:
#   reference-70b: 90 node + 30 pull + 140/10 load + 30 warm-up; eight share 10 GB/s: 140/1.25 = 112
#   fast-load-70b: 90 + 30 + 30 init + 140/3.75 load + 55 compile (cold cache) + 5; eight at 3.75
#     each (8 x 3.75 = 30 of the 100 GB/s): the same
#   one-gpu-8b: 90 + 30 + 30 + 16/10 + 55 + 5; eight share 10 GB/s on one node: 16/1.25 = 12.8
EXPECTED = {
    "reference-70b": (90 + 30 + 14 + 30, 90 + 30 + 112 + 30),
    "fast-load-70b": (90 + 30 + 30 + 140 / 3.75 + 55 + 5, 90 + 30 + 30 + 140 / 3.75 + 55 + 5),
    "one-gpu-8b": (90 + 30 + 30 + 1.6 + 55 + 5, 90 + 30 + 30 + 12.8 + 55 + 5),
}


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_built_ins_are_the_three_scenarios() -> None:
    assert list(SCENARIOS) == list(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_cold_start_of_each_scenario(name: str) -> None:
    spec = SCENARIOS[name].cold_start
    alone, together = EXPECTED[name]
    assert predict_ready(spec, 1)[0].ready_s == pytest.approx(alone)
    assert [r.ready_s for r in predict_ready(spec, 8)] == pytest.approx([together] * 8)


def test_the_seed_storage_is_kept_in_reference_70b() -> None:
    spec = SCENARIOS["reference-70b"].cold_start
    assert (spec.weights_gb, spec.storage_gbps, spec.per_loader_gbps) == (140, 10, None)
    loads = [r.load_s for r in predict_ready(replace(spec, image_pull_s=0, node_provision_s=0), 8)]
    assert loads == pytest.approx([112.0] * 8)


def test_fast_load_reloads_from_the_node_cache_with_a_compile_cache_hit() -> None:
    spec = SCENARIOS["fast-load-70b"].cold_start
    (r,) = predict_ready(
        spec,
        1,
        free_gpus_per_node=(4,),
        image_cached_nodes=(0,),
        weights_cached=(0,),
        compile_cache_warm=True,
    )
    # 30 init + 140 / 26 from the node's NVMe + 18 (compile cache hit) + 5
    assert (r.tier, r.compile_hit) == ("cache", True)
    assert r.ready_s == pytest.approx(30 + 140 / 26 + 18 + 5)


def test_listing_shows_each_scenario_with_its_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["replay", "scenarios"], capsys)
    assert code == 0
    blocks = out.split("\n\n")
    assert [b.split(":", 1)[0] for b in blocks] == list(EXPECTED)
    for block, (alone, together) in zip(blocks, EXPECTED.values(), strict=True):
        assert f"one replica ready at {alone:.1f} s" in block
        assert f"8 together: each ready at {together:.1f} s" in block
        for label in ("weights", "load path", "start-up", "warm node", "engine", "SLO", "reproduce"):
            assert re.search(rf"^  {label} ", block, re.M), (label, block)
    assert "98.0 of it sharing" in blocks[0]  # eight share the seed's storage: 112 - 14


def test_listing_json_and_the_command_it_prints_agree(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["replay", "scenarios", "--json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "infscale.replay.scenarios/v1"
    for entry, (alone, together) in zip(doc["scenarios"], EXPECTED.values(), strict=True):
        cold = entry["cold_start"]
        assert cold["alone_cold_cluster"]["ready_s"] == pytest.approx(alone)
        assert cold["8_together_cold_cluster"]["all_ready_s"] == pytest.approx(together)
        assert entry["scenario"]["cold_start"]["weights_gb"] == SCENARIOS[entry["name"]].cold_start.weights_gb
        # the printed command is the same model: infscale coldstart gives the same eight
        command = entry["reproduce"]
        assert command[:2] == ["infscale", "coldstart"]
        code, out, _ = run_cli([*command[1:], "--json"], capsys)
        assert code == 0
        assert [r["ready_s"] for r in json.loads(out)["replicas"]] == pytest.approx([together] * 8)


def test_listing_takes_names_and_files_and_refuses_unknown_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "gated.yaml"
    path.write_text("base: fast-load-70b\nname: gated\ncold_start: {max_concurrent_loads: 1}\n")
    code, out, _ = run_cli(["replay", "scenarios", "one-gpu-8b", str(path)], capsys)
    assert code == 0
    assert [b.split(":", 1)[0] for b in out.split("\n\n")] == ["one-gpu-8b", "gated"]
    assert "load gate 1 slot(s) (load)" in out
    code, out, err = run_cli(["replay", "scenarios", "nope"], capsys)
    assert (code, out) == (2, "")
    assert "scenario 'nope' is neither a built-in (reference-70b, fast-load-70b, one-gpu-8b)" in err


def test_a_scenario_file_sets_the_new_cold_start_fields(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "base: fast-load-70b\n"
        "cold_start: {max_concurrent_loads: 2, load_gate_scope: startup, compile_cache: node,\n"
        "             node_cache_gb: 500, peer_gbps: 22.5, engine_init_s: 12}\n"
    )
    cold = get_scenario(str(path)).cold_start
    assert (cold.max_concurrent_loads, cold.load_gate_scope, cold.compile_cache) == (
        2,
        GateScope.STARTUP,
        CompileCache.NODE,
    )
    assert (cold.node_cache_gb, cold.peer_gbps, cold.engine_init_s) == (500, 22.5, 12)
    assert cold.per_loader_gbps == 3.75  # the rest from the base


@pytest.mark.parametrize(
    ("cold_start", "message"),
    [
        ("{compile_cache: disk}", "cold_start.compile_cache must be one of none, node, cluster, got 'disk'"),
        ("{load_gate_scope: pod}", "cold_start.load_gate_scope must be one of load, startup, got 'pod'"),
        ("{max_concurrent_loads: 0}", "cold_start.max_concurrent_loads must be unset or an integer >= 1"),
        ("{max_concurrent_loads: 1.5}", "cold_start.max_concurrent_loads must be an integer, got 1.5"),
        ("{compile_cached_s: 90}", "cold_start.compile_cached_s must be <= compile_s (55)"),
        ("{peer_gbps: -1}", "cold_start.peer_gbps must be unset or a finite number > 0, got -1.0"),
    ],
)
def test_a_bad_cold_start_field_is_named(tmp_path: Path, cold_start: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"base: fast-load-70b\ncold_start: {cold_start}\n")
    with pytest.raises(ProfileError, match=re.escape(message)):
        get_scenario(str(path))


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_scenario_replays(name: str) -> None:
    # ten minutes rising from 2 to 12 requests/s: the HPA starts replicas, every request is served,
    # and each replica started becomes ready no sooner than the scenario's fastest start allows
    spec = SyntheticSpec(
        duration_s=600.0, trough_rps=2.0, peak_rps=12.0, period_s=1200.0, peak_at_s=600.0, spikes_per_hour=0
    )
    trace = synthetic_trace(replace(spec, bursts=()), seed=1)
    scenario = SCENARIOS[name]
    result = run_policy(trace, scenario, "hpa", PolicyParams(target=2.0))
    assert np.isfinite(result.requests.finished_s).all()
    started = [r for r in result.replicas if r.cold and np.isfinite(r.ready_s)]
    assert started, "the HPA started no replica"
    cold = scenario.cold_start
    fastest = cold.engine_init_s + cold.compile_cached_s + cold.warmup_s  # a warm node, cache hits, no load
    assert min(r.ready_s - r.requested_s for r in started) >= fastest


def test_replay_flag_sets_the_load_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sample = Path(__file__).resolve().parents[2] / "examples" / "traces" / "azure-sample.csv"
    args = ["replay", "run", "--policy", "hpa", "--trace", str(sample), "--format", "azure"]
    args += ["--scenario", "fast-load-70b", "--no-plots", "--quiet", "--out", str(tmp_path)]
    code, _, _ = run_cli([*args, "--max-concurrent-loads", "2"], capsys)
    assert code == 0
    cold = json.loads((tmp_path / "report.json").read_text())["scenario"]["cold_start"]
    assert (cold["max_concurrent_loads"], cold["per_loader_gbps"]) == (2, 3.75)  # the rest as the scenario
    code, out, err = run_cli([*args, "--max-concurrent-loads", "0"], capsys)
    assert (code, out) == (2, "")
    assert "cold_start.max_concurrent_loads must be unset or an integer >= 1, got 0" in err
