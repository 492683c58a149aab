"""outputsteps.py: the engines' output-length histograms read as the decode steps of the TPOT
tail's requests (tpottail.py), and what they size; the planner keeps their survival in its state."""

from __future__ import annotations

import numpy as np
import pytest
from test_survival import bucket_reading

from autoscaler.policy import capacity, outputsteps, survival, tpottail
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityspec import SloTarget
from autoscaler.policy.observation import MetricReading
from autoscaler.policy.outputsteps import OutputSteps
from autoscaler.policy.survival import Survival
from replay import profiles
from replay.metrics.signals import OUTPUT_LENGTH_BOUNDS
from replay.policies.predictive import replica_profile

# vLLM's bounds for vllm:request_generation_tokens (1, 2, 5, ... as build_1_2_5_buckets makes them)
VLLM_LE = (*(repr(float(b)) for b in OUTPUT_LENGTH_BOUNDS), "+Inf")
REFERENCE_70B = replica_profile(profiles.REFERENCE_70B.engine)
SLO = SloTarget(ttft_s=2.0, tpot_s=0.2)


def histogram(outputs: np.ndarray, seconds: float = 1.0) -> MetricReading:
    """The bucket rates an engine's histogram of these output lengths gives over `seconds`."""
    return bucket_reading(outputs, VLLM_LE, seconds)


def steps_of(outputs: np.ndarray) -> OutputSteps:
    tail = survival.track(None, histogram(outputs), 0.0, 15.0, outputsteps.UNITS)[0]
    got = outputsteps.of(tail)
    assert got is not None
    return got


def short_answers(n: int, share: float, seed: int = 1) -> np.ndarray:
    """ServeGen m-large's outputs in shape: `share` of them 2-4 tokens (the trace's 22.7 % at <= 4),
    the rest geometric of mean 180 (its mean output ~140)."""
    rng = np.random.default_rng(seed)
    return np.where(rng.random(n) < share, rng.integers(2, 5, n), rng.geometric(1 / 180, n)).astype(np.int64)


def test_each_bucket_is_spread_over_its_lengths_and_a_single_token_takes_no_step() -> None:
    """(1, 2] is 2 tokens, one step; (2, 5] is 3-5 tokens, 2-4 steps; (20, 50] is wider than
    INTEGER_WIDTH, so 8 lengths at the middles of its eighths; a 1-token output has no TPOT."""
    outputs = np.array([1] * 10 + [2] * 20 + [3] * 30 + [40] * 40)
    got = steps_of(outputs)
    wide = [20.0 + 30.0 * (j + 0.5) / 8 - 1.0 for j in range(8)]
    assert got.steps == (1.0, 2.0, 3.0, 4.0, *wide)
    # the buckets' shares rounded to 1/16 in log scale, then renormalized: within ~3 % each
    assert got.masses[0] == pytest.approx(0.2, rel=0.04)
    assert got.masses[1:4] == pytest.approx([0.1] * 3, rel=0.04)
    assert got.masses[4:] == pytest.approx([0.05] * 8, rel=0.04)
    assert sum(got.masses) == pytest.approx(0.9, rel=0.04)  # the 1-token outputs' 10 % takes no step


def test_outputs_past_the_last_bound_are_read_at_it() -> None:
    tail = Survival(0.0, (1.0, 2.0, 5.0), (1.0, 0.5, 0.5), 1.0)  # half at 2 tokens, half past 5
    got = outputsteps.of(tail)
    assert got is not None and got.steps == (1.0, 4.0) and got.masses == pytest.approx((0.5, 0.5))


def test_no_output_seen_has_no_steps() -> None:
    assert outputsteps.of(None) is None
    assert outputsteps.of(Survival(0.0, (1.0, 2.0), (0.0, 0.0), 0.0)) is None
    assert outputsteps.of(Survival(0.0, (), (), 1.0)) is None


def test_histograms_within_a_rounding_step_share_one_step_set() -> None:
    """The steps are made from the rounded shares alone: two histograms whose shares round alike
    give the same object (the TPOT tail is cached on its key), a third that does not, another."""
    a = Survival(0.0, (1.0, 2.0, 5.0, 10.0), (0.9, 0.7, 0.5, 0.2), 1.0)
    b = Survival(15.0, (1.0, 2.0, 5.0, 10.0), (0.9, 0.701, 0.5, 0.2), 1.0)
    c = Survival(0.0, (1.0, 2.0, 5.0, 10.0), (0.9, 0.8, 0.5, 0.2), 1.0)
    assert outputsteps.of(a) is outputsteps.of(b)
    got_c = outputsteps.of(c)
    assert got_c is not None and got_c.key != outputsteps.of(a).key  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("lo", "hi", "lengths"),
    [
        (0.0, 1.0, [1.0]),
        (2.0, 5.0, [3.0, 4.0, 5.0]),
        (10.0, 30.0, [float(v) for v in range(11, 31)]),
        (20.0, 50.0, [20.0 + 30.0 * (j + 0.5) / 8 for j in range(8)]),
        (1.5, 3.5, [1.5 + 2.0 * (j + 0.5) / 8 for j in range(8)]),  # bounds that are no whole lengths
    ],
)
def test_a_bucket_is_spread_over_its_whole_lengths_or_eight_points(
    lo: float, hi: float, lengths: list[float]
) -> None:
    assert outputsteps.lengths_in(lo, hi) == lengths


