"""Probe (session 32): how bursty a trace's arrivals are, hour span by hour span, at the scales the
policy reads them (demand.dispersion: the index over the TTFT target from a tick's). Per span: the
arrivals' index of dispersion over 2 s, 15 s and 60 s counts (variance about their 10-minute moving
mean over the mean), and the rate over the 2 s around each request as the requests see it (its 50th,
90th and 98th percentiles). A probe, not part of the policy.

    PYTHONPATH=. .venv/bin/python probes/arrival_index.py TRACE FORMAT RATE_SCALE SEED H0-H1 [H0-H1 ...]

e.g. `traces/servegen_reason_deepseek-r1.tar.gz servegen 0.097 1 0-3 7-11 14-18` (the holdout at
seed 1, docs/policy.md "What is left": a tail held every moment).
"""

from __future__ import annotations

import sys

import numpy as np

from replay.traces import load_trace

SCALES_S = (2.0, 15.0, 60.0)
MOVING_S = 600.0  # the counts' mean is read over this (the typical demand's memory)


def main(argv: list[str]) -> None:
    path, fmt, scale, seed, *spans = argv
    trace = load_trace(path, fmt, rate_scale=float(scale), seed=int(seed))
    arrivals = np.sort(trace.arrival_s)
    for span in spans:
        h0, h1 = (float(h) for h in span.split("-"))
        start, end = h0 * 3600.0, h1 * 3600.0
        x = arrivals[(arrivals >= start) & (arrivals < end)]
        indices = []
        for tick in SCALES_S:
            counts = np.histogram(x, np.arange(start, end + tick, tick))[0].astype(float)
            k = int(MOVING_S / tick)
            moving = np.convolve(counts, np.ones(k) / k, mode="same")
            indices.append(((counts - moving) ** 2).mean() / counts.mean())
        seen = (np.searchsorted(x, x + 1.0) - np.searchsorted(x, x - 1.0)) / 2.0
        p50, p90, p98 = np.percentile(seen, [50, 90, 98])
        print(
            f"hours {span}: {len(x) / (end - start):.2f} req/s; index over "
            + ", ".join(f"{t:g} s {i:.2f}" for t, i in zip(SCALES_S, indices, strict=True))
            + f"; the rate over 2 s a request sees: p50 {p50:.1f}, p90 {p90:.1f}, p98 {p98:.1f}/s"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
