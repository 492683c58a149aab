"""How many replicas a trace needs per second, from the trace itself: the static fleet's size,
every policy's warm start, and the clairvoyant's plan read it."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from replay.profiles import Scenario
from replay.trace import Trace

MAX_PREFILL_SHARE = 0.7  # of a replica's GPU time; the rest decodes (prefill stops decoding)
PREFILL_WINDOW_S = 60  # prefill work is averaged over a minute: short bursts queue, they do not add replicas


def needed_replicas(trace: Trace, scenario: Scenario, target: float) -> npt.NDArray[np.int64]:
    """Per second, the replicas the trace needs: enough to keep `target` requests in flight per
    replica, and enough prefill capacity that prefill takes at most MAX_PREFILL_SHARE of each
    replica's time (long prompts saturate the prefill server long before the slots fill)."""
    out: npt.NDArray[np.int64] = np.ceil(need_load(trace, scenario, target) - 1e-9).astype(np.int64)
    return out


def need_load(trace: Trace, scenario: Scenario, target: float) -> npt.NDArray[np.float64]:
    """needed_replicas before rounding up: per second, the larger of concurrency / target and
    prefill load / MAX_PREFILL_SHARE, in replicas (the clairvoyant scales it)."""
    e = scenario.engine
    prefill_s = e.prefill_alone_s(trace.input_tokens)
    # decode at the batch the KV holds at the trace's mean context (a full, KV-bound replica)
    context = float(np.mean(trace.input_tokens + trace.output_tokens / 2)) if len(trace) else 1.0
    service = prefill_s + trace.output_tokens * e.decode_step_s(e.kv_bound_batch(context), context)
    horizon = math.ceil(trace.duration_s + float(service.max(initial=0.0))) + 2
    start = np.floor(trace.arrival_s).astype(np.int64)
    stop = np.floor(trace.arrival_s + service).astype(np.int64) + 1
    delta = np.bincount(start, minlength=horizon + 1) - np.bincount(stop, minlength=horizon + 1)
    concurrency = np.cumsum(delta)[:horizon]  # requests in flight at some point of each second
    work = np.bincount(start, weights=prefill_s, minlength=horizon)[:horizon]  # prefill seconds per second
    window = np.ones(PREFILL_WINDOW_S) / PREFILL_WINDOW_S
    half = PREFILL_WINDOW_S // 2  # centred moving average, as long as `work` even for short traces
    prefill_load = np.convolve(work, window, mode="full")[half : half + horizon]
    out: npt.NDArray[np.float64] = np.maximum(concurrency / target, prefill_load / MAX_PREFILL_SHARE)
    return out


def peak_replicas(trace: Trace, scenario: Scenario, target: float) -> int:
    need = needed_replicas(trace, scenario, target)
    return min(scenario.max_replicas, max(scenario.min_replicas, int(need.max(initial=0))))


def warm_start_replicas(trace: Trace, scenario: Scenario, target: float, first_s: float = 60.0) -> int:
    """Replicas for the trace's first minute at `target`: as if the autoscaler had been running."""
    if scenario.initial_replicas is not None:
        return scenario.initial_replicas
    # needed(τ) for τ < first_s reads only the arrivals before first_s + half the prefill window:
    # no need to size the whole trace (5 M requests for a day)
    upto = int(np.searchsorted(trace.arrival_s, first_s + PREFILL_WINDOW_S, side="left"))
    early = Trace(trace.name, trace.arrival_s[:upto], trace.input_tokens[:upto], trace.output_tokens[:upto])
    head = needed_replicas(early, scenario, target)[: int(first_s)]
    want = int(head.max()) if len(head) else scenario.min_replicas
    return min(scenario.max_replicas, max(scenario.min_replicas, want))
