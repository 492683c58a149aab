"""The TPOT tail the replay compiles (replay/policies/tailkernel.py) gives the bits of the policy
core's pure-Python source (autoscaler/policy/tpottail.py): every league number depends on them,
and numba may compute a different expression than the one written (a constant power is such a
case: x ** 2.0 becomes x·x, which rounds differently from the C library's pow in ~0.1 % of cases)."""

from __future__ import annotations

import math
import random
from dataclasses import asdict
from typing import Any

from autoscaler.policy import outputsteps, tpottail
from autoscaler.policy.capacityspec import ReplicaProfile
from autoscaler.policy.outputsteps import OutputSteps
from autoscaler.policy.survival import Survival
from replay.policies import tailkernel

VLLM_BOUNDS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0)


def _steps(rng: random.Random) -> OutputSteps | None:
    """None (the geometric alone) or the decode steps of a random output-length histogram on vLLM's
    bounds, from all-short to all-long."""
    if rng.random() < 0.4:
        return None
    weights = [rng.random() ** 4 for _ in range(len(VLLM_BOUNDS) + 1)]
    total = sum(weights)
    over = tuple(sum(weights[i + 1 :]) for i in range(len(VLLM_BOUNDS)))
    return outputsteps.of(Survival(0.0, VLLM_BOUNDS, over, total))


def _pair(steps: OutputSteps | None) -> tuple[tuple[float, ...], tuple[float, ...]]:
    return tpottail.NO_STEPS if steps is None else (steps.steps, steps.masses)


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _cases(n_rates: int, n_sums: int, n_misses: int) -> dict[str, list[object]]:
    """Random profiles and mixes near where the tail binds (long prompts, short outputs), every
    token-budget kind; series on both sides of the normal branch; and the share that misses at
    random loads (its bits: the bisection's result hides most one-ulp changes)."""
    rng = random.Random(11)
    rates: list[object] = []
    while len(rates) < n_rates:
        seqs = rng.choice((64, 256, 1024))
        budget = rng.choice((None, 2048, 8192, 16384))
        profile = ReplicaProfile(
            step_base_s=_log_uniform(rng, 0.008, 0.04),
            prefill_s_per_token=_log_uniform(rng, 2e-5, 2e-4),
            prefill_s_per_attention_pair=rng.choice((0.0, _log_uniform(rng, 1e-10, 2e-8))),
            decode_s_per_request=_log_uniform(rng, 1e-6, 1e-4),
            decode_s_per_context_token=rng.choice((0.0, _log_uniform(rng, 1e-9, 5e-8))),
            max_batched_tokens=budget,
            max_num_seqs=seqs,
            prefill_first=rng.random() < 0.25,
        )
        args = (
            _log_uniform(rng, 0.05, 0.3),  # tpot_s
            _log_uniform(rng, 0.002, 0.2),  # tail
            _log_uniform(rng, 200.0, 30_000.0),  # p
            _log_uniform(rng, 2.0, 400.0),  # o
            _log_uniform(rng, 0.5, 2.0),  # speed
            rng.choice((1.0, _log_uniform(rng, 0.01, 20.0))),  # the prompt lengths' cv²
            rng.choice((1.0, _log_uniform(rng, 0.01, 20.0))),  # the output lengths' cv²
        )
        steps = _steps(rng)
        if tpottail.rate(profile, *args, steps) < math.inf:  # the bisection ran (interpreted: ~2 ms)
            rates.append({"profile": asdict(profile), "args": args, "steps": _pair(steps)})
    # the series, and many normal approximations (cheap), where few arrivals and a busy queue let
    # the variance's square show in the result (a constant power changes ~0.03 % of them)
    sums: list[object] = [
        (rng.uniform(0.0, 60.0), rng.uniform(1e-3, 80.0), rng.random())
        if i % 20 == 0
        else (rng.uniform(60.5, 90.0), rng.uniform(0.0, 0.01), rng.uniform(0.9, 0.995))
        for i in range(n_sums)
    ]
    misses: list[object] = []
    for _ in range(n_misses):
        base, a, d = rng.uniform(0.008, 0.04), _log_uniform(rng, 2e-5, 2e-4), _log_uniform(rng, 1e-6, 1e-4)
        p, o = _log_uniform(rng, 200.0, 30_000.0), _log_uniform(rng, 2.0, 400.0)
        w = a * p + d * o
        budget = rng.choice((0.0, 2048.0, 8192.0))
        tpot_s, tail = rng.uniform(0.05, 0.3), _log_uniform(rng, 0.002, 0.2)
        x = rng.uniform(0.0, 1.0 / w)
        unit = rng.choice((1.0, rng.uniform(0.505, 10.5)))  # (1 + cv²) / 2
        first = rng.random() < 0.25
        args = (base, a, d, w, budget > 0.0, budget, first, 256.0, tpot_s, tail, p, o, 2.0, unit, x)
        misses.append((*args, *_pair(_steps(rng))))
    return {"rates": rates, "sums": sums, "misses": misses}


