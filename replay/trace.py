"""The one in-memory shape every trace format is read into: columns of equal length, sorted by arrival."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, eq=False)
class PrefixBlocks:
    """Per request, the ids of its prompt's leading blocks of `block_tokens` tokens (Mooncake's
    `hash_ids`): two requests share a prompt prefix as far as their ids agree. Request i's ids are
    ids[offsets[i]:offsets[i + 1]]."""

    offsets: I64  # len(trace) + 1, non-decreasing, from 0
    ids: I64
    block_tokens: int = 512

    def __post_init__(self) -> None:
        if len(self.offsets) == 0 or self.offsets[0] != 0 or self.offsets[-1] != len(self.ids):
            raise ValueError("prefix blocks: offsets must start at 0 and end at len(ids)")
        if np.any(np.diff(self.offsets) < 0):
            raise ValueError("prefix blocks: offsets must be non-decreasing")
        if self.block_tokens < 1:
            raise ValueError(f"prefix blocks: block_tokens must be >= 1, got {self.block_tokens}")

    def take(self, index: I64) -> PrefixBlocks:
        """The blocks of requests `index`, in that order."""
        counts = np.diff(self.offsets)[index]
        offsets = np.zeros(len(index) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        starts = np.repeat(self.offsets[:-1][index] - offsets[:-1], counts)
        ids = self.ids[starts + np.arange(int(offsets[-1]))]
        return PrefixBlocks(offsets, ids, self.block_tokens)


@dataclass(frozen=True, slots=True, eq=False)
class Trace:
    name: str
    arrival_s: npt.NDArray[np.float64]  # seconds from the first request (which is at 0), non-decreasing
    input_tokens: npt.NDArray[np.int64]  # prompt tokens, >= 1
    output_tokens: npt.NDArray[np.int64]  # generated tokens, >= 1
    prefix: PrefixBlocks | None = None  # only traces that carry prefix block ids (Mooncake)

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        if len(self.input_tokens) != n or len(self.output_tokens) != n:
            raise ValueError(f"trace {self.name!r}: columns differ in length")
        if self.prefix is not None and len(self.prefix.offsets) != n + 1:
            raise ValueError(
                f"trace {self.name!r}: prefix blocks for {len(self.prefix.offsets) - 1} requests, not {n}"
            )

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def duration_s(self) -> float:
        return float(self.arrival_s[-1]) if len(self) else 0.0
