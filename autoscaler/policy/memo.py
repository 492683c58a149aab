"""Bounded memo tables: `remember` stores a result in a dict that is cleared when full, and
`by_identity` keeps values worked out once per immutable object, found by the object's identity.

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

from collections.abc import Callable
from typing import Any, TypeVar

K = TypeVar("K")
V = TypeVar("V")

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
