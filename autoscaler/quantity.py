"""Kubernetes `resource.Quantity` strings ("30", "1500m", "2k", "1Gi", "1e3") to milli-units.

`to_milli` rounds up like upstream's `Quantity.MilliValue()`, so "0.0001" is 1 milli, never 0.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")
_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


class QuantityError(ValueError):
    pass


def parse(value: str | int | float) -> Decimal:
    """A Quantity string, or a plain JSON number, as an exact Decimal."""
    if isinstance(value, bool):
        raise QuantityError(f"expected a quantity such as '30' or '1500m', got {value!r}")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise QuantityError(f"expected a finite number, got {value!r}")
        return Decimal(str(value))
    match = _QUANTITY.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise QuantityError(f"expected a quantity such as '30' or '1500m', got {value!r}")
    number, exponent, suffix = match.groups()
    try:
        base = Decimal(number)
        return base * Decimal(f"1{exponent}") if exponent else base * _SUFFIX[suffix or ""]
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid decimals
        raise QuantityError(f"invalid quantity {value!r}") from exc


def to_milli(value: str | int | float) -> int:
    return int((parse(value) * 1000).to_integral_value(rounding=ROUND_CEILING))
