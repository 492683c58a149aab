"""A node-local weights cache: what a node's disk holds, least recently used evicted first.

A load from shared storage writes the weights through to the node's cache; the next replica on
that node reads them at the cache's speed. With a capacity, models (or sizes of one model) that
compete for the disk evict the one read longest ago; weights larger than the whole cache are
never kept. Frozen values: every change returns a new cache.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NodeCache:
    capacity_gb: float | None = None  # None: unlimited
    entries: tuple[tuple[str, float], ...] = ()  # (model, GB), least recently used first

    def __deepcopy__(self, memo: dict[int, object]) -> NodeCache:
        # immutable all through: itself (a compiled frozen dataclass cannot be rebuilt field by field)
        return self

    def holds(self, model: str) -> bool:
        return any(name == model for name, _ in self.entries)

    @property
    def used_gb(self) -> float:
        return sum(gb for _, gb in self.entries)

    def read(self, model: str) -> NodeCache:
        """A replica read `model` from the cache: it becomes the most recently used."""
        kept = tuple(e for e in self.entries if e[0] != model)
        if len(kept) == len(self.entries):
            return self
        return NodeCache(self.capacity_gb, (*kept, *(e for e in self.entries if e[0] == model)))

    def filled(self, model: str, gb: float) -> NodeCache:
        """`model` (gb) was written to the cache: most recently used, evicting from the least
        recently used end until it fits. Too large for the whole cache: nothing changes."""
        if self.capacity_gb is not None and gb > self.capacity_gb:
            return self
        kept = [e for e in self.entries if e[0] != model]
        if self.capacity_gb is not None:
            while kept and sum(size for _, size in kept) + gb > self.capacity_gb:
                kept.pop(0)
        return NodeCache(self.capacity_gb, (*kept, (model, gb)))
