"""PolicyState's __init__ is written out (state.py: so the compiled core compiles it); these hold it
to what dataclass's own would be, so a field added to the class cannot be missed by it."""

import dataclasses
from typing import Any

import pytest

from autoscaler.policy.planstate import PlannerState
from autoscaler.policy.state import PolicyState, Recommendation, ScaleEvent


def test_init_takes_every_field_in_order_with_its_default() -> None:
    # by behaviour, not inspect.signature: the compiled build's __init__ has no signature to read
    fields = dataclasses.fields(PolicyState)
    blank = PolicyState()
    for f in fields:
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        assert getattr(blank, f.name) == default, f.name
    # a value of its type each, none its default, positionally in the fields' order
    given: list[Any] = [
        (Recommendation(at=1.0, replicas=3),),
        (ScaleEvent(at=2.0, change=1),),
        (ScaleEvent(at=3.0, change=2),),
        {"m": 1},
        True,
        PlannerState(started_for=4.0),
    ]
    assert len(given) == len(fields)
    by_position = PolicyState(*given)
    by_name = PolicyState(**{f.name: v for f, v in zip(fields, given, strict=True)})
    for f, v in zip(fields, given, strict=True):
        assert getattr(by_position, f.name) is v, f.name
        assert getattr(by_name, f.name) is v, f.name
    with pytest.raises(TypeError):
        PolicyState(*given, None)  # type: ignore[call-arg]


def test_init_sets_what_it_is_given_and_stays_frozen() -> None:
    recs = (Recommendation(at=1.0, replicas=3),)
    state = PolicyState(recommendations=recs, forecasters={"m": 1}, scaled_to_zero=True)
    assert state.recommendations == recs
    assert state.forecasters == {"m": 1}
    assert state.scaled_to_zero is True
    assert state == dataclasses.replace(
        PolicyState(), recommendations=recs, forecasters={"m": 1}, scaled_to_zero=True
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.scaled_to_zero = False  # type: ignore[misc]
    assert PolicyState().forecasters is not PolicyState().forecasters  # a new dict each, as the factory's
