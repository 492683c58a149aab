"""The spec's capacity section (CapacitySpec and its parts): the sizing's own settings, half of spec.py."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache

# --horizontal-pod-autoscaler-sync-period: upstream decides once per period. Defined here, where
# spec.py (which imports this module) reads it too: the legacy cap's period and the decisions'
DEFAULT_SYNC_PERIOD_S = 15


class Router(StrEnum):
    """How requests reach the replicas: what the TTFT tail's prefill queues see (capacity.py)."""

    RANDOM = "Random"  # a Service's random or round-robin pick: each replica an M/G/1 queue fed λ/n
    # the replica with the fewest requests in flight (the replay's router; load-aware gateways'):
    # a request finds a replica with nothing in flight unless every replica holds one
    LEAST_REQUESTS = "LeastRequests"


def _check_range(owner: str, name: str, value: float, low: float, high: float, allowed: str) -> None:
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{owner}.{name} must be {allowed}, got {value!r}")


@dataclass(frozen=True, slots=True)
class ReplicaProfile:
    """One replica's engine as a step-time model: the capacity model's input (docs/policy.md).

    A continuous-batching step that prefills `p` prompt tokens (with `P` attention pairs: a chunk of
    c tokens after k computed has c·k + c(c+1)/2) and decodes one token for each of `B` running
    requests, which read `K` context tokens, takes
        step_base_s + prefill_s_per_token × p + prefill_s_per_attention_pair × P
                    + decode_s_per_request × B + decode_s_per_context_token × K.
    vLLM V1 caps p + B at `max_batched_tokens` per step (None: whole prompts, no token budget);
    `prefill_first` engines (SGLang, TGI) run a step of prompt chunks or a step of decodes, never both.
    """

    step_base_s: float
    prefill_s_per_token: float
    prefill_s_per_attention_pair: float = 0.0
    decode_s_per_request: float = 0.0
    decode_s_per_context_token: float = 0.0
    max_batched_tokens: int | None = None
    max_num_seqs: int = 256
    kv_cache_tokens: int | None = None  # None: KV never binds
    prefill_first: bool = False

    def __post_init__(self) -> None:
        own = "capacity.profile"
        _check_range(own, "step_base_s", self.step_base_s, 1e-6, 60.0, "in [1e-06, 60] s")
        _check_range(own, "prefill_s_per_token", self.prefill_s_per_token, 1e-9, 1.0, "in [1e-09, 1] s")
        for name in ("decode_s_per_request", "decode_s_per_context_token", "prefill_s_per_attention_pair"):
            _check_range(own, name, getattr(self, name), 0.0, 1.0, "in [0, 1] s")
        if self.max_batched_tokens is not None and self.max_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"{own}.max_batched_tokens must be >= max_num_seqs ({self.max_num_seqs}), as vLLM requires,"
                f" got {self.max_batched_tokens}"
            )
        if self.max_num_seqs < 1:
            raise ValueError(f"{own}.max_num_seqs must be >= 1, got {self.max_num_seqs}")
        if self.kv_cache_tokens is not None and self.kv_cache_tokens < 1:
            raise ValueError(f"{own}.kv_cache_tokens must be >= 1 or unset, got {self.kv_cache_tokens}")


@dataclass(frozen=True, slots=True)
class SloTarget:
    """The targets a request must meet to count as good, and the share of good requests to plan for.

    TTFT target = ttft_s + prompt tokens / ttft_tokens_per_s (None: absolute), as llm-d's token-aware
    and DistServe-style SLOs; TPOT is the mean time per output token after the first.
    """

    ttft_s: float = 2.0  # MLPerf llama-70b server scenario
    tpot_s: float | None = 0.2  # MLPerf llama-70b server scenario; None: no TPOT target
    ttft_tokens_per_s: float | None = None
    attainment: float = 0.99  # the capacity model's TTFT tail: at most 1 % of requests wait too long

    def __post_init__(self) -> None:
        _check_range("capacity.slo", "ttft_s", self.ttft_s, 1e-3, 3600.0, "in [0.001, 3600] s")
        if self.tpot_s is not None:
            _check_range("capacity.slo", "tpot_s", self.tpot_s, 1e-4, 60.0, "unset or in [0.0001, 60] s")
        _check_range("capacity.slo", "attainment", self.attainment, 0.5, 0.9999, "in [0.5, 0.9999]")
        if self.ttft_tokens_per_s is not None:
            _check_range(
                "capacity.slo", "ttft_tokens_per_s", self.ttft_tokens_per_s, 1.0, 1e9, "unset or in [1, 1e9]"
            )


