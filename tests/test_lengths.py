"""The prompt lengths' spread (lengths.py) and what it moves in capacity.size's TTFT tail."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autoscaler.policy import capacity, demand, lengths
from autoscaler.policy import mix as mixes
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityspec import CapacitySpec, DemandSpec, ReplicaProfile, SloTarget
from autoscaler.policy.decide import decide
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.spec import AutoscalerSpec, MetricSpec, TargetType
from autoscaler.policy.state import PolicyState

# one-gpu-8b's engine (replay/profiles.py LLAMA_8B_H100): the attention term is a third of a
# 12,000-token prompt's prefill
EIGHT_B = ReplicaProfile(
    step_base_s=0.0065,
    prefill_s_per_token=3.0e-5,
    prefill_s_per_attention_pair=3.5e-9,
    decode_s_per_request=1.5e-5,
    decode_s_per_context_token=5.0e-8,
    max_batched_tokens=8192,
    max_num_seqs=1024,
    kv_cache_tokens=445_000,
)


@pytest.mark.parametrize("a", [0.3, 0.7, 1.0, 2.0, 8.0])
@pytest.mark.parametrize("x", [0.01, 0.5, 1.0, 3.0, 12.0, 40.0])
def test_the_upper_incomplete_gamma_matches_a_sampled_gamma(a: float, x: float) -> None:
    """Q(a, x) against numpy's gamma draws (10^6: a standard error under 5e-4) and the exponential's
    exp(-x) at a = 1 to the digit."""
    if a == 1.0:
        assert lengths.upper_gamma(1.0, x) == pytest.approx(math.exp(-x), rel=1e-9)
    draws = np.random.default_rng(0).gamma(a, 1.0, 1_000_000)
    share = float((draws > x).mean())
    assert lengths.upper_gamma(a, x) == pytest.approx(share, abs=2.5e-3)


def test_the_share_longer_is_the_exponentials_at_cv2_1_and_grows_in_the_tail_with_the_spread() -> None:
    p = 12_000.0
    assert lengths.longer_share(2.0 * p, p, 1.0) == math.exp(-2.0)
    spread = [lengths.longer_share(3.0 * p, p, c) for c in (0.5, 1.0, 2.0)]
    assert spread[0] < spread[1] < spread[2]  # far in the tail, the wider lengths hold more
    draws = np.random.default_rng(1).gamma(1 / 2.0, 2.0 * p, 1_000_000)
    assert lengths.longer_share(3.0 * p, p, 2.0) == pytest.approx(float((draws > 3.0 * p).mean()), abs=3e-3)


@pytest.mark.parametrize("cv2", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("r", [0.0, 0.3, 3.0])
def test_the_prefill_cv2_is_the_sampled_prefill_times(cv2: float, r: float) -> None:
    """α·X + β·X² over gamma lengths X of mean p: the closed form against 2·10^6 draws."""
    p, alpha = 10_000.0, 3e-5
    beta = r * alpha / p
    x = np.random.default_rng(2).gamma(1 / cv2, cv2 * p, 2_000_000)
    s = alpha * x + beta * x * x
    sampled = float(s.var() / s.mean() ** 2)
    assert lengths.prefill_cv2(alpha, beta, p, cv2) == pytest.approx(sampled, rel=0.03)
    if r == 0.0:
        assert lengths.prefill_cv2(alpha, beta, p, cv2) == pytest.approx(cv2, rel=1e-12)


def test_no_histogram_leaves_the_sizing_as_it_was() -> None:
    """Without the engines' lengths the keywords are size()'s defaults: the exponential's idle
    misses and the TTFT tail's cs² of 1, the sizing to the bit."""
    assert lengths.spread(EIGHT_B, 12_000.0, None) == {}
    d = Demand(2.0, 2.0 * 12_000, 2.0 * 300)
    slo = SloTarget(ttft_s=2.0, tpot_s=0.2)
    assert capacity.size(EIGHT_B, slo, d, **lengths.spread(EIGHT_B, 12_000.0, None)) == capacity.size(
        EIGHT_B, slo, d
    )


