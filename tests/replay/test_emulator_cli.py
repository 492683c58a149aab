"""`infscale emulate`: flags, profile resolution, and the command as a real process."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from replay.emulate.cli import EmulatorSettings, add_arguments, run, settings_from_args
from replay.emulate.profiles import FAST_TEST, get_engine_profile
from replay.profiles import REFERENCE_70B, ProfileError

REPO = Path(__file__).resolve().parents[2]


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


@pytest.mark.parametrize("value", ["127.0.0.1:8000", "[::1]:0", "localhost:30000", ":8000"])
def test_listen_addresses_as_every_component_reads_them(value: str) -> None:
    assert EmulatorSettings(listen=value).listen == value


@pytest.mark.parametrize("value", ["8000", "h:port", "h:70000", "::1:8000"])
def test_a_bad_listen_address_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match=f"listen address '{value}'"):
        EmulatorSettings(listen=value)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("fast-test", FAST_TEST, id="emulator built-in"),
        pytest.param("reference-70b", REFERENCE_70B.engine, id="replay scenario"),
    ],
)
def test_profiles_by_name(name: str, expected: object) -> None:
    assert get_engine_profile(name) == expected


def test_profile_file_and_errors(tmp_path: Path) -> None:
    good = tmp_path / "p.yaml"
    good.write_text("engine: {max_num_seqs: 2, step_base_s: 0.002}\n")
    assert get_engine_profile(str(good)).max_num_seqs == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("engine: {max_num_seqs: 0}\n")
    with pytest.raises(ProfileError, match=r"engine\.max_num_seqs must be >= 1, got 0"):
        get_engine_profile(str(bad))
    with pytest.raises(ProfileError, match=r"profile .nope.*built-in profiles: fast-test, reference-70b"):
        get_engine_profile("nope")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--listen", "nowhere"], "--listen: listen address 'nowhere'", id="listen"),
        pytest.param(["--profile", "nope"], "profile 'nope'", id="profile"),
        pytest.param(
            ["--startup-seconds", "-1"],
            "--startup-seconds: Input should be greater than or equal to 0",
            id="startup",
        ),
        pytest.param(["--startup-seconds", "inf"], "startup_seconds must be finite", id="startup infinite"),
        pytest.param(["--model", ""], "--model: String should have at least 1 character", id="empty model"),
    ],
)
def test_bad_flags_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(_args(*argv)) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("engine", ["vllm", "tgi", "sglang", "jetstream"])
def test_every_engine_is_a_choice_of_the_flag_and_the_environment(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert settings_from_args(_args("--engine", engine)).engine == engine
    monkeypatch.setenv("INFSCALE_EMULATE_ENGINE", engine)
    assert settings_from_args(_args()).engine == engine


def test_an_unknown_engine_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _args("--engine", "triton")
    err = capsys.readouterr().err
    assert "--engine {vllm,tgi,sglang,jetstream}" in err and "invalid choice: 'triton'" in err


def test_environment_fills_in_and_flags_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFSCALE_EMULATE_ENGINE", "tgi")
    monkeypatch.setenv("INFSCALE_EMULATE_STARTUP_SECONDS", "30")
    settings = settings_from_args(_args("--startup-seconds", "2"))
    assert (settings.engine, settings.startup_seconds, settings.listen) == ("tgi", 2.0, "127.0.0.1:8000")


@asynccontextmanager
async def _command(engine: str) -> AsyncIterator[str]:
    """`infscale emulate --engine ENGINE` as its own process on an ephemeral port: yields its base
    URL once it says where it listens, then stops it with SIGTERM, which it must exit 0 on."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "infscale", "emulate", "--engine", engine, "--profile", "fast-test",
        "--listen", "127.0.0.1:0",
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()
        assert line.startswith("listening on 127.0.0.1:")
        yield "http://" + line.removeprefix("listening on ")
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 10)
    assert proc.returncode == 0


@pytest.mark.integration
async def test_the_command_serves_until_sigterm() -> None:
    async with _command("sglang") as url, httpx.AsyncClient(base_url=url) as client:
        assert (await client.get("/health_generate")).status_code == 200
        r = await client.post("/v1/completions", json={"prompt": "a b", "max_tokens": 2})
        assert r.json()["usage"]["completion_tokens"] == 2
        assert "sglang:num_requests_total" in (await client.get("/metrics")).text


@pytest.mark.integration
async def test_the_command_serves_jetstream() -> None:
    """`--engine jetstream`: its health path, /v1/generate's stream of JSON objects, its metrics."""
    async with _command("jetstream") as url, httpx.AsyncClient(base_url=url) as client:
        assert (await client.get("/v1/health")).json() == {"is_live": "True"}
        body = {"max_tokens": 3, "text_content": {"text": "a b"}}
        r = await client.post("/v1/generate", json=body)
        assert r.text.count('"streamContent"') == 3
        assert (await client.post("/v1/completions", json={"prompt": "a"})).status_code == 404
        metrics = (await client.get("/metrics")).text
        assert 'jetstream_request_success_count_total{id="' in metrics
        assert 'model_name="emulated_model"} 1.0' in metrics