def _bits(
    rate: Any, miss: Any, beyond: Any, cases: dict[str, list[Any]], arrays: bool
) -> dict[str, list[str]]:
    """Each case's result as hex: the rates through tpottail.rate's argument list, the shares that
    miss and the series directly (the steps as arrays where `arrays`, as tailkernel passes them)."""

    def steps(pair: Any) -> Any:
        return tuple(tailkernel.array(v) for v in pair) if arrays else pair

    rates = []
    for c in cases["rates"]:
        profile = ReplicaProfile(**c["profile"])
        budget = profile.max_batched_tokens
        fields = (
            profile.step_base_s,
            profile.prefill_s_per_token,
            profile.prefill_s_per_attention_pair,
            profile.decode_s_per_request,
            profile.decode_s_per_context_token,
            budget is not None,
            0.0 if budget is None else float(budget),
            profile.prefill_first,
            float(profile.max_num_seqs),
        )
        *args, cv2, outputs_cv2 = c["args"]
        tail_args = (2.0, 0.5 * (1.0 + cv2), 0.5 * (1.0 + outputs_cv2), *steps(c["steps"]))
        rates.append(float(rate(*fields, *args, *tail_args)).hex())
    return {
        "rates": rates,
        "misses": [float(miss(*m[:-2], *steps(m[-2:]))).hex() for m in cases["misses"]],
        "sums": [float(beyond(z, mu, u, 2.0)).hex() for z, mu, u in cases["sums"]],
    }


def test_the_compiled_tail_gives_the_bits_of_its_python_source() -> None:
    cases = _cases(40, 60_000, 400)
    assert sum(z > tpottail.TPOT_SERIES_MAX for z, _, _ in cases["sums"]) > 50_000
    compiled_rate = tailkernel.compiled_rate()
    # the compiled callees, as the compiled _rate calls them (each compiled from its own copy)
    scope = compiled_rate.py_func.__globals__
    compiled = _bits(compiled_rate, scope["_miss"], scope["_beyond"], cases, arrays=True)
    interpreted = _bits(tpottail._rate, tpottail._miss, tpottail._beyond, cases, arrays=False)
    assert sum(float.fromhex(m) > 0.0 for m in interpreted["misses"]) > 100  # the series ran
    shaped = [i for i, m in enumerate(cases["misses"]) if m[-2]]
    assert sum(float.fromhex(interpreted["misses"][i]) > 0.0 for i in shaped) > 50  # the shape's too
    assert interpreted == compiled


def test_the_installed_kernel_serves_the_cores_rate() -> None:
    profile = ReplicaProfile(
        step_base_s=0.0185, prefill_s_per_token=5.55e-5, max_batched_tokens=8192, max_num_seqs=1024
    )
    steps = outputsteps.of(Survival(0.0, VLLM_BOUNDS[:4], (0.9, 0.6, 0.4, 0.3), 1.0))
    interpreted = tpottail.rate(profile, 0.2, 0.01, 2048.0, 28.0, 1.0)
    shaped = tpottail.rate(profile, 0.2, 0.01, 2048.0, 28.0, 1.0, 1.0, 1.0, steps)
    tailkernel.install()
    try:
        assert tpottail._kernel is tailkernel.rate
        assert tpottail.rate(profile, 0.2, 0.01, 2048.0, 28.0, 1.0) == interpreted < math.inf
        assert tpottail.rate(profile, 0.2, 0.01, 2048.0, 28.0, 1.0, 1.0, 1.0, steps) == shaped < interpreted
    finally:
        tpottail.use(None)


def test_the_installed_kernel_serves_the_share_that_misses() -> None:
    # latecurve's curves read tpottail.miss: the compiled _miss once installed, the same bits
    args = (0.0185, 5.55e-5, 4e-5, 0.08, True, 8192.0, False, 1024.0, 0.2, 0.01, 2048.0, 28.0, 2.0, 1.0, 3.0)
    # and over an output-length histogram's steps, which the installed copy takes as arrays
    steps = outputsteps.of(Survival(0.0, VLLM_BOUNDS[:4], (0.9, 0.6, 0.4, 0.3), 1.0))
    interpreted = tpottail.miss(*args)
    shaped = tpottail.miss(*args, steps)
    tailkernel.install()
    try:
        assert tpottail._miss_kernel is tailkernel.miss
        assert tpottail.miss(*args) == interpreted > 0.0
        assert tpottail.miss(*args, steps) == shaped > interpreted
    finally:
        tpottail.use(None)
    assert tpottail._miss_kernel is tpottail._miss
