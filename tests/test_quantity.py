from __future__ import annotations

import pytest

from autoscaler.quantity import QuantityError, to_milli


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        pytest.param("30", 30_000, id="integer"),
        pytest.param("1500m", 1_500, id="milli suffix"),
        pytest.param("0.5", 500, id="decimal"),
        pytest.param("2k", 2_000_000, id="kilo"),
        pytest.param("1Ki", 1_024_000, id="binary suffix"),
        pytest.param("1e3", 1_000_000, id="exponent"),
        pytest.param("0.0001", 1, id="rounds up like MilliValue"),
        pytest.param(12, 12_000, id="JSON integer"),
        pytest.param(0.25, 250, id="JSON float"),
        pytest.param("-2", -2_000, id="negative"),
    ],
)
def test_to_milli(text: str | int | float, milli: int) -> None:
    assert to_milli(text) == milli


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "10 m", "5X", True, float("nan")])
def test_rejects_malformed(bad: object) -> None:
    with pytest.raises(QuantityError, match=r"quantity|finite"):
        to_milli(bad)  # type: ignore[arg-type]
