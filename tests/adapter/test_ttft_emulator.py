"""ttft_bucket_rate end to end: the engine emulator's real vLLM and SGLang /metrics (replay/emulate),
the scrape source and catalog, the adapter's HTTP server, and the controller's reader of it
(tests/adapter/emulated.py).

The emulator runs on a manual clock and one request at a time (max_num_seqs 1): a request's prefill
is one step of step_base_s + prefill_token_s x prompt words, and each group of requests sent at one
instant is served one after the other, so the k-th of a group has its first token k steps after
its arrival. The expected rates count those times against the engines' own bounds
(../shared/engine_metrics.md), not the emulator's histogram; the queued ones' times differ from
their prefills', which the prefill-time histogram counts.
"""

from __future__ import annotations

import pytest
from emulated import LABELS, WINDOW_S, Chain, assert_served_per_bound

from replay.emulate.server import EmulatorConfig
from replay.profiles import EngineProfile

METRIC = "infscale_ttft_bucket_rate"
# steps of exact binary fractions: 0.25 s + 1/1024 s a word (256 words: 0.5 s, 7,424: 7.5 s)
PROFILE = EngineProfile(
    max_num_seqs=1,
    max_num_batched_tokens=20_000,
    kv_budget_tokens=32_768,
    step_base_s=0.25,
    prefill_token_s=1 / 1024,
    prefill_attention_s=0.0,
    decode_request_s=0.0,
    decode_context_s=0.0,
)
# (prompt words, requests sent at one instant), one token each: first tokens 0.5; 0.5, 1.0, 1.5;
# 7.5; 7.5, 15.0; and one word past a bound twice, 0.2509765625 and 0.501953125 s
GROUPS = ((256, 1), (256, 3), (7_424, 1), (7_424, 2), (1, 2))
# vLLM's histogram_time_to_first_token and SGLang's bucket_time_to_first_token, as prometheus_client
# spells them
VLLM_BOUNDS = (
    "0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75", "1.0", "2.5",
    "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "160.0", "640.0", "2560.0", "+Inf",
)  # fmt: skip
SGLANG_BOUNDS = (
    "0.1", "0.2", "0.4", "0.6", "0.8", "1.0", "2.0", "4.0", "6.0", "8.0", "10.0", "20.0", "40.0", "60.0",
    "80.0", "100.0", "200.0", "400.0", "+Inf",
)  # fmt: skip


def first_token_times() -> list[float]:
    """Per request, its first token - its arrival: k prefill steps for the k-th of its group."""
    times = []
    for words, n in GROUPS:
        step = PROFILE.step_base_s + PROFILE.prefill_token_s * words
        times.extend(k * step for k in range(1, n + 1))
    return times


def expected_rates(bounds: tuple[str, ...]) -> dict[str, float]:
    times = first_token_times()
    return {le: sum(1 for s in times if le == "+Inf" or s <= float(le)) / WINDOW_S for le in bounds}


def test_the_expected_rates_arithmetic() -> None:
    """The reference itself, by hand: 9 requests in 60 s, on bounds (le) too: 0.5 twice, 1.0, 7.5 twice."""
    assert sorted(first_token_times()) == [0.2509765625, 0.5, 0.5, 0.501953125, 1.0, 1.5, 7.5, 7.5, 15.0]
    vllm, sglang = expected_rates(VLLM_BOUNDS), expected_rates(SGLANG_BOUNDS)
    assert (vllm["0.25"], vllm["0.5"], vllm["0.75"], vllm["1.0"], vllm["2.5"]) == (
        0,
        3 / 60,
        4 / 60,
        5 / 60,
        6 / 60,
    )
    assert (vllm["5.0"], vllm["7.5"], vllm["10.0"], vllm["20.0"], vllm["+Inf"]) == (
        6 / 60,
        8 / 60,
        8 / 60,
        0.15,
        0.15,
    )
    assert (sglang["0.2"], sglang["0.4"], sglang["0.6"], sglang["1.0"], sglang["8.0"]) == (
        0,
        1 / 60,
        4 / 60,
        5 / 60,
        8 / 60,
    )


@pytest.mark.parametrize(("engine", "bounds"), [("vllm", VLLM_BOUNDS), ("sglang", SGLANG_BOUNDS)])
async def test_the_adapter_serves_the_emulators_times_to_first_token_one_item_per_bound(
    engine: str, bounds: tuple[str, ...]
) -> None:
    async with Chain(EmulatorConfig(engine=engine, profile=PROFILE), {METRIC: "ttft_bucket_rate"}) as c:
        await c.source.scrape_round()  # before any request: every bound at 0
        for words, n in GROUPS:
            await c.complete_together(words, 1, n)
        c.adapter_clock.set(1_000.0 + WINDOW_S)
        await c.source.scrape_round()
        served = await c.read(METRIC)
    expected = expected_rates(bounds)
    assert_served_per_bound(served, LABELS, bounds, expected)
