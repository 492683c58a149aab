"""Where a predictive decision's time goes: its parts, each replayed on the arguments it had.

Run: `python -m bench.decision_parts` (`--python`: without the compiled copies). The bench's
predictive row decides its first TICKS ticks with each part's calls recorded, then each part is
timed on its own recorded arguments, best of 7 runs over all of them, and printed as µs a tick
beside the whole decision's (decide() replayed the same way). The parts are pure, so a replay
returns what the tick did; a part's time includes the calls it makes. "a Lookahead and its
horizon" is planner.plan's Lookahead, horizon.find on it (the one fresh sizing of most ticks) and
the reads at the horizon. Timings move with the machine's load: the shares are what to read
(docs/policy.md, "Performance").
"""

from __future__ import annotations

import gc
import sys
import timeit
from collections import defaultdict
from collections.abc import Callable
from types import ModuleType
from typing import Any

from autoscaler.policy import (
    band,
    decide,
    demand,
    horizon,
    lookahead,
    planner,
    planstages,
    scaledown,
    scaledownstage,
    speedlearn,
)
from autoscaler.policy.state import PolicyState
from bench import bench_policy as b

TICKS = 600
PARTS: tuple[tuple[ModuleType, str], ...] = (
    (decide, "external_metric_replicas"),
    (decide, "combine_metrics"),
    (decide, "stabilize_behavior"),
    (decide, "_next_state"),
    (planner, "plan"),
    (demand, "observe"),
    (band, "track"),
    (planner, "Lookahead"),
    (horizon, "find"),
    (planstages, "forecast_stages"),
    (planstages, "panic_stage"),
    (planstages, "scale_up_stage"),
    (scaledownstage, "stage"),
    (scaledownstage, "terms"),
    (scaledownstage, "recreation"),
    (scaledown, "drain_s"),
    (scaledown, "record"),
    (scaledown, "breakeven_s"),
    (planner, "_learn_speed"),
    (speedlearn, "speed"),
)

Calls = list[tuple[tuple[Any, ...], dict[str, Any]]]


def recorded() -> tuple[list[tuple[Any, ...]], dict[str, Calls]]:
    """decide()'s arguments at each of the first TICKS ticks, and each part's calls."""
    kept: dict[str, Calls] = defaultdict(list)
    own = {name: getattr(module, name) for module, name in PARTS}

    def recording(name: str) -> Callable[..., Any]:
        f = own[name]

        def call(*args: Any, **kwargs: Any) -> Any:
            kept[name].append((args, kwargs))
            return f(*args, **kwargs)

        return call

    for module, name in PARTS:
        setattr(module, name, recording(name))
    spec = b.SCENARIOS[b.PREDICTIVE]
    state, replicas = PolicyState(), 4
    decisions = []
    try:
        for i, (queue, batch) in enumerate(b.observations(TICKS)):
            now = b.START + i * 15.0
            args = (spec, state, b.observation(queue, batch, replicas), now)
            decisions.append(args)
            decision, state = decide.decide(*args)
            if decision.desired_replicas != replicas:
                state = decide.record_rescale(spec, state, now, replicas, decision.desired_replicas)
                replicas = decision.desired_replicas
    finally:
        for module, name in PARTS:
            setattr(module, name, own[name])
    return decisions, kept


def _replay(f: Callable[..., Any], calls: Calls) -> Callable[[], object]:
    return lambda: [f(*args, **kwargs) for args, kwargs in calls]


def _best(run: Callable[[], object]) -> float:
    """µs a tick of run() over the TICKS ticks, best of 7."""
    return min(timeit.repeat(run, number=1, repeat=7)) / TICKS * 1e6


def main() -> None:
    print(b.install_sizing(sys.argv[1:]))
    decisions, kept = recorded()
    gc.freeze()  # the recorded arguments are the bench's: no collection scans them
    rows = [("decide (the whole decision)", 1.0, _best(lambda: [decide.decide(*a) for a in decisions]))]
    for module, name in PARTS:
        f, calls = getattr(module, name), kept[name]
        if name != "find":  # find reads a Lookahead the tick made: replayed with it below
            label = f"{module.__name__.rsplit('.', 1)[-1]}.{name}"
            rows.append((label, len(calls) / TICKS, _best(_replay(f, calls))))

    def horizon_reads() -> None:
        for (args, _), (found, _) in zip(kept["Lookahead"], kept["find"], strict=True):
            ahead = lookahead.Lookahead(*args)
            h, _, _, _ = horizon.find(found[0], found[1], found[2], ahead.need_at, *found[4:])
            ahead.sizing_at(h), ahead.forecast_at(h), ahead.mean_load_at(h)

    rows.append(("a Lookahead and its horizon (find, sizing_at, forecast_at)", 1.0, _best(horizon_reads)))
    print(f"the bench's predictive row, its first {TICKS:,} ticks; µs a tick (best of 7), calls a tick")
    for label, calls_a_tick, us in sorted(rows, key=lambda row: -row[2]):
        print(f"{us:7.2f} µs {calls_a_tick:5.2f}  {label}")


if __name__ == "__main__":
    main()
