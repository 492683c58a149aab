"""What a decision reads from its spec, worked out once per spec object (decide.py keeps them by
the spec's identity, memo.py).

The specs stay Python dataclasses in the compiled core (compiledcore.py: compiled, they behave
differently), so a compiled module reads each of their fields by a generic getattr (~220
instructions), where it reads a compiled class's as a C field (docs/policy.md, "Performance"). A
slots dataclass, not a NamedTuple, whose fields the interpreter reads ~3x slower than a slot.
"""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.policy import capacityfacts
from autoscaler.policy.capacityfacts import CapacityFacts
from autoscaler.policy.spec import AutoscalerSpec, ColdStartSpec, MetricSpec, ScalingRules


@dataclass(frozen=True, slots=True)
class SpecFacts:
    tolerances: tuple[float, float]
    floors: bool  # any floor set (else the floors stage has nothing to do)
    min_replicas: int
    max_replicas: int
    metrics: tuple[tuple[MetricSpec, str], ...]  # each with its name
    max_metric_age_s: float | None
    predicting: bool  # prediction set
    capacity: CapacityFacts | None
    cold_start: ColdStartSpec | None
    rules: tuple[ScalingRules, ScalingRules] | None  # behavior's scale-up and scale-down; None: legacy


def of(spec: AutoscalerSpec) -> SpecFacts:
    f, behavior, cap = spec.floors, spec.behavior, spec.capacity
    return SpecFacts(
        spec.tolerances,
        bool(f.headroom_replicas or f.headroom_fraction or f.warm_min_replicas or f.schedules),
        spec.min_replicas,
        spec.max_replicas,
        tuple((m, m.name) for m in spec.metrics),
        spec.max_metric_age_s,
        spec.prediction is not None,
        None if cap is None else capacityfacts.facts(cap),
        spec.cold_start,
        None if behavior is None else (behavior.scale_up, behavior.scale_down),
    )
