"""The traces a league runs: files or folders (format from the file name), the embedded synthetic
trace by default, each at its rate scales.

Rate scales. A trace at its recorded rate may need 2 replicas or 400; a comparison is only
informative where the peak needs a range of replicas the scenario can give. The rule, for any
trace: the scales at which the trace's busiest minute needs a quarter and three quarters of the
scenario's `max_replicas` (sizing.needed_replicas at the policies' target, averaged per minute),
rounded to two significant figures (`auto`). The shared traces' scales were computed with this
rule on reference-70b (64 replicas, target 16) and are frozen in SHARED_TRACES, so the league's
numbers do not move when the sizing code does; the same scales for every policy, never tuned to
one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from replay.policies.sizing import needed_replicas
from replay.profiles import Scenario
from replay.trace import Trace

AUTO_FRACTIONS = (0.25, 0.75)  # of max_replicas, needed at the busiest minute


class SourceError(ValueError):
    """A trace argument the league cannot use; the message names it."""


@dataclass(frozen=True, slots=True)
class SharedTrace:
    """League defaults for one of the public traces (../shared/traces names them so)."""

    format: str
    rate_scales: tuple[float, ...]
    options: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""


# Computed with the rule above on reference-70b (the busiest minute's need at scale 1 in the note).
SHARED_TRACES: Mapping[str, SharedTrace] = {
    "azure_llm_2023_code.csv": SharedTrace("azure", (5.5, 17.0), note="busiest minute needs 3.3"),
    "azure_llm_2023_conv.csv": SharedTrace("azure", (3.4, 10.0), note="busiest minute needs 5.1"),
    "mooncake_fast25_synthetic.jsonl": SharedTrace("mooncake", (0.52, 1.5), note="busiest minute needs 31.6"),
    "servegen_language_m-large.tar.gz": SharedTrace(
        "servegen",
        (0.048, 0.15),
        # 11:00-14:00 of day 1: the late-morning peak, a 40 % midday dip and the recovery (the
        # 14 days never load); ServeGen synthesizes at the scale, so the rule is iterated
        options={"start_s": 39_600.0, "end_s": 50_400.0},
        note="busiest minute needs 4.0 at scale 0.01",
    ),
}


@dataclass(frozen=True, slots=True)
class TraceSource:
    """One trace to load: `path` None is the embedded synthetic trace."""

    label: str
    path: Path | None = None
    format: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    rate_scales: tuple[float, ...] | None = None  # None: the shared defaults, else the rule

    @property
    def synthesizes(self) -> bool:
        """ServeGen draws requests at the rate scale; the others are scaled after loading."""
        return self.format == "servegen"

    def load(self, rate_scale: float, seed: int) -> Trace:
        from replay.traces import load_trace, scale_rate

        if self.synthesizes:
            assert self.path is not None
            return load_trace(self.path, "servegen", rate_scale=rate_scale, seed=seed, **self.options)
        base = _base(self, seed)
        return base if rate_scale == 1.0 else scale_rate(base, rate_scale, seed=seed)


_FORMAT_BY_NAME = (
    (re.compile(r"^azure.*\.csv$", re.IGNORECASE), "azure"),
    (re.compile(r"^burstgpt.*\.csv$", re.IGNORECASE), "burstgpt"),
    (re.compile(r"^servegen.*\.tar\.gz$", re.IGNORECASE), "servegen"),
    (re.compile(r".*mooncake.*\.jsonl$", re.IGNORECASE), "mooncake"),
)


def infer_format(path: Path) -> str:
    known = SHARED_TRACES.get(path.name)
    if known is not None:
        return known.format
    for pattern, fmt in _FORMAT_BY_NAME:
        if pattern.match(path.name):
            return fmt
    raise SourceError(
        f"{path}: cannot tell the trace format from the name; give --format "
        "(azure_*.csv, burstgpt*.csv, servegen*.tar.gz and *mooncake*.jsonl are recognised)"
    )


def sources(paths: Sequence[Path], fmt: str | None = None) -> list[TraceSource]:
    """Files as given; a folder contributes every file whose format its name tells (README and
    others are skipped). No path: the embedded synthetic trace."""
    if not paths:
        return [TraceSource("synthetic", rate_scales=(1.0,))]
    out: list[TraceSource] = []
    for path in paths:
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.is_file() and _recognised(p))
            if not files:
                raise SourceError(f"{path}: no trace file this league recognises by name")
            out += [_source(p, fmt) for p in files]
        elif path.is_file():
            out.append(_source(path, fmt))
        else:
            raise SourceError(f"{path}: no such file or folder")
    labels = [s.label for s in out]
    twice = sorted({x for x in labels if labels.count(x) > 1})
    if twice:
        raise SourceError(f"trace {', '.join(twice)} given twice")
    return out


def _recognised(path: Path) -> bool:
    try:
        infer_format(path)
    except SourceError:
        return False
    return True


def _source(path: Path, fmt: str | None) -> TraceSource:
    shared = SHARED_TRACES.get(path.name)
    label = re.sub(r"(\.tar\.gz|\.csv|\.jsonl|\.json)$", "", path.name)
    if shared is not None and fmt in (None, shared.format):
        return TraceSource(label, path, shared.format, shared.options, shared.rate_scales)
    return TraceSource(label, path, fmt or infer_format(path))


def minute_peak_need(trace: Trace, scenario: Scenario, target: float) -> float:
    """Replicas the trace's busiest minute needs (per-second need averaged over each minute)."""
    need = needed_replicas(trace, scenario, target)
    minutes = max(1, len(need) // 60)
    head = need[: minutes * 60].astype(np.float64)
    if len(head) < 60:
        return float(head.mean()) if len(head) else 0.0
    return float(head.reshape(minutes, 60).mean(axis=1).max())


def auto_rate_scales(
    source: TraceSource, scenario: Scenario, target: float, seed: int = 0, iterations: int = 3
) -> tuple[float, ...]:
    """The rule: the scales at which the busiest minute needs AUTO_FRACTIONS of max_replicas,
    by fixed-point iteration (the need is not linear in the rate: replicas are whole)."""
    start = 0.01 if source.synthesizes else 1.0  # a synthesizing source at scale 1 can be huge
    out = []
    for fraction in AUTO_FRACTIONS:
        want = fraction * scenario.max_replicas
        k = start
        for _ in range(iterations):
            peak = minute_peak_need(source.load(k, seed), scenario, target)
            if peak <= 0:
                raise SourceError(f"trace {source.label!r} needs no replica: cannot choose its rate scales")
            k *= want / peak
        out.append(_two_figures(k))
    return tuple(out)


_BASES: dict[tuple[object, ...], Trace] = {}


def _base(source: TraceSource, seed: int) -> Trace:
    """A source loaded at its own rate, once per process."""
    from replay.traces import default_trace, load_trace

    key = (source.path, source.format, tuple(sorted(source.options.items())), seed)
    if key not in _BASES:
        if source.path is None:
            _BASES[key] = default_trace(seed)
        else:
            _BASES[key] = load_trace(source.path, source.format or "", **source.options)
    return _BASES[key]


def _two_figures(x: float) -> float:
    digits = 1 - math.floor(math.log10(x))
    return round(x, digits)
