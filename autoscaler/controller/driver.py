"""The real-time driver: leader election and readiness every retry period, metric reads on their
interval, and `concurrency` workers taking keys from the queue as they fall due."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autoscaler.controller.loop import Controller

log = logging.getLogger(__name__)


async def run(controller: Controller, stop: asyncio.Event, *, retry_period_s: float) -> None:
    """The real-time driver until `stop`: leader election every retry period, the caches, metric
    reads on their interval, and `concurrency` workers taking keys from the queue as they fall due."""
    elector = controller.elector

    async def wait(seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=max(0.0, seconds))

    async def elect_once() -> None:
        assert elector is not None
        try:
            await elector.tick(controller.clock())
        except Exception:  # not a KubeError (those tick() handles): retried, or nobody ever leads
            log.exception("leader election failed")
            controller.telemetry.errors.labels("leader_election").inc()

    async def housekeeping() -> None:
        while not stop.is_set():
            now, began = controller.clock(), time.perf_counter()
            if elector is not None:
                await elect_once()
            try:
                await controller.housekeeping(now)
                controller.leading(controller.clock())
                if controller.caches.synced and not gc.get_freeze_count():  # once a process
                    # the caches' objects (most of the heap) live long: out of the collector's full
                    # passes, each of which took 0.2-0.3 s over them every ~3 min (a stall of the loop)
                    gc.collect()
                    gc.freeze()
            except Exception:  # a bug here must not end the process
                log.exception("housekeeping failed")
                controller.telemetry.errors.labels("tick").inc()
            # a round of the loop, with or without objects: the not-acting alert counts these
            controller.telemetry.tick_seconds.observe(time.perf_counter() - began)
            await wait(retry_period_s)

    async def poll_metrics() -> None:
        while not stop.is_set():
            now = controller.clock()
            if controller._leading and controller.caches.autoscalers.synced.is_set():
                try:
                    await controller.metrics.poll(now)
                except Exception:
                    log.exception("metric reads failed")
                    controller.telemetry.errors.labels("read_metric").inc()
            due = controller.metrics.next_poll_at()
            await wait((due - controller.clock()) if due is not None else controller.metrics.interval_s)

    async def work() -> None:
        while not stop.is_set():
            key = await controller.queue.get()
            if key is None:
                return
            if not controller._leading:  # queued again, every key, when this replica leads
                controller.queue.done(key)
                continue
            await controller.process(key, controller.clock())

    await controller.start()
    tasks = [
        asyncio.create_task(housekeeping(), name="infscale housekeeping"),
        asyncio.create_task(poll_metrics(), name="infscale metrics"),
        *(
            asyncio.create_task(work(), name=f"infscale worker {i}")
            for i in range(controller.settings.concurrency)
        ),
    ]
    try:
        await stop.wait()
    finally:
        controller.queue.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await controller.close()
        if elector is not None:
            await elector.release(controller.clock())
