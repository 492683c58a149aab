"""Engine profiles and replay scenarios as data: frozen values and the built-ins.

A scenario is everything the simulated cluster needs besides the trace and the policy: the engine
model of one replica (replay/engine.py), the cold-start path of a new replica (the policy core's
ColdStartSpec, simulated by replay/fleet.py), the SLO and how metrics reach the policy.

Built-ins: reference-70b (the seed's teaching numbers), fast-load-70b (streamed weights, a node
cache, published start-up phases), one-gpu-8b; `infscale replay scenarios` lists their numbers.
Scenario files (YAML/JSON) are read by replay/scenariofile.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from autoscaler.policy.coldstart import ColdStartInputError, check_spec
from autoscaler.policy.spec import ColdStartSpec, CompileCache
from replay.metrics.spec import DEFAULT_METRICS, MetricsSpec
from replay.slo import DEFAULT_SLO, SloSpec


class ProfileError(ValueError):
    """A scenario or engine profile field out of range; the message names the field and value."""


ENGINE_KINDS = ("vllm", "sglang", "tgi")


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """One replica's engine: its scheduler's limits and its step time (replay/scheduler.py is the
    exact model, replay/kernel/ the fast one; docs/replay.md has the sources of every number).

    Every step (one forward pass) runs up to `max_num_batched_tokens` tokens: one per decoding
    request and chunks of prompts (chunked prefill), for at most `max_num_seqs` requests whose KV
    (paged, `block_size` tokens a block) fits in `kv_budget_tokens`. A step takes

        step_base_s + prefill_token_s x prefill tokens + prefill_attention_s x attention pairs
                    + decode_request_s x decoding requests + decode_context_s x context tokens

    where a prompt chunk of c tokens after k already computed attends to k + 1 ... k + c tokens
    (c k + c (c + 1) / 2 pairs) and a decoding request reads its whole context (prompt + generated).
    `kind` is the scheduler: vllm (V1: decodes and prompt chunks share each step's budget) or
    sglang / tgi (prefill-first: a step runs either prompt chunks or the decodes, never both).
    """

    kind: str = "vllm"
    max_num_seqs: int = 1024  # vLLM's default on an H100
    max_num_batched_tokens: int = 8_192  # vLLM V1's default for online serving
    kv_budget_tokens: int = 440_000
    block_size: int = 16
    prefix_caching: bool = False  # reuse prompt blocks a replica has seen (the trace's prefix block ids)
    step_base_s: float = 0.0185
    prefill_token_s: float = 5.55e-5
    prefill_attention_s: float = 8.85e-9
    decode_request_s: float = 4.0e-5
    decode_context_s: float = 3.3e-8

    def __post_init__(self) -> None:
        _check(self.kind in ENGINE_KINDS, "engine.kind", self.kind, f"one of {', '.join(ENGINE_KINDS)}")
        for name in ("max_num_seqs", "max_num_batched_tokens", "block_size"):
            value = getattr(self, name)
            _check(value >= 1, f"engine.{name}", value, ">= 1")
        _check(
            self.max_num_batched_tokens >= self.max_num_seqs,
            "engine.max_num_batched_tokens",
            self.max_num_batched_tokens,
            f">= max_num_seqs ({self.max_num_seqs}), as vLLM requires",
        )
        _check(
            self.kv_budget_tokens >= self.block_size,
            "engine.kv_budget_tokens",
            self.kv_budget_tokens,
            f">= block_size ({self.block_size})",
        )
        _check(isinstance(self.prefix_caching, bool), "engine.prefix_caching", self.prefix_caching, "a bool")
        _check(
            math.isfinite(self.step_base_s) and self.step_base_s > 0,
            "engine.step_base_s",
            self.step_base_s,
            "a finite number > 0",
        )
        for name in ("prefill_token_s", "prefill_attention_s", "decode_request_s", "decode_context_s"):
            value = getattr(self, name)
            _check(math.isfinite(value) and value >= 0, f"engine.{name}", value, "a finite number >= 0")

    @property
    def kv_blocks(self) -> int:
        return self.kv_budget_tokens // self.block_size

    @property
    def mixed_batches(self) -> bool:
        """Decodes and prompt chunks in one step (vLLM), or prefill-first (SGLang, TGI)."""
        return self.kind == "vllm"

    def step_s(
        self, prefill_tokens: float, attention_pairs: float, decode_requests: float, context_tokens: float
    ) -> float:
        return (
            self.step_base_s
            + self.prefill_token_s * prefill_tokens
            + self.prefill_attention_s * attention_pairs
            + self.decode_request_s * decode_requests
            + self.decode_context_s * context_tokens
        )

    def prefill_alone_s(self, prompt_tokens: Any) -> Any:
        """Time to first token of prompts alone on an idle replica, in chunks of the step budget
        (works on NumPy arrays): every chunk is one step."""
        p = np.asarray(prompt_tokens, dtype=np.float64)
        steps = np.ceil(p / self.max_num_batched_tokens)
        return (
            steps * self.step_base_s + self.prefill_token_s * p + self.prefill_attention_s * p * (p + 1) / 2
        )

    def decode_step_s(self, running: float, context_tokens_each: float) -> float:
        """A decode-only step of `running` requests of `context_tokens_each` tokens of context."""
        return self.step_s(0, 0, running, running * context_tokens_each)

    def kv_bound_batch(self, tokens_each: float) -> int:
        """The most requests of `tokens_each` KV tokens a replica runs at once (KV or max_num_seqs)."""
        return max(1, min(self.max_num_seqs, int(self.kv_budget_tokens // max(tokens_each, 1.0))))


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    engine: EngineProfile
    cold_start: ColdStartSpec
    slo: SloSpec = DEFAULT_SLO  # replay/slo.py: MLPerf's llama2-70b server constraints
    metrics: MetricsSpec = DEFAULT_METRICS  # replay/metrics/spec.py: the adapter scraping every 5 s
    sync_period_s: float = 15.0  # --horizontal-pod-autoscaler-sync-period
    min_replicas: int = 1
    max_replicas: int = 64
    # ready at t = 0 on warm nodes; None: sized for the trace's first minute at the policy's target
    # (a static policy brings its own N)
    initial_replicas: int | None = None
    node_idle_remove_s: float = 600.0  # cluster-autoscaler's scale-down-unneeded-time

    def __post_init__(self) -> None:
        _check(bool(self.name), "name", self.name, "non-empty")
        for name in ("sync_period_s",):
            value = getattr(self, name)
            _check(math.isfinite(value) and value > 0, name, value, "a finite number > 0")
        value = self.node_idle_remove_s
        _check(math.isfinite(value) and value >= 0, "node_idle_remove_s", value, "a finite number >= 0")
        _check(self.min_replicas >= 1, "min_replicas", self.min_replicas, ">= 1")
        _check(self.max_replicas >= self.min_replicas, "max_replicas", self.max_replicas, ">= min_replicas")
        _check(
            self.initial_replicas is None or self.min_replicas <= self.initial_replicas <= self.max_replicas,
            "initial_replicas",
            self.initial_replicas,
            f"within [min_replicas, max_replicas] = [{self.min_replicas}, {self.max_replicas}]",
        )
        try:
            check_spec(self.cold_start)
        except ColdStartInputError as e:
            raise ProfileError(f"cold_start.{e}") from e


def _check(ok: bool, field: str, value: object, requirement: str) -> None:
    if not ok:
        raise ProfileError(f"{field} must be {requirement}, got {value!r}")


# Llama-3-70B in BF16, tensor-parallel on 4 H100 SXM (vLLM V1): docs/replay.md, "Engine profiles",
# derives each number from published measurements
LLAMA_70B_TP4_H100 = EngineProfile()
# Llama-3.1-8B in BF16 on one H100 SXM
LLAMA_8B_H100 = EngineProfile(
    kv_budget_tokens=445_000,
    step_base_s=0.0065,
    prefill_token_s=3.0e-5,
    prefill_attention_s=3.5e-9,
    decode_request_s=1.5e-5,
    decode_context_s=5.0e-8,
)


REFERENCE_70B = Scenario(
    name="reference-70b",
    description=(
        "teaching numbers near a 70B model in BF16 on 4 H100s: 140 GB of weights, 4 GPUs per replica, "
        "8-GPU nodes (90 s to provision), 30 s image pull, shared storage 10 GB/s, 30 s warm-up"
    ),
    engine=LLAMA_70B_TP4_H100,
    cold_start=ColdStartSpec(
        weights_gb=140.0,
        storage_gbps=10.0,
        per_loader_gbps=None,
        image_pull_s=30.0,
        warmup_s=30.0,
        node_provision_s=90.0,
        gpus_per_replica=4,
        gpus_per_node=8,
    ),
)


def _vllm_h100_startup(cold: ColdStartSpec) -> ColdStartSpec:
    """`cold` with vLLM V1's start-up once the weights are in, on an H100-class node, from published
    breakdowns (docs/coldstart.md, "Published numbers"): engine init (process start, imports,
    CUDA/NCCL init, KV profiling) 30 s; torch.compile + CUDA-graph capture 45 + 10 = 55 s on a
    compile-cache miss, 8 + 10 = 18 s on a hit; 5 s of warm-up to the readiness probe. The compile
    cache is a volume shared by the cluster (vLLM's torch_compile_cache), filled by the first compile."""
    return replace(
        cold,
        engine_init_s=30.0,
        compile_s=55.0,
        compile_cached_s=18.0,
        compile_cache=CompileCache.CLUSTER,
        warmup_s=5.0,
    )


FAST_LOAD_70B = Scenario(
    name="fast-load-70b",
    description=(
        "reference-70b's model, engine and nodes with a fast load path: weights streamed from object "
        "storage at 3.75 GB/s per replica (Run:ai-streamer class, 100 GB/s in all), a 26 GB/s node "
        "cache (NVMe + GPUDirect Storage) filled on first load, published vLLM start-up phases "
        "with a shared compile cache (55 s miss, 18 s hit)"
    ),
    engine=REFERENCE_70B.engine,
    cold_start=_vllm_h100_startup(
        replace(REFERENCE_70B.cold_start, storage_gbps=100.0, per_loader_gbps=3.75, local_cache_gbps=26.0)
    ),
)

ONE_GPU_8B = Scenario(
    name="one-gpu-8b",
    description=(
        "Llama-3.1-8B in BF16 on one H100: 16 GB of weights, 1 GPU per replica, 8-GPU nodes (90 s to "
        "provision), 30 s image pull, the seed's shared 10 GB/s storage, published vLLM start-up "
        "phases with a shared compile cache (55 s miss, 18 s hit)"
    ),
    engine=LLAMA_8B_H100,
    cold_start=_vllm_h100_startup(replace(REFERENCE_70B.cold_start, weights_gb=16.0, gpus_per_replica=1)),
    max_replicas=128,
)

SCENARIOS: Mapping[str, Scenario] = {s.name: s for s in (REFERENCE_70B, FAST_LOAD_70B, ONE_GPU_8B)}
