"""A replica's cold-start phases, the weight tiers, and the record of one replica on its way to ready.

startup.Startups runs the machine over these; coldstart and the replay's fleet read the records.

One replica's phases, each of which may take 0 s:

  PROVISION  until its node is up (a new node is up node_provision_s after it was asked for)
  PULL       until its node has the image: image_pull_s, once per node; later replicas on the
             node wait for the pull in progress, and a pull, once started, completes
  INIT       engine_init_s: process start, imports, CUDA / NCCL init
  GATE       waiting for a load-gate slot (max_concurrent_loads). The slot is taken after INIT and
             given back when the weights are in; with load_gate_scope = startup it is taken
             before INIT and given back at READY (a sidecar gating the engine container)
  LOAD       the weights, from the first tier that applies:
               the node cache, when it holds them (local_cache_gbps, not shared);
               a ready replica, when peer_gbps is set and one is ready (peer_gbps, not shared);
               shared storage otherwise (processor sharing with a cap, storage.py), written
               through to the node cache when the spec has one
  COMPILE    compile_cached_s on a compile-cache hit, compile_s on a miss; a miss fills the cache
  WARMUP     warmup_s
  READY      serves, and counts as a peer source until the owner says it is gone
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

from autoscaler.policy.spec import ColdStartSpec, GateScope


class StartPhase(IntEnum):
    PROVISION = 0
    PULL = 1
    INIT = 2
    GATE = 3
    LOAD = 4
    COMPILE = 5
    WARMUP = 6
    READY = 7


class Tier(StrEnum):
    SHARED = "shared"
    CACHE = "cache"
    PEER = "peer"


_LOAD_GATED = (
    StartPhase.PROVISION,
    StartPhase.PULL,
    StartPhase.INIT,
    StartPhase.GATE,
    StartPhase.LOAD,
    StartPhase.COMPILE,
    StartPhase.WARMUP,
    StartPhase.READY,
)
_STARTUP_GATED = (
    StartPhase.PROVISION,
    StartPhase.PULL,
    StartPhase.GATE,
    StartPhase.INIT,
    StartPhase.LOAD,
    StartPhase.COMPILE,
    StartPhase.WARMUP,
    StartPhase.READY,
)

_PHASES = len(StartPhase)


def phase_order(spec: ColdStartSpec) -> tuple[StartPhase, ...]:
    """The phases in the order a replica of this spec goes through them."""
    return _STARTUP_GATED if spec.load_gate_scope == GateScope.STARTUP else _LOAD_GATED


@dataclass(slots=True)
class Start:
    """One replica on its way to ready (the machine's record; callers read it)."""

    replica: int
    node: int
    order: int  # start order: breaks ties at the gate
    phase: StartPhase = StartPhase.PROVISION
    entered: list[float] = field(default_factory=lambda: [math.nan] * _PHASES)
    tier: Tier | None = None
    target_gb: float = 0.0  # shared-storage loads: done when the service per loader reaches this
    compile_hit: bool | None = None
    token: int = 0  # bumped on every phase change: timers of an earlier phase are stale

    def copy(self) -> Start:
        """An independent record at the same point (Startups.clone)."""
        return Start(
            self.replica,
            self.node,
            self.order,
            self.phase,
            list(self.entered),
            self.tier,
            self.target_gb,
            self.compile_hit,
            self.token,
        )
