"""The one in-memory shape every trace format is read into: columns of equal length, sorted by arrival."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True, slots=True, eq=False)
class Trace:
    name: str
    arrival_s: npt.NDArray[np.float64]  # seconds from the first request (which is at 0), non-decreasing
    input_tokens: npt.NDArray[np.int64]  # prompt tokens, >= 1
    output_tokens: npt.NDArray[np.int64]  # generated tokens, >= 1

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        if len(self.input_tokens) != n or len(self.output_tokens) != n:
            raise ValueError(f"trace {self.name!r}: columns differ in length")

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def duration_s(self) -> float:
        return float(self.arrival_s[-1]) if len(self) else 0.0