@dataclass(frozen=True, slots=True)
class DemandSpec:
    """Where demand is read and how it is forecast (docs/policy.md, "Defaults and why").

    The metric names are the adapter's (adapter/presets.py): engine counters as rates, summed over
    the target's pods, and the in-flight gauge whose growth is the demand the counters miss.
    """

    request_rate_metric: str = "infscale_request_rate"
    prompt_token_rate_metric: str = "infscale_prompt_token_rate"
    generation_token_rate_metric: str = "infscale_generation_token_rate"
    inflight_metric: str = "infscale_inflight"
    queue_metric: str | None = "infscale_queue_size"  # waiting requests: saturation, for learning
    # Σ prompt tokens² per second, from the engines' prompt-length histograms (the adapter's
    # prompt_token_square_rate): the lengths' spread (lengths.py). None (the default: a catalog
    # without it would warn every sync), or no reading: exponential lengths, TTFT tail cs² 1
    prompt_square_metric: str | None = None
    # Σ generated tokens² per second, from the engines' output-length histograms (the adapter's
    # output_token_square_rate): the outputs' spread, the context a running request holds
    # (capacity.py). None (the default), or no reading: outputs geometric around their mean (cv² 1)
    output_square_metric: str | None = None
    # Σ generated tokens per second of the requests finished, the same histograms' _sum (the
    # adapter's finished_output_token_rate): the mean the squares are read about, counted when a
    # request finishes as the squares are (the generation counter counts tokens as they are
    # decoded). Read only with output_square_metric: either missing, cv² 1
    output_sum_metric: str | None = None
    # the inference gateway's arrivals counter as a rate (the adapter's gateway preset): the count
    # the arrivals' dispersion is read from. None (the default: engines alone), or no reading: the
    # finishes + the in-flight growth, whose finishes come in clumps (docs/policy.md, "Defaults")
    arrival_rate_metric: str | None = None
    # the engines' KV cache usage, a 0-1 gauge (the adapter's kv_cache_usage: the mean over the pods,
    # or one item a pod): a tick at which it is at speedlearn.KV_FULL or above is no speed sample
    # (preempted requests are recomputed, work the token counters do not count). None (the
    # default), or no reading: every saturated tick is a sample
    kv_usage_metric: str | None = None
    # the engines' prefill-time histograms as bucket rates, one item per `le` bound (the adapter's
    # prefill_time_bucket_rate; vLLM's vllm:request_prefill_time_seconds): the holds one long
    # prompt's prefill puts on a replica, where their tail is fatter than the prompt lengths'
    # gamma says (prefilltail.py). None (the default), or no reading: the gamma's alone
    prefill_time_metric: str | None = None
    # the engines' output-length histograms as bucket rates, one item per `le` bound (the adapter's
    # output_length_bucket_rate; vLLM's vllm:request_generation_tokens): the decode steps of the
    # TPOT tail's requests, where the short answers are more than a geometric of the mean output
    # says (outputsteps.py). None (the default), or no reading: the geometric alone
    output_length_metric: str | None = None
    # the engines' TTFT histograms as bucket rates, one item per `le` bound (the adapter's
    # ttft_bucket_rate; vLLM's vllm:time_to_first_token_seconds): first tokens slow past what the
    # sizing allows or the hour usually sees, persistently, ask for a replica more (latefeedback.py).
    # None (the default), or no reading: the sizing alone
    ttft_metric: str | None = None
    alpha: float = 0.3  # level weight of a sample smoothing_period_s after the last (policy.md, Defaults)
    beta: float = 0.05  # trend weight, same gap: a trend must persist minutes to count
    smoothing_period_s: float = 15.0  # the HPA sync period
    damping_s: float = 120.0  # the trend's effect fades with this time constant (damped Holt)
    quantile: float = 0.98  # plan on this upper quantile of the forecast (docs/policy.md, "Defaults")
    prior_error: float = 0.3  # the error quantile assumed before errors were scored (band.upper)
    prior_weight: float = 8.0  # scored errors that weigh as much as the prior
    # the fewest requests' worth of counts the level averages (a 5 % Poisson noise, the mix's 400),
    # counted at the read's own noise: below alpha's window's worth, a longer window
    # (demand.level_alpha_at); 0: alpha's window at any rate
    level_requests: float = 400.0

    def __post_init__(self) -> None:
        own = "capacity.demand"
        if self.arrival_rate_metric == "":
            raise ValueError(f"{own}.arrival_rate_metric: a metric name, or None (not read)")
        if self.kv_usage_metric == "":
            raise ValueError(f"{own}.kv_usage_metric: a metric name, or None (not read)")
        if self.prefill_time_metric == "":
            raise ValueError(f"{own}.prefill_time_metric: a metric name, or None (not read)")
        if self.output_length_metric == "":
            raise ValueError(f"{own}.output_length_metric: a metric name, or None (not read)")
        if self.ttft_metric == "":
            raise ValueError(f"{own}.ttft_metric: a metric name, or None (not read)")
        _check_range(own, "alpha", self.alpha, 1e-3, 1.0, "in [0.001, 1]")
        _check_range(own, "beta", self.beta, 0.0, 1.0, "in [0, 1]")
        _check_range(own, "smoothing_period_s", self.smoothing_period_s, 1e-3, 1e6, "in [0.001, 1e6] s")
        _check_range(own, "damping_s", self.damping_s, 1.0, 1e7, "in [1, 1e7] s")
        _check_range(own, "quantile", self.quantile, 0.5, 0.999, "in [0.5, 0.999]")
        _check_range(own, "prior_error", self.prior_error, 0.0, 5.0, "in [0, 5]")
        _check_range(own, "prior_weight", self.prior_weight, 0.0, 1e6, "in [0, 1e6]")
        _check_range(own, "level_requests", self.level_requests, 0.0, 1e9, "in [0, 1e9]")