def test_wider_prompts_need_more_replicas_for_the_same_mean() -> None:
    """8,000-token prompts with a length-aware TTFT every prompt can meet (no idle misses: the wait
    tail alone binds): the spread of prefill times lengthens the waits' tail, so lengths of cv² 3
    need more replicas than exponential ones, and one length (cv² 0.01) fewer."""
    slo = SloTarget(ttft_s=2.0, tpot_s=None, ttft_tokens_per_s=4000.0)
    d = Demand(6.0, 6.0 * 8000, 6.0 * 300)
    counts = [
        capacity.size(EIGHT_B, slo, d, **lengths.spread(EIGHT_B, 8000.0, c)).replicas
        for c in (0.01, 1.0, 3.0)
    ]
    assert counts[0] < counts[1] < counts[2]


def test_the_mix_keeps_the_prompts_second_moment_and_an_older_mix_has_none() -> None:
    """Prompt squares counted beside the prompt tokens give E[x²] per request, weighted as the mix;
    a tick without the reading keeps it; a state without it reads cv² None (the fallback)."""
    spec = DemandSpec()
    state, _ = demand.observe(spec, None, 0.0, 2.0, 2.0 * 1000, 200.0, 4.0)
    assert state.mix.lengths_cv2() is None
    for i in range(1, 40):  # 2 req/s of prompts whose E[x²] is 3·1000² (cv² 2)
        state, _ = demand.observe(spec, state, 15.0 * i, 2.0, 2000.0, 200.0, 4.0, 2.0 * 3e6)
    cv2 = state.mix.lengths_cv2()
    assert cv2 == pytest.approx(2.0, rel=1e-6)
    state, _ = demand.observe(spec, state, 15.0 * 40, 2.0, 2000.0, 200.0, 4.0, None)
    assert state.mix.lengths_cv2() == pytest.approx(cv2, rel=1e-6)
    assert mixes.Mix(5.0, 1000.0, 100.0).lengths_cv2() is None


def _capacity_stage(square_metric: str | None, cv2: float | None, rate: float = 6.0) -> int:
    """The capacity stage's count after a minute of `rate` req/s of 8,000-token prompts whose lengths
    have `cv2` (None: the engines publish no histogram)."""
    spec = AutoscalerSpec(
        max_replicas=200,
        metrics=(MetricSpec("infscale_queue_size", TargetType.AVERAGE_VALUE, 1_000_000),),
        capacity=CapacitySpec(
            profile=EIGHT_B,
            slo=SloTarget(ttft_s=2.0, tpot_s=None, ttft_tokens_per_s=4000.0),
            demand=DemandSpec(prompt_square_metric=square_metric),
        ),
    )
    p = 8000.0
    metrics = {
        "infscale_queue_size": MetricReading.of(0.0),
        "infscale_request_rate": MetricReading.of(rate),
        "infscale_prompt_token_rate": MetricReading.of(rate * p),
        "infscale_generation_token_rate": MetricReading.of(rate * 300.0),
        "infscale_inflight": MetricReading.of(20.0),
    }
    if cv2 is not None:
        metrics["infscale_prompt_token_square_rate"] = MetricReading.of(rate * (1.0 + cv2) * p * p)
    state = PolicyState()
    for i in range(5):
        decision, state = decide(spec, state, Observation(10, 10, 10, metrics=metrics), 1_000.0 + 15 * i)
    (stage,) = (s for s in decision.stages if s.name == "capacity")
    return stage.after


def test_the_planner_sizes_with_the_lengths_the_engines_publish() -> None:
    """The capacity stage reads the square metric the spec names: wide lengths need more replicas
    than narrow ones, and without the metric (unnamed, or named and not served) the exponential's.
    At 12 req/s: where the count prices the overshoot at its queue (the TTFT binds: lateband.py),
    6 req/s sizes the exponential's and the narrow lengths at the same 5 replicas."""
    fallback = _capacity_stage(None, None, 12.0)
    assert _capacity_stage("infscale_prompt_token_square_rate", None, 12.0) == fallback
    assert _capacity_stage(None, 3.0, 12.0) == fallback  # served but not named: not read
    narrow = _capacity_stage("infscale_prompt_token_square_rate", 0.01, 12.0)
    wide = _capacity_stage("infscale_prompt_token_square_rate", 3.0, 12.0)
    assert narrow < fallback < wide


