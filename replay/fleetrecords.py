"""The fleet's records (Phase, Replica, Node, NodeState): what the replay reads, apart from Fleet's logic."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from typing import TypedDict


class Phase(IntEnum):
    """Ordered by how early in its life a replica is: scale-down removes the lowest first."""

    PROVISIONING = 0  # waiting for a new node
    PULLING = 1
    INITIALIZING = 2  # engine init
    GATED = 3  # waiting for a load-gate slot
    LOADING = 4
    COMPILING = 5
    WARMING = 6
    READY = 7
    DRAINING = 8
    DELETED = 9


@dataclass(slots=True)
class Replica:
    """Mutable bookkeeping of one replica (internal to the fleet; reports read copies)."""

    id: int
    node: int
    phase: Phase
    requested_s: float
    scheduled_s: float = math.nan  # GPUs held from here ...
    deleted_s: float = math.nan  # ... to here
    ready_s: float = math.nan
    drain_s: float = math.nan
    cold: bool = True  # False for the warm replicas present at t = 0


@dataclass(slots=True)
class Node:
    """A node's GPUs and life; what it has cached lives in the start-up machine's facts."""

    id: int
    gpus_free: int
    up_s: float
    empty_since: float | None = None
    removed: bool = False


class NodeState(TypedDict):
    """The up nodes as the policy core's placement and lead-time arithmetic take them."""

    free_gpus_per_node: list[int]
    image_cached_nodes: set[int]
    weights_cached: set[int]
    compile_cached_nodes: set[int]
    compile_cache_warm: bool
    peer_sources: int
