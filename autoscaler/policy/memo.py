"""Values worked out once per immutable object, found by the object's identity.

Specs are frozen, but hashing one costs more than a decision's use of what is derived from it, so
the derived value is kept by `id()`. Each entry keeps its object too: an id cannot be reused by a
new object while the entry stands, and a hit is checked to be the same object. A table is cleared
when it holds `size` entries (a process sees a handful of specs; a long-lived one with churning
specs does not grow).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

K = TypeVar("K")
V = TypeVar("V")

Table = dict[int, tuple[Any, Any]]


def by_identity(table: Table, obj: K, make: Callable[[K], V], size: int = 256) -> V:
    """table's value for `obj`, made by make(obj) the first time it is asked for."""
    got = table.get(id(obj))
    if got is not None and got[0] is obj:
        value: V = got[1]
        return value
    if len(table) >= size:
        table.clear()
    value = make(obj)
    table[id(obj)] = obj, value
    return value
