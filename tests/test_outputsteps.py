"""outputsteps.py: the engines' output-length histograms read as the decode steps of the TPOT
tail's requests (tpottail.py), and what they size; the planner keeps their survival in its state."""

from __future__ import annotations

import math

import numpy as np
import pytest

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
    rates = [float(np.sum(outputs <= float(le))) / seconds for le in VLLM_LE]
    return MetricReading(
        tuple(math.ceil(r * 1000 - 1e-6) for r in rates),
        window_s=seconds,
        labels=tuple({"le": le} for le in VLLM_LE),
    )


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
    reads it; a hostile engine's histogram keeps the last survival and the stage says why."""
    from test_policy_planner import NOW, obs, readings

    from autoscaler.policy.capacityspec import CapacitySpec, DemandSpec
    from autoscaler.policy.decide import decide
    from autoscaler.policy.planstate import PlannerState
    from autoscaler.policy.spec import AutoscalerSpec, MetricSpec, TargetType
    from autoscaler.policy.state import PolicyState
    from autoscaler.specsections import CapacityModel

    def spec(metric: str | None) -> AutoscalerSpec:
        cap = CapacitySpec(
            profile=REFERENCE_70B,
            slo=SLO,
            demand=DemandSpec(output_length_metric=metric, prompt_square_metric="sq"),
            plan_tpot_share=1.0,
            plan_ttft_share=1.0,
        )
        return AutoscalerSpec(
            max_replicas=8,
            metrics=(MetricSpec("infscale_queue_size", TargetType.AVERAGE_VALUE, 16_000),),
            capacity=cap,
        )

    outputs = short_answers(100_000, 0.227)
    rate = 13.0
    metrics = readings(rate, prompt=665.0, output=float(outputs.mean())) | {
        "sq": MetricReading.of(rate * 665.0**2 * (1 + 1.85)),
        HIST: histogram(outputs, seconds=100_000 / rate),
    }

    def last(metric: str | None) -> tuple[int, str, PolicyState]:
        state = PolicyState()
        for i in range(8):
            decision, state = decide(spec(metric), state, obs(1, metrics), NOW + 15 * i)
        stage = next(s for s in decision.stages if s.name == "capacity")
        return stage.after, stage.message, state

    without, said_without, plain = last(None)
    with_shape, said, state = last(HIST)
    assert with_shape == without + 1
    assert "decode in 4 steps or fewer" not in said_without
    assert "% of requests decode in 4 steps or fewer (the engines' histograms)" in said
    assert HIST in spec(HIST).capacity.metric_names and HIST not in spec(None).capacity.metric_names  # type: ignore[union-attr]
    planner_state = state.planner
    assert planner_state is not None and planner_state.output_tail is not None
    assert plain.planner is not None and plain.planner.output_tail is None
    doc = planner_state.to_dict()
    assert set(doc["outputTail"]) == {"at", "bounds", "over", "total"}
    assert PlannerState.from_dict(doc) == planner_state
    model = CapacityModel.model_validate(CapacityModel.document_of(spec(HIST).capacity))  # type: ignore[arg-type]
    assert model.to_spec().demand.output_length_metric == HIST
    broken = MetricReading((5, 9), labels=({"le": "-3"}, {"le": "+Inf"}))
    decision, after = decide(spec(HIST), state, obs(1, metrics | {HIST: broken}), NOW + 15 * 8)
    stage = next(s for s in decision.stages if s.name == "capacity")
    assert (
        "; the output-length histogram not read (`le`='-3': a bound is a number of tokens > 0 and at"
        " most 1e+09, or +Inf), its last shape kept" in stage.message
    )
    assert after.planner is not None and after.planner.output_tail == planner_state.output_tail
    assert stage.after == with_shape


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"bounds": [2.0, 1.0], "over": [0.0, 0.0]}, "increasing bounds"),
        ({"over": [5.0, 0.0]}, "planner.outputTail.over"),
        ({"bounds": [1.0, 2e9]}, "planner.outputTail.bounds"),
    ],
)
def test_a_malformed_survival_in_the_state_is_refused_naming_its_field(
    change: dict[str, object], problem: str
) -> None:
    from autoscaler.policy.planstate import PlannerState

    state = PlannerState(output_tail=Survival(10.0, (1.0, 2.0), (0.5, 0.1), 2.0))
    doc = state.to_dict()
    assert PlannerState.from_dict(doc) == state
    with pytest.raises(ValueError, match=problem):
        PlannerState.from_dict({**doc, "outputTail": {**doc["outputTail"], **change}})


def test_a_bound_past_the_most_is_refused_so_the_state_always_reads_back() -> None:
    """A hostile engine's bound of 1e12 tokens (or 1e8 seconds of prefill) is no histogram: read,
    the planner would keep a state it refuses to read back (planstate's bounds checks), so it is
    refused when read, naming the bound, and the last survival is kept."""
    from autoscaler.policy.planstate import PlannerState

    kept = Survival(10.0, (1.0, 2.0), (0.5, 0.1), 2.0)
    for units, big in ((survival.TOKENS, "1e12"), (survival.SECONDS, "1e8")):
        reading = MetricReading((5, 9), labels=({"le": big}, {"le": "+Inf"}))
        got, why = survival.track(kept, reading, 20.0, 15.0, units)
        assert got is kept and f"`le`='{big}': a bound is a number of {units.name} > 0 and at most" in why
        at_most = MetricReading((5, 9), labels=({"le": repr(units.most)}, {"le": "+Inf"}))
        tail = survival.track(None, at_most, 20.0, 15.0, units)[0]
        assert tail is not None and tail.bounds == (units.most,)
        state = (
            PlannerState(prefill_tail=tail) if units is survival.SECONDS else PlannerState(output_tail=tail)
        )
        assert PlannerState.from_dict(state.to_dict()) == state


def test_the_spec_field_is_a_metric_name_or_unset() -> None:
    from autoscaler.policy.capacityspec import DemandSpec
    from autoscaler.specsections import DemandModel

    with pytest.raises(ValueError, match="output_length_metric"):
        DemandSpec(output_length_metric="")
    with pytest.raises(ValueError, match="outputLengthMetric"):
        DemandModel.model_validate({"outputLengthMetric": ""})
    assert DemandModel.model_validate({"outputLengthMetric": HIST}).to_spec().output_length_metric == HIST
    assert DemandModel.model_validate({}).to_spec().output_length_metric is None
