"""The output lengths' spread (the engines' output-length histograms, lengths.context_share): the
context a running request holds, p + o·(1 + cv²) / 2, in the KV ceiling, the decode step's reads
and the learned speed; without a histogram the geometric's p + o, to the bit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autoscaler.policy import capacity, demand, idlemiss, lengths, replicarates, speedlearn, tailsearch
from autoscaler.policy import mix as mixes
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityspec import CapacitySpec, DemandSpec, SloTarget
from autoscaler.policy.decide import decide
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.spec import AutoscalerSpec, MetricSpec, TargetType
from autoscaler.policy.state import PolicyState
from tests.test_lengths import EIGHT_B  # one-gpu-8b's engine

SLO = SloTarget(ttft_s=2.0, tpot_s=0.1)
SUM = "infscale_finished_output_token_rate"  # the output-length histograms' _sum, as a rate


def test_the_share_and_the_age_are_the_geometrics_at_cv2_one_and_a_gammas_elsewhere() -> None:
    """(1 + cv²) / 2 of the mean output, and the age's variance from a gamma's third moment: by
    simulation, a running request met at a random step (length-biased, at a uniform point of its
    own) holds that many decoded tokens on average, with that variance."""
    assert lengths.context_share(1.0) == capacity.CONTEXT_OUTPUT_SHARE == 1.0
    assert lengths.age_variance(1.0) == 1.0
    rng = np.random.default_rng(3)
    for cv2 in (0.25, 0.5, 3.0):
        o = rng.gamma(1.0 / cv2, 500.0 * cv2, 400_000)
        picked = rng.choice(o, 400_000, p=o / o.sum())  # a step meets requests as they last
        age = picked * rng.random(len(picked))
        assert age.mean() / 500.0 == pytest.approx(lengths.context_share(cv2), rel=0.02)
        assert age.var() / 500.0**2 == pytest.approx(lengths.age_variance(cv2), rel=0.05)


def test_without_a_histogram_the_sizing_is_the_geometrics_to_the_bit() -> None:
    """outputs_cv2 1 (what no histogram leaves) gives every field of the sizing as before, and the
    TPOT tail's rate and the idle misses the same floats."""
    for r, p, o in ((40.0, 1000.0, 1500.0), (80.0, 1760.0, 460.0), (10.0, 3000.0, 10.0)):
        d = Demand(r, r * p, r * o)
        assert capacity.size(EIGHT_B, SLO, d, outputs_cv2=1.0) == capacity.size(EIGHT_B, SLO, d)
    assert tailsearch.tpot_rate(EIGHT_B, 0.1, 0.01, 3000.0, 10.0, 1.0, 2.0, 1.0) == tailsearch.tpot_rate(
        EIGHT_B, 0.1, 0.01, 3000.0, 10.0, 1.0, 2.0
    )
    e = replicarates.engine(EIGHT_B)
    assert idlemiss.idle_misses(e, SLO, 8000.0, 200.0, 1.0, 1.5, 1.0) == idlemiss.idle_misses(
        e, SLO, 8000.0, 200.0, 1.0, 1.5
    )


def test_a_wider_output_spread_holds_more_context_and_needs_more_replicas() -> None:
    """Outputs spread wider than the geometric of their mean hold more context a running request:
    the KV-bound count of 1,500-token answers at 40 req/s (12 at cv² 1: the replay's least fleet,
    tests/replay/test_capacity_vs_replay.py) rises with the outputs' cv², and falls for narrower
    ones (10 at 0.25, 20 at 3.5)."""
    d = Demand(40.0, 40.0 * 1000.0, 40.0 * 1500.0)
    counts = [capacity.size(EIGHT_B, SLO, d, outputs_cv2=c).replicas for c in (0.25, 1.0, 3.5)]
    assert counts[0] < counts[1] < counts[2]
    assert counts[1] == 12


def test_the_mix_keeps_the_outputs_second_moment_about_its_mean() -> None:
    """Generated tokens squared and generated tokens of the requests finished (the one histogram's
    buckets and _sum), counted beside the tokens, give E[o²] / E[o]² over the spread's window; a
    tick without the readings keeps it; none read, or the squares without the sum: cv² None (the
    geometric's fallback)."""
    spec = DemandSpec()
    state, _ = demand.observe(spec, None, 0.0, 2.0, 2000.0, 2.0 * 460.0, 4.0)
    assert state.mix.outputs_cv2() is None
    # 2 req/s of outputs of mean 460 and E[o²] 948,000 (the stationary mix's: cv² 3.48)
    for i in range(1, 40):
        state, _ = demand.observe(
            spec, state, 15.0 * i, 2.0, 2000.0, 920.0, 4.0, None, None, None, None, 2.0 * 948_000.0, 920.0
        )
    cv2 = state.mix.outputs_cv2()
    assert cv2 == pytest.approx(948_000.0 / 460.0**2 - 1.0, rel=1e-6)
    assert state.mix.lengths_cv2() is None  # the prompts' spread is its own reading
    state, _ = demand.observe(spec, state, 15.0 * 40, 2.0, 2000.0, 920.0, 4.0)
    assert state.mix.outputs_cv2() == pytest.approx(cv2, rel=1e-6)
    assert mixes.Mix(5.0, 1000.0, 100.0).outputs_cv2() is None
    lone, _ = demand.observe(spec, None, 0.0, 2.0, 2000.0, 920.0, 4.0)
    for i in range(1, 10):
        lone, _ = demand.observe(
            spec, lone, 15.0 * i, 2.0, 2000.0, 920.0, 4.0, None, None, None, None, 2.0 * 948_000.0
        )
    assert lone.mix.outputs_cv2() is None


