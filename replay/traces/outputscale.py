"""Trace → trace: every output length ×k (`--trace-option output_scale=K`, any format).

A reasoning model answers the same prompts with far longer generations (ServeGen's DeepSeek-R1
averages ~1,500 output tokens where the Azure 2023 conversation trace averages 211), so a request
stays in flight for minutes instead of seconds. Stretching a public trace's outputs keeps its real
arrivals (bursts, ramps) and its prompts, and makes that long-output traffic from files anyone can
share: `azure_llm_2023_conv.csv` with `output_scale=7.1` has a mean of ~1,500 output tokens.

Each length is rounded to the nearest integer and kept ≥ 1 (a request costs at least one step);
lengths are multiplied, not redrawn, so the shape of the distribution (its spread, its tail, the
rows that are long) is the trace's own. A scale that would carry a length past `MAX_TOKENS` is
refused rather than clipped: a clipped tail would no longer be the trace's tail.
"""

from __future__ import annotations

import math

import numpy as np

from replay.trace import Trace
from replay.traces.bounds import MAX_TOKENS
from replay.traces.errors import TraceError


def scale_output(trace: Trace, k: float) -> Trace:
    """The trace with every output length multiplied by k (rounded, at least 1)."""
    if not math.isfinite(k) or k <= 0:
        raise TraceError(f"output_scale: expected a number > 0, got {k!r}")
    if k == 1:
        return trace
    scaled = np.maximum(1, np.rint(trace.output_tokens * k)).astype(np.int64)
    if len(scaled) and int(scaled.max()) > MAX_TOKENS:
        longest = int(trace.output_tokens.max())
        raise TraceError(
            f"output_scale {k:g}: the longest output ({longest:,} tokens) would become "
            f"{int(scaled.max()):,}, more than {MAX_TOKENS:,}"
        )
    return Trace(
        name=f"{trace.name}-outx{k:g}",
        arrival_s=trace.arrival_s,
        input_tokens=trace.input_tokens,
        output_tokens=scaled,
        prefix=trace.prefix,
    )
