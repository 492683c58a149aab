"""The size of status.policyState as the controller writes it, on the shared traces.

Run: `python -m bench.bench_status [TRACE_DIR]` (or `python -m bench status`; default
../shared/traces). The replay's predictive policy over each league trace at its larger rate scale
(the busier one) on reference-70b (64 replicas: the league's largest fleet); after every decision,
the policy state as crd.state_to_status writes it (compact JSON, as the client sends it) is
measured: the largest, and the longest of each list the planner keeps. docs/controller.md ("The
status's size") quotes the figures against the object budget (etcd's 1.5 MiB).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from autoscaler.controller.crd import state_to_status
from autoscaler.policy.observation import Observation
from autoscaler.policy.state import PolicyState
from replay.league.sources import SHARED_TRACES, _source
from replay.policies import PolicyParams, build_policy
from replay.policies.hpa import DecidePolicy
from replay.profiles import REFERENCE_70B
from replay.simulate import simulate

ETCD_OBJECT_BYTES = 1_572_864


def _lengths(state: PolicyState) -> tuple[int, int, int, int]:
    p = state.planner
    if p is None:
        return 0, 0, 0, 0
    d = p.demand
    return len(p.needs), len(p.gaps), len(d.pending) if d else 0, len(d.peaks) if d else 0


@dataclass(slots=True)
class Measured(DecidePolicy):
    """The replay's DecidePolicy, measuring the state it threads after each decision."""

    most: dict[str, float] = field(default_factory=dict)

    def desired(self, now: float, obs: Observation) -> int:
        out = DecidePolicy.desired(self, now, obs)
        size = len(json.dumps(state_to_status(self.state), separators=(",", ":"), allow_nan=False))
        most = self.most
        most["bytes"] = max(most.get("bytes", 0.0), size)
        for name, n in zip(("needs", "gaps", "pending", "peaks"), _lengths(self.state), strict=True):
            most[name] = max(most.get(name, 0.0), n)
        most["decisions"] = most.get("decisions", 0.0) + 1
        return out


def measure(path: Path) -> dict[str, float]:
    source = _source(path, None)
    scale = max(source.rate_scales or (1.0,))
    trace = source.load(scale, seed=0)
    built = build_policy("predictive", REFERENCE_70B, trace, PolicyParams(), lambda: 0.0)
    assert isinstance(built, DecidePolicy)
    policy = Measured(**{f: getattr(built, f) for f in DecidePolicy.__dataclass_fields__ if f != "decisions"})
    simulate(trace, REFERENCE_70B, policy)
    return policy.most


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0]) if args else Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"
    head = ("decisions", "max bytes", "needs", "gaps", "pending", "peaks")
    print(f"{'trace':<36} " + " ".join(f"{h:>{w}}" for h, w in zip(head, (9, 10, 6, 5, 8, 6), strict=True)))
    worst = 0.0
    for name in SHARED_TRACES:
        path = folder / name
        if not path.exists():
            print(f"{name:<36} (not found in {folder})")
            continue
        begun = time.perf_counter()
        m = measure(path)
        worst = max(worst, m["bytes"])
        print(
            f"{name:<36} {m['decisions']:>9,.0f} {m['bytes']:>10,.0f} {m['needs']:>6.0f} {m['gaps']:>5.0f}"
            f" {m['pending']:>8.0f} {m['peaks']:>6.0f}   ({time.perf_counter() - begun:.0f} s)",
            flush=True,
        )
    print(f"largest policyState: {worst:,.0f} bytes = {worst / ETCD_OBJECT_BYTES:.2%} of etcd's 1.5 MiB")


if __name__ == "__main__":
    main()
