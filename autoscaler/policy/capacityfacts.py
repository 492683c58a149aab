"""What a tick reads from a capacity spec, or derives from it alone, worked out once per spec: the
demand and profile, the planning targets, the demand's metric names, the learning, panic and period
settings, and the load, the unit the band scores its errors in (GPU-seconds per second a demand
costs at the profile's speed), as a function and as the terms flat arithmetic reads (flatahead.py,
flatband.py). specfacts.py keeps them with the rest of a spec's facts; planner.plan, the Lookahead
(lookahead.py), the panic's stage and flatcalls.above_band read them instead of the spec.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autoscaler.policy import capacity, lateband, latecurve, replicarates
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityspec import CapacitySpec, DemandSpec, ReplicaProfile, Router, SloTarget


def load_of(profile: ReplicaProfile, d: Demand) -> float:
    """GPU-seconds per second a demand costs at the profile's speed: the unit errors are scored in.
    Below MIN_RATE requests/s, its prompts' prefill alone: a subnormal rate's mix is infinite per
    request, and the decode part's inf × 0 was NaN (a state restored with 5e-324 requests/s)."""
    if d.requests < capacity.MIN_RATE:
        return profile.prefill_s_per_token * d.prompt_tokens
    return d.requests * replicarates.work_per_request(
        profile, d.prompt_tokens / d.requests, d.output_tokens / d.requests, 1.0
    )


def _load_function(profile: ReplicaProfile) -> Callable[[Demand], float]:
    """load_of for one profile, its arithmetic inlined (the same operations in the same order, so
    the same floats): a tick evaluates a dozen loads."""
    a0 = profile.prefill_s_per_token
    a1 = profile.prefill_s_per_attention_pair * 0.5  # a1 * 0.5 * x is (a1 * 0.5) * x
    b0 = profile.decode_s_per_request
    c0 = profile.decode_s_per_context_token
    k = capacity.CONTEXT_OUTPUT_SHARE
    min_rate = capacity.MIN_RATE

    def load(d: Demand) -> float:
        r, prompt, output = d.requests, d.prompt_tokens, d.output_tokens
        if r < min_rate:
            return a0 * prompt
        p = prompt / r
        o = output / r
        return r * ((a0 + a1 * (p + 1.0)) * p + (b0 + c0 * (p + k * o)) * o)

    return load


def load_terms(profile: ReplicaProfile) -> tuple[float, float, float, float, float, float]:
    """The terms _load_function's load reads, as flat arithmetic takes them (flatband.py)."""
    return (
        profile.prefill_s_per_token,
        profile.prefill_s_per_attention_pair * 0.5,
        profile.decode_s_per_request,
        profile.decode_s_per_context_token,
        capacity.CONTEXT_OUTPUT_SHARE,
        capacity.MIN_RATE,
    )


def band_terms(d: DemandSpec) -> tuple[float, float, float]:
    """The demand spec's terms the flat band reads (flatahead.start, flatband): its damping, prior
    weight and prior error."""
    return d.damping_s, d.prior_weight, d.prior_error


@dataclass(frozen=True, slots=True)
class CapacityFacts:
    """What a tick reads from a capacity spec, or derives from it alone, worked out once per spec
    (specfacts.py): the spec stays a Python dataclass (compiledcore.py), each field of which a
    compiled module reads by a generic getattr (~220 instructions), a compiled class's as a C field."""

    demand: DemandSpec
    profile: ReplicaProfile
    engine: replicarates.Engine  # the profile's fields the idle misses read
    slo: SloTarget  # the planning targets
    curve_specs: int  # latecurve.spec_number(profile, slo): the late curves' key
    ttft_s: float  # slo's
    tail: float  # 1 - slo's attainment: the share of requests allowed to be late
    peak_z: float  # lateband.peak_deviate of the demand's quantile
    least_loaded: bool  # the router is LEAST_REQUESTS
    load: Callable[[Demand], float]  # load_of for the profile
    terms: tuple[float, ...]  # load's (load_terms)
    band: tuple[float, float, float]  # band_terms
    learn: bool
    learn_prior_weight: float
    decision_period_s: float
    panic_threshold: float
    panic_window_s: float
    # the demand's metrics
    request_rate_metric: str
    prompt_token_rate_metric: str
    generation_token_rate_metric: str
    inflight_metric: str
    queue_metric: str | None
    prompt_square_metric: str | None
    output_square_metric: str | None
    output_sum_metric: str | None
    arrival_rate_metric: str | None
    kv_usage_metric: str | None
    prefill_time_metric: str | None
    output_length_metric: str | None
    ttft_metric: str | None
    slo_ttft_s: float  # the SLO's own TTFT target (ttft_s is the planning one): late first tokens


def facts(cap: CapacitySpec) -> CapacityFacts:
    d, slo = cap.demand, cap.planning_slo
    return CapacityFacts(
        d,
        cap.profile,
        replicarates.engine(cap.profile),
        slo,
        latecurve.spec_number(cap.profile, slo),
        slo.ttft_s,
        1.0 - slo.attainment,
        lateband.peak_deviate(d.quantile),
        cap.router == Router.LEAST_REQUESTS,
        _load_function(cap.profile),
        load_terms(cap.profile),
        band_terms(d),
        cap.learn,
        cap.learn_prior_weight,
        cap.decision_period_s,
        cap.panic_threshold,
        cap.panic_window_s,
        d.request_rate_metric,
        d.prompt_token_rate_metric,
        d.generation_token_rate_metric,
        d.inflight_metric,
        d.queue_metric,
        d.prompt_square_metric,
        d.output_square_metric,
        d.output_sum_metric,
        d.arrival_rate_metric,
        d.kv_usage_metric,
        d.prefill_time_metric,
        d.output_length_metric,
        d.ttft_metric,
        cap.slo.ttft_s,
    )
