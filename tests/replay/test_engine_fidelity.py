"""The engine model against published measurements (docs/replay.md, "How faithful is this: the
engine"): NVIDIA NIM's Llama-3.3-70B on 2 x H100 FP8 (the same per-GPU work as reference-70b's BF16
on 4), AIPerf's concurrency mode, run on the exact scheduler."""

from __future__ import annotations

import pytest

from replay.profiles import LLAMA_70B_TP4_H100, EngineProfile
from replay.scheduler import StepScheduler


def closed_loop(p: EngineProfile, clients: int, isl: int, osl: int, rounds: int) -> tuple[float, float]:
    """`clients` users each sending its next request when the last one finished; mean TTFT and ITL
    over every request but each client's first (they all start at once)."""
    core = StepScheduler(p)
    owner = {core.submit(isl, osl, 0.0).id: c for c in range(clients)}
    sent = dict.fromkeys(range(clients), 1)
    done = []
    t = 0.0
    while (step := core.schedule(t)) is not None:
        core.complete(step)
        t = step.end_s
        for r, _ in step.chunks:
            if r.finished_s == t:
                c = owner.pop(r.id)
                done.append(r)
                if sent[c] < rounds:
                    owner[core.submit(isl, osl, t).id] = c
                    sent[c] += 1
    steady = [r for r in done if r.arrival_s > 0] or done
    ttft = sum(r.first_token_s - r.arrival_s for r in steady) / len(steady)
    itl = sum((r.finished_s - r.first_token_s) / (r.output_tokens - 1) for r in steady) / len(steady)
    return ttft, itl


# (clients, prompt, output, published TTFT ms, published ITL ms, TTFT tolerance or None: not met)
ROWS = [
    pytest.param(1, 5_000, 500, 406.77, 18.58, 0.05, id="1 client, 5000/500"),
    pytest.param(1, 500, 2_000, 47.77, 18.91, 0.05, id="1 client, 500/2000"),
    pytest.param(5, 5_000, 500, 546.7, 21.83, 0.15, id="5 clients"),
    pytest.param(25, 5_000, 500, 688.69, 38.75, None, id="25 clients"),
    pytest.param(50, 5_000, 500, 834.51, 59.73, None, id="50 clients"),
]


@pytest.mark.parametrize(("clients", "isl", "osl", "ttft_ms", "itl_ms", "ttft_tolerance"), ROWS)
def test_against_nim_llama_70b_h100(
    clients: int, isl: int, osl: int, ttft_ms: float, itl_ms: float, ttft_tolerance: float | None
) -> None:
    ttft, itl = closed_loop(LLAMA_70B_TP4_H100, clients, isl, osl, rounds=4 if clients >= 25 else 8)
    itl_tolerance = 0.05 if clients == 1 else 0.10
    assert itl * 1000 == pytest.approx(itl_ms, rel=itl_tolerance)
    if ttft_tolerance is not None:
        assert ttft * 1000 == pytest.approx(ttft_ms, rel=ttft_tolerance)
    else:  # the documented gap: many concurrent long prompts queue behind each other's chunks
        assert ttft * 1000 > ttft_ms
