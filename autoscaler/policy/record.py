"""Record: a value class with a NamedTuple's equality, hash and repr, for the values a decision
builds and reads by their fields alone.

Compiled by mypyc (autoscaler/compiledcore.py), a NamedTuple is built through tuple.__new__ (an
argument tuple, its slice and the instance, ~1,000 instructions with its dealloc), a plain class's
instance as a C struct whose fields are set in place (~150). A subclass names its fields in FIELDS,
in order, and sets them in its `__init__`; the repr is the NamedTuple's, so a decision's repr (the
bench's digests) reads as before. Not a tuple: no unpacking or indexing; `_replace` as a
NamedTuple's, by keyword (a generic call: off the hot path).
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

R = TypeVar("R", bound="Record")


class Record:
    FIELDS: ClassVar[tuple[str, ...]] = ()

    def values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self.FIELDS])

    def _replace(self: R, **changes: Any) -> R:
        """A copy with the fields named changed, as a NamedTuple's `_replace`."""
        unknown = [name for name in changes if name not in self.FIELDS]
        if unknown:
            raise ValueError(f"Got unexpected field names: {unknown!r}")
        return type(self)(**{name: changes.get(name, getattr(self, name)) for name in self.FIELDS})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and type(other) is type(self) and self.values() == other.values()

    def __hash__(self) -> int:
        return hash(self.values())

    def __repr__(self) -> str:
        fields = ", ".join(
            [f"{name}={value!r}" for name, value in zip(self.FIELDS, self.values(), strict=True)]
        )
        return f"{type(self).__name__}({fields})"
