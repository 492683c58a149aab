"""infscale_output_length_bucket_rate: vLLM's output-length histogram (vllm:request_generation_tokens),
its bounds against the emulator's and prometheus_client's."""

from __future__ import annotations

import itertools

import pytest

from replay.metrics.signals import OUTPUT_LENGTH_BOUNDS, one_two_five

OUTPUT_LE = [
    "1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "1000.0", "2000.0", "5000.0",
    "10000.0", "20000.0", "50000.0", "100000.0", "200000.0", "+Inf",
]  # fmt: skip


def test_the_output_length_buckets_are_the_emulators_for_every_replay_scenario() -> None:
    """The emulator's vllm:request_generation_tokens has build_1_2_5_buckets(max_model_len) bounds,
    its max_model_len the KV cache: every replay scenario's engine gives the replay's bounds,
    written as prometheus_client writes them."""
    from replay.emulate.metrics import FLAVORS, _go_float
    from replay.emulate.stats import Hist
    from replay.profiles import SCENARIOS
    from replay.scheduler import context_limit

    contexts = {context_limit(s.engine) for s in SCENARIOS.values()}
    assert contexts == {440_000, 444_992}
    for context in contexts:
        assert tuple(FLAVORS["vllm"].buckets(context)[Hist.GENERATION_TOKENS]) == OUTPUT_LENGTH_BOUNDS
    assert [_go_float(b) for b in (*OUTPUT_LENGTH_BOUNDS, float("inf"))] == OUTPUT_LE


@pytest.mark.parametrize(
    ("limit", "top"), [(1, 1.0), (4, 2.0), (5, 5.0), (499_999, 200_000.0), (500_000, 500_000.0)]
)
def test_one_two_five_is_vllms_build_1_2_5_buckets_up_to_and_with_its_limit(limit: int, top: float) -> None:
    """vLLM appends each of 1, 2, 5 x 10^k while it is <= max_value."""
    bounds = one_two_five(limit)
    assert bounds[-1] == top and bounds[:3] == (1.0, 2.0, 5.0)[: len(bounds)]
    assert all(b / a in (2.0, 2.5) for a, b in itertools.pairwise(bounds))
