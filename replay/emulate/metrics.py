"""The emulator's /metrics: what vLLM, TGI, SGLang and JetStream expose, with their exact names, types
and labels.

Sits beside replay/emulate/batching.py: `EngineStats` (replay/emulate/stats.py) observes the engine loop and
keeps the counters and histograms every engine derives its metrics from; one renderer per engine
turns them, with the current gauges, into that engine's exposition. Names, types, labels and bucket
boundaries follow ../shared/engine_metrics.md (each engine's metrics module).

vLLM and SGLang export with prometheus_client, so they render through it (promclient.py: floats
with `.0`, `_total` on counters, `le="1.0"`). TGI exports from Rust (metrics-exporter-prometheus):
plain numbers, counters without `_total`, some families with a TYPE line and no HELP line; it has its
own small writer (tgimetrics.py). JetStream exports with prometheus_client too: jetstreammetrics.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from replay.emulate import promclient as pc
from replay.emulate.batching import Gauges
from replay.emulate.jetstreammetrics import jetstream_buckets, render_jetstream
from replay.emulate.stats import EngineStats, Hist
from replay.emulate.tgimetrics import render_tgi, tgi_buckets
from replay.metrics.signals import one_two_five  # vLLM's build_1_2_5_buckets, shared with the replay

Renderer = Callable[[EngineStats, Gauges, str], str]


@dataclass(frozen=True, slots=True)
class MetricsFlavor:
    """One engine's /metrics: its buckets and its writer."""

    buckets: Callable[[int], Mapping[Hist, Sequence[float]]]  # from the context length (KV budget)
    render: Renderer
    content_type: str = "text/plain; version=0.0.4; charset=utf-8"


# --- vLLM (vllm/v1/metrics/loggers.py) -------------------------------------------------------------

_VLLM_TTFT = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
_VLLM_ITL = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
)  # fmt: skip
_VLLM_REQUEST = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
_VLLM_STEP_TOKENS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def _vllm_buckets(context: int) -> Mapping[Hist, Sequence[float]]:
    return {
        Hist.TTFT: _VLLM_TTFT,
        Hist.ITL: _VLLM_ITL,
        Hist.E2E: _VLLM_REQUEST,
        Hist.QUEUE: _VLLM_REQUEST,
        Hist.PREFILL: _VLLM_REQUEST,
        Hist.DECODE: _VLLM_REQUEST,
        Hist.INFERENCE: _VLLM_REQUEST,
        Hist.PROMPT_TOKENS: one_two_five(context),
        Hist.GENERATION_TOKENS: one_two_five(context),
        Hist.STEP_TOKENS: _VLLM_STEP_TOKENS,
    }


def render_vllm(stats: EngineStats, gauges: Gauges, model: str) -> str:
    labels = {"model_name": model, "engine": "0"}
    h = stats.hists
    success = CounterMetricFamily(
        "vllm:request_success",
        "Count of successfully processed requests.",
        labels=[*labels, "finished_reason"],
    )
    # no EOS in the emulator: every finished request stopped at max_tokens
    for reason, value in (
        ("stop", 0),
        ("length", stats.requests_finished),
        ("abort", stats.requests_aborted),
    ):
        success.add_metric([*labels.values(), reason], float(value))
    cache_info = GaugeMetricFamily(
        "vllm:cache_config_info",
        "Information of the LLMEngine CacheConfig",
        labels=["block_size", "num_gpu_blocks", "enable_prefix_caching"],
    )
    cache_info.add_metric(["16", str(gauges.kv_budget_tokens // 16), "False"], 1.0)
    families: list[Metric] = [
        pc.gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            labels,
            gauges.running,
        ),
        pc.gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels, gauges.waiting
        ),
        pc.gauge(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            labels,
            gauges.kv_used_tokens / gauges.kv_budget_tokens,
        ),
        pc.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", labels, 0),
        pc.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels, stats.prompt_tokens),
        pc.counter(
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            labels,
            stats.generation_tokens,
        ),
        success,
        pc.histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", labels, h[Hist.PROMPT_TOKENS]
        ),
        pc.histogram(
            "vllm:request_generation_tokens",
            "Number of generation tokens processed.",
            labels,
            h[Hist.GENERATION_TOKENS],
        ),
        pc.histogram(
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            labels,
            h[Hist.STEP_TOKENS],
        ),
        pc.histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            labels,
            h[Hist.TTFT],
        ),
        pc.histogram(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            labels,
            h[Hist.ITL],
        ),
        pc.histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            labels,
            h[Hist.E2E],
        ),
        pc.histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            labels,
            h[Hist.QUEUE],
        ),
        pc.histogram(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            labels,
            h[Hist.INFERENCE],
        ),
        pc.histogram(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            labels,
            h[Hist.PREFILL],
        ),
        pc.histogram(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            labels,
            h[Hist.DECODE],
        ),
        cache_info,
    ]
    return pc.exposition(families)