def test_a_subnormal_prompt_mix_sizes_as_no_prompt() -> None:
    """A restored state's mix of 2e-313 tokens a request (the reader accepts any finite >= 0) once
    made the TTFT tail's slack infinite (OverflowError on main at 4c294de); its square is 0."""
    assert mixes.Mix(5.0, 2.2250738585e-313, 1.0, 1.5e8, 5.0, 2.2250738585e-313).lengths_cv2() is None
    d = Demand(3.0, 3.0 * 2.2250738585e-313, 3.0 * 100.0)
    assert capacity.size(EIGHT_B, SloTarget(ttft_s=2.0, tpot_s=0.2), d).replicas >= 1


def _cv2_after_one_long_prompt(spread_window: float) -> tuple[float, float]:
    """The lengths' cv² before and after one 100,000-token prompt joins 10 req/s of prompts of mean
    1,000 and cv² 1 (E[x²] = 2·1000²) in 15-s ticks, the mix weighing ~400 requests and the spread
    `spread_window` (mix.add_counts as demand.observe calls it)."""
    requests = 150.0
    decay = math.exp(-requests / mixes.MIX_REQUESTS)
    mix = mixes.Mix(0.0, 0.0, 0.0)
    for _ in range(60):  # 9,000 requests: both windows settled
        mix = mixes.add_counts(
            mix, decay, requests, requests * 1000, requests * 200, requests * 2e6, spread_window
        )
    before = mix.lengths_cv2()
    mix = mixes.add_counts(
        mix, decay, requests, requests * 1000 + 1e5, requests * 200, requests * 2e6 + 1e10, spread_window
    )
    after = mix.lengths_cv2()
    assert before is not None and after is not None
    return before, after


def test_one_long_prompt_moves_the_spread_a_quarter_of_what_it_moves_over_the_mix() -> None:
    """The spread's mean square over SPREAD_REQUESTS (2,000) where the mix keeps ~400 (docs/policy.md,
    "Defaults and why", the lengths' spread window): one long prompt's square weighs a fifth as much,
    so the cv² it reads jumps a quarter as far; over the mix's own window it is the mix's reading."""
    before, after = _cv2_after_one_long_prompt(mixes.SPREAD_REQUESTS)
    mix_before, mix_after = _cv2_after_one_long_prompt(mixes.MIX_REQUESTS)
    assert before == pytest.approx(1.0, rel=1e-3) and mix_before == pytest.approx(1.0, rel=1e-3)
    assert mix_after - mix_before > 10.0  # one 100,000-token prompt in ~500 requests: cv² ~14
    assert 0.0 < after - before < 0.3 * (mix_after - mix_before)


@pytest.mark.parametrize(
    ("wait_s", "p", "cv2"),
    [(1.9, 691.0, 10.57), (1.5, 2048.0, 2.0), (0.5, 300.0, 4.0), (3.0, 12_000.0, 1.44)],
)
def test_the_residual_share_is_a_sampled_prefills_past_the_wait(wait_s: float, p: float, cv2: float) -> None:
    """P(R > t) = E[(S - t)+] / E[S] for S = α·x + β·x² over gamma lengths, against the mean of
    a million sampled prefills (DeepSeek-R1's busiest hour first: 691-token prompts of cv² 10.6 on
    reference-70b's coefficients)."""
    alpha, beta = 1.0 / 16_000.0 - 4.4e-9 * p, 4.4e-9
    rng = np.random.default_rng(7)
    x = rng.gamma(1.0 / cv2, p * cv2, 1_000_000)
    s = alpha * x + beta * x * x
    sampled = float(np.maximum(s - wait_s, 0.0).mean() / s.mean())
    got = lengths.residual_share(wait_s, p, alpha, beta, cv2)
    assert got == pytest.approx(sampled, rel=0.05, abs=1e-6)
    assert lengths.residual_share(0.0, p, alpha, beta, cv2) == 1.0
    assert lengths.residual_share(2.0 * wait_s, p, alpha, beta, cv2) < got  # falls with the wait
