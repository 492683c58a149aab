"""`infscale replay online`: the stream parser, request bodies, settings, and whole runs against
emulators on loopback (routing, bounds, failures, the report in the offline schema)."""

from __future__ import annotations

import argparse
import json
import math
import socket
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from emulator_fixtures import emulator

from replay import report as rep
from replay.emulate.server import EMULATOR
from replay.online.cli import add_arguments, cap_tokens, run
from replay.online.driver import StreamTally, request_body, run_online
from replay.online.records import (
    Api,
    OnlineConfig,
    PromptStyle,
    RequestRecord,
    Status,
    read_records,
    write_records,
)
from replay.online.results import build_online_report, markdown, serving_metrics, timeline_of
from replay.profiles import REFERENCE_70B, EngineProfile
from replay.trace import Trace


def trace(arrivals: list[float], inputs: list[int] | None = None, outputs: list[int] | None = None) -> Trace:
    n = len(arrivals)
    return Trace(
        "test",
        np.array(arrivals, dtype=np.float64),
        np.array(inputs or [8] * n, dtype=np.int64),
        np.array(outputs or [5] * n, dtype=np.int64),
    )


# 50 ms steps: a 1,000-token answer holds its slot for 50 s, far past any deadline below
SLOW = EngineProfile(
    max_num_seqs=4,
    max_num_batched_tokens=2_048,
    kv_budget_tokens=4_096,
    step_base_s=0.05,
    prefill_token_s=1e-6,
    prefill_attention_s=0.0,
    decode_request_s=0.0,
    decode_context_s=0.0,
)


# --- pure parts ----------------------------------------------------------------------------------


def _chunk(**choice: Any) -> str:
    return "data: " + json.dumps({"choices": [choice]})


@pytest.mark.parametrize(
    ("lines", "first", "chunks", "usage", "error", "done"),
    [
        pytest.param(
            [_chunk(text=" a"), "", _chunk(text=" b"), "data: [DONE]"],
            1.0,
            2,
            None,
            "",
            True,
            id="completions",
        ),
        pytest.param(
            [
                _chunk(delta={"role": "assistant", "content": ""}),
                _chunk(delta={"content": "x"}),
                "data: [DONE]",
            ],
            2.0,
            1,
            None,
            "",
            True,
            id="chat: the role chunk is not a token",
        ),
        pytest.param(
            [_chunk(text="x"), 'data: {"choices":[],"usage":{"completion_tokens":7}}'],
            1.0,
            1,
            7,
            "",
            False,
            id="usage block counts tokens",
        ),
        pytest.param(
            ['data: {"error":{"message":"boom","code":500}}'],
            math.nan,
            0,
            None,
            "boom",
            False,
            id="error in stream",
        ),
        pytest.param(
            ["data: {oops"], math.nan, 0, None, "unparseable stream chunk '{oops'", False, id="garbage"
        ),
        pytest.param([": keep-alive", "event: ping"], math.nan, 0, None, "", False, id="comments ignored"),
        pytest.param(
            ['data: {"choices": ["x"]}'],
            math.nan,
            0,
            None,
            """malformed stream chunk '{"choices": ["x"]}'""",
            False,
            id="choices not objects",
        ),
        pytest.param(
            ['data: {"choices": [{"delta": "x"}]}'],
            math.nan,
            0,
            None,
            """malformed stream chunk '{"choices": [{"delta": "x"}]}'""",
            False,
            id="delta not an object",
        ),
    ],
)
def test_stream_tally(
    lines: list[str], first: float, chunks: int, usage: int | None, error: str, done: bool
) -> None:
    tally = StreamTally()
    for k, line in enumerate(lines, 1):
        tally.feed(line, float(k))
    assert (tally.text_chunks, tally.completion_tokens, tally.error, tally.done) == (
        chunks,
        usage,
        error,
        done,
    )
    assert tally.first_text_at == first or (math.isnan(first) and math.isnan(tally.first_text_at))


