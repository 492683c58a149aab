"""How much the warm-up's history moves a one-replica run: a fleet that starts at N replicas and
drops to one at a chosen warm-up decision, then holds one replica over the whole scored window.

On ServeGen m-large × 0.048 on one-gpu-8b the planner, predictive and the clairvoyant all hold one
replica over the scored window, yet differ by a few good requests (docs/policy.md, "The league:
where it wins and where it does not", the goal A lost at seeds 1 and 4). The engine is
deterministic given its arrivals, so the difference is the state the single replica carries out of
the warm-up: a replica that is never idle keeps its steps' phase from whatever the warm-up did.
This probe prints the scored window's good requests for each drop time. Run from the repository's root:
    .venv/bin/python probes/warmup_path.py [SEED [N [DROP_S ...]]]
(defaults: seed 1, N 11, drops at the warm-up's decisions 1 to 12, every 15 s.)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from autoscaler.policy.observation import Observation
from replay import report
from replay.profiles import SCENARIOS
from replay.simulate import simulate
from replay.traces import load_trace
from replay.warmup import with_warmup

TRACE = Path("../shared/traces/servegen_language_m-large.tar.gz")
WARMUP_S = 1_800.0  # the league's warm-up on one-gpu-8b (replay/warmup.py's auto)


@dataclass(slots=True)
class DropToOne:
    """`start` replicas at first, one from `drop_s` on (times on the played trace's clock)."""

    start: int
    drop_s: float
    name: str = "drop"
    period_s: float = 15.0
    fresh_metrics: bool = False
    metric_names: tuple[str, ...] = ()
    lead_quantile: float | None = None
    reads_cold_start: bool = False

    @property
    def initial_replicas(self) -> int:
        return self.start

    def desired(self, now: float, obs: Observation) -> int:
        return self.start if now < self.drop_s else 1


def main() -> None:
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    start = int(sys.argv[2]) if len(sys.argv) > 2 else 11
    drops = [float(x) for x in sys.argv[3:]] or [15.0 * k for k in range(1, 13)]
    scored = load_trace(TRACE, "servegen", rate_scale=0.048, seed=seed, start_s=39_600.0, end_s=50_400.0)
    played = with_warmup(scored, WARMUP_S)
    scenario = SCENARIOS["one-gpu-8b"]
    print(f"seed {seed}: {len(scored):,} scored requests, {start} replicas until the drop")
    for drop in [None, *drops]:
        policy = DropToOne(1, 0.0) if drop is None else DropToOne(start, drop)
        result = simulate(scored, scenario, policy, warmup_s=WARMUP_S, played=played)
        summary = report.policy_summary(result)
        good = round(summary["slo_attainment"] * len(scored))
        label = "one from the start" if drop is None else f"drop at warm-up +{drop:.0f} s"
        print(f"  {label:>24}: {good:,} good, {summary['gpu_hours']:.2f} GPU-h", flush=True)


if __name__ == "__main__":
    main()
