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

from replay.calibrate import add_arguments, compare, pair, run, simulate_offline
from replay.emulate.batching import run_virtual
from replay.online.records import RequestRecord, Status, write_records
from replay.profilefit import FitError, fit_profile
from replay.profiles import REFERENCE_70B, EngineProfile

TRUE = EngineProfile(
    max_num_seqs=8,
    max_num_batched_tokens=2_048,
    kv_budget_tokens=50_000,
    step_base_s=0.008,
    prefill_token_s=2.0e-5,
    prefill_attention_s=2.0e-9,
    decode_request_s=0.0015,
    decode_context_s=2.0e-7,
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
        pytest.param(3.0, 0.003, id="busier, 3 ms client overhead"),
    ],
)
def test_fit_recovers_the_engine_that_produced_the_measurements(rate_per_s: float, overhead_s: float) -> None:
    # the run's limits, reference-70b's step times as the start
    base = replace(
        REFERENCE_70B.engine, max_num_seqs=8, max_num_batched_tokens=2_048, kv_budget_tokens=50_000
    )
    fit = fit_profile(virtual_records(TRUE, rate_per_s, 300, overhead_s=overhead_s), base)
    p = fit.profile
    assert p.step_base_s == pytest.approx(TRUE.step_base_s, rel=0.03)
    assert p.prefill_token_s == pytest.approx(TRUE.prefill_token_s, rel=0.1)
    assert p.decode_request_s == pytest.approx(TRUE.decode_request_s, rel=0.1)
    assert p.decode_context_s == pytest.approx(TRUE.decode_context_s, rel=0.2)
    assert p.prefill_attention_s == pytest.approx(TRUE.prefill_attention_s, rel=0.3)
    assert fit.overhead_s == pytest.approx(overhead_s, abs=0.001)
    assert fit.rms_s < 0.015  # under a step: a request that joins one step later than measured costs one
    assert (p.max_num_seqs, p.kv_budget_tokens) == (8, 50_000)  # not identifiable: kept


@pytest.mark.parametrize(
    ("records", "message"),
    [
        pytest.param(
            virtual_records(TRUE, 400.0, 60), "sent to an idle endpoint", id="saturated run: never idle"
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
    """The emulator's engine and the offline engine on the same requests: the same scheduler, so
    every request's times agree (the twin's scrape-interval routing changes nothing on one endpoint)."""
    records = virtual_records(TRUE, 3.0, 120)
    offline = simulate_offline(records, replace(REFERENCE_70B, engine=TRUE), endpoints=1)
    p = pair(records, offline)
    doc = compare(p)
    assert doc["requests_compared"] == 120
    assert doc["per_request"]["ttft_abs_diff_max_s"] < 1e-6
    assert doc["per_request"]["e2e_abs_diff_max_s"] < 1e-6


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
        "engine: {max_num_seqs: 8, max_num_batched_tokens: 2048, kv_budget_tokens: 50000, "
        "step_base_s: 0.008, prefill_token_s: 2.0e-5, prefill_attention_s: 2.0e-9, decode_request_s: 0.0015, "
        "decode_context_s: 2.0e-7}\n"
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
                "--out",
                str(out),
            )
        )
        == 0
    )
    doc = json.loads((out / "calibrate.json").read_text())
    assert doc["schema"] == "infscale.replay.calibrate/v2" and doc["endpoints"] == 1
    assert doc["requests_compared"] == 120
    assert (out / "calibrate.png").stat().st_size > 10_000
    from replay.emulate.profiles import get_engine_profile

    fitted = get_engine_profile(str(out / "fitted-profile.yaml"))
    assert fitted.step_base_s == pytest.approx(TRUE.step_base_s, rel=0.03)
    assert "| ttft_p50_s |" in (out / "calibrate.md").read_text()


@pytest.mark.parametrize(
    ("setup", "argv", "message"),
    [
        pytest.param(None, [], "requests.jsonl", id="not an online directory"),
        pytest.param("bad-line", [], "requests.jsonl:1", id="unreadable record"),
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
    offline = simulate_offline([*records, late], REFERENCE_70B, endpoints=1)
    assert len(offline.arrival_s) == 20
