"""`infscale emulate`: an inference engine without a GPU, for running the whole chain on one machine.

    infscale emulate --listen 127.0.0.1:8000                       # vLLM-like, reference-70b timing
    infscale emulate --engine tgi --profile fast-test --startup-seconds 5 --listen 127.0.0.1:3000
    infscale emulate --engine jetstream --profile fast-test --listen 127.0.0.1:8080  # /v1/generate

Serves the OpenAI-compatible API (JetStream: its own /v1/generate) with continuous batching in real
time (replay/emulate/batching.py), the chosen engine's /metrics and readiness paths
(replay/emulate/server.py). Every flag also reads from `INFSCALE_EMULATE_<NAME>` (e.g.
INFSCALE_EMULATE_STARTUP_SECONDS=30 in a container); flags win.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import sys
from typing import Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from common.listen import ListenAddress, bind_host, parse_listen
from common.settings_errors import configure_logging, report
from common.signals import stop_on_signals
from replay.emulate.profiles import PROFILES, get_engine_profile
from replay.emulate.server import ENGINES, EmulatorConfig, create_app
from replay.profiles import ProfileError

log = logging.getLogger("infscale.emulate")


class EmulatorSettings(BaseSettings):
    """The emulator's settings; the defaults below are the one place they are written."""

    model_config = SettingsConfigDict(env_prefix="INFSCALE_EMULATE_", frozen=True, extra="forbid")

    listen: ListenAddress = "127.0.0.1:8000"  # HOST:PORT; port 0 picks a free one
    engine: Literal["vllm", "tgi", "sglang", "jetstream"] = "vllm"
    profile: str = "reference-70b"  # a name in replay/emulate/profiles.py, a scenario name, or a file
    model: str = Field(default="emulated-model", min_length=1)
    startup_seconds: float = Field(default=0.0, ge=0)  # weight loading: not ready before

    @field_validator("startup_seconds")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError(f"startup_seconds must be finite, got {value}")
        return value


_HELP = {
    "listen": "HOST:PORT to serve on; port 0 picks a free one",
    "engine": "whose API errors, readiness paths and /metrics (jetstream: its own API, /v1/generate)",
    "profile": f"engine timing: {', '.join(PROFILES)}, a replay scenario name, or a scenario YAML/JSON file",
    "model": "served model name",
    "startup_seconds": "weight loading: readiness and the API answer 503 until then",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for name, help_text in _HELP.items():
        flag = "--" + name.replace("_", "-")
        kind = float if name == "startup_seconds" else str
        choices = ENGINES if name == "engine" else None
        default = EmulatorSettings.model_fields[name].default
        parser.add_argument(
            flag,
            dest=name,
            type=kind,
            choices=choices,
            default=argparse.SUPPRESS,  # only flags given override the environment and the defaults
            help=f"{help_text} (default {default}; env INFSCALE_EMULATE_{name.upper()})",
        )


def settings_from_args(args: argparse.Namespace) -> EmulatorSettings:
    given = {name: getattr(args, name) for name in _HELP if hasattr(args, name)}
    return EmulatorSettings(**given)


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
        config = EmulatorConfig(
            engine=settings.engine,
            profile=get_engine_profile(settings.profile),
            model=settings.model,
            startup_s=settings.startup_seconds,
        )
    except ValidationError as e:
        return report("infscale emulate", e)
    except (ValueError, ProfileError) as e:
        print(f"infscale emulate: error: {e}", file=sys.stderr)
        return 2
    configure_logging(logging.INFO)
    host, port = parse_listen(settings.listen)
    try:
        asyncio.run(serve(config, host, port))
    except OSError as e:
        print(f"infscale emulate: cannot listen on {settings.listen}: {e}", file=sys.stderr)
        return 1
    return 0


async def serve(config: EmulatorConfig, host: str, port: int, stop: asyncio.Event | None = None) -> None:
    """Serve until SIGTERM/SIGINT (or `stop`)."""
    from aiohttp import web

    stop = stop_on_signals(stop)
    runner = web.AppRunner(create_app(config), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, bind_host(host), port).start()
        bound = runner.addresses[0][1] if runner.addresses else port
        log.info(
            "emulating %s (%s) on http://%s:%d; ready in %.1f s",
            config.engine,
            config.model,
            host,
            bound,
            config.startup_s,
        )
        print(f"listening on {host}:{bound}", flush=True)  # a parent process reads the port from here
        await stop.wait()
    finally:
        await runner.cleanup()
