"""prefill_time_bucket_rate end to end: the engine emulator's real vLLM /metrics (replay/emulate),
the scrape source and catalog, the adapter's HTTP server, and the controller's reader of it.

The emulator runs on a manual clock, one request at a time, so each prefill takes exactly one step:
step_base_s + prefill_token_s x prompt words. The expected rates come from those times and vLLM's
bucket bounds (../shared/engine_metrics.md), not from the emulator's histogram.
"""

from __future__ import annotations

from emulated import LABELS, WINDOW_S, assert_served_per_bound, served_buckets

from replay.emulate.server import EmulatorConfig
from replay.profiles import EngineProfile

METRIC = "infscale_prefill_time_bucket_rate"
# vLLM's request-time buckets as it exposes them (prometheus_client spells 1 as "1.0")
VLLM_BOUNDS = (
    "0.3", "0.5", "0.8", "1.0", "1.5", "2.0", "2.5", "5.0", "10.0", "15.0", "20.0", "30.0", "40.0",
    "50.0", "60.0", "120.0", "240.0", "480.0", "960.0", "1920.0", "7680.0", "+Inf",
)  # fmt: skip
# no decode or attention cost: a prefill alone is 0.1 s + 1 ms a word, in one step
PROFILE = EngineProfile(
    max_num_seqs=4,
    max_num_batched_tokens=20_000,
    kv_budget_tokens=32_768,
    step_base_s=0.1,
    prefill_token_s=0.001,
    prefill_attention_s=0.0,
    decode_request_s=0.0,
    decode_context_s=0.0,
)
# prompt words -> requests: prefills of 0.2, 0.6, 1.4, 2.1, 6.1 and 14.1 s
PROMPTS = {100: 3, 500: 2, 1_300: 1, 2_000: 1, 6_000: 1, 14_000: 1}


def expected_rates() -> dict[str, float]:
    prefills = [
        PROFILE.step_base_s + PROFILE.prefill_token_s * words
        for words, n in PROMPTS.items()
        for _ in range(n)
    ]
    return {le: sum(1 for s in prefills if le == "+Inf" or s <= float(le)) / WINDOW_S for le in VLLM_BOUNDS}


async def test_the_adapter_serves_the_emulators_prefill_times_one_item_per_bound() -> None:
    requests = [(words, 1) for words, n in PROMPTS.items() for _ in range(n)]
    config = EmulatorConfig(engine="vllm", profile=PROFILE)
    served = await served_buckets(config, METRIC, "prefill_time_bucket_rate", requests)
    expected = expected_rates()
    assert expected["0.3"] == 3 / 60 and expected["15.0"] == expected["+Inf"] == 9 / 60  # the arithmetic
    assert_served_per_bound(served, LABELS, VLLM_BOUNDS, expected)