def test_the_outputs_spread_is_read_about_the_finished_not_the_decoded() -> None:
    """The generation counter counts tokens as they are decoded, the histogram when a request
    finishes: long answers decoding through a window whose finishes are few read a mean output
    far from the finished ones'. The cv² is the histogram's own E[o²] / E[o]² - 1, whatever the
    generation counter says: constant 2,000-token answers read 0 while the decoded tokens per
    finished request swing from a third to three times the finished mean."""
    spec = DemandSpec()
    state = None
    o = 2000.0
    for i in range(200):
        finished = 0.2 if i % 2 else 1.0
        decoded = (3.0 if i % 2 else 0.33) * finished * o
        state, _ = demand.observe(
            spec, state, 15.0 * i, finished, finished * 1000.0, decoded, 30.0,
            None, None, None, None, finished * o * o, finished * o,
        )  # fmt: skip
        if i > 0:  # the first tick sets the state's clock
            assert state.mix.outputs_cv2() == pytest.approx(0.0, abs=1e-9)


def _capacity_stage(square_metric: str | None, cv2: float | None, sum_metric: str | None = SUM) -> int:
    """The capacity stage's count after a minute of 40 req/s of 1,000-token prompts and 1,500-token
    outputs (KV-bound on one-gpu-8b) whose lengths have `cv2` (None: no histogram published)."""
    spec = AutoscalerSpec(
        max_replicas=200,
        metrics=(MetricSpec("infscale_queue_size", TargetType.AVERAGE_VALUE, 1_000_000),),
        capacity=CapacitySpec(
            profile=EIGHT_B,
            slo=SLO,
            demand=DemandSpec(output_square_metric=square_metric, output_sum_metric=sum_metric),
        ),
    )
    rate, o = 40.0, 1500.0
    metrics = {
        "infscale_queue_size": MetricReading.of(0.0),
        "infscale_request_rate": MetricReading.of(rate),
        "infscale_prompt_token_rate": MetricReading.of(rate * 1000.0),
        "infscale_generation_token_rate": MetricReading.of(rate * o),
        "infscale_inflight": MetricReading.of(rate * 30.0),
    }
    if cv2 is not None:
        metrics["infscale_output_token_square_rate"] = MetricReading.of(rate * (1.0 + cv2) * o * o)
        metrics[SUM] = MetricReading.of(rate * o)
    state = PolicyState()
    for i in range(5):
        decision, state = decide(spec, state, Observation(10, 10, 10, metrics=metrics), 1_000.0 + 15 * i)
    (stage,) = (s for s in decision.stages if s.name == "capacity")
    return stage.after


def test_the_planner_sizes_with_the_output_lengths_the_engines_publish() -> None:
    """The capacity stage reads the output square and sum metrics the spec names: wide outputs
    need more replicas than narrow ones; unnamed, or named and not served, or the squares without
    the sum, the geometric's (cv² 1)."""
    fallback = _capacity_stage(None, None)
    assert _capacity_stage("infscale_output_token_square_rate", None) == fallback
    assert _capacity_stage(None, 3.0) == fallback  # served but not named: not read
    assert _capacity_stage("infscale_output_token_square_rate", 1.0) == fallback
    assert _capacity_stage("infscale_output_token_square_rate", 3.0, None) == fallback  # squares alone
    narrow = _capacity_stage("infscale_output_token_square_rate", 0.25)
    wide = _capacity_stage("infscale_output_token_square_rate", 3.0)
    assert narrow < fallback < wide


def test_the_speed_is_learned_at_the_sizings_work_per_request() -> None:
    """A saturated replica's decode work is counted at the context the sizing holds: at the wider
    share the same counters read as a faster engine (the work the sizing charges was done)."""
    state = speedlearn.NO_SPEED
    kw = dict(queue=40.0, prompt_rate=1000.0 * 4.0, generated_rate=1500.0 * 4.0, finished_rate=4.0, ready=2)
    geometric, wide = state, state
    for _ in range(speedlearn.SATURATED_TICKS + 2):
        geometric = speedlearn.learn(EIGHT_B, geometric, **kw)  # type: ignore[arg-type]
        wide = speedlearn.learn(EIGHT_B, wide, **kw, share=lengths.context_share(3.0))  # type: ignore[arg-type]
    assert geometric.samples > 0 and wide.log_ratio > geometric.log_ratio
    assert math.isfinite(wide.log_ratio)
