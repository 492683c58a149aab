"""Learned cold starts: the newest observed startups of one target and robust estimates over them.

Pure. The history is a value the controller keeps in the InferenceAutoscaler's status, so a restart
or a failover neither loses nor double-counts samples: a pod is taken once, when its Ready time is
newer than the newest sample kept (or equal, under another name).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autoscaler.controller.kubetime import parse_time, rfc3339
from autoscaler.controller.podfacts import Startup
from autoscaler.policy.observe import quantile

__all__ = ["ColdStartHistory", "quantile"]


@dataclass(frozen=True, slots=True)
class ColdStartHistory:
    samples: tuple[Startup, ...] = ()  # oldest Ready first

    @property
    def newest_ready_at(self) -> float | None:
        return self.samples[-1].ready_at if self.samples else None

    def add(self, startups: Iterable[Startup], *, keep: int, max_startup_s: float) -> ColdStartHistory:
        newest = self.newest_ready_at
        names_at_newest = {s.pod for s in self.samples if s.ready_at == newest}
        fresh = [
            s
            for s in startups
            if s.startup_s <= max_startup_s
            and (
                newest is None
                or s.ready_at > newest
                or (s.ready_at == newest and s.pod not in names_at_newest)
            )
        ]
        if not fresh:
            return self
        merged = sorted((*self.samples, *fresh), key=lambda s: (s.ready_at, s.pod))
        return ColdStartHistory(tuple(merged[-keep:]))

    def startup_quantile(self, q: float) -> float | None:
        """Creation -> Ready, what users wait for (reported beside the model's prediction)."""
        return quantile([s.startup_s for s in self.samples], q) if self.samples else None

    def load_quantile(self, q: float) -> float | None:
        """Scheduled -> Ready: the horizon's base; node provisioning is added by the capacity check."""
        return quantile([s.load_s for s in self.samples], q) if self.samples else None

    def to_dict(self) -> list[dict[str, Any]]:
        return [
            {
                "pod": s.pod,
                "readyTime": rfc3339(s.ready_at),
                "startupSeconds": round(s.startup_s, 3),
                "loadSeconds": round(s.load_s, 3),
            }
            for s in self.samples
        ]

    @classmethod
    def from_dict(cls, data: Any) -> ColdStartHistory:
        """Parse `to_dict` output; a malformed entry raises ValueError naming its index and field."""
        if not isinstance(data, list):
            raise ValueError(f"status.coldStarts.samples: expected a list, got {data!r}")
        samples = []
        for i, entry in enumerate(data):
            where = f"status.coldStarts.samples[{i}]"
            if not isinstance(entry, Mapping):
                raise ValueError(f"{where}: expected an object, got {entry!r}")
            try:
                ready_at = parse_time(str(entry["readyTime"]))
                startup_s, load_s = float(entry["startupSeconds"]), float(entry["loadSeconds"])
            except KeyError as exc:
                raise ValueError(f"{where}: missing {exc.args[0]}") from None
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{where}: {exc}") from None
            if not (math.isfinite(startup_s) and math.isfinite(load_s) and 0 <= load_s <= startup_s):
                raise ValueError(
                    f"{where}: need 0 <= loadSeconds <= startupSeconds, got {load_s}, {startup_s}"
                )
            samples.append(Startup(str(entry.get("pod", "")), ready_at, startup_s, load_s))
        return cls(tuple(sorted(samples, key=lambda s: (s.ready_at, s.pod))))