@dataclass(frozen=True, slots=True)
class CapacitySpec:
    """Demand x capacity sizing: set, the predictive stages size from demand (decide.py)."""

    profile: ReplicaProfile
    slo: SloTarget = field(default_factory=SloTarget)
    demand: DemandSpec = field(default_factory=DemandSpec)
    learn: bool = True  # refine the profile's speed from what saturated replicas achieve
    learn_prior_weight: float = 8.0  # saturated samples that weigh as much as the profile
    panic_threshold: float = 2.0  # demand this many times the forecast's upper band: panic (Knative's 200 %)
    panic_window_s: float = 60.0  # no scale-down this long after a panic (Knative's stable window)
    decision_period_s: float = DEFAULT_SYNC_PERIOD_S  # how often the caller decides: scale-up staggers by it
    # the sizing plans at these shares of the TPOT and TTFT targets (1: at the targets themselves;
    # the per-request TPOT tail and the per-replica TTFT tail are within +-1 replica of the replay
    # on stationary load, docs/policy.md "Defaults and why"); below 1 buys headroom on top
    plan_tpot_share: float = 1.0
    plan_ttft_share: float = 1.0
    router: Router = Router.RANDOM  # how requests reach the replicas (the TTFT tail's queues)

    def __post_init__(self) -> None:
        _check_range("capacity", "decision_period_s", self.decision_period_s, 0.1, 3600.0, "in [0.1, 3600] s")
        _check_range("capacity", "learn_prior_weight", self.learn_prior_weight, 0.0, 1e6, "in [0, 1e6]")
        _check_range("capacity", "panic_threshold", self.panic_threshold, 1.0, 1e3, "in [1, 1000]")
        _check_range("capacity", "panic_window_s", self.panic_window_s, 0.0, 1e5, "in [0, 1e5] s")
        _check_range("capacity", "plan_tpot_share", self.plan_tpot_share, 0.01, 1.0, "in [0.01, 1]")
        _check_range("capacity", "plan_ttft_share", self.plan_ttft_share, 0.01, 1.0, "in [0.01, 1]")

    @property
    def planning_slo(self) -> SloTarget:
        """The targets the sizing plans on: the SLO's, tightened by the planning shares."""
        return _planning_slo(self.slo, self.plan_tpot_share, self.plan_ttft_share)

    @property
    def metric_names(self) -> tuple[str, ...]:
        """Every metric the demand stage reads (the caller fetches them beside spec.metrics)."""
        d = self.demand
        names: tuple[str, ...] = (
            d.request_rate_metric,
            d.prompt_token_rate_metric,
            d.generation_token_rate_metric,
            d.inflight_metric,
        )
        if d.queue_metric is not None:
            names = (*names, d.queue_metric)
        if d.arrival_rate_metric is not None:
            names = (*names, d.arrival_rate_metric)
        if d.output_square_metric is not None:
            names = (*names, d.output_square_metric)
        if d.output_sum_metric is not None:
            names = (*names, d.output_sum_metric)
        if d.kv_usage_metric is not None:
            names = (*names, d.kv_usage_metric)
        if d.prefill_time_metric is not None:
            names = (*names, d.prefill_time_metric)
        if d.output_length_metric is not None:
            names = (*names, d.output_length_metric)
        if d.ttft_metric is not None:
            names = (*names, d.ttft_metric)
        return names if d.prompt_square_metric is None else (*names, d.prompt_square_metric)


@lru_cache(maxsize=64)
def _planning_slo(slo: SloTarget, tpot_share: float, ttft_share: float) -> SloTarget:
    return SloTarget(
        ttft_s=max(slo.ttft_s * ttft_share, 1e-3),
        tpot_s=None if slo.tpot_s is None else max(slo.tpot_s * tpot_share, 1e-4),
        ttft_tokens_per_s=None if slo.ttft_tokens_per_s is None else slo.ttft_tokens_per_s / ttft_share,
        attainment=slo.attainment,
    )
