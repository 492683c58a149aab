"""Latency SLOs: per-request targets on time to first token (TTFT) and time per output token (TPOT).

A request is *good* when it finishes, its TTFT is within the TTFT target and its TPOT within the
TPOT target. replay/report.py turns the per-request verdicts into `slo_attainment` (the share of
good requests), `ttft_attainment`, `tpot_attainment` and goodput.

- TTFT = first token - arrival (gateway wait, queue and prefill included).
- TTFT target = ttft_s, or, length-aware, ttft_s + input_tokens / ttft_tokens_per_s: a fixed
  allowance plus the prompt's own prefill at a reference rate. Per-request (token-aware) TTFT targets
  are how llm-d's router carries SLOs (the `x-llm-d-slo-ttft-ms` request header), and llm-d's
  workload-variant autoscaler takes the prompt-proportional prefill out of its TTFT SLO for the same
  reason; DistServe (Zhong et al., OSDI 2024) scales its targets with an "SLO scale" factor, and
  SLOs-Serve (arXiv 2504.08784) states prefill SLOs as a bounded slowdown over the request's own
  prefill time. A linear base + tokens / rate is the simplest form of both.
- TPOT = (finished - first token) / (output tokens - 1), as vLLM's `bench serve`, MLPerf's loadgen and
  llm-d's router compute it. A 1-token output has no TPOT: it is NaN in the per-request column, left
  out of the TPOT percentiles, and meets any TPOT target (vLLM's goodput feeds it as 0).
- A request that never finishes (dropped) misses both targets.

Presets (`SLO_PRESETS`) are MLPerf Inference's LLM server-scenario constraints (mlcommons/inference,
loadgen/mlperf.conf). MLPerf constrains the *99th percentile* of TTFT and of TPOT; our headline is
the share of requests that meet both targets, a per-request reading of the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
BOOL = npt.NDArray[np.bool_]


class SloError(ValueError):
    """An SLO field out of range or an unknown preset; the message names the field and value."""


@dataclass(frozen=True, slots=True)
class SloSpec:
    ttft_s: float = 2.0  # TTFT target, or its fixed part when length-aware
    ttft_tokens_per_s: float | None = None  # set: length-aware, + input_tokens / this rate
    tpot_s: float | None = 0.2  # TPOT target; None: no TPOT target (TTFT alone decides)

    def __post_init__(self) -> None:
        _check(math.isfinite(self.ttft_s) and self.ttft_s > 0, "slo.ttft_s", self.ttft_s)
        rate = self.ttft_tokens_per_s
        _check(rate is None or (math.isfinite(rate) and rate > 0), "slo.ttft_tokens_per_s", rate)
        tpot = self.tpot_s
        _check(tpot is None or (math.isfinite(tpot) and tpot > 0), "slo.tpot_s", tpot)

    def ttft_target_s(self, input_tokens: npt.NDArray[np.int64]) -> F64 | float:
        """Each request's TTFT target (one float when it does not depend on the prompt)."""
        if self.ttft_tokens_per_s is None:
            return self.ttft_s
        out: F64 = self.ttft_s + input_tokens / self.ttft_tokens_per_s
        return out


def _check(ok: bool, field: str, value: object) -> None:
    if not ok:
        raise SloError(f"{field} must be a finite number > 0, got {value!r}")


# mlcommons/inference loadgen/mlperf.conf: llama2-70b.Server.ttft_latency = 2000, tpot_latency = 200
# (ms; the same for llama3_1-8b's TTFT, mixtral-8x7b, deepseek-r1's TTFT), and
# llama2-70b-interactive.Server.ttft_latency = 450, tpot_latency = 40 — both constrain the p99.
SLO_PRESETS: Mapping[str, SloSpec] = {
    "mlperf-server": SloSpec(ttft_s=2.0, tpot_s=0.2),
    "mlperf-interactive": SloSpec(ttft_s=0.45, tpot_s=0.04),
}
DEFAULT_SLO = SLO_PRESETS["mlperf-server"]


def preset(name: str) -> SloSpec:
    try:
        return SLO_PRESETS[name]
    except KeyError:
        raise SloError(f"unknown SLO preset {name!r} (known: {', '.join(SLO_PRESETS)})") from None


@dataclass(frozen=True, slots=True)
class Verdicts:
    """Per request, in trace order."""

    ttft_s: F64  # NaN: no first token
    tpot_s: F64  # NaN: not finished, or a 1-token output (no TPOT)
    ttft_met: BOOL
    tpot_met: BOOL
    good: BOOL  # both met (a TPOT verdict needs the finish)


def judge(
    slo: SloSpec,
    arrival_s: F64,
    first_token_s: F64,
    finished_s: F64,
    input_tokens: npt.NDArray[np.int64],
    output_tokens: npt.NDArray[np.int64],
) -> Verdicts:
    """Every request against `slo` (NaN times: the event never happened, a miss)."""
    finished = np.isfinite(finished_s)
    ttft = first_token_s - arrival_s
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(output_tokens > 1, (finished_s - first_token_s) / (output_tokens - 1), np.nan)
    ttft_met = ttft <= slo.ttft_target_s(input_tokens)  # NaN compares False: a miss
    if slo.tpot_s is None:
        tpot_met = finished.copy()
    else:
        tpot_met = finished & ((output_tokens <= 1) | (tpot <= slo.tpot_s))
    return Verdicts(ttft, tpot, ttft_met, tpot_met, ttft_met & tpot_met)
