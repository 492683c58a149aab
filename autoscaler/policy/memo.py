"""Bounded memo tables: `remember` stores a result in a dict that is cleared when full, and
`by_identity` keeps values worked out once per immutable object, found by the object's identity;
`Tables` keeps tables of grid points by a key and two floats, the last one read compared first.

A memo table holds pure results (a search on rounded inputs, a spec's derived values), so
clearing it costs recomputation, never a different answer; clearing the whole table when it holds
`size` entries keeps a long-lived process bounded without an LRU's bookkeeping on every hit (the
callers look a key up with dict.get themselves, so a hit pays no call).

Specs are frozen, but hashing one costs more than a decision's use of what is derived from it, so
by_identity keeps the derived value by `id()`. Each entry keeps its object too: an id cannot be
reused by a new object while the entry stands, and a hit is checked to be the same object (a
process sees a handful of specs; a long-lived one with churning specs does not grow). A caller
made every tick reads its hit inline (`got = table.get(id(obj))`, `got[0] is obj`), as for remember.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

Table = dict[int, tuple[Any, Any]]


def remember(table: dict[K, V], key: K, value: V, size: int) -> V:
    """`value`, stored under `key` in `table`, which is cleared first when it holds `size` entries."""
    if len(table) >= size:
        table.clear()
    table[key] = value
    return value


def by_identity(table: Table, obj: K, make: Callable[[K], V], size: int = 256) -> V:
    """table's value for `obj`, made by make(obj) the first time it is asked for."""
    got = table.get(id(obj))
    if got is not None and got[0] is obj:
        value: V = got[1]
        return value
    value = make(obj)
    remember(table, id(obj), (obj, value), size)
    return value


class Tables(Generic[T]):
    """Tables of a grid's points by (key, a, b), under a dict cleared when it holds `size` tables
    (remember). A tick reads the same table several times and builds its key anew, so the last one
    read is compared first: hashing the key's floats at each read cost more than the rest of it
    (burstprice's hold grid, lateband's cells)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.tables: dict[tuple[object, float, float], dict[int, T]] = {}
        self.last: tuple[object, float, float, dict[int, T]] = (None, math.nan, math.nan, {})

    def clear(self) -> None:
        """Every table dropped, the last one read too (worked out again when next asked for)."""
        self.tables.clear()
        self.last = (None, math.nan, math.nan, {})

    def of(self, key: object, a: float, b: float) -> dict[int, T]:
        """The table for (key, a, b), empty the first time it is asked for."""
        last = self.last
        if last[1] == a and last[2] == b and last[0] == key:
            return last[3]
        full = (key, a, b)
        table = self.tables.get(full)
        if table is None:
            table = remember(self.tables, full, {}, self.size)
        self.last = (key, a, b, table)
        return table
