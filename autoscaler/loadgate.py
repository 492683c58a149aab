"""`infscale loadgate`: the load gate's actuator, a native sidecar that staggers weight loading.

N replicas reading weights from one shared storage at once each get 1/N of its bandwidth, so all
of them are ready only at the end; one at a time, the first is ready after 1/N of that. The gate
runs as an init container with `restartPolicy: Always` (a native sidecar, Kubernetes >= 1.29): the
kubelet starts the engine container only once the sidecar's startup probe passes, and the probe
(`GET /acquired`) passes once the gate holds one of N slots. It gives the slot back when the engine
reports ready (`--engine-ready-url` answers 2xx), after `--timeout-seconds`, or on SIGTERM (the
pod goes away); a pod killed without a word loses it when its Lease expires.

The slots are N coordination.k8s.io/v1 Leases, `infscale-load-<storage>-<i>` in the pod's
namespace, one set per storage: a counting semaphore. Each is taken and renewed as client-go's
leader election takes a lock (autoscaler/controller/leader.py: expiry judged on the gate's own
clock, writes carrying the resourceVersion so two gates racing for one slot make one winner and a
409). N is `--slots`, or the InferenceAutoscaler's `spec.coldStart.maxConcurrentLoads`
(`--autoscaler`), so the controller's cold-start model and the gate agree on it.

After the slot is given back the sidecar stays up (a native sidecar that exits is restarted, and
would queue again) and /acquired stays 200. `LoadGate.step(now)` is one attempt, for tests with a
manual clock; `hold()` is the real-time driver.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from autoscaler.controller.kube import KubeClient
from autoscaler.controller.leader import LeaderElector

log = logging.getLogger(__name__)

LEASE_PREFIX = "infscale-load"
# Renewed every retry period; a gate whose pod vanished frees its slot after the lease duration.
DEFAULT_LEASE_DURATION_S = 30.0
DEFAULT_RENEW_DEADLINE_S = 20.0
DEFAULT_RETRY_S = 2.0
# The longest a replica may hold a slot: a stuck engine must not block every other replica. Ten
# minutes covers a 140 GB model at 0.25 GB/s, far slower than any shared storage we model.
DEFAULT_TIMEOUT_S = 600.0


def lease_name(storage: str, slot: int) -> str:
    return f"{LEASE_PREFIX}-{storage}-{slot}"


@dataclass
class GateStatus:
    """What the probes show."""

    acquired: bool = False  # a slot was taken (and maybe given back since): the engine may start
    holding: int | None = None  # the slot held now
    released_because: str = ""  # "ready", "timeout", "stopping"


class LoadGate:
    """N slots over Leases; `identity` is the pod's name."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        namespace: str,
        storage: str,
        slots: int,
        identity: str,
        lease_duration_s: float = DEFAULT_LEASE_DURATION_S,
        renew_deadline_s: float = DEFAULT_RENEW_DEADLINE_S,
    ) -> None:
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.identity = identity
        self.status = GateStatus()
        self._slots = [
            LeaderElector(
                kube,
                namespace=namespace,
                name=lease_name(storage, i),
                identity=identity,
                lease_duration_s=lease_duration_s,
                renew_deadline_s=renew_deadline_s,
            )
            for i in range(slots)
        ]
        # each gate starts its round at its own slot, so N waiters do not all read slot 0 first
        self._first = zlib.crc32(identity.encode()) % slots

    async def step(self, now: float) -> bool:
        """Renew the slot held, or try each slot once; whether one is held afterwards."""
        if self.status.holding is not None:
            if await self._slots[self.status.holding].tick(now):
                return True
            log.warning("load gate %s: lost slot %d; queueing again", self.identity, self.status.holding)
            self.status.holding = None
        n = len(self._slots)
        for k in range(n):
            i = (self._first + k) % n
            if await self._slots[i].tick(now):
                self.status.holding = i
                self.status.acquired = True
                log.info("load gate %s: took slot %d of %d", self.identity, i, n)
                return True
        return False

    async def release(self, now: float, because: str) -> None:
        if self.status.holding is None:
            return
        slot, self.status.holding = self.status.holding, None
        self.status.released_because = because
        await self._slots[slot].release(now)
        log.info("load gate %s: gave slot %d back (%s)", self.identity, slot, because)


async def hold(
    gate: LoadGate,
    engine_ready: Callable[[], Awaitable[bool]],
    *,
    clock: Callable[[], float],
    sleep: Callable[[float], Awaitable[object]],
    stop: asyncio.Event,
    retry_s: float = DEFAULT_RETRY_S,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> str:
    """Queue for a slot, hold it until the engine is ready (or the timeout, or `stop`), give it
    back; returns why it was given back ("stopping" if `stop` came first)."""
    while not stop.is_set() and not await gate.step(clock()):
        await _pause(sleep, stop, retry_s)
    if stop.is_set():
        await gate.release(clock(), "stopping")
        return "stopping"
    taken = clock()
    while True:
        if stop.is_set():
            because = "stopping"
            break
        if await engine_ready():
            because = "ready"
            break
        if clock() - taken >= timeout_s:
            because = "timeout"
            log.warning("load gate %s: the engine was not ready within %.0f s", gate.identity, timeout_s)
            break
        await gate.step(clock())  # renew (or, if it was lost, queue again)
        await _pause(sleep, stop, retry_s)
    await gate.release(clock(), because)
    return because


async def _pause(sleep: Callable[[float], Awaitable[object]], stop: asyncio.Event, seconds: float) -> None:
    """`sleep`, cut short by `stop`."""
    sleeping = asyncio.ensure_future(sleep(seconds))
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait((sleeping, stopping), return_when=asyncio.FIRST_COMPLETED)
    for task in (sleeping, stopping):
        task.cancel()
