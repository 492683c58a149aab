"""The base of the spec documents' models: strict (unknown fields refused, so a typo never
silently becomes a default), frozen, by alias or name; and Kubernetes quantities checked as such."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
)

from autoscaler import quantity


def _valid_quantity(value: str | int | float) -> str | int | float:
    quantity.parse(value)  # raises QuantityError (a ValueError) naming the bad text
    return value


QuantityValue = Annotated[str | int | float, AfterValidator(_valid_quantity)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
