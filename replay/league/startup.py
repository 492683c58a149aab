"""The start-up sweep: the same scenario with slower or faster cold starts.

A scenario's start-up time is the policy core's lead time of one replica on a cold cluster
(coldstart.lead_time_s with no node up: provisioning, image pull, weight load, warm-up); it is
164 s for reference-70b. Two ways to reach another start-up time T:

- `dilate` (default): every duration of the cold path multiplied and every bandwidth divided by
  the same factor -- the cluster as it is, slower or faster throughout; contention between
  loaders keeps its shape (eight loaders still take eight times one).
- `bandwidth`: only the storage bandwidths change (weights 140 GB at a slower or faster store);
  start-up times below the fixed phases (provisioning, pull, warm-up) cannot be reached and are
  left out.
Fields are found by their units (`*_s` durations, `*_gbps` bandwidths), nested specs included,
so new cold-start phases are swept without changes here.
"""

from __future__ import annotations

import dataclasses
import math
from enum import StrEnum
from typing import Any, TypeVar

from autoscaler.policy import coldstart
from autoscaler.policy.spec import ColdStartSpec
from replay.profiles import Scenario

DEFAULT_STARTUPS_S = (30.0, 60.0, 120.0, 240.0, 420.0, 600.0)
# the bandwidth mode's fastest store: every bandwidth x 1e9 (140 GB in 14 ns), the fixed phases alone
FASTEST = 1e-9

T = TypeVar("T")


class StartupMode(StrEnum):
    DILATE = "dilate"
    BANDWIDTH = "bandwidth"


class StartupError(ValueError):
    """A start-up time this scenario cannot be given; the message says why."""


def startup_s(spec: ColdStartSpec) -> float:
    """One replica's start-up on a cold cluster (no node up), per the policy core."""
    return coldstart.lead_time_s(spec)


def _scaled(value: T, factor: float, durations: bool) -> T:
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        x = getattr(value, f.name)
        if isinstance(x, float) and not isinstance(x, bool):
            if durations and f.name.endswith("_s"):
                changes[f.name] = x * factor
            elif f.name.endswith("_gbps"):
                changes[f.name] = x / factor
        elif dataclasses.is_dataclass(x):
            changes[f.name] = _scaled(x, factor, durations)
        elif isinstance(x, tuple) and x and all(dataclasses.is_dataclass(v) for v in x):
            changes[f.name] = tuple(_scaled(v, factor, durations) for v in x)
    return dataclasses.replace(value, **changes)


def with_startup(scenario: Scenario, target_s: float, mode: StartupMode = StartupMode.DILATE) -> Scenario:
    """`scenario` with its cold path changed so one replica on a cold cluster starts in
    `target_s` seconds (within 0.1 %)."""
    if not (math.isfinite(target_s) and target_s > 0):
        raise StartupError(f"start-up time must be a finite number > 0, got {target_s!r}")
    spec = scenario.cold_start
    durations = mode == StartupMode.DILATE

    def at(factor: float) -> ColdStartSpec:
        return _scaled(spec, factor, durations)

    if durations:  # every phase scales: start-up is linear in the factor
        factor = target_s / startup_s(spec)
    else:  # bisection: the load time falls with the bandwidth, the fixed phases stay
        floor = startup_s(at(FASTEST))
        if target_s <= floor * 1.001:
            raise StartupError(
                f"{scenario.name}: {target_s:g} s is below the {floor:.0f} s its fixed phases take "
                "(provisioning, image pull, warm-up); use the dilate mode"
            )
        lo, hi = FASTEST, 1.0
        while startup_s(at(hi)) < target_s:
            hi *= 2.0
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if startup_s(at(mid)) < target_s else (lo, mid)
            if hi - lo < 1e-12 * hi:
                break
        factor = hi
    scaled = at(factor)
    got = startup_s(scaled)
    if abs(got - target_s) > 1e-3 * target_s:
        raise StartupError(f"{scenario.name}: reached {got:.1f} s, not {target_s:g} s")
    return dataclasses.replace(scenario, name=f"{scenario.name}@startup-{target_s:g}s", cold_start=scaled)
