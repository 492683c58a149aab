"""Probe (session 45): the per-request TPOT tail (tpottail._miss) with the outputs' real short share
in place of the geometric around their mean, as vLLM's request_generation_tokens buckets (1, 2, 5,
10, 20, 50, ...) would give it: an oracle of that histogram, each case's whole trace spread
evenly within the buckets (docs/policy-history.md, session 45).

Two uses:

    PYTHONPATH=. .venv/bin/python probes/output_shape_oracle.py tail SCALE X [X ...]
        the share over the TPOT target one reference-70b replica has at X req/s on ServeGen m-large's
        league window (the trace's mean prompt, output and prompt cv²), geometric against the shape;
    EMP=1 PYTHONPATH=. .venv/bin/python probes/output_shape_oracle.py replay league ...
        the infscale command with the shape installed in place of the geometric (EMP=0: unchanged;
        MAXG=1: the higher of the two at each rate; every case's caches cleared at its start).
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any

import numba
import numpy as np

from autoscaler.policy import burstprice, latecurve, lengths, tailsearch, tpottail
from replay.league import runner
from replay.policies import tailkernel

BOUNDS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)
TRACE = "../shared/traces/servegen_language_m-large.tar.gz"
_shape: list[Any] = [np.zeros(0), np.zeros(0)]  # decode steps D = o - 1 >= 1 and P(D = d)
_scope = tailkernel.compiled_rate().py_func.__globals__
_beyond, _prefill_rate, _geometric = _scope["_beyond"], _scope["prefill_rate"], _scope["_miss"]


@numba.njit(cache=False)  # type: ignore[misc]
def _miss_shaped(
    base, a, d, w, has_budget, budget, prefill_first, seqs, tpot_s, tail, p, o, two, unit, x, dn, dm
):  # type: ignore[no-untyped-def]
    """tpottail._miss with P(D = dn[i]) = dm[i] in place of the geometric's masses."""
    rho = x * w
    if rho >= 1.0:
        return 1.0
    step = base / (1.0 - rho)
    batch = min(x * o * step, seqs)
    m = (tpot_s - base - d * batch) / a
    if m <= 0.0:
        return 1.0
    if has_budget and m >= (budget if prefill_first else budget - batch):
        return 0.0
    u = x * p / _prefill_rate(x, o, base, w, a, d, has_budget, budget, prefill_first)
    if u >= 1.0:
        return 1.0
    missed = 0.0
    for i in range(dn.shape[0]):
        share = _beyond(dn[i] * m / (p * unit), x * (dn[i] - 1.0) * step / unit, u, two)
        missed += dm[i] * share
        if share < 1e-9:
            break
    return missed


def miss(*args: Any) -> float:
    """The shape's share; with MAXG=1 the geometric's where that is higher (the geometric a floor)."""
    shaped = float(_miss_shaped(*args, _shape[0], _shape[1]))
    if os.environ.get("MAXG", "0") == "1":
        return max(shaped, float(_geometric(*args)))
    return shaped


# tpottail._rate's bisection itself, over miss() (its globals with `_miss` replaced, as tailkernel.py
# compiles it with the compiled callees)
rate = types.FunctionType(tpottail._rate.__code__, {**vars(tpottail), "_miss": miss}, "rate")


def shape(outputs: Any) -> tuple[Any, Any]:
    """(D, P(D)) for the decode steps D = o - 1 >= 1, o spread evenly within vLLM's buckets."""
    o = np.asarray(outputs, dtype=np.int64)
    masses: dict[float, float] = {}
    lo = 0
    for hi in (*BOUNDS, 10**9):
        k = int(((o > lo) & (o <= hi)).sum())
        if k:
            top = min(hi, int(o.max()))
            width = top - lo
            points = (
                list(range(lo + 1, top + 1))
                if width <= 20
                else [lo + width * (j + 0.5) / 8 for j in range(8)]
            )
            for v in points:
                if v - 1 >= 1:
                    masses[v - 1] = masses.get(v - 1, 0.0) + k / len(o) / len(points)
        lo = hi
    steps = sorted(masses)
    return np.array(steps, dtype=np.float64), np.array([masses[s] for s in steps], dtype=np.float64)


def tail_table(scale: float, rates: list[float]) -> None:
    from replay.policies.predictive import replica_profile
    from replay.profiles import SCENARIOS
    from replay.traces import load_trace

    profile = replica_profile(SCENARIOS["reference-70b"].engine)
    trace = load_trace(TRACE, "servegen", rate_scale=scale, seed=0, start_s=39_600.0, end_s=50_400.0)
    prompts = np.asarray(trace.input_tokens, dtype=float)
    outputs = np.asarray(trace.output_tokens, dtype=float)
    p, o = float(prompts.mean()), float(outputs.mean())
    cv2, out_cv2 = float(prompts.var()) / p / p, float(outputs.var()) / o / o
    _shape[0], _shape[1] = shape(trace.output_tokens)
    base = profile.step_base_s
    a = profile.prefill_s_per_token + profile.prefill_s_per_attention_pair * 0.5 * (p + 1.0)
    d = profile.decode_s_per_request + profile.decode_s_per_context_token * (
        p + lengths.context_share(out_cv2) * o
    )
    args = (base, a, d, a * p + d * o, True, float(profile.max_batched_tokens or 0), False)
    args += (float(profile.max_num_seqs), 0.2, 0.01, p, o, 2.0, tpottail.units(cv2))
    short = 100 * float((outputs <= 4).mean())
    print(
        f"m-large x{scale:g}: prompts {p:.0f} (cv² {cv2:.2f}), "
        f"outputs {o:.0f} (cv² {out_cv2:.2f}), {short:.1f} % <= 4"
    )
    for x in rates:
        geometric = tpottail._miss(*args, x)
        shaped = miss(*args, x)
        print(
            f"  {x:g} req/s a replica: TPOT misses {100 * geometric:.3f} % (geometric), "
            f"{100 * shaped:.3f} % (the shape)"
        )


_run_case = runner.run_case


def run_case(trace: Any, case: Any, setup: Any) -> Any:
    _shape[0], _shape[1] = shape(trace.output_tokens)
    tailsearch._tpot_cache.clear()
    latecurve._curves.clear()
    burstprice._holds.clear()
    return _run_case(trace, case, setup)


_use = tpottail.use


def use(kernel: Any, miss_kernel: Any = None) -> None:
    _use(kernel, miss_kernel)
    if os.environ.get("EMP", "1") == "1":
        tpottail._kernel, tpottail._miss_kernel = rate, miss


if __name__ == "__main__":
    if sys.argv[1:2] == ["tail"]:
        tail_table(float(sys.argv[2]), [float(x) for x in sys.argv[3:]])
    else:
        runner.run_case = run_case  # type: ignore[assignment]
        tpottail.use = use  # type: ignore[assignment]
        from infscale.cli import main

        sys.argv = ["infscale", *sys.argv[1:]]
        main()
