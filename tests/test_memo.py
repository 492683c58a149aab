"""memo.remember: a bounded table, cleared when full; memo.by_identity: one value per object, by
identity, never handed to another object."""

from __future__ import annotations

from autoscaler.policy import memo


def test_made_once_per_object_and_not_shared_by_an_equal_one() -> None:
    table: memo.Table = {}
    made: list[tuple[int, ...]] = []

    def make(key: tuple[int, ...]) -> int:
        made.append(key)
        return len(made)

    first, equal = (1, 2), tuple([1, 2])  # equal, not the same object
    assert memo.by_identity(table, first, make) == 1
    assert memo.by_identity(table, first, make) == 1
    assert memo.by_identity(table, equal, make) == 2
    assert made == [(1, 2), (1, 2)]


def test_a_full_table_is_cleared_before_the_next_entry() -> None:
    table: memo.Table = {}
    keys = [object() for _ in range(3)]
    for k in keys:
        memo.by_identity(table, k, id, size=2)
    assert len(table) == 1 and table[id(keys[2])][0] is keys[2]


def test_remember_stores_and_clears_a_full_table_first() -> None:
    table: dict[str, int] = {}
    assert memo.remember(table, "a", 1, size=2) == 1
    assert memo.remember(table, "b", 2, size=2) == 2
    assert table == {"a": 1, "b": 2}
    assert memo.remember(table, "c", 3, size=2) == 3
    assert table == {"c": 3}