def test_short_answers_lower_the_rate_a_replica_serves_and_long_ones_leave_the_geometric() -> None:
    """m-large's short answers (22.7 % at 2-4 tokens) take the TPOT tail's rate on reference-70b
    from ~17.5 to ~12 requests/s; outputs with no short answer (Azure's, none under 9 tokens)
    leave the geometric's rate as it was: the miss is the higher of the two at every rate."""
    short = steps_of(short_answers(100_000, 0.227))
    long = steps_of(np.arange(20, 400))
    o = float(short_answers(100_000, 0.227).mean())
    geometric = tpottail.rate(REFERENCE_70B, 0.2, 0.01, 665.0, o, 1.0, 1.85)
    shaped = tpottail.rate(REFERENCE_70B, 0.2, 0.01, 665.0, o, 1.0, 1.85, 1.0, short)
    assert 16.0 < geometric < 19.0 and 10.5 < shaped < 13.5
    assert tpottail.rate(REFERENCE_70B, 0.2, 0.01, 665.0, o, 1.0, 1.85, 1.0, long) == geometric


def test_the_short_answers_size_a_second_replica_where_the_geometric_saw_one() -> None:
    short = steps_of(short_answers(100_000, 0.227))
    demand = Demand(15.0, 15.0 * 665.0, 15.0 * 138.0)
    assert capacity.size(REFERENCE_70B, SLO, demand, lengths_cv2=1.85).replicas == 1
    assert capacity.size(REFERENCE_70B, SLO, demand, lengths_cv2=1.85, output_steps=short).replicas == 2


def test_the_shape_is_part_of_the_tail_caches_keys() -> None:
    from autoscaler.policy import latecurve, tailsearch

    short = steps_of(short_answers(100_000, 0.227))
    o = 138.0
    plain = tailsearch.tpot_rate(REFERENCE_70B, 0.2, 0.01, 665.0, o, 1.0, 1.85)
    shaped = tailsearch.tpot_rate(REFERENCE_70B, 0.2, 0.01, 665.0, o, 1.0, 1.85, 1.0, short)
    assert shaped < plain
    key, curve = latecurve.curve(REFERENCE_70B, SLO, 665.0, o, 1.0, 1.85, 1.5, 5.0, 1.0)
    key_s, curve_s = latecurve.curve(REFERENCE_70B, SLO, 665.0, o, 1.0, 1.85, 1.5, 5.0, 1.0, short)
    assert key_s[:-1] == key[:-1] and key_s[-1] == short.key and key[-1] is None
    assert curve is not None and curve_s is not None and curve_s[4] < curve[4]  # its rate a replica


HIST = "infscale_output_length_bucket_rate"


def test_the_planner_reads_the_histogram_into_its_state_and_says_so_in_the_capacity_stage() -> None:
    """decide() with capacity.demand.outputLengthMetric: the survival is kept in the planner's
    state (and through its JSON), the capacity stage says how many requests decode in 4 steps or
    fewer, and the count at 15 req/s of m-large's mix is one more; a spec without the metric never
    reads it; a hostile engine's histogram keeps the last survival and the stage says why (the
    spec's field and the state's checks: test_survival)."""
    from test_policy_planner import NOW, readings
    from test_survival import assert_the_histogram_is_read_and_kept, capacity_after, planner_spec

    from autoscaler.policy.capacityspec import DemandSpec
    from autoscaler.policy.spec import AutoscalerSpec

    def spec(metric: str | None) -> AutoscalerSpec:
        return planner_spec(REFERENCE_70B, DemandSpec(output_length_metric=metric, prompt_square_metric="sq"))

    outputs = short_answers(100_000, 0.227)
    rate = 13.0
    metrics = readings(rate, prompt=665.0, output=float(outputs.mean())) | {
        "sq": MetricReading.of(rate * 665.0**2 * (1 + 1.85)),
        HIST: histogram(outputs, seconds=100_000 / rate),
    }
    without, said_without, plain = capacity_after(spec(None), metrics)
    with_shape, said, state = capacity_after(spec(HIST), metrics)
    assert with_shape == without + 1
    assert "decode in 4 steps or fewer" not in said_without
    assert "% of requests decode in 4 steps or fewer (the engines' histograms)" in said
    assert_the_histogram_is_read_and_kept(spec(HIST), spec(None), HIST, state, plain, "output_tail")
    broken = MetricReading((5, 9), labels=({"le": "-3"}, {"le": "+Inf"}))
    after_n, message, after = capacity_after(
        spec(HIST), metrics | {HIST: broken}, state, ticks=1, start=NOW + 15 * 8
    )
    assert (
        "; the output-length histogram not read (`le`='-3': a bound is a number of tokens > 0 and at"
        " most 1e+09, or +Inf), its last shape kept" in message
    )
    assert state.planner is not None and after.planner is not None
    assert after.planner.output_tail == state.planner.output_tail
    assert after_n == with_shape
