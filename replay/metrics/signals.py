"""The metrics a replay policy can read, what one scrape of the cluster holds, and readings from values.

Each metric is served as the infscale adapter serves it (adapter/presets.py, adapter/catalog.py):
gauges and per-second rates of counters, one value per pod, combined across the deployment's pods.

| metric | what (as vLLM exposes it on each engine pod's /metrics) |
|---|---|
| infscale_inflight | num_requests_waiting + num_requests_running |
| infscale_queue_size | vllm:num_requests_waiting |
| infscale_batch_size | vllm:num_requests_running |
| infscale_kv_cache_usage | vllm:kv_cache_usage_perc (the mean over pods) |
| infscale_request_rate | rate of vllm:request_success_total |
| infscale_prompt_token_rate | rate of vllm:prompt_tokens_total |
| infscale_generation_token_rate | rate of vllm:generation_tokens_total |
| infscale_prompt_token_square_rate | rate of Σ prompt tokens², from vllm:request_prompt_tokens's buckets |
| infscale_output_token_square_rate | rate of Σ output tokens², vllm:request_generation_tokens's buckets |
| infscale_finished_output_token_rate | rate of Σ finished requests' output tokens, its _sum |
| infscale_prefill_time_bucket_rate | rate of each vllm:request_prefill_time_seconds_bucket, one per `le` |
| infscale_output_length_bucket_rate | rate of each vllm:request_generation_tokens_bucket, one per `le` |
| infscale_ttft_bucket_rate | rate of each vllm:time_to_first_token_seconds_bucket, one per `le` |
| infscale_arrival_rate | rate of requests reaching the router (the gateway's counter) |
| infscale_gateway_pending | requests held at the gateway while no replica is ready (the gateway's gauge) |

A bucketed metric (a histogram's buckets: the three *_bucket_rate) is a metric of several columns:
one item per bucket, in bound order, each with its `le` label, every item combined across pods as
a one-column metric's single item is; it cannot also be read per pod (one item per pod and bucket
would need a second label the reading does not carry). The prefill times and output lengths are
observed at a request's finish, the time to first token at the first token, as vLLM V1 does.

The output lengths are tokens a finished request generated (buckets 1, 2, 5, 10, 20, 50, ... as
vLLM's build_1_2_5_buckets, to 200,000); the times to first token are first token - the request's
arrival at its replica (buckets 0.001 ... 2560 s), which predictive's late stage reads
(autoscaler/policy/latefeedback.py).

The table's last two are the inference gateway's /metrics (e.g. the Gateway API Inference Extension's
inference_objective_request_total; Knative's activator and KEDA's HTTP interceptor hold requests
the same way), every other metric the engines'.

The engine counters count *processed* work: while a queue grows they lag the demand (arrivals ≈
processed rate + d(queue)/dt). Only the gateway's counter sees arrivals as they come.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from types import MappingProxyType
from typing import Final, Literal

import numpy as np
import numpy.typing as npt

from autoscaler.policy.observation import MetricReading

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def one_two_five(limit: int) -> tuple[float, ...]:
    """vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... up to `limit` (its max_model_len)."""
    out: list[float] = []
    exponent = 0
    while True:
        for m in (1, 2, 5):
            value = m * 10**exponent
            if value > limit:
                return tuple(out)
            out.append(float(value))
        exponent += 1


# the columns of a pod's row in a scrape
INFLIGHT, WAITING, RUNNING, KV_USAGE, REQUESTS, PROMPT_TOKENS, GENERATION_TOKENS, PROMPT_SQUARES = range(8)
OUTPUT_SQUARES, OUTPUT_SUMS = 8, 9
# vLLM's prefill-time histogram (vllm:request_prefill_time_seconds: first token - first scheduled)
# has these bucket bounds, then +Inf; a pod's row holds its cumulative buckets (le) from column
# PREFILL_TIME on, in bound order, +Inf last. Observed at a request's finish, as vLLM V1 does
# (loggers.py, for each of iteration_stats.finished_requests), by the replay's engines and the
# emulator
PREFILL_TIME_BOUNDS: Final = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
PREFILL_TIME_BUCKETS: Final = len(PREFILL_TIME_BOUNDS) + 1
PREFILL_TIME = 10
# vLLM's output-length histogram (vllm:request_generation_tokens: the tokens a request generated,
# observed at its finish) has build_1_2_5_buckets(max_model_len) bounds, then +Inf; a pod's row
# holds its cumulative buckets from column OUTPUT_LENGTH on, as the prefill times'. The emulator's
# max_model_len is the KV cache (replay/scheduler.py's context_limit): 440,000 tokens for the
# replay scenarios' 70B engine, 444,992 for the 8B's, the same bounds, 1 to 200,000. The kernel
# freezes one set: an engine of another context publishes these bounds still
OUTPUT_LENGTH_BOUNDS: Final = one_two_five(440_000)
OUTPUT_LENGTH_BUCKETS: Final = len(OUTPUT_LENGTH_BOUNDS) + 1
OUTPUT_LENGTH = PREFILL_TIME + PREFILL_TIME_BUCKETS
# vLLM's time-to-first-token histogram (vllm:time_to_first_token_seconds; loggers.py's
# histogram_time_to_first_token) has these bounds, then +Inf; a pod's row holds its cumulative
# buckets from column TTFT on, as the prefill times'. Observed at a request's first token, not at
# its finish: V1's IterationStats appends now - the request's arrival_time (when the engine's server
# took it in) to time_to_first_tokens_iter as it emits its first token (stats.py); the replay's
# engines time it from when the router sends the request to the replica
TTFT_BOUNDS: Final = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
TTFT_BUCKETS: Final = len(TTFT_BOUNDS) + 1
TTFT = OUTPUT_LENGTH + OUTPUT_LENGTH_BUCKETS
COLUMNS = TTFT + TTFT_BUCKETS
# and of the gateway's
ARRIVALS, PENDING = range(2)


class Combine(StrEnum):
    """How the pods' values combine into one item: the adapter catalog's aggregations
    (adapter/presets.py Combine; the replay does not import the adapter)."""

    SUM = "sum"
    MEAN = "mean"
    MAX = "max"


class Kind(Enum):
    GAUGE = "gauge"
    RATE = "rate"  # per-second rate of a counter


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    kind: Kind
    column: int  # of a pod's row, or of the gateway's (a bucketed metric's first)
    combine: Combine  # across pods, as the adapter's catalog aggregation
    gateway: bool = False  # the gateway's series, not the pods'
    # a bucketed metric: one column and one item per bucket from `column` on, each item's labels
    # (its `le`) in bound order; (): one column, one item without labels
    labels: tuple[Mapping[str, str], ...] = field(default=(), compare=False)
    # what a row or a table of rates is indexed with: `column`, or a bucketed metric's columns (a
    # slice: the values then come one row per bucket)
    columns: int | slice = field(init=False, compare=False)

    def __post_init__(self) -> None:
        columns = slice(self.column, self.column + len(self.labels)) if self.labels else self.column
        object.__setattr__(self, "columns", columns)


def le_label(bound: float) -> str:
    """A bucket bound as prometheus_client writes it in `le` (below 1e6: "0.3", "1.0", "+Inf")."""
    return "+Inf" if math.isinf(bound) else repr(float(bound))


def bucket_labels(bounds: tuple[float, ...]) -> tuple[Mapping[str, str], ...]:
    """The items' labels of a histogram's buckets: `le` of each bound, then +Inf."""
    return tuple(MappingProxyType({"le": le_label(b)}) for b in (*bounds, math.inf))


def bucket_rate(name: str, column: int, bounds: tuple[float, ...]) -> Metric:
    """A histogram's bucket rates: its cumulative buckets from `column` on, one per bound then
    +Inf, each the rate of a counter, summed over pods."""
    return Metric(name, Kind.RATE, column, Combine.SUM, labels=bucket_labels(bounds))


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("infscale_inflight", Kind.GAUGE, INFLIGHT, Combine.SUM),
        Metric("infscale_queue_size", Kind.GAUGE, WAITING, Combine.SUM),
        Metric("infscale_batch_size", Kind.GAUGE, RUNNING, Combine.SUM),
        Metric("infscale_kv_cache_usage", Kind.GAUGE, KV_USAGE, Combine.MEAN),
        Metric("infscale_request_rate", Kind.RATE, REQUESTS, Combine.SUM),
        Metric("infscale_prompt_token_rate", Kind.RATE, PROMPT_TOKENS, Combine.SUM),
        Metric("infscale_generation_token_rate", Kind.RATE, GENERATION_TOKENS, Combine.SUM),
        Metric("infscale_prompt_token_square_rate", Kind.RATE, PROMPT_SQUARES, Combine.SUM),
        Metric("infscale_output_token_square_rate", Kind.RATE, OUTPUT_SQUARES, Combine.SUM),
        Metric("infscale_finished_output_token_rate", Kind.RATE, OUTPUT_SUMS, Combine.SUM),
        bucket_rate("infscale_prefill_time_bucket_rate", PREFILL_TIME, PREFILL_TIME_BOUNDS),
        bucket_rate("infscale_output_length_bucket_rate", OUTPUT_LENGTH, OUTPUT_LENGTH_BOUNDS),
        bucket_rate("infscale_ttft_bucket_rate", TTFT, TTFT_BOUNDS),
        Metric("infscale_arrival_rate", Kind.RATE, ARRIVALS, Combine.SUM, gateway=True),
        Metric("infscale_gateway_pending", Kind.GAUGE, PENDING, Combine.SUM, gateway=True),
    )
}


PER_POD: Final = "pod"
# how a read combines the pods' values: None, the metric's own (the adapter's default catalog);
# a Combine; or PER_POD, one item per pod (a catalog whose labels include the pod)
Aggregation = Combine | Literal["pod"] | None


class UnknownMetricError(KeyError):
    pass


class AggregationError(ValueError):
    """A read asked for an aggregation the metric cannot be read with."""


def metric(name: str, aggregation: Aggregation = None) -> Metric:
    """The metric `name`, checked against the aggregation a read asks for."""
    try:
        m = METRICS[name]
    except KeyError:
        raise UnknownMetricError(f"no metric {name!r} in the replay (known: {', '.join(METRICS)})") from None
    _check_aggregation(m, aggregation)
    return m


def _check_aggregation(m: Metric, aggregation: Aggregation) -> None:
    if aggregation == PER_POD and m.labels:
        raise AggregationError(
            f"{m.name} is read one item per bucket (le): it cannot also be read per pod; "
            "read it combined (its own sum, or a Combine)"
        )


@dataclass(frozen=True, slots=True)
class ClusterScrape:
    """What a scrape at `t` can read: every serving pod's row, and the gateway's.

    `ready` pods take new requests; `draining` ones (terminating) finish theirs. Which of them a
    path scrapes is the path's: the adapter's discovery skips terminating pods, Prometheus scrapes
    every endpoint it discovers until the pod is gone.
    """

    t: float
    ready: I64
    draining: I64
    rows: F64  # (len(ready) + len(draining)) x COLUMNS: ready pods first, then draining
    gateway: tuple[float, float]  # requests that reached the gateway so far, and those held there now


def cluster_scrape(
    t: float, rows: F64, ready: I64, draining: I64, arrivals: int, pending: int
) -> ClusterScrape:
    """`rows`: the pods' rows in this module's columns (replay/engine.py's pod_rows), ready first."""
    return ClusterScrape(t, ready, draining, rows, (float(arrivals), float(pending)))


def reading(
    values: F64 | list[float],
    m: Metric,
    aggregation: Aggregation,
    age_s: float,
    window_s: float | None = None,
) -> MetricReading:
    """The items the External Metrics API would return for `m`: one combined item, or one per pod
    (see Aggregation), or for a bucketed metric one combined item per bucket with its labels;
    milli-units rounded up, as the HPA's Quantity.MilliValue, a rate with the `window` it was
    measured over (None for a gauge). `values`: the pods' values, a bucketed metric's one row per
    bucket (as indexed with m.columns). No value: a failed read (the adapter answers "no fresh
    data", never 0)."""
    combine = m.combine if aggregation is None or aggregation == PER_POD else Combine(aggregation)
    if m.labels:
        per_bucket = np.reshape(values, (len(m.labels), -1))
        if not per_bucket.shape[1]:
            return MetricReading.failed(f"no data for {m.name}")
        _check_aggregation(m, aggregation)
        items = np.asarray(_combined(per_bucket, combine)).tolist()
    elif not len(values):
        return MetricReading.failed(f"no data for {m.name}")
    elif aggregation == PER_POD:
        items = [float(v) for v in values]
    else:
        items = [float(_combined(values, combine))]
    window = window_s if m.kind is not Kind.GAUGE else None
    milli = tuple(math.ceil(v * 1000 - 1e-6) for v in items)
    return MetricReading(milli, age_s=age_s, window_s=window, labels=m.labels)


def _combined(values: F64 | list[float], combine: Combine) -> F64 | float:
    """The pods' values combined: along the last axis (one per bucket of a 2-D table). The ufuncs'
    reductions themselves: np.sum, np.mean and np.max's results, without their wrappers."""
    if combine is Combine.SUM:
        return np.add.reduce(values, axis=-1)  # type: ignore[no-any-return]
    if combine is Combine.MEAN:
        return np.add.reduce(values, axis=-1) / np.shape(values)[-1]  # type: ignore[no-any-return]
    return np.maximum.reduce(values, axis=-1)  # type: ignore[no-any-return]


def live_reading(scrape: ClusterScrape, name: str, aggregation: Aggregation = PER_POD) -> MetricReading:
    """A gauge read straight from the cluster now, one item per ready pod (Knative's autoscaler
    scrapes each ready pod's queue-proxy every second; its activator holds the pending requests,
    one item): no rates."""
    m = metric(name, aggregation)
    if m.kind is not Kind.GAUGE:
        return MetricReading.failed(f"{name} is a rate: it needs two scrapes, not a live read")
    if m.gateway:
        return reading([scrape.gateway[m.column]], m, aggregation, 0.0)
    return reading(scrape.rows[: len(scrape.ready), m.columns].T, m, aggregation, 0.0)
