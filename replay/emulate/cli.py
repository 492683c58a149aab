"""`infscale emulate`: an inference engine without a GPU, for running the whole chain on one machine.

    infscale emulate --listen 127.0.0.1:8000                       # vLLM-like, reference-70b timing
    infscale emulate --engine tgi --profile fast-test --startup-seconds 5 --listen 127.0.0.1:3000

Serves the OpenAI-compatible API with continuous batching in real time (replay/emulate/batching.py),
the chosen engine's /metrics and readiness paths (replay/emulate/server.py).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from replay.emulate.profiles import PROFILES, get_engine_profile
from replay.emulate.server import ENGINES, EmulatorConfig, create_app
from replay.profiles import ProfileError

log = logging.getLogger("infscale.emulate")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", default="127.0.0.1:8000", help="HOST:PORT (default 127.0.0.1:8000)")
    parser.add_argument(
        "--engine", choices=ENGINES, default="vllm", help="whose API and metrics (default vllm)"
    )
    parser.add_argument(
        "--profile",
        default="reference-70b",
        help=f"engine timing: {', '.join(PROFILES)}, a replay scenario name, or a scenario YAML/JSON file",
    )
    parser.add_argument("--model", default="emulated-model", help="served model name")
    parser.add_argument(
        "--startup-seconds", type=float, default=0.0, help="weight loading: not ready before (default 0)"
    )


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen {value!r}: expected HOST:PORT with a port in 0-65535")
    return host.strip("[]"), int(port)


def run(args: argparse.Namespace) -> int:
    try:
        host, port = parse_listen(args.listen)
        config = EmulatorConfig(
            engine=args.engine,
            profile=get_engine_profile(args.profile),
            model=args.model,
            startup_s=args.startup_seconds,
        )
    except (ValueError, ProfileError) as e:
        print(f"infscale emulate: error: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(serve(config, host, port))
    except OSError as e:
        print(f"infscale emulate: cannot listen on {args.listen}: {e}", file=sys.stderr)
        return 1
    return 0


async def serve(config: EmulatorConfig, host: str, port: int, stop: asyncio.Event | None = None) -> None:
    """Serve until SIGTERM/SIGINT (or `stop`)."""
    from aiohttp import web

    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = web.AppRunner(create_app(config), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
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