# --- SGLang (python/sglang/srt/metrics/collector.py) -----------------------------------------------

_SGLANG_TTFT = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
                200.0, 400.0)  # fmt: skip
_SGLANG_ITL = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08,
               0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)  # fmt: skip
_SGLANG_E2E = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
               200.0, 400.0, 600.0, 1200.0, 1800.0, 2400.0)  # fmt: skip
_SGLANG_QUEUE = (0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
                 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500,
                 3000)  # fmt: skip


def _sglang_buckets(context: int) -> Mapping[Hist, Sequence[float]]:
    return {Hist.TTFT: _SGLANG_TTFT, Hist.ITL: _SGLANG_ITL, Hist.E2E: _SGLANG_E2E, Hist.QUEUE: _SGLANG_QUEUE}


def render_sglang(stats: EngineStats, gauges: Gauges, model: str) -> str:
    labels = {"model_name": model, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0"}
    h = stats.hists
    families: list[Metric] = [
        pc.gauge("sglang:num_running_reqs", "The number of running requests.", labels, gauges.running),
        pc.gauge("sglang:num_used_tokens", "The number of used tokens.", labels, gauges.kv_used_tokens),
        pc.gauge(
            "sglang:token_usage", "The token usage.", labels, gauges.kv_used_tokens / gauges.kv_budget_tokens
        ),
        pc.gauge(
            "sglang:gen_throughput",
            "The generation throughput (token/s).",
            labels,
            stats.gen_throughput if gauges.running else 0.0,
        ),
        pc.gauge(
            "sglang:num_queue_reqs", "The number of requests in the waiting queue.", labels, gauges.waiting
        ),
        pc.gauge(
            "sglang:num_grammar_queue_reqs", "The number of requests in the grammar waiting queue.", labels, 0
        ),
        pc.gauge("sglang:num_retracted_reqs", "The number of retracted requests.", labels, 0),
        pc.gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", labels, 0.0),
        pc.counter(
            "sglang:prompt_tokens", "Number of prefill tokens processed.", labels, stats.prompt_tokens
        ),
        pc.counter(
            "sglang:generation_tokens",
            "Number of generation tokens processed.",
            labels,
            stats.generation_tokens,
        ),
        pc.counter("sglang:cached_tokens", "Number of cached prompt tokens.", labels, 0),
        pc.counter("sglang:num_requests", "Number of requests processed.", labels, stats.requests_finished),
        pc.counter(
            "sglang:num_aborted_requests", "Number of requests aborted.", labels, stats.requests_aborted
        ),
        pc.histogram(
            "sglang:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            labels,
            h[Hist.TTFT],
        ),
        pc.histogram(
            "sglang:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            labels,
            h[Hist.ITL],
        ),
        pc.histogram(
            "sglang:e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            labels,
            h[Hist.E2E],
        ),
        pc.histogram(
            "sglang:queue_time_seconds", "Histogram of queueing time in seconds.", labels, h[Hist.QUEUE]
        ),
    ]
    return pc.exposition(families)


FLAVORS: dict[str, MetricsFlavor] = {
    "vllm": MetricsFlavor(_vllm_buckets, render_vllm),
    "tgi": MetricsFlavor(tgi_buckets, render_tgi, content_type="text/plain; charset=utf-8"),
    "sglang": MetricsFlavor(_sglang_buckets, render_sglang),
    "jetstream": MetricsFlavor(jetstream_buckets, render_jetstream),
}


def new_stats(engine: str, context_tokens: int, slots: int = 0) -> EngineStats:
    """`slots`: the engine's max_num_seqs, for the engines that report slot occupancy (JetStream)."""
    # vLLM V1 observes the queue time when a request finishes; TGI (queue.rs, next_batch), SGLang
    # (the scheduler, as a request joins a prefill batch) and JetStream (orchestrator.py, as a
    # request takes its decode slot after its prefill) when it is scheduled
    return EngineStats(FLAVORS[engine].buckets(context_tokens), queue_at_finish=engine == "vllm", slots=slots)
