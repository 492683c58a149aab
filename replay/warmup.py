"""The warm-up prefix: W seconds of traffic played before the scored trace, so that every policy
enters it in its own steady state, its engines mid-flight, instead of at a heuristic warm start
on empty engines (docs/replay.md, "The warm start").

The prefix is the trace itself reflected in time: its first W seconds mirrored onto [-W, 0),
mirrored again every trace length if W is longer (the even extension, period 2T): the arrival
rate and the request mix are continuous at t = 0 and no traffic is invented. The loop plays the
prefixed trace shifted by +W (replay/simulate.py cuts its result back to the scored window).

W by default (default_warmup_s): max(MIN_WARMUP_S, 2 x S + D), S the scenario's start-up of one
replica on a cold cluster, D the HPA's scale-down window. A policy that starts too small asks
for replicas at once and has them one start-up later; the counters it read while engines filled
under-read, so a second round may be needed: two start-ups. A policy that starts too large
(the warm start sizes at a KV-full replica's batch) sheds its surplus only after its scale-down
window: D for the HPA. The floor is the slowest memory among the policies: three half-lives of
predictive's typical demand (demand.TYPICAL_HALF_LIFE_S: the start then weighs 1/8), which also
prices its rent-or-buy keeps; predictive sheds a warm start of 47 replicas on Azure conv x 10
(reference-70b) in ~1,000 s, so 2 x S + D = 628 s left it at 46 at t = 0 (docs/replay.md).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from autoscaler.policy import coldstart
from autoscaler.policy.demand import TYPICAL_HALF_LIFE_S
from replay.policies.params import PolicyParams
from replay.profiles import Scenario
from replay.trace import Trace

MIN_WARMUP_S = 3.0 * TYPICAL_HALF_LIFE_S  # 1,800 s
ALIGN_S = 60.0
HPA_DOWNSCALE_WINDOW_S = PolicyParams().downscale_window_s  # the HPA's default scale-down window


def default_warmup_s(scenario: Scenario, downscale_window_s: float = HPA_DOWNSCALE_WINDOW_S) -> float:
    """max(MIN_WARMUP_S, 2 x one replica's cold-cluster start-up + the scale-down window), rounded
    up to whole minutes: the 15 s syncs, 30 s polls and scrapes then fall on the same instants of
    the trace as without a warm-up (and the per-second needs stay aligned)."""
    startup = coldstart.lead_time_s(scenario.cold_start)
    return ALIGN_S * math.ceil(max(MIN_WARMUP_S, 2.0 * startup + downscale_window_s) / ALIGN_S)


def reflected_times(arrival_s: np.ndarray, warmup_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(times in [-W, 0), source request of each), in time order: the trace's arrivals reflected
    onto the warm-up. Segment k covers [-(k+1)T, -kT): even k mirrors (x = -kT - a, a in (0, T]),
    odd k repeats (x = -(k+1)T + a, a in [0, T)), so no instant is taken twice."""
    n = len(arrival_s)
    span = float(arrival_s[-1]) if n else 0.0
    if warmup_s <= 0 or span <= 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    index = np.arange(n, dtype=np.int64)
    times, sources = [], []
    k = 0
    while k * span < warmup_s:
        if k % 2 == 0:
            keep = arrival_s > 0
            x = -k * span - arrival_s[keep]
        else:
            keep = arrival_s < span
            x = -(k + 1) * span + arrival_s[keep]
        inside = x >= -warmup_s
        times.append(x[inside])
        sources.append(index[keep][inside])
        k += 1
    t = np.concatenate(times)
    src = np.concatenate(sources)
    order = np.argsort(t, kind="stable")
    return t[order], src[order]


def with_warmup(trace: Trace, warmup_s: float) -> Trace:
    """`trace` behind a reflected prefix of `warmup_s` seconds, the whole shifted by +warmup_s
    (the loop's clock starts at the prefix): requests of the prefix first, then the trace's own.
    warmup_s = 0: the trace itself."""
    if warmup_s <= 0:
        return trace
    x, src = reflected_times(trace.arrival_s, warmup_s)
    # within [0, W): a reflection of an arrival a hair after 0 must not land on the scored window
    prefix = np.clip(x + warmup_s, 0.0, np.nextafter(warmup_s, 0.0))
    index = np.concatenate((src, np.arange(len(trace), dtype=np.int64)))
    return Trace(
        trace.name,
        np.concatenate((prefix, trace.arrival_s + warmup_s)),
        trace.input_tokens[index],
        trace.output_tokens[index],
        None if trace.prefix is None else trace.prefix.take(index),
    )


# --- the setting, as the commands take it ---------------------------------------------------------


def add_warmup_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--warmup-s",
        default="auto",
        metavar="S|auto",
        help="seconds of the trace reflected and played before it, unscored, so every policy enters it in "
        "its own steady state (auto, the default: max(1800, 2 x the scenario's cold start + 300); "
        "0: the heuristic warm start on empty engines)",
    )


def parse_warmup(text: str) -> float | None:
    """--warmup-s as a number of seconds, None for auto (each scenario's default_warmup_s)."""
    if text.strip() == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--warmup-s: expected seconds or auto, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise ValueError(f"--warmup-s must be a finite number >= 0, got {text}")
    return value


def resolve_warmup(
    value: float | None, scenario: Scenario, downscale_window_s: float = HPA_DOWNSCALE_WINDOW_S
) -> float:
    """A warm-up setting (None: auto) for this scenario."""
    return default_warmup_s(scenario, downscale_window_s) if value is None else value
