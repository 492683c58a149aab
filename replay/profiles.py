"""Engine profiles and replay scenarios as data: frozen values, built-ins, and a YAML/JSON loader.

A scenario is everything the simulated cluster needs besides the trace and the policy: the engine
model of one replica (replay/engine.py), the cold-start path of a new replica (the policy core's
ColdStartSpec, simulated by replay/fleet.py), the SLO and how metrics reach the policy.

Built-ins: reference-70b (the seed's teaching numbers), fast-load-70b (streamed weights, a node
cache, published start-up phases), one-gpu-8b; `infscale replay scenarios` lists their numbers.
A user file holds the same fields (units in the names); anything left out keeps the built-in
value of the scenario named by `base` (default `reference-70b`):

    base: fast-load-70b
    name: my-gated-70b
    cold_start: {max_concurrent_loads: 2, compile_cache: node}   # every ColdStartSpec field
    engine: {max_num_seqs: 256, prefix_caching: true}   # every EngineProfile field
    slo: {ttft_s: 1.0, tpot_s: 0.1}      # or a preset name: slo: mlperf-interactive
    metrics: {path: prometheus, prometheus: {scrape_interval_s: 30}}

Fields of earlier files still load where they moved (`_MOVED`): `slo_ttft_s: X` as
`slo: {ttft_s: X}` (the other SLO fields keep the base's: add `tpot_s: null` for the old TTFT-only
verdict), `scrape_interval_s` and `metric_delay_s` as `metrics.direct.scrape_interval_s` and
`metrics.direct.delay_s`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from autoscaler.policy.coldstart import ColdStartInputError, check_spec
from autoscaler.policy.spec import ColdStartSpec, CompileCache
from replay.metrics.spec import DEFAULT_METRICS, MetricsError, MetricsSpec
from replay.slo import DEFAULT_SLO, SLO_PRESETS, SloError, SloSpec, preset


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


def get_scenario(name_or_path: str) -> Scenario:
    """A built-in scenario by name, or a YAML/JSON file describing one."""
    if name_or_path in SCENARIOS:
        return SCENARIOS[name_or_path]
    path = Path(name_or_path)
    if not path.is_file():
        raise ProfileError(
            f"scenario {name_or_path!r} is neither a built-in ({', '.join(SCENARIOS)}) nor a file"
        )
    return load_scenario(path)


def load_scenario(path: Path) -> Scenario:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ProfileError(f"{path}: not UTF-8 text: {e}") from e
    try:
        doc = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise ProfileError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {e}") from e
    if not isinstance(doc, dict):
        raise ProfileError(f"{path}: expected a mapping at the top level, got {type(doc).__name__}")
    try:
        return scenario_from_mapping(doc)
    except ProfileError as e:
        raise ProfileError(f"{path}: {e}") from e


def scenario_from_mapping(doc: Mapping[str, Any]) -> Scenario:
    base_name = doc.get("base", REFERENCE_70B.name)
    if not isinstance(base_name, str) or base_name not in SCENARIOS:
        raise ProfileError(f"base must be one of {', '.join(SCENARIOS)}, got {base_name!r}")
    base = SCENARIOS[base_name]
    top = {f.name: f for f in fields(Scenario)}
    changes: dict[str, Any] = {}
    doc = _migrated(doc)
    for key, value in doc.items():
        if key == "base":
            continue
        if key == "engine":
            changes[key] = _sub(EngineProfile, base.engine, value, "engine")
        elif key == "cold_start":
            changes[key] = _sub(ColdStartSpec, base.cold_start, value, "cold_start")
        elif key == "slo":
            changes[key] = _slo(base.slo, value)
        elif key == "metrics":
            try:
                changes[key] = _sub(MetricsSpec, base.metrics, value, "metrics")
            except MetricsError as e:
                raise ProfileError(str(e)) from e
        elif key in top:
            changes[key] = _typed(value, top[key].type, key)
        else:
            raise ProfileError(f"unknown field {key!r} (known: base, {', '.join(top)})")
    if "name" not in changes:
        changes["name"] = f"{base.name}-custom"
    return replace(base, **changes)


# fields of earlier scenario files -> where they live now
_MOVED = {
    "slo_ttft_s": ("slo", "ttft_s"),
    "scrape_interval_s": ("metrics", "direct", "scrape_interval_s"),
    "metric_delay_s": ("metrics", "direct", "delay_s"),
}


def _migrated(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Earlier files keep loading: each moved field is read as its new place (docs/replay.md)."""
    out = {k: v for k, v in doc.items() if k not in _MOVED}
    for old, (section, *path) in _MOVED.items():
        if old not in doc:
            continue
        if section in doc:
            raise ProfileError(f"give {section}.{'.'.join(path)}, not both {section} and the older {old}")
        node = out.setdefault(section, {})
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = doc[old]
    return out


def _slo(base: SloSpec, value: object) -> SloSpec:
    """`slo: mlperf-interactive`, or a mapping of SloSpec fields, optionally on a `preset`."""
    try:
        if isinstance(value, str):
            return preset(value)
        if not isinstance(value, dict):
            raise ProfileError(
                f"slo must be a preset name ({', '.join(SLO_PRESETS)}) or a mapping, got {value!r}"
            )
        if "preset" in value:
            name = value["preset"]
            if not isinstance(name, str):
                raise ProfileError(f"slo.preset must be a string, got {name!r}")
            base, value = preset(name), {k: v for k, v in value.items() if k != "preset"}
        spec: SloSpec = _sub(SloSpec, base, value, "slo")
        return spec
    except SloError as e:
        raise ProfileError(str(e)) from e


def _sub(cls: Any, base: Any, value: object, prefix: str) -> Any:
    if not isinstance(value, dict):
        raise ProfileError(f"{prefix} must be a mapping, got {value!r}")
    known = {f.name: f for f in fields(cls)}
    changes: dict[str, Any] = {}
    for key, item in value.items():
        if key not in known:
            raise ProfileError(f"unknown field {prefix}.{key} (known: {', '.join(known)})")
        current = getattr(base, key)
        if is_dataclass(current):  # a nested section, e.g. metrics.prometheus
            changes[key] = _sub(type(current), current, item, f"{prefix}.{key}")
        else:
            changes[key] = _typed(item, known[key].type, f"{prefix}.{key}")
    return replace(base, **changes)


def _typed(value: object, annotation: object, field: str) -> object:
    """Accept ints where floats are expected; refuse strings and bools where numbers are expected."""
    kind = str(annotation)
    if value is None and "None" in kind:
        return None
    if kind.startswith("int"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProfileError(f"{field} must be an integer, got {value!r}")
        return value
    if kind.startswith("bool"):
        if not isinstance(value, bool):
            raise ProfileError(f"{field} must be true or false, got {value!r}")
        return value
    if kind.startswith("float"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ProfileError(f"{field} must be a number, got {value!r}")
        return float(value)
    if kind.startswith("str"):
        if not isinstance(value, str):
            raise ProfileError(f"{field} must be a string, got {value!r}")
        return value
    return value
