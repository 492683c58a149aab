"""Engine presets: which exposed series make up each normalized signal, as data.

Pipeline position: a source fetches an engine's Prometheus text (adapter/sources/scrape.py) and
adapter/exposition.py turns it into `Samples`; presetread.gauge_value / counter_total read one pod's
signal from them with a preset's `Rule`. The Prometheus source (adapter/sources/prometheus.py) turns
the same rules into PromQL, so both sources compute the same thing.

Normalized signals:
- `queue_size`: requests waiting (count); `batch_size`: requests running (count);
- `inflight`: waiting + running, derived for every engine that has both (what the replay's
  policies scale on, so its sweep prints an HPA that reads a served metric);
- `kv_cache_usage`: KV-cache saturation as a 0–1 fraction;
- `request_rate`, `prompt_token_rate`, `generation_token_rate`: per-second rates of counters;
- `prompt_token_square_rate`: Σ prompt tokens² per second, from the prompt-length histogram's
  buckets (adapter/histogram.py): with the two rates above, the prompt lengths' spread;
- `output_token_square_rate`: Σ generated tokens² per second, from the output-length histogram's
  buckets likewise: the output lengths' spread (the context a running request holds);
- `finished_output_token_rate`: Σ generated tokens per second of the requests finished, the
  output-length histogram's `_sum`: the mean the squares are read about, counted at a request's
  finish as they are (vLLM's generation counter counts tokens as they are decoded);
- `prefill_time_bucket_rate`: per-second rates of the per-request prefill-time histogram's
  cumulative buckets, one item per `le` bound as the engine spells it (adapter/buckets.py): how
  often a prefill ends within each bound, `+Inf` every prefill; the far tail is how often one long
  prompt holds a replica past the TTFT target. vLLM only: TGI times prefill per batch, not per
  request, and SGLang, Triton, TensorRT-LLM, JetStream and llama.cpp have no prefill-time histogram;
- `output_length_bucket_rate`: the same per bound over the per-request output-length histogram
  (generated tokens, observed at a request's finish): how often a request ends within each length,
  the outputs' distribution beyond the mean and square. vLLM, TGI and JetStream; Triton and
  llama.cpp have none, SGLang's is opt-in and not read, TensorRT-LLM's `nv_llm_output_token_len`
  is not known to count per request (docs/adapter-sources.md);
- `ttft_bucket_rate`: the same per bound over the per-request time-to-first-token histogram (the
  first token - the request's arrival at the server, observed at the first token): the share of
  requests past a TTFT target, as the engines saw it. vLLM and SGLang; TGI has none, JetStream's
  starts at the prefill's dequeue, not the arrival, Triton's and TensorRT-LLM's are opt-in and in
  milliseconds (docs/adapter-sources.md);
- `slot_usage`: JetStream's decode-slot occupancy (a 0–1 fraction; JetStream has no running count).
- `arrival_rate`: requests/s reaching an inference gateway, from its request counter (a gateway's
  pods, not the engines': the demand stage's `arrivalRateMetric`, docs/policy.md).

A new engine is one `EnginePreset(...)` entry in `PRESETS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class Signal(StrEnum):
    QUEUE_SIZE = "queue_size"
    BATCH_SIZE = "batch_size"
    INFLIGHT = "inflight"
    KV_CACHE_USAGE = "kv_cache_usage"
    REQUEST_RATE = "request_rate"
    PROMPT_TOKEN_RATE = "prompt_token_rate"
    GENERATION_TOKEN_RATE = "generation_token_rate"
    PROMPT_TOKEN_SQUARE_RATE = "prompt_token_square_rate"
    OUTPUT_TOKEN_SQUARE_RATE = "output_token_square_rate"
    FINISHED_OUTPUT_TOKEN_RATE = "finished_output_token_rate"
    PREFILL_TIME_BUCKET_RATE = "prefill_time_bucket_rate"
    OUTPUT_LENGTH_BUCKET_RATE = "output_length_bucket_rate"
    TTFT_BUCKET_RATE = "ttft_bucket_rate"
    SLOT_USAGE = "slot_usage"
    ARRIVAL_RATE = "arrival_rate"


# --- what a valid reading of each signal is ------------------------------------------------------

# A pod's value past this is not a reading: 10,000 pods of one label group at this much each still
# sum within the HPA's range (wire.QUANTITY_MAX_ABS, what MilliValue() holds in int64).
MAX_POD_VALUE = 9_223_372_036_854_775 // 10_000
_FRACTIONS = frozenset({Signal.KV_CACHE_USAGE, Signal.SLOT_USAGE})


def value_problem(signal: Signal | None, value: float) -> str | None:
    """Why `value` is no valid reading of `signal` for one pod, as a telemetry reason (None if it
    is one): counts and rates are finite and >= 0, fractions within [0, 1]. An explicit PromQL
    query (signal None) has no known domain: finite and within range only."""
    if value != value or value in (math.inf, -math.inf):
        return "not_finite"
    if abs(value) > MAX_POD_VALUE:
        return "out_of_range"
    if signal is None:
        return None
    if value < 0:
        return "negative"
    if signal in _FRACTIONS and value > 1:
        return "above_one"
    return None


class Combine(StrEnum):
    """How values combine: the series of one pod (per data-parallel engine, rank, model) here, the
    pods of one label group in the catalog (its `Aggregation`)."""

    SUM = "sum"
    MEAN = "mean"
    MAX = "max"


class Kind(StrEnum):
    GAUGE = "gauge"  # the value as exposed
    RATIO = "ratio"  # numerator ÷ denominator, both gauges
    RATE = "rate"  # per-second increase of a counter between two scrapes
    # per-second increase of Σ x² over a histogram's observations, from its buckets (histogram.py)
    SQUARE_RATE = "square_rate"
    # per-second increase of each cumulative `_bucket` series of a histogram: one value per bound
    BUCKET_RATE = "bucket_rate"


# The label that tells a BUCKET_RATE signal's values of one pod apart: its histogram bound.
LE = "le"


@dataclass(frozen=True, slots=True)
class Series:
    """Samples named `name` whose labels include `match` (e.g. TRT-LLM's `request_type="waiting"`)."""

    name: str
    match: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Term:
    """One addend of a signal: the first alternative the engine exposes (older metric generations
    come later in the tuple)."""

    alternatives: tuple[Series, ...]


@dataclass(frozen=True, slots=True)
class Rule:
    """How to compute one signal of one pod.

    GAUGE and RATE: the sum of `terms`, each the `combine` of its samples. RATIO: terms[0] ÷ terms[1],
    each summed over the pod's series first. BUCKET_RATE: one term, a histogram's `_bucket` series,
    summed per bound over the pod's series.
    """

    kind: Kind
    terms: tuple[Term, ...]
    combine: Combine = Combine.SUM


@dataclass(frozen=True, slots=True)
class EnginePreset:
    name: str
    rules: Mapping[Signal, Rule]
    model_label: str | None = None  # the exposed label naming the served model, if any

    def rule(self, signal: Signal) -> Rule:
        try:
            return self.rules[signal]
        except KeyError:
            have = ", ".join(sorted(self.rules))
            raise KeyError(f"engine {self.name!r} has no signal {signal.value!r} (it has: {have})") from None


def _s(name: str, **match: str) -> Series:
    return Series(name, match)


def gauge(*alternatives: Series, combine: Combine = Combine.SUM) -> Rule:
    return Rule(Kind.GAUGE, (Term(alternatives),), combine)


def gauge_sum(*terms: Series) -> Rule:
    """Several distinct series added up (e.g. JetStream's prefill and generate backlogs)."""
    return Rule(Kind.GAUGE, tuple(Term((t,)) for t in terms))


def ratio(numerator: Series, denominator: Series) -> Rule:
    return Rule(Kind.RATIO, (Term((numerator,)), Term((denominator,))))


def rate(*alternatives: Series) -> Rule:
    return Rule(Kind.RATE, (Term(alternatives),))


def square_rate(name: str) -> Rule:
    """Σ x² per second of the histogram named `name`: its `_bucket` series, then its `_sum`."""
    return Rule(Kind.SQUARE_RATE, (Term((_s(f"{name}_bucket"),)), Term((_s(f"{name}_sum"),))))


def bucket_rate(name: str) -> Rule:
    """Each cumulative bucket of the histogram named `name` as a rate: its `_bucket` series."""
    return Rule(Kind.BUCKET_RATE, (Term((_s(f"{name}_bucket"),)),))


def item_labels(rule: Rule) -> tuple[str, ...]:
    """Labels beside the pod's that a signal's items are served under: a BUCKET_RATE signal is one
    item per bound (`le`), the others one item per pod group."""
    return (LE,) if rule.kind is Kind.BUCKET_RATE else ()


def _with_inflight(preset: EnginePreset) -> EnginePreset:
    """Add `inflight` = the queue's terms + the batch's terms, when both are plain summed gauges."""
    queue, batch = preset.rules.get(Signal.QUEUE_SIZE), preset.rules.get(Signal.BATCH_SIZE)
    plain = (Kind.GAUGE, Combine.SUM)
    if (
        queue is None
        or batch is None
        or (queue.kind, queue.combine) != plain
        or (batch.kind, batch.combine) != plain
    ):
        return preset
    rules = {**preset.rules, Signal.INFLIGHT: Rule(Kind.GAUGE, queue.terms + batch.terms)}
    return EnginePreset(preset.name, rules, preset.model_label)


# Sources: ../shared/engine_metrics.md (each engine's metrics module). Within a pod, queues and
# batches of data-parallel engines / ranks add up; saturation fractions average.
PRESETS: dict[str, EnginePreset] = {
    p.name: _with_inflight(p)
    for p in (
        EnginePreset(
            "vllm",
            {
                Signal.QUEUE_SIZE: gauge(_s("vllm:num_requests_waiting")),
                Signal.BATCH_SIZE: gauge(_s("vllm:num_requests_running")),
                # renamed in v0.9; the old name is gone from v0.11
                Signal.KV_CACHE_USAGE: gauge(
                    _s("vllm:kv_cache_usage_perc"), _s("vllm:gpu_cache_usage_perc"), combine=Combine.MEAN
                ),
                Signal.REQUEST_RATE: rate(_s("vllm:request_success_total")),
                Signal.PROMPT_TOKEN_RATE: rate(_s("vllm:prompt_tokens_total")),
                Signal.GENERATION_TOKEN_RATE: rate(_s("vllm:generation_tokens_total")),
                Signal.PROMPT_TOKEN_SQUARE_RATE: square_rate("vllm:request_prompt_tokens"),
                Signal.OUTPUT_TOKEN_SQUARE_RATE: square_rate("vllm:request_generation_tokens"),
                Signal.FINISHED_OUTPUT_TOKEN_RATE: rate(_s("vllm:request_generation_tokens_sum")),
                # V1: first token - first scheduled, observed as the request finishes (loggers.py)
                Signal.PREFILL_TIME_BUCKET_RATE: bucket_rate("vllm:request_prefill_time_seconds"),
                # build_1_2_5_buckets up to the max model length, as the square rate reads them
                Signal.OUTPUT_LENGTH_BUCKET_RATE: bucket_rate("vllm:request_generation_tokens"),
                # V1: observed at the first token, from the request's arrival at the server (stats.py)
                Signal.TTFT_BUCKET_RATE: bucket_rate("vllm:time_to_first_token_seconds"),
            },
            model_label="model_name",
        ),
        EnginePreset(
            "tgi",
            {
                Signal.QUEUE_SIZE: gauge(_s("tgi_queue_size")),
                Signal.BATCH_SIZE: gauge(_s("tgi_batch_current_size")),
                Signal.KV_CACHE_USAGE: ratio(
                    _s("tgi_batch_current_max_tokens"), _s("tgi_batch_max_total_tokens")
                ),
                Signal.REQUEST_RATE: rate(_s("tgi_request_success")),  # TGI counters have no _total
                Signal.PROMPT_TOKEN_RATE: rate(_s("tgi_request_input_length_sum")),
                Signal.GENERATION_TOKEN_RATE: rate(_s("tgi_request_generated_tokens_sum")),
                Signal.PROMPT_TOKEN_SQUARE_RATE: square_rate("tgi_request_input_length"),
                Signal.OUTPUT_TOKEN_SQUARE_RATE: square_rate("tgi_request_generated_tokens"),
                Signal.FINISHED_OUTPUT_TOKEN_RATE: rate(_s("tgi_request_generated_tokens_sum")),
                # 100 linear buckets up to max_total_tokens: bounds such as "40.96", as Rust prints them
                Signal.OUTPUT_LENGTH_BUCKET_RATE: bucket_rate("tgi_request_generated_tokens"),
            },
        ),
        EnginePreset(
            "sglang",
            {
                Signal.QUEUE_SIZE: gauge(_s("sglang:num_queue_reqs")),
                Signal.BATCH_SIZE: gauge(_s("sglang:num_running_reqs")),
                Signal.KV_CACHE_USAGE: gauge(_s("sglang:token_usage"), combine=Combine.MEAN),
                Signal.REQUEST_RATE: rate(_s("sglang:num_requests_total")),
                Signal.PROMPT_TOKEN_RATE: rate(_s("sglang:prompt_tokens_total")),
                Signal.GENERATION_TOKEN_RATE: rate(_s("sglang:generation_tokens_total")),
                # the tokenizer manager's: first token - the request's creation there
                Signal.TTFT_BUCKET_RATE: bucket_rate("sglang:time_to_first_token_seconds"),
            },
            model_label="model_name",
        ),
        EnginePreset(
            "triton",
            {
                Signal.QUEUE_SIZE: gauge(_s("nv_inference_pending_request_count")),
                Signal.REQUEST_RATE: rate(_s("nv_inference_request_success")),
            },
            model_label="model",
        ),
        EnginePreset(
            "tensorrt-llm",
            {
                Signal.QUEUE_SIZE: gauge(_s("nv_trt_llm_request_metrics", request_type="waiting")),
                Signal.BATCH_SIZE: gauge(_s("nv_trt_llm_request_metrics", request_type="active")),
                Signal.KV_CACHE_USAGE: gauge(
                    _s("nv_trt_llm_kv_cache_block_metrics", kv_cache_block_type="fraction"),
                    combine=Combine.MEAN,
                ),
                Signal.REQUEST_RATE: rate(_s("nv_inference_request_success")),
                Signal.PROMPT_TOKEN_RATE: rate(
                    _s("nv_llm_input_token_len_sum", response_metric_type="total_input_tokens")
                ),
                Signal.GENERATION_TOKEN_RATE: rate(
                    _s("nv_llm_output_token_len_sum", response_metric_type="total_output_tokens")
                ),
            },
            model_label="model",
        ),
        EnginePreset(
            "jetstream",
            {
                Signal.QUEUE_SIZE: gauge_sum(
                    _s("jetstream_prefill_backlog_size"), _s("jetstream_generate_backlog_size")
                ),
                Signal.SLOT_USAGE: gauge(_s("jetstream_slots_used_percentage"), combine=Combine.MEAN),
                # no kv_cache_usage: its kv_cache_utilization_perc is the decode slots in use x 100 / the
                # slots (orchestrator.py's _get_kv_cache_utilization), not the KV cache: slot_usage above
                Signal.REQUEST_RATE: rate(_s("jetstream_request_success_count_total")),
                Signal.PROMPT_TOKEN_RATE: rate(_s("jetstream_request_input_length_sum")),
                Signal.GENERATION_TOKEN_RATE: rate(_s("jetstream_request_output_length_sum")),
                Signal.PROMPT_TOKEN_SQUARE_RATE: square_rate("jetstream_request_input_length"),
                Signal.OUTPUT_TOKEN_SQUARE_RATE: square_rate("jetstream_request_output_length"),
                Signal.FINISHED_OUTPUT_TOKEN_RATE: rate(_s("jetstream_request_output_length_sum")),
                Signal.OUTPUT_LENGTH_BUCKET_RATE: bucket_rate("jetstream_request_output_length"),
            },
            model_label="model_name",
        ),
        # Not an engine: the Gateway API Inference Extension's endpoint picker (:9090/metrics) counts
        # a request as it routes it (inference_model_request_total before v1.0), per its guide
        # gateway-api-inference-extension.sigs.k8s.io/guides/metrics-and-observability/
        EnginePreset(
            "gateway-api-inference-extension",
            {
                Signal.ARRIVAL_RATE: rate(
                    _s("inference_objective_request_total"), _s("inference_model_request_total")
                ),
            },
            model_label="model_name",
        ),
        EnginePreset(
            "llama.cpp",
            {
                Signal.QUEUE_SIZE: gauge(_s("llamacpp:requests_deferred")),
                Signal.BATCH_SIZE: gauge(_s("llamacpp:requests_processing")),
                Signal.KV_CACHE_USAGE: gauge(_s("llamacpp:kv_cache_usage_ratio")),  # older builds only
                Signal.PROMPT_TOKEN_RATE: rate(_s("llamacpp:prompt_tokens_total")),
                Signal.GENERATION_TOKEN_RATE: rate(_s("llamacpp:tokens_predicted_total")),
            },
        ),
    )
}


def get_preset(name: str) -> EnginePreset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; known engines: {', '.join(sorted(PRESETS))}") from None
