"""survival.py's histograms in the planner, one test for both that read them (the prefill times'
far tail, prefilltail.py, and the outputs' decode steps, outputsteps.py): the spec's fields, the
state's JSON and its checks, the bounds' maxima; and the helpers both modules' tests share."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_policy_planner import NOW, obs

from autoscaler.policy import survival
from autoscaler.policy.capacityspec import CapacitySpec, DemandSpec, ReplicaProfile, SloTarget
from autoscaler.policy.decide import decide
from autoscaler.policy.observation import MetricReading
from autoscaler.policy.planstate import PlannerState
from autoscaler.policy.spec import AutoscalerSpec, MetricSpec, TargetType
from autoscaler.policy.state import PolicyState
from autoscaler.policy.survival import Survival
from autoscaler.specsections import CapacityModel, DemandModel


def bucket_reading(samples: np.ndarray, les: tuple[str, ...], seconds: float = 1.0) -> MetricReading:
    """The bucket rates an engine's histogram of these samples gives over `seconds`, one item per
    `le` bound (in the API's milli-units, rounded up)."""
    rates = [float(np.sum(samples <= float(le))) / seconds for le in les]
    return MetricReading(
        tuple(math.ceil(r * 1000 - 1e-6) for r in rates),
        window_s=seconds,
        labels=tuple({"le": le} for le in les),
    )


def planner_spec(profile: ReplicaProfile, demand: DemandSpec) -> AutoscalerSpec:
    """A predictive spec at the 2 s / 0.2 s SLO planned at its targets, up to 8 replicas."""
    cap = CapacitySpec(
        profile=profile,
        slo=SloTarget(ttft_s=2.0, tpot_s=0.2),
        demand=demand,
        plan_tpot_share=1.0,
        plan_ttft_share=1.0,
    )
    return AutoscalerSpec(
        max_replicas=8,
        metrics=(MetricSpec("infscale_queue_size", TargetType.AVERAGE_VALUE, 16_000),),
        capacity=cap,
    )


def capacity_after(
    spec: AutoscalerSpec,
    metrics: dict[str, MetricReading],
    state: PolicyState | None = None,
    ticks: int = 8,
    start: float = NOW,
    replicas: int = 1,
) -> tuple[int, str, PolicyState]:
    """(the capacity stage's count, its message, the state) after `ticks` decisions 15 s apart from
    `start` on `replicas` reading `metrics`, from `state` (None: a fresh one)."""
    state = PolicyState() if state is None else state
    for i in range(ticks):
        decision, state = decide(spec, state, obs(replicas, metrics), start + 15 * i)
    stage = next(s for s in decision.stages if s.name == "capacity")
    return stage.after, stage.message, state


def assert_the_histogram_is_read_and_kept(
    spec: AutoscalerSpec,
    unset: AutoscalerSpec,
    metric: str,
    state: PolicyState,
    plain: PolicyState,
    field: str,
) -> None:
    """`spec` reads the histogram `metric` (`unset` does not) into the planner's state field `field`
    (prefill_tail / output_tail / ttft_tail): the state after it holds the survival, `plain` (sized
    without) none; the state's JSON and the spec's document both read back the same."""
    key = {"prefill_tail": "prefillTail", "output_tail": "outputTail", "ttft_tail": "ttftTail"}[field]
    assert metric in spec.capacity.metric_names and metric not in unset.capacity.metric_names  # type: ignore[union-attr]
    planner_state = state.planner
    assert planner_state is not None and getattr(planner_state, field) is not None
    assert plain.planner is not None and getattr(plain.planner, field) is None
    doc = planner_state.to_dict()
    assert set(doc[key]) == {"at", "bounds", "over", "total"}
    assert PlannerState.from_dict(doc) == planner_state
    model = CapacityModel.model_validate(CapacityModel.document_of(spec.capacity))  # type: ignore[arg-type]
    spec_field = {
        "prefill_tail": "prefill_time_metric",
        "output_tail": "output_length_metric",
        "ttft_tail": "ttft_metric",
    }[field]
    assert getattr(model.to_spec().demand, spec_field) == metric


# the three histograms: the spec's field (Python, YAML), the state's JSON key, the bounds' units
FIELDS = [
    ("prefill_time_metric", "prefillTimeMetric", "prefillTail", survival.SECONDS),
    ("output_length_metric", "outputLengthMetric", "outputTail", survival.TOKENS),
    ("ttft_metric", "ttftMetric", "ttftTail", survival.SECONDS),
]


def _state(key: str, tail: Survival) -> PlannerState:
    field = {"prefillTail": "prefill_tail", "outputTail": "output_tail", "ttftTail": "ttft_tail"}[key]
    return PlannerState(**{field: tail})


@pytest.mark.parametrize(("field", "yaml", "key", "units"), FIELDS)
@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"bounds": [2.0, 1.0], "over": [0.0, 0.0]}, "increasing bounds"),
        ({"bounds": [1.0], "over": [0.5, 0.1]}, "expected 1 values"),
        ({"over": [5.0, 0.0]}, "planner.{key}.over"),
        ({"total": -1.0}, "planner.{key}.total"),
        ({"bounds": [0.0, 1.0]}, "planner.{key}.bounds"),
        ({"bounds": [1.0, 2e9]}, "planner.{key}.bounds"),
    ],
)
def test_a_malformed_survival_in_the_state_is_refused_naming_its_field(
    field: str, yaml: str, key: str, units: survival.Units, change: dict[str, object], problem: str
) -> None:
    state = _state(key, Survival(10.0, (1.0, 2.0), (0.5, 0.1), 2.0))
    doc = state.to_dict()
    assert PlannerState.from_dict(doc) == state
    with pytest.raises(ValueError, match=problem.format(key=key)):
        PlannerState.from_dict({**doc, key: {**doc[key], **change}})


