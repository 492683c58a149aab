"""JetStream's /metrics as its prometheus_client collector exports them (metrics.py's flavor "jetstream").

Upstream, AI-Hypercomputer/JetStream (formerly google/JetStream; read at acd4f5a, 2026-01-05, the
repository's archival notice):
- jetstream/core/metrics/prometheus.py, `JetstreamMetricsCollector`: every name, type, HELP string,
  label name and bucket bound below, and the families' order (their order of definition);
- jetstream/engine/token_utils.py, `DEFAULT_PREFILL_BUCKETS`: the input-length histogram's buckets;
- jetstream/core/orchestrator.py: what each gauge is bound to and when each histogram is observed.

What the emulator's engine stands for here: its waiting requests are the prefill backlog (in
JetStream's interleaved mode the transfer and generate backlogs hold one request each at most,
orchestrator.py), its running requests the decode slots in use (`max_num_seqs` slots, one generate
engine, idx "0"; a JetStream request takes its slot after its prefill, the emulator's at its prefill
step). Times are the engine's own: admitted = prefill dequeue, first token = prefill's end.

Left out: `jetstream_model_load_time`, `jetstream_server_startup_latency` (set once at start; the
HTTP entrypoint, jetstream/entrypoints/http/api_server.py, never sets the latter) and
`lora_request_info` (the wall time of the last generate step, labelled with the LoRA adapters), which
the emulator does not model; as in the other prometheus_client renderers here, no `_created`
samples and no process or Python collectors. Upstream serves these on a listener of its own
(`--prometheus_port`, 9988 by default in the HTTP server; any path); the emulator on its API port,
at /metrics, from the start (upstream's families have no samples until the engine is loaded).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping, Sequence

from prometheus_client.core import Metric

from replay.emulate import promclient as pc
from replay.emulate.batching import Gauges
from replay.emulate.stats import EngineStats, Hist

# prometheus.py: `os.getenv("HOSTNAME", shortuuid.uuid())`, once per process (a class attribute);
# a random hex id stands for shortuuid's 22 characters
_ID = os.environ.get("HOSTNAME", uuid.uuid4().hex[:22])

# prometheus.py's bucket lists
_ENQUEUED_S = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)  # queue, wait
_INPUT_TOKENS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)  # DEFAULT_PREFILL_BUCKETS
_OUTPUT_TOKENS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000,
                  200000, 500000, 1000000, 2000000)  # fmt: skip
_TTFT_S = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
_TPOT_S = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
_PREFILL_TOKEN_S = (0.00001, 0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                    0.05, 0.1)  # fmt: skip
_REQUEST_S = (1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)

# prometheus.py: a model name becomes the `model_name` label with "-" as "_", and is left out
# when empty or still no valid label value by this pattern
_LABEL_VALUE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


def jetstream_buckets(context: int) -> Mapping[Hist, Sequence[float]]:
    """Each histogram with the time orchestrator.py observes it at (the emulator's times)."""
    return {
        # jetstream_queue_duration: the waits in the prefill, transfer and generate queues, observed
        # as the request takes its decode slot, after its prefill: the emulator's first token
        Hist.QUEUE: _ENQUEUED_S,
        # jetstream_wait_time_per_request: the request's whole time less its prefill and generate
        # times, at its finish (the emulator has no gap between prefill and slot: its queue wait)
        Hist.WAIT: _ENQUEUED_S,
        # jetstream_request_input_length: the prompt's true length, at the prefill's end
        Hist.PROMPT_TOKENS_AT_FIRST: _INPUT_TOKENS,
        # jetstream_request_output_length: the slot's generated length, at the finish
        Hist.GENERATION_TOKENS: _OUTPUT_TOKENS,
        # jetstream_time_to_first_token: first token returned - prefill dequeue (not the arrival)
        Hist.PREFILL_AT_FIRST: _TTFT_S,
        # jetstream_time_per_prefill_token: (prefill's end - prefill dequeue) / true length
        Hist.PREFILL_PER_TOKEN: _PREFILL_TOKEN_S,
        # jetstream_time_per_output_token: (complete - prefill's end) / generated length, at the finish
        Hist.DECODE_PER_TOKEN: _TPOT_S,
        # jetstream_time_per_request: complete - prefill's end (not the arrival), at the finish
        Hist.DECODE: _REQUEST_S,
    }


def model_name_label(model: str) -> str | None:
    """The `model_name` label JetStream gives the model it is launched with, or None for none."""
    sanitized = model.replace("-", "_")
    return sanitized if sanitized and _LABEL_VALUE.match(sanitized) else None


def render_jetstream(stats: EngineStats, gauges: Gauges, model: str) -> str:
    # JetStream names the model only when its launcher passes one (MetricsServerConfig.model_name;
    # its HTTP entrypoint and MaxText's server pass none): the emulator always passes its own
    labels = {"id": _ID}
    name = model_name_label(model)
    if name is not None:
        labels["model_name"] = name
    engine = {**labels, "idx": "0"}  # one generate engine
    h = stats.hists
    # orchestrator.py: 1 - free slots / max_concurrent_decodes, a fraction despite its name
    slots_used = gauges.running / stats.slots if stats.slots else 0.0
    families: list[Metric] = [
        pc.gauge("jetstream_prefill_backlog_size", "Size of prefill queue", labels, gauges.waiting),
        # orchestrator.py binds the transfer and generate backlog gauges to
        # functools.partial(float, backlog.qsize()): the size when the driver started, 0, for good
        pc.gauge("jetstream_transfer_backlog_size", "Size of transfer queue", engine, 0),
        pc.gauge("jetstream_generate_backlog_size", "Size of generate queue", engine, 0),
        pc.histogram(
            "jetstream_queue_duration",
            "The total time each request spends enqueued in seconds",
            labels,
            h[Hist.QUEUE],
        ),
        pc.gauge(
            "jetstream_slots_used_percentage",
            "The percentage of decode slots currently being used",
            engine,
            slots_used,
        ),
        pc.histogram(
            "jetstream_request_input_length",
            "Number of input tokens per request",
            labels,
            h[Hist.PROMPT_TOKENS_AT_FIRST],
        ),
        pc.histogram(
            "jetstream_request_output_length",
            "Number of output tokens per request",
            labels,
            h[Hist.GENERATION_TOKENS],
        ),
        pc.counter(
            "jetstream_request_success_count",
            "Number of requests successfully completed",
            labels,
            stats.requests_finished,
        ),
        pc.histogram(
            "jetstream_time_to_first_token",
            "Time to first token per request in seconds",
            labels,
            h[Hist.PREFILL_AT_FIRST],
        ),
        pc.histogram(
            "jetstream_time_per_output_token",
            "Average time per output token per request in seconds",
            labels,
            h[Hist.DECODE_PER_TOKEN],
        ),
        pc.histogram(
            "jetstream_time_per_prefill_token",
            "Prefill time per token per request in seconds",
            labels,
            h[Hist.PREFILL_PER_TOKEN],
        ),
        pc.histogram(
            "jetstream_time_per_request", "End to end request latency in seconds", labels, h[Hist.DECODE]
        ),
        pc.histogram(
            "jetstream_wait_time_per_request",
            "Time each request is not being prefilled or decoded",
            labels,
            h[Hist.WAIT],
        ),
        # the prefill, transfer and generate backlogs together
        pc.gauge(
            "num_requests_waiting",
            "Requests count waiting to be processed for inference.",
            labels,
            gauges.waiting,
        ),
        # orchestrator.py: (slots - free slots) * 100 / slots, a percentage of the decode slots
        # (not of the KV cache, and 0-100 where the slots' gauge is 0-1)
        pc.gauge(
            "kv_cache_utilization_perc",
            "kv-cache utilization by the requests under processing.",
            labels,
            slots_used * 100,
        ),
    ]
    return pc.exposition(families)
