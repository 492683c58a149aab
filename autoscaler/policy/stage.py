"""One step of a decision, as `infscale explain` and the reports show it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, final

from autoscaler.policy.record import Record


@final
class Stage(Record):
    """A stage's counts and reason, and its message kept as a template with its arguments.

    The message is formatted only when it is read (`message`, `to_dict`): the replay keeps every
    decision but reports read them at the end, the benchmark never, and formatting a stage's
    floats costs more than the stage's arithmetic. `template` is a `str.format` template whose
    fields are filled from `args` (the same format specs as an f-string, so the same text), a
    plain message when `args` is empty (never formatted: its braces stay as they are), or a
    function that `args` are passed to. The arguments must be immutable values.

    A Record (record.py), not a NamedTuple: a decision builds ~7.
    """

    FIELDS = ("name", "before", "after", "reason", "template", "args")

    name: str
    before: int  # the recommendation (replicas) before the stage ...
    after: int  # ... and after it
    reason: str  # a CamelCase word, as Kubernetes condition reasons
    template: str | Callable[..., str]
    args: tuple[Any, ...]

    def __init__(
        self,
        name: str,
        before: int,
        after: int,
        reason: str,
        template: str | Callable[..., str] = "",
        args: tuple[Any, ...] = (),
    ) -> None:
        self.name = name
        self.before = before
        self.after = after
        self.reason = reason
        self.template = template
        self.args = args

    @property
    def message(self) -> str:
        template = self.template
        if not self.args:
            return template if isinstance(template, str) else template()
        if isinstance(template, str):
            return template.format(*self.args)
        return template(*self.args)

    def to_dict(self) -> dict[str, Any]:
        """The stage as report.json and `infscale explain --output json` write it."""
        return {
            "name": self.name,
            "before": self.before,
            "after": self.after,
            "reason": self.reason,
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Stage:
        """A stage as to_dict wrote it (its message read back as plain text)."""
        return cls(doc["name"], doc["before"], doc["after"], doc["reason"], doc.get("message", ""))
