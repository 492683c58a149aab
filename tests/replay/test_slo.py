"""SLO verdicts (replay/slo.py), the scenario's `slo` section, and the report's SLO and goodput figures."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from replay import report
from replay.engine import RequestResults
from replay.policies import StaticPolicy
from replay.profiles import REFERENCE_70B, ProfileError
from replay.scenariofile import get_scenario, scenario_from_mapping
from replay.simulate import RunResult, simulate
from replay.slo import SLO_PRESETS, SloSpec, judge
from replay.trace import Trace

NAN = math.nan


def _judge(slo: SloSpec, rows: list[tuple[float, float, float, int, int]]) -> tuple[list[bool], ...]:
    """rows: (arrival, first token, finished, input tokens, output tokens)."""
    a, f, e, i, o = (np.array(c, dtype=float) for c in zip(*rows, strict=True))
    v = judge(slo, a, f, e, i.astype(np.int64), o.astype(np.int64))
    return v.ttft_met.tolist(), v.tpot_met.tolist(), v.good.tolist()


def test_a_request_is_good_when_it_meets_both_targets() -> None:
    rows = [
        (0.0, 1.0, 1.0 + 9 * 0.1, 100, 10),  # TTFT 1 s, TPOT 100 ms: good
        (10.0, 12.5, 12.5 + 9 * 0.1, 100, 10),  # TTFT 2.5 s: misses TTFT only
        (20.0, 20.5, 20.5 + 10 * 0.3, 100, 11),  # TPOT 300 ms: misses TPOT only
        (30.0, 31.0, 31.0, 100, 1),  # one output token: no TPOT, meets the TPOT target
        (40.0, NAN, NAN, 100, 10),  # dropped: misses both
        (50.0, 52.0, 52.0 + 4 * 0.2, 100, 5),  # exactly on both targets: met (<=)
    ]
    ttft, tpot, good = _judge(SLO_PRESETS["mlperf-server"], rows)
    assert ttft == [True, False, True, True, False, True]
    assert tpot == [True, True, False, True, False, True]
    assert good == [True, False, False, True, False, True]


def test_length_aware_ttft_target_grows_with_the_prompt() -> None:
    slo = SloSpec(ttft_s=1.0, ttft_tokens_per_s=1_000.0, tpot_s=None)
    rows = [
        (0.0, 2.9, 5.0, 2_000, 10),  # target 1 + 2 = 3 s
        (0.0, 1.2, 5.0, 100, 10),  # target 1.1 s
        (0.0, 0.5, NAN, 100, 10),  # first token in time, never finished: no TPOT verdict, not good
    ]
    ttft, tpot, good = _judge(slo, rows)
    assert ttft == [True, False, True]
    assert tpot == [True, True, False]  # no TPOT target: finishing is enough
    assert good == [True, False, False]


def test_presets_are_mlperfs_server_constraints() -> None:
    # mlcommons/inference loadgen/mlperf.conf, llama2-70b and llama2-70b-interactive (ms)
    assert SLO_PRESETS["mlperf-server"] == SloSpec(ttft_s=2.0, tpot_s=0.2)
    assert SLO_PRESETS["mlperf-interactive"] == SloSpec(ttft_s=0.45, tpot_s=0.04)
    assert REFERENCE_70B.slo == SLO_PRESETS["mlperf-server"]


@pytest.mark.parametrize(
    ("doc", "want"),
    [
        pytest.param({"slo": "mlperf-interactive"}, SLO_PRESETS["mlperf-interactive"], id="preset name"),
        pytest.param(
            {"slo": {"preset": "mlperf-interactive", "ttft_tokens_per_s": 4000}},
            SloSpec(0.45, 4000.0, 0.04),
            id="preset with an override",
        ),
        pytest.param({"slo": {"tpot_s": None}}, SloSpec(2.0, None, None), id="TTFT alone"),
        pytest.param({"slo": {"ttft_s": 3}}, SloSpec(3.0, None, 0.2), id="int for float, rest from base"),
        pytest.param({"slo_ttft_s": 1}, SloSpec(1.0, None, 0.2), id="the older slo_ttft_s"),
    ],
)
def test_scenario_slo_section(doc: dict[str, object], want: SloSpec) -> None:
    assert scenario_from_mapping(doc).slo == want


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        pytest.param({"slo": "mlperf-offline"}, "unknown SLO preset 'mlperf-offline' (known: mlperf-server"),
        pytest.param(
            {"slo": 2}, "slo must be a preset name (mlperf-server, mlperf-interactive) or a mapping"
        ),
        pytest.param({"slo": {"preset": 1}}, "slo.preset must be a string, got 1"),
        pytest.param({"slo": {"ttft_tokens_per_s": 0}}, "slo.ttft_tokens_per_s must be a finite number > 0"),
        pytest.param({"slo": {"tpot_s": "fast"}}, "slo.tpot_s must be a number, got 'fast'"),
        pytest.param(
            {"slo": {"ttft": 1}}, "unknown field slo.ttft (known: ttft_s, ttft_tokens_per_s, tpot_s)"
        ),
        pytest.param({"slo_ttft_s": 1, "slo": {"tpot_s": 0.1}}, "not both slo and the older slo_ttft_s"),
        pytest.param({"slo_ttft_s": -1}, "slo.ttft_s must be a finite number > 0, got -1.0"),
    ],
)
def test_bad_slo_names_the_field(doc: dict[str, object], message: str) -> None:
    with pytest.raises(ProfileError, match=re.escape(message)):
        scenario_from_mapping(doc)


def test_scenario_file_with_slo_preset(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: chat\nslo: mlperf-interactive\n", encoding="utf-8")
    assert get_scenario(str(path)).slo == SLO_PRESETS["mlperf-interactive"]


def _result(rows: list[tuple[float, float, float, int, int]], gpu_seconds: float) -> RunResult:
    a, f, e, i, o = (np.array(c, dtype=float) for c in zip(*rows, strict=True))
    n = len(a)
    requests = RequestResults(
        replica=np.zeros(n, dtype=np.int64),
        admitted_s=a.copy(),
        first_token_s=f,
        finished_s=e,
        dropped=~np.isfinite(e),
        preemptions=np.zeros(n, dtype=np.int64),
        prefix_hit_tokens=np.zeros(n, dtype=np.int64),
    )
    return RunResult(
        policy="p",
        scenario=REFERENCE_70B,
        trace_name="t",
        arrival_s=a,
        input_tokens=i.astype(np.int64),
        output_tokens=o.astype(np.int64),
        requests=requests,
        timeline=(),
        replicas=(),
        end_s=float(np.nanmax(e)),
        gpu_seconds=gpu_seconds,
        replica_seconds=0.0,
        scale_events=0,
        cold_starts=0,
        wall_seconds=1.0,
    )


def test_summary_attainment_goodput_and_tpot_percentiles() -> None:
    rows = [
        (0.0, 1.0, 1.0 + 9 * 0.1, 100, 10),  # good, TPOT 100 ms
        (10.0, 12.5, 12.5 + 9 * 0.1, 100, 10),  # TTFT miss, TPOT 100 ms
        (20.0, 20.5, 20.5 + 10 * 0.3, 100, 11),  # TPOT miss (300 ms)
        (30.0, 31.0, 31.0, 100, 1),  # good, no TPOT
        (40.0, 40.2, 40.2 + 2 * 0.05, 100, 3),  # good, TPOT 50 ms
    ]
    s = report.policy_summary(_result(rows, gpu_seconds=2 * 3600.0))
    assert s["slo_attainment"] == pytest.approx(3 / 5)
    assert s["ttft_attainment"] == pytest.approx(4 / 5)
    assert s["tpot_attainment"] == pytest.approx(4 / 5)
    assert s["goodput_rps"] == pytest.approx(3 / 40)  # good requests over the 40 s of arrivals
    assert s["goodput_per_gpu_hour"] == pytest.approx(3 / 2)
    # TPOTs of the four multi-token requests: 0.05, 0.1, 0.1, 0.3 (the 1-token one has none)
    assert s["tpot_p50_s"] == pytest.approx(float(np.percentile([0.05, 0.1, 0.1, 0.3], 50)))
    assert s["tpot_p99_s"] == pytest.approx(float(np.percentile([0.05, 0.1, 0.1, 0.3], 99)))
    assert s["preemptions"] == 0 and math.isnan(s["prefix_cache_hit_rate"])


def test_same_run_judged_by_three_slos() -> None:
    # one request at a time (no queueing), prompts 400 to 8,000 tokens: TTFT grows with the prompt
    n = 20
    trace = Trace("lengths", np.arange(n) * 30.0, 400 * np.arange(1, n + 1), np.full(n, 50))
    run = simulate(trace, REFERENCE_70B, StaticPolicy(1))
    interactive = SLO_PRESETS["mlperf-interactive"]
    length_aware = replace(interactive, ttft_tokens_per_s=0.5 / REFERENCE_70B.engine.prefill_token_s)
    got = {
        name: report.policy_summary(replace(run, scenario=replace(REFERENCE_70B, slo=slo)))["slo_attainment"]
        for name, slo in (
            ("interactive", interactive),
            ("server", REFERENCE_70B.slo),
            ("aware", length_aware),
        )
    }
    assert 0 < got["interactive"] < 1  # the long prompts' own prefill is over 450 ms
    assert got["server"] == got["aware"] == 1.0  # idle replica: the allowance covers any prompt


def test_report_json_and_markdown_carry_the_slo(tmp_path: Path) -> None:
    trace = Trace("one", np.array([0.0, 1.0]), np.array([1_600, 800]), np.array([50, 1]))
    doc = report.build_report(trace, [simulate(trace, REFERENCE_70B, StaticPolicy(1))], seed=None)
    report.write_report(tmp_path, doc, plots=False)
    loaded = json.loads((tmp_path / "report.json").read_text())
    assert loaded["schema"] == "infscale.replay.report/v2"
    assert loaded["scenario"]["slo"] == {"ttft_s": 2.0, "ttft_tokens_per_s": None, "tpot_s": 0.2}
    p = loaded["policies"]["static-1"]
    assert p["slo_attainment"] == p["ttft_attainment"] == p["tpot_attainment"] == 1.0
    assert p["prefix_cache_hit_rate"] is None and p["preemptions"] == 0
    assert p["goodput_rps"] == pytest.approx(2.0)  # 2 good requests over a 1 s arrival span
    md = (tmp_path / "report.md").read_text()
    assert "SLO TTFT <= 2 s, TPOT <= 200 ms" in md
    assert "| static-1 | 100.00% | 100.00% | 100.00% |" in md


def test_cli_slo_preset_replaces_the_scenarios(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from infscale.cli import main

    out = tmp_path / "out"
    argv = [
        "replay",
        "run",
        "--policy",
        "static-2",
        "--end-s",
        "60",
        "--no-plots",
        "--quiet",
        "--out",
        str(out),
    ]
    assert main([*argv, "--slo-preset", "mlperf-interactive"]) == 0
    doc = json.loads((out / "report.json").read_text())
    assert doc["scenario"]["slo"] == {"ttft_s": 0.45, "ttft_tokens_per_s": None, "tpot_s": 0.04}
    assert "SLO TTFT <= 0.45 s, TPOT <= 40 ms" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:  # argparse's own usage error
        main([*argv, "--slo-preset", "mlperf-offline"])
    assert exited.value.code == 2
    assert "invalid choice: 'mlperf-offline'" in capsys.readouterr().err
