"""`infscale replay stationary`: the predictive policy in the replay loop on stationary traffic.

The capacity model is checked against the replay on static fleets (tests/replay/
test_capacity_vs_replay.py); this runs the whole policy in the loop, with the engines' own noise
(finishes clumped by batches, counters read as rates over windows), on Poisson arrivals at a
constant rate, and asks whether it settles near the least static fleet that meets the SLO and
stays there. Per case (a scenario, a mix of request shapes, a load):

  rate      the arrival rate at which main's capacity model first said `load` replicas (RATES:
            the load is named by the model's count, so the grid spans a few replicas to tens on
            either engine; fixed, so a change to the model runs the same traces);
  least     the least static fleet whose attainment meets the SLO's (found by search around the
            model's count, behind the same warm-up); where none does up to 2x + 4 the model's
            count, the least within 0.1 point of that ceiling, marked `*`;
  predictive  started at `least` behind the scenario's warm-up (so the policy's state has
            history and nothing is owed to a warm start), then over the scored hour: the mean
            replicas (requested to deleted, as GPU-hours count them), the lowest and highest
            desired count, the cold starts, the scale events and the SLO attainment.

The mixes: `chat` (1,000-token prompts, 200-token outputs), `long-prompts` (4,000 and 200),
`long-outputs` (1,000 and 1,500, geometric-like outputs of shape 1: reasoning models' long and
spread answers, as the ServeGen paper's figures show them) and `mix` (60 % chat, 20 % each of
the other two). Lengths are gamma-distributed around their means (shape 2 unless said).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, replace

import numpy as np
import numpy.typing as npt

from autoscaler.policy import lengths
from autoscaler.policy.capacity import Demand, size
from replay import cliargs, report
from replay.cli import run_policy
from replay.policies import PolicyParams, StaticPolicy
from replay.policies.predictive import replica_profile, slo_target
from replay.profiles import SCENARIOS, Scenario
from replay.simulate import simulate
from replay.trace import Trace
from replay.warmup import default_warmup_s

SCHEMA = "infscale.replay.stationary/v1"
DURATION_S = 3_600.0  # the scored window: cold starts are counted per hour
CEILING_SLACK = 0.001  # where no fleet meets the SLO: within 0.1 point of the ceiling


@dataclass(frozen=True, slots=True)
class Part:
    """A share of the requests: mean prompt and output tokens, gamma shapes of both."""

    weight: float
    prompt: float
    output: float
    prompt_shape: float = 2.0
    output_shape: float = 2.0


MIXES: dict[str, tuple[Part, ...]] = {
    "chat": (Part(1.0, 1_000.0, 200.0),),
    "long-prompts": (Part(1.0, 4_000.0, 200.0),),
    "long-outputs": (Part(1.0, 1_000.0, 1_500.0, output_shape=1.0),),
    "mix": (
        Part(0.6, 1_000.0, 200.0),
        Part(0.2, 4_000.0, 200.0),
        Part(0.2, 1_000.0, 1_500.0, output_shape=1.0),
    ),
}
LOADS = (3, 10, 30)
# the arrival rates at which the capacity model on main (125ded6) first said LOADS replicas, on a
# sample of the mix: fixed, so that a change to the model runs the same traces
RATES: dict[tuple[str, str], tuple[float, float, float]] = {
    ("reference-70b", "chat"): (24.0, 107.0, 345.0),
    ("reference-70b", "long-prompts"): (2.2, 9.4, 30.6),
    ("reference-70b", "long-outputs"): (6.3, 28.0, 91.0),
    ("reference-70b", "mix"): (11.0, 50.0, 160.0),
    ("one-gpu-8b", "chat"): (41.0, 185.0, 595.0),
    ("one-gpu-8b", "long-prompts"): (8.7, 39.0, 126.0),
    ("one-gpu-8b", "long-outputs"): (8.9, 40.0, 129.0),
    ("one-gpu-8b", "mix"): (17.7, 80.0, 256.0),
}
GRID_SCENARIOS = ("reference-70b", "one-gpu-8b")


@dataclass(frozen=True, slots=True)
class Row:
    scenario: str
    mix: str
    load: int  # the model's count the rate was chosen for
    rate: float
    model: int  # the model's count on the trace's own mix and spread
    least: int
    least_attainment: float
    reachable: bool  # False: no fleet met the SLO, `least` is the ceiling's
    mean_replicas: float
    lowest: int
    highest: int
    cold_starts: int
    scale_events: int
    slo_attainment: float

    @property
    def over(self) -> float:
        return self.mean_replicas - self.least


def poisson_trace(mix: str, rate: float, duration_s: float = DURATION_S, seed: int = 1) -> Trace:
    """Poisson arrivals at `rate` of the mix's parts, lengths gamma around their means."""
    parts = MIXES[mix]
    rng = np.random.default_rng(seed)
    n = int(rate * duration_s)
    arrival = np.cumsum(rng.exponential(1.0 / rate, n))
    weights = np.array([p.weight for p in parts])
    which = rng.choice(len(parts), n, p=weights / weights.sum())
    prompts, outputs = np.empty(n), np.empty(n)
    for i, part in enumerate(parts):
        at = which == i
        k = int(at.sum())
        prompts[at] = rng.gamma(part.prompt_shape, part.prompt / part.prompt_shape, k)
        outputs[at] = rng.gamma(part.output_shape, part.output / part.output_shape, k)
    return Trace(f"stationary-{mix}", arrival, _tokens(prompts), _tokens(outputs))


