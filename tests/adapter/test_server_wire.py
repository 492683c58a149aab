"""The wire format as pure functions: Quantity strings, timestamps, Status, negotiation."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter import wire
from adapter.wire import Answer, QuantityError, Reason, StatusError


@pytest.mark.parametrize(
    ("value", "quantity"),
    [
        pytest.param(0, "0", id="zero"),
        pytest.param(-0.0, "0", id="negative zero"),
        pytest.param(1, "1", id="one"),
        pytest.param(12, "12", id="twelve"),
        pytest.param(1.5, "1500m", id="1.5"),
        pytest.param(0.25, "250m", id="0.25"),
        pytest.param(0.001, "1m", id="one milli"),
        pytest.param(0.0015, "2m", id="half a milli rounds to even"),
        pytest.param(0.0025, "2m", id="half-even down"),
        pytest.param(0.0004, "0", id="below a milli"),
        pytest.param(-2.5, "-2500m", id="negative"),
        pytest.param(1000, "1k", id="1k"),
        pytest.param(1500, "1500", id="1.5k is not an integer"),
        pytest.param(2000, "2k", id="2k"),
        pytest.param(10000, "10k", id="10k"),
        pytest.param(1_200_000, "1200k", id="1200k"),
        pytest.param(1_000_000, "1M", id="1M"),
        pytest.param(123_456_789, "123456789", id="no suffix fits"),
        pytest.param(1e15, "1P", id="peta"),
        pytest.param(0.1 + 0.2, "300m", id="float noise never rounds up"),
        pytest.param(9_223_372_036_854_775, "9223372036854775", id="largest the HPA holds"),
    ],
)
def test_format_quantity(value: float, quantity: str) -> None:
    assert wire.format_quantity(value) == quantity


@pytest.mark.parametrize(
    ("value", "error"),
    [
        pytest.param(math.nan, "no Quantity form", id="NaN"),
        pytest.param(math.inf, "no Quantity form", id="inf"),
        pytest.param(-math.inf, "no Quantity form", id="-inf"),
        pytest.param(1e16, "exceeds the HPA's range", id="too large"),
    ],
)
def test_format_quantity_refuses(value: float, error: str) -> None:
    with pytest.raises(QuantityError, match=error):
        wire.format_quantity(value)


_QUANTITY = r"-?[1-9][0-9]*(m|k|M|G|T|P|E)?|0"


@given(st.floats(min_value=-1e15, max_value=1e15, allow_nan=False))
def test_quantities_are_canonical_and_exact_to_a_milli(value: float) -> None:
    import re
    from decimal import Decimal

    text = wire.format_quantity(value)
    assert re.fullmatch(_QUANTITY, text), text
    suffix = {"m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
    digits, unit = (text[:-1], text[-1]) if text[-1] in suffix else (text, "")
    parsed = Decimal(digits).scaleb(suffix.get(unit, 0))
    assert abs(parsed - Decimal(repr(value))) <= Decimal("0.0005")
    assert not digits.endswith("000") or unit == "E"  # the largest exponent was chosen


@pytest.mark.parametrize(
    ("unix_s", "text"),
    [
        pytest.param(0, "1970-01-01T00:00:00Z", id="epoch"),
        pytest.param(1_790_000_000.999, "2026-09-21T14:13:20Z", id="whole seconds, UTC, Z"),
    ],
)
def test_format_time(unix_s: float, text: str) -> None:
    assert wire.format_time(unix_s) == text


def test_status_document() -> None:
    error = StatusError(Reason.NOT_FOUND, "gone", {"name": "m"})
    assert wire.status(error) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "gone",
        "reason": "NotFound",
        "details": {"name": "m"},
        "code": 404,
    }


@pytest.mark.parametrize(
    ("accept", "discovery", "answer"),
    [
        pytest.param(None, False, Answer.JSON, id="absent"),
        pytest.param("", False, Answer.JSON, id="empty"),
        pytest.param("*/*", False, Answer.JSON, id="anything"),
        pytest.param("APPLICATION/JSON", False, Answer.JSON, id="case-insensitive"),
        pytest.param(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            True,
            Answer.DISCOVERY_V2,
            id="v2",
        ),
        pytest.param(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            False,
            None,
            id="v2 off discovery",
        ),
        pytest.param(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
            True,
            Answer.DISCOVERY_V2BETA1,
            id="v2beta1 first",
        ),
        pytest.param(
            "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList, application/json;q=0.9",
            True,
            Answer.JSON,
            id="unknown version falls back",
        ),
        pytest.param(
            "application/json;q=0.1, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            True,
            Answer.DISCOVERY_V2,
            id="weights order",
        ),
        pytest.param("text/plain;q=1, image/png", False, None, id="nothing acceptable"),
        pytest.param(",,;", False, None, id="garbage"),
    ],
)
def test_negotiate(accept: str | None, discovery: bool, answer: Answer | None) -> None:
    assert wire.negotiate(accept, discovery=discovery) is answer
