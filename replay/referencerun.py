"""A whole trace through replay/scheduler.py's engines in virtual time, step by step and event by
event: slow and obvious, the reference the fast engine (replay/engine.py, replay/kernel/) is tested
against, and the closed-loop runs replay/profilefit.py fits a profile with."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from replay.profiles import EngineProfile
from replay.scheduler import Request, RequestRejected, Step, StepScheduler


@dataclass(slots=True)
class ReferenceRun:
    """Per request, in trace order: what happened (NaN where it did not)."""

    replica: list[int] = field(default_factory=list)
    admitted_s: list[float] = field(default_factory=list)
    first_token_s: list[float] = field(default_factory=list)
    finished_s: list[float] = field(default_factory=list)
    dropped: list[bool] = field(default_factory=list)
    preemptions: list[int] = field(default_factory=list)
    prefix_hit_tokens: list[int] = field(default_factory=list)
    steps: int = 0


def reference_run(
    profile: EngineProfile,
    arrival_s: Sequence[float],
    input_tokens: Sequence[int],
    output_tokens: Sequence[int],
    *,
    replicas: int = 1,
    targets: Sequence[int] | None = None,
    prefix_blocks: Sequence[Sequence[int]] | None = None,
    on_step: Callable[[int, Step], None] | None = None,
) -> ReferenceRun:
    """Every replica step by step, event by event (slow, obvious). Each request goes to its target,
    or when none is given, on arrival to the replica with the fewest waiting + running requests
    (ties to the lowest index), after every step that ended by then. An idle replica starts a step
    when a request reaches it, with every request that arrived at that same instant. `on_step` sees
    every step run (replica, step)."""
    engines = [StepScheduler(profile) for _ in range(replicas)]
    steps: list[Step | None] = [None] * replicas
    n = len(arrival_s)
    out = ReferenceRun()
    requests: list[Request | None] = []
    i = 0
    while True:
        busy = [(s.end_s, k) for k, s in enumerate(steps) if s is not None]
        next_step = min(busy) if busy else (math.inf, -1)
        next_arrival = float(arrival_s[i]) if i < n else math.inf
        if next_step[0] == math.inf and next_arrival == math.inf:
            break
        if next_step[0] <= next_arrival:
            t, k = next_step
            step = steps[k]
            assert step is not None
            engines[k].complete(step)
            out.steps += 1
            if on_step is not None:
                on_step(k, step)
            steps[k] = engines[k].schedule(t)
            continue
        t = next_arrival
        if targets is not None:
            k = int(targets[i])
        else:
            load = [len(e.waiting) + len(e.running) for e in engines]
            k = load.index(min(load))
        blocks = tuple(prefix_blocks[i]) if prefix_blocks is not None else ()
        try:
            requests.append(engines[k].submit(int(input_tokens[i]), int(output_tokens[i]), t, blocks))
        except RequestRejected:
            requests.append(None)
        out.replica.append(k)
        i += 1
        if i < n and float(arrival_s[i]) == t:
            continue  # the same instant: route them all before an idle replica starts
        for k, engine in enumerate(engines):
            if steps[k] is None and not engine.idle:
                steps[k] = engine.schedule(t)
    for r in requests:
        if r is None:
            out.admitted_s.append(math.nan)
            out.first_token_s.append(math.nan)
            out.finished_s.append(math.nan)
            out.dropped.append(True)
            out.preemptions.append(0)
            out.prefix_hit_tokens.append(0)
        else:
            out.admitted_s.append(r.admitted_s)
            out.first_token_s.append(r.first_token_s)
            out.finished_s.append(r.finished_s)
            out.dropped.append(False)
            out.preemptions.append(r.preemptions)
            out.prefix_hit_tokens.append(r.prefix_hit_tokens)
    return out
