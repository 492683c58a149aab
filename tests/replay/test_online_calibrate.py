"""`infscale replay calibrate`: the offline twin of an online run, the comparison, and the profile fit,
on online records made by the emulator's engine in virtual time (exact, no sleeping)."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from replay.calibrate import FitError, add_arguments, compare, fit_profile, pair, run, simulate_offline
from replay.emulate.batching import run_virtual
from replay.online import RequestRecord, Status, write_records
from replay.profiles import REFERENCE_70B, EngineProfile

TRUE = EngineProfile(
    max_running=8,
    kv_budget_tokens=50_000,
    prefill_tokens_per_s=50_000.0,
    decode_base_s=0.008,
    decode_per_running_s=0.0015,
)


def virtual_records(
    profile: EngineProfile, rate_per_s: float, n: int, seed: int = 3, overhead_s: float = 0.0
) -> list[RequestRecord]:
    """What `replay online` would record against one emulator, made in virtual time: sent at arrival,
    first token and end as the engine produced them (plus a fixed client overhead)."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1 / rate_per_s, n))
    arrival -= arrival[0]
    inputs = rng.integers(100, 4_000, n)
    outputs = rng.integers(3, 150, n)
    reqs = run_virtual(profile, arrival.tolist(), inputs.tolist(), outputs.tolist())
    return [
        RequestRecord(
            index=i,
            endpoint=0,
            scheduled_s=float(arrival[i]),
            sent_s=float(arrival[i]),
            first_token_s=r.first_token_s + overhead_s,
            finished_s=r.finished_s + overhead_s,
            input_tokens=int(inputs[i]),
            output_tokens=int(outputs[i]),
            generated_tokens=r.generated,
            status=Status.OK,
        )
        for i, r in enumerate(reqs)
    ]


@pytest.mark.parametrize(
    ("rate_per_s", "overhead_s"),
    [
        pytest.param(2.0, 0.0, id="light load"),
        pytest.param(4.0, 0.003, id="moderate load, 3 ms client overhead"),
    ],
)
def test_fit_recovers_the_engine_that_produced_the_measurements(rate_per_s: float, overhead_s: float) -> None:
    base = EngineProfile(max_running=8, kv_budget_tokens=50_000)  # reference timings as the start
    fit = fit_profile(virtual_records(TRUE, rate_per_s, 300, overhead_s=overhead_s), base)
    assert fit.profile.decode_base_s == pytest.approx(TRUE.decode_base_s, rel=0.05)
    assert fit.profile.decode_per_running_s == pytest.approx(TRUE.decode_per_running_s, rel=0.1)
    assert fit.profile.prefill_tokens_per_s == pytest.approx(TRUE.prefill_tokens_per_s, rel=0.05)
    assert fit.overhead_s == pytest.approx(overhead_s, abs=0.002)
    assert (fit.profile.max_running, fit.profile.kv_budget_tokens) == (8, 50_000)  # not identifiable: kept


@pytest.mark.parametrize(
    ("records", "message"),
    [
        pytest.param(
            virtual_records(TRUE, 400.0, 60), "endpoint to themselves", id="saturated run: nobody was alone"
        ),
        pytest.param([], "no successful request", id="nothing"),
        pytest.param(
            [RequestRecord(0, 0, 0.0, 0.0, 0.1, 0.2, 10, 2, 2, Status.OK)],
            ">= 3 requests with >= 3 generated tokens",
            id="answers too short",
        ),
    ],
)
def test_fit_says_what_is_missing(records: list[RequestRecord], message: str) -> None:
    with pytest.raises(FitError, match=message):
        fit_profile(records, TRUE)


def test_the_offline_twin_of_an_emulated_run_agrees() -> None:
    """The emulator's engine and the offline engine on the same requests: per request within a step
    plus a tick (light load), the percentiles within 2 %."""
    records = virtual_records(TRUE, 3.0, 120)
    offline = simulate_offline(records, replace(REFERENCE_70B, engine=TRUE), endpoints=1, tick_s=0.002)
    p = pair(records, offline)
    doc = compare(p)
    assert doc["requests_compared"] == 120
    step = TRUE.step_s(TRUE.max_running)
    assert doc["per_request"]["ttft_abs_diff_p50_s"] <= step + 0.002
    for name in ("ttft_p50_s", "ttft_p95_s", "e2e_p50_s", "e2e_p95_s"):
        row = doc["metrics"][name]
        assert row["online"] == pytest.approx(row["offline"], rel=0.02, abs=step)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_cli_writes_the_comparison_the_plot_and_a_loadable_profile(tmp_path: Path) -> None:
    online = tmp_path / "online"
    online.mkdir()
    write_records(online / "requests.jsonl", virtual_records(TRUE, 2.0, 120))
    (online / "report.json").write_text(json.dumps({"online": {"endpoints": ["http://a:1"]}}))
    profile = tmp_path / "true.yaml"
    profile.write_text(
        "engine: {max_running: 8, kv_budget_tokens: 50000, prefill_tokens_per_s: 50000, "
        "decode_base_s: 0.008, decode_per_running_s: 0.0015}\n"
    )
    out = tmp_path / "out"
    assert (
        run(
            _args(
                "--online",
                str(online),
                "--profile",
                str(profile),
                "--fit",
                "--tick",
                "0.005",
                "--out",
                str(out),
            )
        )
        == 0
    )
    doc = json.loads((out / "calibrate.json").read_text())
    assert doc["schema"] == "infscale.replay.calibrate/v1" and doc["endpoints"] == 1
    assert doc["requests_compared"] == 120
    assert (out / "calibrate.png").stat().st_size > 10_000
    from replay.emulate.profiles import get_engine_profile

    fitted = get_engine_profile(str(out / "fitted-profile.yaml"))
    assert fitted.decode_base_s == pytest.approx(TRUE.decode_base_s, rel=0.05)
    assert "| ttft_p50_s |" in (out / "calibrate.md").read_text()


@pytest.mark.parametrize(
    ("setup", "argv", "message"),
    [
        pytest.param(None, [], "requests.jsonl", id="not an online directory"),
        pytest.param("bad-line", [], "requests.jsonl:1", id="unreadable record"),
        pytest.param("ok", ["--tick", "0"], "--tick must be a finite number > 0, got 0.0", id="tick"),
        pytest.param("ok", ["--profile", "nope"], "profile 'nope'", id="unknown profile"),
    ],
)
def test_cli_errors_exit_2(
    tmp_path: Path, setup: str | None, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    online = tmp_path / "online"
    online.mkdir()
    if setup == "bad-line":
        (online / "requests.jsonl").write_text("{}\n")
    elif setup == "ok":
        write_records(online / "requests.jsonl", virtual_records(TRUE, 2.0, 10))
    assert run(_args("--online", str(online), "--out", str(tmp_path / "o"), *argv)) == 2
    assert message in capsys.readouterr().err


def test_requests_not_sent_stay_out_of_the_twin() -> None:
    records = virtual_records(TRUE, 2.0, 20)
    late = RequestRecord(20, -1, 99.0, math.nan, math.nan, math.nan, 10, 10, 0, Status.NOT_SENT)
    offline = simulate_offline([*records, late], REFERENCE_70B, endpoints=1, tick_s=0.01)
    assert len(offline.arrival_s) == 20
