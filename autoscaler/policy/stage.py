"""One step of a decision, as `infscale explain` and the reports show it."""

from __future__ import annotations

from typing import NamedTuple


class Stage(NamedTuple):
    name: str
    before: int  # the recommendation (replicas) before the stage ...
    after: int  # ... and after it
    reason: str  # a CamelCase word, as Kubernetes condition reasons
    message: str = ""
