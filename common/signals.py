"""The stop signal every infscale server waits for: SIGTERM (the kubelet) or SIGINT (a terminal)."""

from __future__ import annotations

import asyncio
import signal


def stop_on_signals(stop: asyncio.Event | None = None) -> asyncio.Event:
    """`stop` (or a new event), set by SIGTERM or SIGINT on the running loop."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop
