"""TGI's /metrics as its Rust exporter writes them, apart from metrics.py's prometheus_client renderers."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from replay.emulate.batching import Gauges, StepKind
from replay.emulate.stats import EngineStats, Hist, Histogram

# TGI: router/src/server.rs, metrics-exporter-prometheus
_TGI_DURATION = tuple(0.00015 * 1.5**n for n in range(35))  # the router's duration matcher buckets


def tgi_buckets(context: int) -> Mapping[Hist, Sequence[float]]:
    linear = tuple(context / 100 * (i + 1) for i in range(100))  # 100 linear buckets up to the limit
    return {
        Hist.E2E: _TGI_DURATION,
        Hist.QUEUE: _TGI_DURATION,
        Hist.INFERENCE: _TGI_DURATION,
        Hist.MEAN_TPOT: _TGI_DURATION,
        Hist.PREFILL_BATCH_S: _TGI_DURATION,
        Hist.DECODE_BATCH_S: _TGI_DURATION,
        Hist.PROMPT_TOKENS: linear,
        Hist.GENERATION_TOKENS: linear,
        Hist.BATCH_NEXT_SIZE: tuple(float(2**i) for i in range(11)),
    }


def _num(value: float) -> str:
    """Rust's f64 Display: integral values without a fraction, others shortest round-trip."""
    if value == math.inf:
        return "+Inf"
    return str(int(value)) if value == int(value) else repr(value)


def _labels(pairs: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs.items()) + "}" if pairs else ""


class _TgiWriter:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, doc: str | None) -> None:
        if doc is not None:
            self.lines.append(f"# HELP {name} {doc}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        self.lines.append(f"{name}{_labels(labels or {})} {_num(value)}")

    def hist(self, name: str, h: Histogram, labels: Mapping[str, str] | None = None) -> None:
        base = dict(labels or {})
        for le, c in h.cumulative():
            self.sample(f"{name}_bucket", c, {**base, "le": _num(le)})
        self.sample(f"{name}_sum", h.total, base)
        self.sample(f"{name}_count", h.count, base)


def render_tgi(stats: EngineStats, gauges: Gauges, model: str) -> str:
    h = stats.hists
    w = _TgiWriter()
    for name, doc, value in (
        ("tgi_queue_size", "Current queue size", gauges.waiting),
        ("tgi_batch_current_size", "Current batch size", gauges.running),
        ("tgi_batch_current_max_tokens", "Maximum tokens for the current batch", gauges.kv_used_tokens),
    ):
        w.family(name, "gauge", doc)
        w.sample(name, value)
    w.family("tgi_batch_max_total_tokens", "gauge", None)  # TGI describes it nowhere: no HELP line
    w.sample("tgi_batch_max_total_tokens", gauges.kv_budget_tokens)
    w.family("tgi_request_count", "counter", "Total number of requests")
    w.sample("tgi_request_count", stats.requests_received + stats.requests_rejected)
    w.family("tgi_request_success", "counter", "Number of successful requests")
    w.sample("tgi_request_success", stats.requests_finished)
    w.family("tgi_request_failure", "counter", None)
    w.sample("tgi_request_failure", stats.requests_rejected, {"err": "validation"})
    w.sample("tgi_request_failure", stats.requests_aborted, {"err": "incomplete"})
    for suffix, doc in (
        ("count", "Inference calls per method"),
        ("success", "Number of successful inference calls per method"),
    ):
        w.family(f"tgi_batch_inference_{suffix}", "counter", doc)
        for method in StepKind:
            w.sample(f"tgi_batch_inference_{suffix}", stats.forward_passes[method], {"method": method.value})
    for name, doc, hist in (
        ("tgi_request_duration", "Request duration", Hist.E2E),
        ("tgi_request_queue_duration", "Time spent in the queue per request", Hist.QUEUE),
        ("tgi_request_inference_duration", "Request inference duration", Hist.INFERENCE),
        ("tgi_request_mean_time_per_token_duration", "Mean time per token per request", Hist.MEAN_TPOT),
        ("tgi_request_input_length", "Input token length per request", Hist.PROMPT_TOKENS),
        ("tgi_request_generated_tokens", "Generated tokens per request", Hist.GENERATION_TOKENS),
        ("tgi_batch_next_size", "Batch size distribution", Hist.BATCH_NEXT_SIZE),
    ):
        w.family(name, "histogram", doc)
        w.hist(name, h[hist])
    w.family("tgi_batch_inference_duration", "histogram", "Batch inference duration")
    w.hist("tgi_batch_inference_duration", h[Hist.PREFILL_BATCH_S], {"method": "prefill"})
    w.hist("tgi_batch_inference_duration", h[Hist.DECODE_BATCH_S], {"method": "decode"})
    return "\n".join(w.lines) + "\n"