@pytest.mark.parametrize(
    ("api", "prompt", "path", "expected"),
    [
        pytest.param(
            Api.COMPLETIONS, PromptStyle.WORDS, "/v1/completions", {"prompt": "hi hi hi"}, id="words"
        ),
        pytest.param(
            Api.COMPLETIONS, PromptStyle.TOKEN_IDS, "/v1/completions", {"prompt": [100] * 3}, id="ids"
        ),
        pytest.param(
            Api.CHAT,
            PromptStyle.WORDS,
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "hi hi hi"}]},
            id="chat",
        ),
    ],
)
def test_request_body(api: Api, prompt: PromptStyle, path: str, expected: dict[str, Any]) -> None:
    config = OnlineConfig(endpoints=("http://h:1",), api=api, prompt=prompt)
    got_path, body = request_body(config, "m", 3, 9)
    assert got_path == path
    assert body == {
        "model": "m",
        "max_tokens": 9,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
        "ignore_eos": True,
        **expected,
    }


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param({"endpoints": ()}, "give at least one endpoint", id="no endpoint"),
        pytest.param({"endpoints": ("ftp://x",)}, "--endpoint 'ftp://x': expected http", id="scheme"),
        pytest.param({"speedup": 0.0}, "--speedup must be a finite number > 0, got 0.0", id="speedup"),
        pytest.param({"max_in_flight": 0}, "--max-in-flight must be >= 1, got 0", id="in flight"),
        pytest.param({"max_duration_s": -1.0}, "--max-duration-s must be > 0, got -1.0", id="duration"),
        pytest.param({"timeout_s": 0.0}, "--timeout-s must be > 0", id="timeout"),
        pytest.param(
            {"api": Api.CHAT, "prompt": PromptStyle.TOKEN_IDS},
            r"--prompt token-ids needs --api completions \(chat messages are text\)",
            id="token ids for chat",
        ),
    ],
)
def test_config_errors_name_the_flag(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OnlineConfig(**{"endpoints": ("http://h:1",), **fields})


@pytest.mark.parametrize(
    ("sent", "finished", "expected_inflight", "expected_rate"),
    [
        pytest.param(
            [0.5, 1.5], [2.5, math.nan], [0, 1, 1], [0.0, 1.0, 1.0], id="a failure counts as done when sent"
        ),
        pytest.param(
            [0.0, 0.0, 0.2], [0.1, 3.0, 3.0], [2, 2, 2, 0], [0.0, 1.0, 0.0, 0.0], id="arrivals in (t - 1, t]"
        ),
    ],
)
def test_timeline_of(
    sent: list[float], finished: list[float], expected_inflight: list[int], expected_rate: list[float]
) -> None:
    end = max(f for f in [*finished, *sent] if math.isfinite(f))
    points = timeline_of(np.array(sent), np.array(finished), 2, 1.0, end)
    assert [p.inflight for p in points] == expected_inflight
    assert [p.arrivals_per_s for p in points] == expected_rate
    assert {(p.desired, p.ready) for p in points} == {(2, 2)}


def test_cap_tokens() -> None:
    t = cap_tokens(trace([0.0, 1.0], [10, 500], [3, 900]), 100, 50)
    assert t.input_tokens.tolist() == [10, 100] and t.output_tokens.tolist() == [3, 50]
    with pytest.raises(ValueError, match="--max-output-tokens must be >= 1, got 0"):
        cap_tokens(t, None, 0)


def test_records_round_trip_and_errors_name_line_and_field(tmp_path: Path) -> None:
    recs = [
        RequestRecord(0, 1, 0.0, 0.01, 0.05, 0.2, 8, 5, 5, Status.OK),
        RequestRecord(1, -1, 9.0, math.nan, math.nan, math.nan, 8, 5, 0, Status.NOT_SENT, "late"),
    ]
    path = write_records(tmp_path / "r.jsonl", recs)
    back = read_records(path)
    assert back[0] == recs[0]
    assert back[1].status is Status.NOT_SENT and math.isnan(back[1].sent_s)
    lines = path.read_text().splitlines()
    doc = json.loads(lines[1])
    del doc["input_tokens"]
    path.write_text(lines[0] + "\n" + json.dumps(doc) + "\n")
    with pytest.raises(ValueError, match=r"r.jsonl:2: missing field\(s\) input_tokens"):
        read_records(path)
    doc["input_tokens"] = 1
    doc["sent_s"] = "soon"
    path.write_text(json.dumps(doc) + "\n")
    with pytest.raises(ValueError, match=r"r\.jsonl:1: expected a number or null, got 'soon'"):
        read_records(path)


# --- against emulators ----------------------------------------------------------------------------


async def test_a_run_measures_every_request_and_balances_the_endpoints() -> None:
    # the first four stream for ~0.3 s: the last two find two outstanding on each endpoint
    t = trace([0.0, 0.0, 0.0, 0.0, 0.01, 0.02], outputs=[200, 201, 202, 203, 9, 10])
    async with emulator() as (a, app_a), emulator() as (b, app_b):
        result = await run_online(t, OnlineConfig(endpoints=(a, b)))
    assert result.model == "emulated-model"
    assert [r.status for r in result.records] == [Status.OK] * 6
    assert [r.generated_tokens for r in result.records] == [200, 201, 202, 203, 9, 10]
    for r in result.records:
        assert 0 <= r.sent_s < r.first_token_s <= r.finished_s
    # fewest outstanding first, ties to the first endpoint: they alternate
    assert [r.endpoint for r in result.records] == [0, 1, 0, 1, 0, 1]
    assert app_a[EMULATOR].stats.requests_finished + app_b[EMULATOR].stats.requests_finished == 6
    assert {app_a[EMULATOR].stats.requests_finished, app_b[EMULATOR].stats.requests_finished} == {3}


async def test_speedup_compresses_the_schedule() -> None:
    t = trace([0.0, 2.0, 4.0])
    async with emulator() as (url, _):
        result = await run_online(t, OnlineConfig(endpoints=(url,), speedup=40.0))
    assert [r.scheduled_s for r in result.records] == [0.0, 0.05, 0.1]
    for r in result.records:
        assert r.sent_s >= r.scheduled_s


async def test_max_in_flight_serializes_and_reports_the_lag() -> None:
    t = trace([0.0] * 4, outputs=[20] * 4)
    async with emulator() as (url, app):
        result = await run_online(t, OnlineConfig(endpoints=(url,), max_in_flight=1))
        history = list(app[EMULATOR].history.points)
    assert max(w + r for _, w, r, _ in history) == 1  # the engine never saw two at once
    sent = [r.sent_s for r in result.records]
    finished = [r.finished_s for r in result.records]
    assert all(sent[k + 1] >= finished[k] for k in range(3))


async def test_max_duration_leaves_late_requests_unsent_and_cancels_the_rest() -> None:
    # the 1-token request needs one 0.05 s step; 3 s leaves room for a loaded machine (0.5 s did
    # not, at load 9) while the 1,000-token one (50 s of steps) is still cut
    t = trace([0.0, 0.0, 30.0], outputs=[1, 1_000, 5])
    async with emulator(profile=SLOW) as (url, app):
        result = await run_online(t, OnlineConfig(endpoints=(url,), max_duration_s=3.0))
        core = app[EMULATOR].engine.core
    assert [r.status for r in result.records] == [Status.OK, Status.CANCELLED, Status.NOT_SENT]
    assert math.isfinite(result.records[1].sent_s) and math.isnan(result.records[2].sent_s)
    assert core.gauges().running <= 1  # the cancelled stream was hung up on
    # the report covers the run, not the trace time of requests never sent (30 s here)
    policy = build_online_report(t, result, REFERENCE_70B, gpus_per_endpoint=4)["policies"]["online"]
    assert 3.0 <= policy["end_s"] < 10
    assert policy["gpu_hours"] == pytest.approx(4 * policy["end_s"] / 3600)
    # without --gpus-per-endpoint the GPUs behind an endpoint are unknown: n/a, never a guess
    unknown = build_online_report(t, result, REFERENCE_70B)
    assert math.isnan(unknown["policies"]["online"]["gpu_hours"])
    assert "GPU-hours: n/a (pass --gpus-per-endpoint)" in markdown(unknown)


async def test_refusals_and_dead_endpoints_are_recorded_not_raised() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        t = trace([0.0, 0.0, 0.0], inputs=[5_000, 8, 8])
        async with emulator() as (url, _):
            result = await run_online(t, OnlineConfig(endpoints=(url, dead), model="emulated-model"))
    by_index = {r.index: r for r in result.records}
    assert by_index[0].status is Status.ERROR
    assert by_index[0].error.startswith("HTTP 400: This model's maximum context length is 4096 tokens")
    assert by_index[1].status is Status.TRANSPORT and "ConnectError" in by_index[1].error
    assert by_index[2].status is Status.OK


async def test_a_malformed_stream_is_an_error_of_that_request() -> None:
    """A server whose chunks are not the OpenAI shape fails the request, not the driver."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text='data: {"choices": "oops"}\n\ndata: [DONE]\n\n')

    config = OnlineConfig(endpoints=("http://h:1",), model="m")
    result = await run_online(trace([0.0]), config, transport=httpx.MockTransport(handler))
    (record,) = result.records
    assert (record.status, record.endpoint) == (Status.ERROR, 0)
    assert record.error == """malformed stream chunk '{"choices": "oops"}'"""


async def test_a_dead_endpoint_is_named_as_dead_not_as_a_missing_model() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
        with pytest.raises(
            ValueError, match=r"nothing answers at http://127\.0\.0\.1:\d+ \(ConnectError"
        ) as exc:
            await run_online(trace([0.0]), OnlineConfig(endpoints=(dead,)))
    assert "--model" not in str(exc.value)


@pytest.mark.parametrize(
    ("status", "body", "hint"),
    [
        pytest.param(
            404,
            "not found",
            r"answered HTTP 404: the server lists no models there; pass --model NAME",
            id="404",
        ),
        pytest.param(401, "", r"refused the request \(HTTP 401\): pass --api-key", id="401"),
        pytest.param(
            200, '{"data": []}', r"did not list a model \(IndexError.*pass --model NAME", id="empty list"
        ),
    ],
)
async def test_model_discovery_hints_match_the_failure(status: int, body: str, hint: str) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(status, text=body))
    with pytest.raises(ValueError, match=hint):
        await run_online(trace([0.0]), OnlineConfig(endpoints=("http://h:1",)), transport=transport)


def test_an_endpoint_ending_in_v1_is_refused_with_its_base_url() -> None:
    with pytest.raises(ValueError, match=r"give the server's base URL without /v1 \(http://h:8000\)"):
        OnlineConfig(endpoints=("http://h:8000/v1/",))


async def test_serving_metrics_as_vllm_benchmarks_define_them() -> None:
    t = trace([0.0, 0.1, 0.2, 0.6], outputs=[3, 4, 5, 6])
    async with emulator() as (url, _):
        result = await run_online(t, OnlineConfig(endpoints=(url,)))
    serving = serving_metrics(result)
    ok = [r for r in result.records if r.status is Status.OK]
    assert serving["completed"] == 4
    assert serving["output_throughput"] == pytest.approx(
        sum(r.generated_tokens for r in ok) / result.wall_seconds
    )
    # one gap per chunk after the first (the emulator streams one token per chunk)
    assert all(len(r.itl_s) == r.generated_tokens - 1 for r in ok)
    tpot = [(r.e2e_s - r.ttft_s) / (r.generated_tokens - 1) for r in ok]
    assert serving["mean_tpot_ms"] == pytest.approx(1000 * sum(tpot) / len(tpot))
    report = build_online_report(t, result, REFERENCE_70B)
    text = markdown(report)
    assert "Simulated" not in text and "real time" not in text
    assert "s of wall time" in text and "| ITL |" in text and "| TPOT |" in text


async def test_report_has_the_offline_schema(tmp_path: Path) -> None:
    t = trace([0.0, 0.1, 0.2, 0.6], outputs=[3, 4, 5, 6])
    async with emulator() as (url, _):
        result = await run_online(t, OnlineConfig(endpoints=(url,)))
    report = build_online_report(t, result, REFERENCE_70B)
    policy = report["policies"]["online"]
    for key in (
        "slo_attainment",
        "ttft_p50_s",
        "ttft_p99_s",
        "queue_wait_p50_s",
        "e2e_p99_s",
        "gpu_hours",
        "mean_ready_replicas",
        "requests_total",
        "requests_finished",
        "requests_dropped",
        "end_s",
        "timeline",
        "replicas",
    ):
        assert key in policy
    assert report["schema"] == rep.SCHEMA
    assert policy["requests_finished"] == 4 and policy["requests_dropped"] == 0
    assert policy["slo_attainment"] == 1.0
    assert math.isnan(policy["queue_wait_p50_s"])  # not visible from outside: null in JSON
    assert policy["mean_ready_replicas"] == pytest.approx(1.0)
    assert report["online"]["requests_by_status"] == {"ok": 4}
    written = rep.write_report(tmp_path, report, plots=True)
    assert json.loads(written[0].read_text())["policies"]["online"]["queue_wait_p50_s"] is None
    assert {p.name for p in written} == {
        "report.json",
        "report.md",
        "report.html",
        "timeline.png",
        "frontier.png",
    }


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--endpoint", "ftp://x"], "--endpoint 'ftp://x'", id="bad endpoint"),
        pytest.param(["--endpoint", "http://h:1", "--speedup", "-2"], "--speedup must be", id="bad speedup"),
        pytest.param(
            ["--endpoint", "http://h:1", "--trace", "x.csv"], "--format is required", id="no format"
        ),
        pytest.param(
            ["--endpoint", "http://h:1", "--api", "chat", "--prompt", "token-ids"],
            "token-ids needs",
            id="chat ids",
        ),
        pytest.param(["--endpoint", "http://h:1", "--scenario", "nope"], "scenario 'nope'", id="scenario"),
    ],
)
def test_cli_errors_exit_2_naming_the_flag(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(_args(*argv)) == 2
    assert message in capsys.readouterr().err


def test_an_unreachable_endpoint_exits_1_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        argv = ["--endpoint", dead, "--model", "m", "--end-s", "0.5", "--out", str(tmp_path), "--no-plots"]
        assert run(_args(*argv)) == 1
    err = capsys.readouterr().err
    assert "request(s) failed: ConnectError" in err  # the refused connection, named
    assert json.loads((tmp_path / "report.json").read_text())["online"]["requests_by_status"].keys() == {
        "transport"
    }


def test_replay_group_lists_online_and_calibrate() -> None:
    from infscale.cli import build_parser

    parser = build_parser(["replay"])
    args = parser.parse_args(["replay", "online", "--endpoint", "http://h:1", "--speedup", "3"])
    assert (args.replay_command, args.speedup, args.endpoint) == ("online", 3.0, ["http://h:1"])
    args = parser.parse_args(["replay", "calibrate", "--online", "d", "--fit"])
    assert (args.replay_command, args.fit) == ("calibrate", True)


async def test_a_full_window_does_not_wait_past_the_deadline() -> None:
    t = trace([0.0, 0.0, 0.0], outputs=[1_000, 5, 5])  # the first holds the only slot for 50 s
    async with emulator(profile=SLOW) as (url, _):
        result = await run_online(t, OnlineConfig(endpoints=(url,), max_in_flight=1, max_duration_s=0.3))
    assert [r.status for r in result.records] == [Status.CANCELLED, Status.NOT_SENT, Status.NOT_SENT]
    assert result.wall_seconds < 5


@pytest.mark.parametrize(
    ("engine", "api", "prompt"),
    [
        pytest.param("vllm", Api.COMPLETIONS, PromptStyle.TOKEN_IDS, id="vllm, token ids"),
        pytest.param("sglang", Api.COMPLETIONS, PromptStyle.WORDS, id="sglang, words"),
        pytest.param("tgi", Api.CHAT, PromptStyle.WORDS, id="tgi, chat"),
    ],
)
async def test_prompts_arrive_with_the_trace_lengths(engine: str, api: Api, prompt: PromptStyle) -> None:
    t = trace([0.0, 0.0, 0.01], inputs=[7, 300, 1], outputs=[3, 4, 5])
    async with emulator(engine) as (url, app):
        result = await run_online(t, OnlineConfig(endpoints=(url,), api=api, prompt=prompt))
        stats = app[EMULATOR].stats
    assert [r.status for r in result.records] == [Status.OK] * 3
    assert stats.prompt_tokens == 308 and stats.generation_tokens == 12
    assert [r.generated_tokens for r in result.records] == [3, 4, 5]