@pytest.mark.parametrize(("field", "yaml", "key", "units"), FIELDS)
def test_a_bound_past_the_most_is_refused_so_the_state_always_reads_back(
    field: str, yaml: str, key: str, units: survival.Units
) -> None:
    """A hostile engine's bound past the units' most (1e8 seconds of prefill, 1e12 tokens) is no
    histogram: read, the planner would keep a state it refuses to read back (planstate's bounds
    checks), so it is refused when read, naming the bound, and the last survival is kept."""
    kept = Survival(10.0, (1.0, 2.0), (0.5, 0.1), 2.0)
    big = "1e8" if units is survival.SECONDS else "1e12"
    reading = MetricReading((5, 9), labels=({"le": big}, {"le": "+Inf"}))
    got, why = survival.track(kept, reading, 20.0, 15.0, units)
    assert got is kept and f"`le`='{big}': a bound is a number of {units.name} > 0 and at most" in why
    at_most = MetricReading((5, 9), labels=({"le": repr(units.most)}, {"le": "+Inf"}))
    tail = survival.track(None, at_most, 20.0, 15.0, units)[0]
    assert tail is not None and tail.bounds == (units.most,)
    state = _state(key, tail)
    assert PlannerState.from_dict(state.to_dict()) == state


@pytest.mark.parametrize(("field", "yaml", "key", "units"), FIELDS)
def test_the_spec_field_is_a_metric_name_or_unset(
    field: str, yaml: str, key: str, units: survival.Units
) -> None:
    metric = "infscale_some_bucket_rate"
    with pytest.raises(ValueError, match=field):
        DemandSpec(**{field: ""})
    with pytest.raises(ValueError, match=yaml):
        DemandModel.model_validate({yaml: ""})
    assert getattr(DemandModel.model_validate({yaml: metric}).to_spec(), field) == metric
    assert getattr(DemandModel.model_validate({}).to_spec(), field) is None
