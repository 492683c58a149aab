"""A KEDA ScaledObject as far as scaling goes, with upstream's defaults (kedacore/keda
apis/keda/v1alpha1: pollingInterval 30 s, cooldownPeriod 300 s, initialCooldownPeriod 0,
minReplicaCount 0, maxReplicaCount 100, no idleReplicaCount, no fallback) and one Prometheus
trigger (activationThreshold 0, ignoreNullValues true, useCachedMetrics false)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

DEFAULT_POLLING_INTERVAL_S = 30.0  # withtriggers_types.go defaultPollingInterval
DEFAULT_COOLDOWN_PERIOD_S = 300.0  # scale_executor.go defaultCooldownPeriod
DEFAULT_INITIAL_COOLDOWN_PERIOD_S = 0.0  # defaultInitialCooldownPeriod
DEFAULT_HPA_MIN_REPLICAS = 1  # scaledobject_types.go defaultHPAMinReplicas
DEFAULT_HPA_MAX_REPLICAS = 100


class FallbackBehavior(StrEnum):
    STATIC = "static"  # the default
    CURRENT_REPLICAS = "currentReplicas"
    CURRENT_REPLICAS_IF_HIGHER = "currentReplicasIfHigher"
    CURRENT_REPLICAS_IF_LOWER = "currentReplicasIfLower"


@dataclass(frozen=True, slots=True)
class Fallback:
    failure_threshold: int
    replicas: int
    behavior: FallbackBehavior = FallbackBehavior.STATIC

    @property
    def valid(self) -> bool:
        """HasValidFallback (without scaling modifiers)."""
        return self.failure_threshold >= 0 and self.replicas >= 0


@dataclass(frozen=True, slots=True)
class PrometheusTrigger:
    """The trigger: `threshold` is the HPA's AverageValue target, the query's value per replica."""

    threshold: float
    activation_threshold: float = 0.0
    ignore_null_values: bool = True
    use_cached_metrics: bool = False


class ScaledObjectError(ValueError):
    """A ScaledObject KEDA's admission webhook would refuse; the message names the field."""


@dataclass(frozen=True, slots=True)
class ScaledObject:
    trigger: PrometheusTrigger
    min_replica_count: int = 0
    max_replica_count: int = DEFAULT_HPA_MAX_REPLICAS
    idle_replica_count: int | None = None
    polling_interval_s: float = DEFAULT_POLLING_INTERVAL_S
    cooldown_period_s: float = DEFAULT_COOLDOWN_PERIOD_S
    initial_cooldown_period_s: float = DEFAULT_INITIAL_COOLDOWN_PERIOD_S
    fallback: Fallback | None = None

    def __post_init__(self) -> None:
        if self.min_replica_count < 0:
            raise ScaledObjectError(f"minReplicaCount must be >= 0, got {self.min_replica_count}")
        if self.max_replica_count < self.min_replica_count:
            raise ScaledObjectError(
                f"MinReplicaCount={self.min_replica_count} must be less than "
                f"MaxReplicaCount={self.max_replica_count}"
            )
        if self.idle_replica_count is not None and self.idle_replica_count >= self.min_replica_count:
            raise ScaledObjectError(
                f"IdleReplicaCount={self.idle_replica_count} must be less than "
                f"MinReplicaCount={self.min_replica_count}"
            )
        if self.polling_interval_s <= 0:
            raise ScaledObjectError(f"pollingInterval must be > 0, got {self.polling_interval_s}")
        if self.cooldown_period_s < 0 or self.initial_cooldown_period_s < 0:
            raise ScaledObjectError("cooldownPeriod and initialCooldownPeriod must be >= 0")
        if self.trigger.threshold <= 0:
            raise ScaledObjectError(f"threshold must be > 0, got {self.trigger.threshold}")

    @property
    def hpa_min_replicas(self) -> int:
        """GetHPAMinReplicas: KEDA does 0 <-> 1 itself; its HPA never goes below 1."""
        return self.min_replica_count if self.min_replica_count > 0 else DEFAULT_HPA_MIN_REPLICAS