def _tokens(x: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    out: npt.NDArray[np.int64] = np.maximum(1, x).astype(np.int64)
    return out


def model_count(scenario: Scenario, trace: Trace, rate: float) -> int:
    """The capacity model's count at the trace's own mix and prompt and output spreads (as the
    engines' histograms give them), under the replay's least-loaded router."""
    x = trace.input_tokens.astype(float)
    y = trace.output_tokens.astype(float)
    profile = replica_profile(scenario.engine)
    cv2 = float((x * x).mean() / x.mean() ** 2 - 1.0)
    outputs_cv2 = float((y * y).mean() / y.mean() ** 2 - 1.0)
    spread = lengths.with_outputs(lengths.spread(profile, float(x.mean()), cv2), outputs_cv2)
    shape = lengths.Shape(**spread, least_loaded=True)
    demand = Demand(rate, rate * float(x.mean()), rate * float(y.mean()))
    slo = slo_target(scenario)
    sizing = size(profile, slo, demand, **shape)
    return sizing.replicas


def attainment(trace: Trace, scenario: Scenario, replicas: int, warmup_s: float) -> float:
    result = simulate(trace, scenario, StaticPolicy(replicas), warmup_s=warmup_s, max_tail_s=1e6)
    return float(report.policy_summary(result)["slo_attainment"])


def least_fleet(trace: Trace, scenario: Scenario, start: int, warmup_s: float) -> tuple[int, float, bool]:
    """(the least static fleet meeting the SLO, its attainment, whether the SLO was reachable),
    searched from `start` (the attainment rises with the fleet)."""
    goal = slo_target(scenario).attainment
    cap = 2 * start + 4
    seen: dict[int, float] = {}

    def at(n: int) -> float:
        if n not in seen:
            seen[n] = attainment(trace, scenario, n, warmup_s)
        return seen[n]

    reachable = at(cap) >= goal
    if not reachable:
        goal = at(cap) - CEILING_SLACK
    n = max(1, start)
    while at(n) < goal:
        n += 1
    while n > 1 and at(n - 1) >= goal:
        n -= 1
    return n, at(n), reachable


def run_case(scenario_name: str, mix: str, load: int, seed: int = 1) -> Row:
    """One case of the grid: `load` one of LOADS (the rate is RATES')."""
    scenario = SCENARIOS[scenario_name]
    rate = RATES[scenario_name, mix][LOADS.index(load)]
    trace = poisson_trace(mix, rate, seed=seed)
    warmup_s = default_warmup_s(scenario)
    model = model_count(scenario, trace, rate)
    least, least_att, reachable = least_fleet(trace, scenario, model, warmup_s)
    started = replace(scenario, initial_replicas=least)
    result = run_policy(trace, started, "predictive", PolicyParams(), warmup_s=warmup_s)
    desired = [p.desired for p in result.timeline if 0.0 <= p.t_s < trace.duration_s]
    return Row(
        scenario_name,
        mix,
        load,
        rate,
        model,
        least,
        least_att,
        reachable,
        result.replica_seconds / trace.duration_s,
        min(desired),
        max(desired),
        result.cold_starts,
        result.scale_events,
        float(report.policy_summary(result)["slo_attainment"]),
    )


def render(rows: list[Row]) -> str:
    head = (
        f"{'scenario':<14}{'mix':<14}{'load':>5}{'req/s':>9}{'model':>6}{'least':>7}{'at':>8}"
        f"{'mean':>7}{'over':>6}{'range':>8}{'cold/h':>7}{'events':>7}{'SLO %':>8}"
    )
    lines = [head]
    for r in rows:
        least = f"{r.least}{'' if r.reachable else '*'}"
        lines.append(
            f"{r.scenario:<14}{r.mix:<14}{r.load:>5}{r.rate:>9.4g}{r.model:>6}{least:>7}"
            f"{100 * r.least_attainment:>8.2f}{r.mean_replicas:>7.1f}{r.over:>+6.1f}"
            f"{f'{r.lowest}-{r.highest}':>8}{r.cold_starts:>7}{r.scale_events:>7}"
            f"{100 * r.slo_attainment:>8.2f}"
        )
    worst = max(rows, key=lambda r: r.over)
    lines.append(
        f"sum: mean {sum(r.mean_replicas for r in rows):.1f} over the least {sum(r.least for r in rows)}, "
        f"cold starts {sum(r.cold_starts for r in rows)}, SLO below the least's in "
        f"{sum(r.slo_attainment < r.least_attainment - 0.005 for r in rows)} cases by > 0.5 pt; "
        f"most over: {worst.scenario} {worst.mix} {worst.load} ({worst.over:+.1f})"
    )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="(default: both)")
    parser.add_argument("--mix", action="append", choices=sorted(MIXES), help="(default: every mix)")
    parser.add_argument("--load", action="append", type=int, choices=LOADS, help="(default: every load)")
    parser.add_argument("--seed", type=cliargs.seed, default=1, help="the traces' seed")


def run(args: argparse.Namespace) -> int:
    rows = []
    for scenario in args.scenario or GRID_SCENARIOS:
        for mix in args.mix or MIXES:
            for load in args.load or LOADS:
                rows.append(run_case(scenario, mix, load, args.seed))
                if getattr(args, "output", "text") == "text":
                    print(render(rows).splitlines()[-2], file=sys.stderr, flush=True)
    if getattr(args, "output", "text") == "json":
        print(json.dumps({"schema": SCHEMA, "rows": [asdict(r) for r in rows]}, indent=2))
    else:
        print(render(rows))
    return 0
