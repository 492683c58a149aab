"""How far ahead the policy looks, and when the replicas it starts are ready.

The horizon is the caller's figure (the replay's fleet projects its own start-ups), the spec's, or
the cold-start model's (autoscaler/policy/coldstart.py) on the observation's cluster facts. Both are
pure functions of hashable values and a cluster looks the same most ticks, so they are cached.
"""

from __future__ import annotations

from functools import lru_cache

from autoscaler.policy import coldstart
from autoscaler.policy.observation import Observation
from autoscaler.policy.spec import AutoscalerSpec, ColdStartSpec


def fixed_lead_s(spec: AutoscalerSpec, obs: Observation) -> float | None:
    """A time to ready the caller or the spec gives instead of the cold-start model's (or None)."""
    if obs.lead_time_s is not None:
        return obs.lead_time_s
    if spec.prediction is not None:
        return spec.prediction.lead_time_s
    return None


def lead_time_s(spec: AutoscalerSpec, obs: Observation) -> float:
    """The forecast horizon: the caller's figure, the spec's, or the cold-start model's."""
    if spec.prediction is None:
        return 0.0
    if obs.lead_time_s is not None:
        return obs.lead_time_s
    if spec.prediction.lead_time_s is not None:
        return spec.prediction.lead_time_s
    if spec.cold_start is not None:
        return cold_start_lead_s(spec.cold_start, *cluster(obs))
    return 0.0


@lru_cache(maxsize=1024)
def cold_start_lead_s(
    cold: ColdStartSpec,
    free: tuple[int, ...],
    image_cached: tuple[int, ...],
    weights_cached: tuple[int, ...],
    loading: tuple[float, ...],
) -> float:
    """The model is a pure function of hashable values, and a cluster looks the same most ticks."""
    return coldstart.lead_time_s(
        cold,
        free_gpus_per_node=free,
        image_cached_nodes=image_cached,
        weights_cached=weights_cached,
        loading_remaining_gb=loading,
    )


def cluster(
    obs: Observation,
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[float, ...]]:
    return obs.free_gpus_per_node, obs.image_cached_nodes, obs.weights_cached_nodes, obs.loading_remaining_gb


@lru_cache(maxsize=1024)
def ready_in_s(
    cold: ColdStartSpec,
    k: int,
    free: tuple[int, ...],
    image_cached: tuple[int, ...],
    weights_cached: tuple[int, ...],
    loading: tuple[float, ...],
) -> tuple[float, ...]:
    """Seconds until each of k replicas started now is ready (pure, so cached like the lead time)."""
    replicas = coldstart.predict_ready(
        cold,
        k,
        free_gpus_per_node=free,
        image_cached_nodes=image_cached,
        weights_cached=weights_cached,
        loading_remaining_gb=loading,
    )
    return tuple(r.ready_s for r in replicas)
