"""Probe (session 22): a proxy for a reasoning trace, built from a shared one. Azure conv's arrivals
(one hour) with synthetic lengths: prompts lognormal of mean 2,200 tokens and cv² 7 (capped at
160,000), outputs gamma of shape 1 and mean 1,500, the shapes docs/policy.md gives the held-out
DeepSeek-R1 trace ("Traffic it was not tuned on"); nothing is read from that trace. It writes a CSV
(`--format csv`) and prints its lengths; `window` prints the prompts' mean and cv² over each
2-minute window instead, which is what a mix of a few hundred requests sees. A probe, not part of
the policy.

    PYTHONPATH=. .venv/bin/python probes/reason_proxy.py /tmp/reason_proxy_0.csv 0
    PYTHONPATH=. .venv/bin/python probes/reason_proxy.py /tmp/reason_proxy_0.csv 0 window
    infscale replay compare --trace /tmp/reason_proxy_0.csv --format csv --rate-scale 0.6 \\
      --scenario reference-70b --policies static-mean,hpa,keda,keda-cached,predictive,clairvoyant
"""

from __future__ import annotations

import os
import sys

import numpy as np

from replay.traces import load_trace

TRACES = os.environ.get("TRACES", "traces")  # the folder holding the traces (docs/traces.md)
PROMPT_MEAN, PROMPT_CV2, PROMPT_CAP = 2_200.0, 7.0, 160_000
OUTPUT_MEAN, OUTPUT_SHAPE = 1_500.0, 1.0
WINDOW_S = 120.0


def main(out: str, seed: int, window: bool) -> None:
    trace = load_trace(f"{TRACES}/azure_llm_2023_conv.csv", "azure")
    n = len(trace.arrival_s)
    rng = np.random.default_rng(seed)
    sigma2 = float(np.log1p(PROMPT_CV2))
    mu = float(np.log(PROMPT_MEAN)) - sigma2 / 2.0
    prompts = np.minimum(np.maximum(1, np.round(rng.lognormal(mu, np.sqrt(sigma2), n))), PROMPT_CAP)
    outputs = np.maximum(1, np.round(rng.gamma(OUTPUT_SHAPE, OUTPUT_MEAN / OUTPUT_SHAPE, n)))
    with open(out, "w") as f:
        f.write("timestamp,input_tokens,output_tokens\n")
        for a, x, y in zip(trace.arrival_s, prompts.astype(int), outputs.astype(int), strict=True):
            f.write(f"{a:.6f},{x},{y}\n")
    p = prompts.astype(float)
    print(f"{n} requests; prompts mean {p.mean():.0f}, cv² {p.var() / p.mean() ** 2:.2f}, "
          f"{100 * (p > 30_000).mean():.2f} % over 30,000; outputs mean {outputs.mean():.0f}")  # fmt: skip
    if window:
        for start in np.arange(0.0, float(trace.arrival_s[-1]), WINDOW_S):
            x = p[(trace.arrival_s >= start) & (trace.arrival_s < start + WINDOW_S)]
            if len(x) > 1:
                m, top = x.mean(), x.max()
                cv2 = x.var() / m**2
                print(f"{start:6.0f} s  {len(x):4d} prompts  mean {m:6.0f}  cv² {cv2:5.2f}  max {top:7.0f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0, sys.argv[3:4] == ["window"])
