"""record.Record's classes: each names its fields three times (annotations, FIELDS, __init__), and
equality, hash and repr read FIELDS alone, so a field left out of FIELDS would be ignored by them
silently. Each class is built here from its FIELDS by keyword (from the sources and, in CI's second
run, compiled) and its annotations compared where the build keeps them."""

from __future__ import annotations

import inspect

import pytest

from autoscaler.policy.capacity import Demand, Sizing
from autoscaler.policy.demand import DemandState, Estimate, Series
from autoscaler.policy.hpa import Condition, MetricsRecommendation
from autoscaler.policy.lasting import Lasting
from autoscaler.policy.levelbins import Heights, Relative
from autoscaler.policy.mix import Mix
from autoscaler.policy.planstate import Outcome, Plan, PlannerState
from autoscaler.policy.record import Record
from autoscaler.policy.replicacalc import MetricProposal
from autoscaler.policy.scaledown import Keep
from autoscaler.policy.speedlearn import SpeedState
from autoscaler.policy.stage import Stage
from autoscaler.policy.state import Recommendation

_SIZING = Sizing(3, "ttft", 15_000.0, 4_000.0, 2.5, 0.4)
_DEMAND = Demand(7.5, 7_500.0, 1_500.0)
_STAGE = Stage("capacity", 2, 3, "TTFTBinds", "{} needed", (3,))
_PLAN = Plan(_DEMAND, _DEMAND, _DEMAND, 1.3, 44.0, _SIZING, 0.9, 3, 3, 1, False)
_CONDITION = Condition("ScalingActive", True, "ValidMetricFound", "the HPA was able to")

INSTANCES: list[Record] = [
    _STAGE,
    _SIZING,
    _PLAN,
    Estimate(_DEMAND, 0.25),
    Outcome((_STAGE,), 3, _PLAN, PlannerState()),
    MetricsRecommendation(
        4, "infscale_queue_size", {"infscale_queue_size": MetricProposal(4, 1.2, 3_000)}, _CONDITION
    ),
    MetricProposal(4, 1.2, 3_000),
    Keep(3, "KeepRecurring", "replica {} came back", (3,)),
    SpeedState(-0.25, 12.0, 2, 4, 6.5),
    Recommendation(100.0, 3),
    Relative(0.5, 0.25, 30.0),
    Lasting(40.0, 2.5, 0.75),
    Series(2.5, -0.125),
    Mix(400.0, 900.0, 150.0, 1.6e6, 1_800.0, 950.0, 4.5e4, 160.0),
    DemandState(
        100.0,
        4.0,
        Mix(400.0, 900.0, 150.0),
        Series(2.5, 0.0),
        True,
        ((85.0, 145.0, 3.0, 1),),
        0.5,
        0.25,
        30.0,
        _DEMAND,
        ((90.0, 3.5),),
        3.5,
        ((0.25, 30.0), (0.5, 12.0)),
        Relative(0.5, 0.25, 30.0),
        (0.5, 2.0),
    ),
    Heights(1.5, 0.75, 60.0, 0.125, 0.0625, -0.5),
    PlannerState(None, SpeedState(-0.25, 12.0, 2), ((100.0, 3),), started_for=2.5, gaps=(30.0,)),
]


@pytest.mark.parametrize("value", INSTANCES, ids=lambda v: type(v).__name__)
def test_every_field_is_in_fields_and_reads_back(value: Record) -> None:
    cls = type(value)
    again = cls(**dict(zip(cls.FIELDS, value.values(), strict=True)))  # FIELDS are __init__'s names
    assert again == value and repr(again) == repr(value)
    try:
        expected = hash(value.values())
    except TypeError:  # a mapping among the values: unhashable, as the NamedTuple it was
        with pytest.raises(TypeError):
            hash(again)
    else:
        assert hash(again) == hash(value) == expected
    assert repr(value).startswith(f"{cls.__name__}({cls.FIELDS[0]}=")
    assert [getattr(value, name) for name in cls.FIELDS] == list(value.values())
    annotations = inspect.get_annotations(cls)
    if annotations:  # the sources keep them; a compiled class may not
        fields = tuple(name for name in annotations if name != "FIELDS")
        assert fields == cls.FIELDS, f"{cls.__name__}: FIELDS {cls.FIELDS} against its annotations {fields}"


def test_replace_is_a_namedtuples() -> None:
    state = SpeedState(-0.25, 12.0, 2, 4, 6.5)
    assert state._replace(ready=5, queue=1.0) == SpeedState(-0.25, 12.0, 2, 5, 1.0)
    assert state == SpeedState(-0.25, 12.0, 2, 4, 6.5)  # a copy: the value itself unchanged
    with pytest.raises(ValueError, match="unexpected field names: \\['speed'\\]"):
        state._replace(speed=1.0)


def test_a_record_differs_from_another_class_and_from_a_tuple_of_its_values() -> None:
    assert MetricProposal(4, 1.2, 3_000) != MetricProposal(4, 1.2, 3_001)
    assert MetricProposal(4, 1.2, 3_000) != (4, 1.2, 3_000)
    assert Keep(3, "TTFTBinds", "{} needed", (3,)) != _STAGE
