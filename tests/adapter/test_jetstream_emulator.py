"""The JetStream preset end to end: the engine emulator's real JetStream /metrics (replay/emulate,
`--engine jetstream`), the scrape source and catalog, the adapter's HTTP server, and the controller's
reader of it (tests/adapter/emulated.py), where the preset's rules were tested against static text
only (tests/adapter/engine_fixtures.py JETSTREAM).

The expected values come from what the emulator was sent: requests of chosen prompt words and
max_tokens (the emulator has no EOS: each generates exactly its max_tokens), and how many wait for
the engine's decode slots. The bucket bounds are `jetstream_request_output_length`'s in upstream's
jetstream/core/metrics/prometheus.py, as prometheus_client spells them; the model label is the
model's name with "-" as "_", as JetStream labels it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from emulated import WINDOW_S, Chain, Served, request_body, served

from replay.emulate.server import EmulatorConfig
from replay.profiles import EngineProfile

LABELS = {"namespace": "serving", "deployment": "llama", "model": "emulated_model"}
PROFILE = EngineProfile(
    max_num_seqs=4,  # JetStream's decode slots
    max_num_batched_tokens=8_192,
    kv_budget_tokens=32_768,
    step_base_s=0.01,
    prefill_token_s=0.0,
    prefill_attention_s=0.0,
    decode_request_s=0.0,
    decode_context_s=0.0,
)
# (prompt words, max_tokens): 1 and 2 on a bound (le is <=), 1,500 past ten of the twenty bounds
REQUESTS = [(10, 1), (10, 1), (30, 2), (100, 7), (5, 40), (200, 400), (50, 1_500)]
OUTPUT_BOUNDS = (
    "1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "1000.0", "2000.0",
    "5000.0", "10000.0", "20000.0", "50000.0", "100000.0", "200000.0", "500000.0", "1e+06", "2e+06",
    "+Inf",
)  # fmt: skip
RATES = {
    "infscale_request_rate": "request_rate",
    "infscale_prompt_token_rate": "prompt_token_rate",
    "infscale_generation_token_rate": "generation_token_rate",
    "infscale_output_length_bucket_rate": "output_length_bucket_rate",
}


def milli(per_window: float) -> int:
    """A count over the window as the milli-units the adapter serves per second."""
    return round(per_window / WINDOW_S * 1000)


def expected_buckets() -> dict[str, int]:
    outputs = [tokens for _, tokens in REQUESTS]
    return {le: milli(sum(1 for o in outputs if le == "+Inf" or o <= float(le))) for le in OUTPUT_BOUNDS}


def test_the_expected_arithmetic() -> None:
    """The references themselves, by hand: 7 requests, 405 prompt words, 1,951 tokens, in 60 s."""
    assert (len(REQUESTS), sum(w for w, _ in REQUESTS), sum(t for _, t in REQUESTS)) == (7, 405, 1_951)
    assert (milli(7), milli(405), milli(1_951)) == (117, 6_750, 32_517)
    b = expected_buckets()
    assert (b["1.0"], b["2.0"], b["5.0"], b["10.0"], b["50.0"], b["500.0"]) == (33, 50, 50, 67, 83, 100)
    assert b["1000.0"] == 100 and b["2000.0"] == b["2e+06"] == b["+Inf"] == 117


def one_value(served_metric: Served) -> int:
    """The single item's value, as the controller read it."""
    assert [item["metricLabels"] for item in served_metric.items] == [LABELS]
    assert served_metric.reading.error == ""
    (value,) = served_metric.reading.values_milli
    return value


async def test_the_adapter_serves_request_and_token_rates_and_output_lengths_from_jetstream() -> None:
    config = EmulatorConfig(engine="jetstream", profile=PROFILE)
    got = await served(config, RATES, REQUESTS)
    assert one_value(got["infscale_request_rate"]) == milli(len(REQUESTS))
    assert one_value(got["infscale_prompt_token_rate"]) == milli(sum(w for w, _ in REQUESTS))
    # JetStream has no token counter: both token rates are its histograms' _sum, at each finish
    assert one_value(got["infscale_generation_token_rate"]) == milli(sum(t for _, t in REQUESTS))
    assert all(s.reading.window_s == WINDOW_S for s in got.values())
    buckets = got["infscale_output_length_bucket_rate"]
    assert [item["metricLabels"] for item in buckets.items] == [{**LABELS, "le": le} for le in OUTPUT_BOUNDS]
    assert all(item["window"] == WINDOW_S for item in buckets.items)
    assert buckets.reading.error == ""
    assert [dict(labels)["le"] for labels in buckets.reading.labels] == list(OUTPUT_BOUNDS)
    expected = expected_buckets()
    assert buckets.reading.values_milli == tuple(expected[le] for le in OUTPUT_BOUNDS)


GAUGES = {"infscale_queue_size": "queue_size", "infscale_slot_usage": "slot_usage"}
SLOW = EngineProfile(  # a step a second of the manual clock: requests stay while the test looks
    max_num_seqs=4,
    max_num_batched_tokens=8_192,
    kv_budget_tokens=32_768,
    step_base_s=1.0,
    prefill_token_s=0.0,
    prefill_attention_s=0.0,
    decode_request_s=0.0,
    decode_context_s=0.0,
)


@pytest.mark.parametrize(
    ("sent", "queue", "slots_milli"),
    [
        pytest.param(3, 0, 750, id="3 requests on 4 slots: none waits"),
        pytest.param(6, 2, 1_000, id="6 requests on 4 slots: 2 in the prefill backlog"),
    ],
)
async def test_the_adapter_serves_the_prefill_backlog_and_the_slots_in_use(
    sent: int, queue: int, slots_milli: int
) -> None:
    config = EmulatorConfig(engine="jetstream", profile=SLOW)
    async with Chain(config, GAUGES) as c:
        path, body = request_body("jetstream", 10, 1_000)  # far longer than the test runs
        streams: list[asyncio.Task[Any]] = [
            asyncio.create_task(c.engine.post(path, json=body)) for _ in range(sent)
        ]
        try:
            want = (min(sent, SLOW.max_num_seqs), sent - min(sent, SLOW.max_num_seqs))
            for _ in range(200):  # hang guard: admitted within a few steps
                if c.gauges == want:
                    break
                await c.engine_clock.advance_to(c.engine_clock.t + 1.0)
                await asyncio.sleep(0.01)
            await c.source.scrape_round()
            got = {metric: await c.read(metric) for metric in GAUGES}
        finally:
            for task in streams:
                task.cancel()
            await asyncio.gather(*streams, return_exceptions=True)
            await c.drain()
    assert one_value(got["infscale_queue_size"]) == queue * 1000
    assert one_value(got["infscale_slot_usage"]) == slots_milli
