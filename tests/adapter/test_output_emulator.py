"""output_length_bucket_rate end to end: the engine emulator's real vLLM and TGI /metrics
(replay/emulate), the scrape source and catalog, the adapter's HTTP server, and the controller's
reader of it (tests/adapter/emulated.py).

Each request generates exactly its max_tokens (the emulator has no EOS). The expected bounds are the
engines' own, from ../shared/engine_metrics.md and their sources (vLLM's build_1_2_5_buckets up to
the max model length; TGI's 100 linear buckets up to max_total_tokens, as Rust prints an f64), and
the expected rates count the requests' lengths against them, not the emulator's histogram.
"""

from __future__ import annotations

import pytest
from emulated import LABELS, WINDOW_S, assert_served_per_bound, served_buckets

from replay.emulate.server import EmulatorConfig
from replay.profiles import EngineProfile

METRIC = "infscale_output_length_bucket_rate"
PROFILE = EngineProfile(
    max_num_seqs=4,
    max_num_batched_tokens=8_192,
    kv_budget_tokens=32_768,  # the context limit the buckets go up to: 32,768 tokens
    step_base_s=0.01,
    prefill_token_s=0.0,
    prefill_attention_s=0.0,
    decode_request_s=0.0,
    decode_context_s=0.0,
)
# output tokens -> requests; 1 and 2 on a vLLM bound (le is <=), 3,000 past ten of TGI's
OUTPUTS = {1: 3, 2: 1, 7: 2, 40: 1, 400: 1, 3_000: 1}
# build_1_2_5_buckets(32_768) as prometheus_client spells it
VLLM_BOUNDS = (
    "1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "1000.0", "2000.0",
    "5000.0", "10000.0", "20000.0", "+Inf",
)  # fmt: skip


def _rust(value: float) -> str:
    """Rust's f64 Display: an integral value without a fraction, else the shortest round trip."""
    return str(int(value)) if value == int(value) else repr(value)


# router/src/server.rs: (max_total_tokens / 100) * (x + 1) for x in 0..100
TGI_BOUNDS = (*(_rust(32_768 / 100 * (x + 1)) for x in range(100)), "+Inf")


def expected_rates(bounds: tuple[str, ...]) -> dict[str, float]:
    lengths = [tokens for tokens, n in OUTPUTS.items() for _ in range(n)]
    return {le: sum(1 for o in lengths if le == "+Inf" or o <= float(le)) / WINDOW_S for le in bounds}


@pytest.mark.parametrize(("engine", "bounds"), [("vllm", VLLM_BOUNDS), ("tgi", TGI_BOUNDS)])
async def test_the_adapter_serves_the_emulators_output_lengths_one_item_per_bound(
    engine: str, bounds: tuple[str, ...]
) -> None:
    config = EmulatorConfig(engine=engine, profile=PROFILE)
    assert config.max_model_len == 32_768
    requests = [(10, tokens) for tokens, n in OUTPUTS.items() for _ in range(n)]
    served = await served_buckets(config, METRIC, "output_length_bucket_rate", requests)
    expected = expected_rates(bounds)
    labels = LABELS if engine == "vllm" else {k: v for k, v in LABELS.items() if k != "model"}  # TGI: none
    assert_served_per_bound(served, labels, bounds, expected)


def test_the_expected_rates_arithmetic() -> None:
    """The reference itself, by hand: 9 requests in 60 s."""
    vllm, tgi = expected_rates(VLLM_BOUNDS), expected_rates(TGI_BOUNDS)
    assert (vllm["1.0"], vllm["2.0"], vllm["5.0"], vllm["50.0"], vllm["500.0"]) == (
        3 / 60,
        4 / 60,
        4 / 60,
        7 / 60,
        8 / 60,
    )
    assert vllm["2000.0"] == 8 / 60 and vllm["5000.0"] == vllm["+Inf"] == 9 / 60
    assert TGI_BOUNDS[:2] == ("327.68", "655.36") and TGI_BOUNDS[24] == "8192" and len(TGI_BOUNDS) == 101
    assert (tgi["327.68"], tgi["655.36"], tgi[TGI_BOUNDS[8]], tgi[TGI_BOUNDS[9]]) == (
        7 / 60,
        8 / 60,
        8 / 60,
        9 / 60,
    )
