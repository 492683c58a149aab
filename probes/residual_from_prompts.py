"""Probe (session 42): the light-load TTFT tail's residual (lengths.residual_share, P(R > slack) of
the prefill a request finds in progress) read from each case's own prompts instead of a gamma of
the mix's mean and cv²: the case's whole trace (200,000 prompts at most), scaled to the mix's mean
at each sizing, as an oracle of the engines' prompt-length buckets. Runs `infscale` with the
arguments given, in this process and the league's forked workers; a probe, not part of the policy
(docs/policy-history.md, "A saturated tick read by the prompts waiting against one step's budget").

    PYTHONPATH=. .venv/bin/python probes/residual_from_prompts.py replay league --trace … \\
        --policies predictive …

e.g. on branch s42's tree (d10328e) with the league's and the holdouts' commands, seeds 0–9.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from autoscaler.policy import lengths
from replay.league import runner

_prompts: list[tuple[Any, float]] = []  # the case's prompts, sorted, and their mean
_case, _gamma = runner.run_case, lengths.residual_share


def run_case(trace: Any, case: Any, setup: Any) -> dict[str, Any]:
    x = np.asarray(trace.input_tokens, float)
    if len(x) > 200_000:
        x = np.random.default_rng(0).choice(x, 200_000, replace=False)
    _prompts[:] = [(np.sort(x), float(x.mean()))]
    lengths._residual_cache.clear()  # keyed on the mix alone: another case's shape must not answer
    return _case(trace, case, setup)


def residual_share(wait_s: float, p: float, alpha: float, beta: float, cv2: float) -> float:
    if not _prompts or wait_s <= 0.0 or p <= 0.0:
        return _gamma(wait_s, p, alpha, beta, cv2)
    key = tuple(round(math.log(max(v, 1e-30)) * 256) for v in (wait_s, p, alpha, beta))
    got = lengths._residual_cache.get(key)
    if got is None:
        xs, mean = _prompts[0]
        x = xs * (p / mean)
        s = alpha * x + beta * x * x  # a prompt's prefill seconds, as the gamma's form has them
        total = float(s.mean())
        got = min(1.0, float(np.maximum(s - wait_s, 0.0).mean()) / total) if total > 0.0 else 0.0
        lengths._residual_cache[key] = got
    return got


if __name__ == "__main__":
    runner.run_case = run_case  # type: ignore[assignment]
    lengths.residual_share = residual_share  # type: ignore[assignment]
    from infscale.cli import main

    sys.argv = ["infscale", *sys.argv[1:]]
    main()
