"""memo.remember: a bounded table, cleared when full; memo.by_identity: one value per object, by
identity, never handed to another object; memo.Tables: a table per (key, a, b), the last first."""

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


def test_tables_one_per_key_and_floats_the_last_read_first_and_bounded() -> None:
    tables: memo.Tables[float] = memo.Tables(3)
    first = tables.of(("curve", 1), 0.01, 2.0)
    first[4] = 0.5
    assert tables.of(("curve", 1), 0.01, 2.0) is first  # the last one, by an equal key built anew
    others = [tables.of(("curve", 2), 0.01, 2.0), tables.of(("curve", 1), 0.02, 2.0)]
    assert all(t == {} and t is not first for t in others) and others[0] is not others[1]
    assert tables.of(("curve", 1), 0.01, 2.0) is first  # found in the dict, not as the last one
    assert len(tables.tables) == 3
    fourth = tables.of(("curve", 1), 0.01, 5.0)  # the bound reached: the others dropped first
    assert fourth == {} and len(tables.tables) == 1
    assert tables.of(("curve", 1), 0.01, 2.0) == {}  # worked out again
    tables.clear()
    assert tables.tables == {} and tables.of(("curve", 1), 0.01, 2.0) == {}  # the last one dropped too
