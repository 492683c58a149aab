"""CPU time of the per-tick parts the compiled copies replace, each against the Python path on the
same arguments: what a fused call saves, and what it does not (the values built around it).

Run: `python -m bench.tick_parts`. The bench's predictive row runs TICKS ticks; the last tick's
arguments are kept and each part is timed on them, best of 5 runs of N calls, the variants
alternately in one process (docs/policy.md, "Performance"). Timings move with the machine's
load; the ratios within a line are what to read.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable
from typing import Any

from autoscaler.policy import (
    band,
    burstsize,
    capacityfacts,
    demand,
    flatahead,
    flatband,
    flatcalls,
    flatdemand,
    flatkernel,
    lookahead,
)
from autoscaler.policy.decide import decide, record_rescale
from autoscaler.policy.state import PolicyState
from bench import bench_policy as b

TICKS = 1_200
N = 20_000


def _captured() -> dict[str, Any]:
    """The arguments of the last tick's demand.observe and band.track, the bench's predictive row."""
    kept: dict[str, Any] = {}
    observe, track = demand.observe, band.track

    def observing(*args: Any) -> Any:
        kept["observe"] = args
        return observe(*args)

    def tracking(*args: Any) -> Any:
        kept["track"] = args
        return track(*args)

    demand.observe, band.track = observing, tracking  # type: ignore[assignment]
    try:
        spec = b.SCENARIOS[b.PREDICTIVE]
        state, replicas = PolicyState(), 4
        for i, (queue, batch) in enumerate(b.observations(TICKS)):
            now = b.START + i * 15.0
            decision, state = decide(spec, state, b.observation(queue, batch, replicas), now)
            if decision.desired_replicas != replicas:
                state = record_rescale(spec, state, now, replicas, decision.desired_replicas)
                replicas = decision.desired_replicas
    finally:
        demand.observe, band.track = observe, track
    return kept


def _python() -> None:
    flatdemand.install(None)
    flatband.use(None)
    flatahead.use(None)


def _line(name: str, variants: dict[str, tuple[Callable[[], object], Callable[[], object]]]) -> None:
    """Each variant's (prepare, call): N calls timed after prepare(), best of 5, alternately."""
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(5):
        for label, (prepare, call) in variants.items():
            prepare()
            best[label] = min(best[label], timeit.timeit(call, number=N))
    _python()
    print(f"{name}: " + ", ".join(f"{label} {t / N * 1e6:.2f} µs" for label, t in best.items()))


def main() -> None:
    from replay.policies import sizekernel, tickkernel

    kept = _captured()
    cap = b.SCENARIOS[b.PREDICTIVE].capacity
    assert cap is not None
    d = cap.demand
    tick, burst, ahead = tickkernel.compiled(), tickkernel.compiled_burst_test(), tickkernel.compiled_ahead()
    sizing = sizekernel.compiled()
    observed, est = demand.observe(*kept["observe"])
    prior, now = kept["observe"][1], kept["observe"][2]
    # the spec's facts once, as decide keeps them per spec: not rebuilt inside the timed calls
    facts = capacityfacts.facts(cap)
    load, terms, band_terms = facts.load, facts.terms, facts.band
    args: list[Any] = []

    def keeping(*values: Any) -> Any:
        args[:] = values
        return tick(*values)

    flatdemand.install(keeping)
    demand.observe(*kept["observe"])
    _python()

    def nothing() -> None:
        pass

    _line(
        "demand.observe",
        {
            "Python": (_python, lambda: demand.observe(*kept["observe"])),
            "flat Python": (
                lambda: flatdemand.install(flatdemand.tick),
                lambda: demand.observe(*kept["observe"]),
            ),
            "compiled": (lambda: flatdemand.install(tick), lambda: demand.observe(*kept["observe"])),
            "its compiled tick alone": (nothing, lambda: tick(*args)),
        },
    )

    def band_upper() -> object:  # planstages.panic_stage's test before flatband
        expected_now = band.upper(d, prior, demand.expected(d, prior, now - prior.at), load)
        return load(est.now) > cap.panic_threshold * load(expected_now), expected_now.requests

    def burst_test() -> object:
        return flatcalls.above_band(terms, band_terms, prior, now, est.now, cap.panic_threshold)

    _line(
        "the panic's test",
        {
            "band.upper and 4 loads": (_python, band_upper),
            "flat Python": (_python, burst_test),
            "compiled": (lambda: flatband.use(burst), burst_test),
        },
    )

    def forecasts() -> object:
        ahead = lookahead.Lookahead(facts, observed, 1.0, 64)
        return ahead.forecast_at(0.0), ahead.forecast_at(150.0), ahead.forecast_at(180.0)

    _line(
        "a Lookahead and 3 forecasts",
        {
            "Python": (_python, forecasts),
            "flat Python": (lambda: flatahead.use((flatahead.start, flatahead.forecast)), forecasts),
            "compiled": (lambda: flatahead.use(ahead), forecasts),
        },
    )

    burstsize.use(sizing)
    sized_ahead = lookahead.Lookahead(facts, observed, 1.0, 64)
    sized_ahead.sizing_at(150.0)  # the profile's and SLO's tables, packed for the kernel
    upper = sized_ahead.upper_at(150.0)
    table = flatkernel._last
    r, prompt, output = upper.requests, upper.prompt_tokens, upper.output_tokens
    sized = (table[3], table[4], r, prompt, output, 1.0, 64, 2.0, 1.0, 0.0, 0.0)
    _line(
        "the fused sizing's call",
        {
            "dispatcher": (nothing, lambda: sizekernel._dispatcher(*sized)),
            "entry point": (nothing, lambda: sizing.size(*sized)),
        },
    )
    burstsize.use(None)
    _line("band.track (Python)", {"Python": (nothing, lambda: band.track(*kept["track"]))})


if __name__ == "__main__":
    main()
