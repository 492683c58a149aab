"""The marginal replica on the plateau (docs/policy-history.md, session 21, "The plateau"): per count
n, the model's misses under the least-requests router, the prompts no fleet serves in time F
(idlemiss.idle_misses), the waits past their slack W(n) (leastloaded.wait_tail at capacity.sizer's
terms) and the TPOT tail T(n) (tpottail._miss at λ/n), and the next replica's gain
W(n) + T(n) - W(n+1) - T(n+1) beside its share of the SLO's allowance, ε/(n+1); and the least n
whose W + T (not W alone) fits the waits' budget (idlemiss.wait_budget, at most ε). Run from the
repository's root: .venv/bin/python probes/plateau_margin.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NamedTuple

sys.path.insert(0, "tests/replay")

from test_capacity_vs_replay import (
    ONE_GPU_8B,
    REFERENCE_70B,
    TOKEN_AWARE,
    Demand,
    Scenario,
    Trace,
    lengths,
    replica_profile,
    size,
    slo_target,
    stationary,
)

from autoscaler.policy import capacity, idlemiss, leastloaded, replicarates, tpottail

# rate, mean prompt, mean output, scenario, the gamma's shape (cv² 1 / shape)
CASES = {
    "2k": (30.0, 2000.0, 150.0, REFERENCE_70B, 0.5),
    "8k": (3.0, 8000.0, 300.0, TOKEN_AWARE, 0.5),
    "mooncake-8b": (5.4, 11_600.0, 200.0, ONE_GPU_8B, 0.6),
    "mooncake-70b": (1.8, 11_200.0, 200.0, REFERENCE_70B, 0.6),
}


class Model(NamedTuple):
    trace: Trace
    count: int  # capacity.size's, least-loaded
    lost: float  # F
    eps: float
    share: float  # the waits' budget: idlemiss.wait_budget, at most ε under this router
    misses: Callable[[int], tuple[float, float]]  # n -> (W, T)


def model(lam: float, prompt: float, output: float, scenario: Scenario, shapes: tuple[float, float]) -> Model:
    """The model's terms on test_capacity_vs_replay's stationary trace of this case."""
    trace = stationary(lam, prompt, output, shape=shapes[0], output_shape=shapes[1])
    x = trace.input_tokens.astype(float)
    demand = Demand(lam, lam * float(x.mean()), lam * float(trace.output_tokens.mean()))
    slo, pr = slo_target(scenario), replica_profile(scenario.engine)
    spread = lengths.spread(pr, float(x.mean()), float((x * x).mean() / x.mean() ** 2 - 1.0))
    cs2, cv2 = spread["service_cv2"], spread["lengths_cv2"]
    p, o = demand.prompt_tokens / lam, demand.output_tokens / lam
    base = pr.step_base_s
    a = replicarates.prefill_token_s(pr, p)
    d = replicarates.decode_token_s(pr, p, o)
    w = a * p + d * o
    load = lam * w
    budget = pr.max_batched_tokens
    eps = 1.0 - slo.attainment
    lost = idlemiss.idle_misses(replicarates.engine(pr), slo, p, o, 1.0, cv2)
    departing = leastloaded.departing(lam, base, p, budget)

    def misses(n: int) -> tuple[float, float]:
        rate = replicarates.prefill_rate_of(pr, lam / n, o, base, w, a, d)
        service = p / rate
        free = 1.0 - load / n
        step = base / (1e-3 if free < 1e-3 else free)
        slack = slo.ttft_s - service - step + (p / slo.ttft_tokens_per_s if slo.ttft_tokens_per_s else 0.0)
        slack = max(slack, capacity.MIN_SLACK_SHARE * service)
        slack_services = slack / service * 2.0 / (1.0 + cs2)
        wait = leastloaded.wait_tail(
            n, lam * service, slack_services, lam * o * base, load, 1.0, cs2, departing
        )
        tpot = tpottail._miss(
            base,
            a,
            d,
            w,
            budget is not None,
            float(budget or 0),
            pr.prefill_first,
            float(pr.max_num_seqs),
            slo.tpot_s,
            eps,
            p,
            o,
            2.0,
            tpottail.units(cv2),
            lam / n,
            *tpottail.NO_STEPS,
        )
        return wait, tpot

    count = size(pr, slo, demand, **spread, least_loaded=True).replicas
    return Model(trace, count, lost, eps, min(eps, max(lost, eps - lost)), misses)


def joint_count(m: Model) -> int:
    """The least n from the model's count up whose W + T fits the waits' budget."""
    n = m.count
    while sum(m.misses(n)) > m.share:
        n += 1
    return n


def curves(name: str, counts: range) -> None:
    lam, prompt, output, scenario, shape = CASES[name]
    m = model(lam, prompt, output, scenario, (shape, shape))
    lost, eps, share, misses = m.lost, m.eps, m.share, m.misses
    print(f"{name}: F (idle misses) {100 * lost:.2f} %, ε {100 * eps:.2f} %, least-loaded count {m.count}")
    stop = joint = None
    for n in range(1, max(counts) + 1):  # the stops: each count in turn
        wn, tn = misses(n)
        w1, t1 = misses(n + 1)
        if stop is None and wn < 1.0 and (lost + wn + tn <= eps or wn + tn - w1 - t1 < eps / (n + 1)):
            stop = n
        if joint is None and wn + tn <= share:
            joint = n
    for n in counts:
        wn, tn = misses(n)
        w1, t1 = misses(n + 1)
        gain = wn + tn - w1 - t1
        print(
            f"  n={n:3d} W={100 * wn:.3f} T={100 * tn:.3f} F+W+T={100 * (lost + wn + tn):.3f} "
            f"gain={100 * gain:.4f} ε/(n+1)={100 * eps / (n + 1):.4f}"
        )
    print(f"  the least n where F+W+T <= ε or the gain < ε/(n+1): {stop}")
    print(f"  the least n where W+T <= the waits' budget {100 * share:.2f} %: {joint}")


if __name__ == "__main__":
    for name, counts in (("2k", range(8, 25, 2)), ("8k", range(12, 41, 3))):
        curves(name, counts)
    for name in ("mooncake-8b", "mooncake-70b"):
        curves(name, range(4, 61, 4))
