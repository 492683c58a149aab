"""Probe (session 20): static reference-70b fleets at the (rate, n) points where the residual tail's
steady count is above main's on ServeGen m-large × 0.048 (tail_points.py's), fed ServeGen's own
(prompt, output) pairs of the league's window (11:00-14:00 of day 1) resampled, under Poisson
arrivals and under the window's own arrivals time-scaled to the rate. The share of requests whose
wait (admitted - arrival) passes main's slack and the residual's, beside the models' tails: main's
(exponential, a level count's few_held) and the variant's (residual, Erlang few_held, thinned,
stepped), each at the window's mix (index 1) and at the inputs the policy sized with (its lengths'
cv², its index). It imports autoscaler.policy.residualtail, the residual tail of branch tail20
(session 19's variant, not on main): run it from that branch's tree.

    .venv/bin/python probes/tail_static.py /tmp/tail_points.json 10.95:2,3 13.9:2,3,5 ...
    .venv/bin/python probes/tail_static.py /tmp/tail_points.json all   # every point, at both counts
    .venv/bin/python probes/tail_static.py /tmp/tail_points.json mix   # the window's prompts
    .venv/bin/python probes/tail_static.py /tmp/tail_points.json cap:8000 10.95:2   # prompts cut at 8,000
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

import numpy as np

from autoscaler.policy import leastloaded, lengths, replicarates, residualtail
from replay.policies import StaticPolicy
from replay.policies.predictive import replica_profile, slo_target
from replay.profiles import REFERENCE_70B
from replay.simulate import simulate
from replay.trace import Trace
from replay.traces import load_trace

TRACES = os.environ.get("TRACES", "traces")  # the folder holding the traces (docs/traces.md)

TRACE = f"{TRACES}/servegen_language_m-large.tar.gz"
WARMUP_S = 300.0
RUN_S = 3600.0


def main_few_held(n: int, offered: float, decoding: float, rho: float, index: float) -> float:
    """main's few_held (2e13202): P(all n hold one) / P(one holds one), a level count's."""
    inflight = offered + decoding / (1.0 - rho / n)
    held = -math.expm1(-inflight / n)
    every = 1.0 - lengths.upper_gamma(n / index, inflight / index)
    return 1.0 if held <= 0.0 or every >= held else every / held


def main_tail(n: int, a: list[Any]) -> float:
    """main's leastloaded.wait_tail at n from its servers() arguments (offered, slack, tail, decoding,
    rho, index, most, cs2, departing)."""
    offered, slack, _, decoding, rho, index, _, cs2, dep = a[:9]
    u = offered / n
    if u >= 1.0:
        return 1.0
    index = max(index, 1.0)
    f = leastloaded.pooled(n, offered, rho, index, cs2, dep)
    if n > rho:
        f = min(f, main_few_held(n, offered, decoding, rho, index))
    return f * u * math.exp(-(1.0 - u) * slack)


def variant_tail(n: int, a: list[Any]) -> float:
    offered, slack, _, decoding, rho, index, _, cs2, dep, residual = a[:10]
    return leastloaded.wait_tail(n, offered, slack, decoding, rho, index, cs2, dep, tuple(residual))


def terms(lam: float, n: int, p: float, o: float, cv2: float, index: float, ca2: float) -> dict[str, Any]:
    """capacity.sizer's terms at n for this mix (main's and the residual's), as servers() gets them."""
    profile = replica_profile(REFERENCE_70B.engine)
    slo = slo_target(REFERENCE_70B)
    base = profile.step_base_s
    w = replicarates.work_per_request(profile, p, o, 1.0)
    rate = replicarates.prefill_rate(profile, lam / n, p, o, base, w, 1.0)
    service = p / rate
    step = base / max(1e-3, 1.0 - lam / n * w)
    beta = profile.prefill_s_per_attention_pair * 0.5
    per_token = 1.0 / rate - beta * p
    r = beta * p / per_token if per_token > 0 else 0.0
    c2 = lengths.clip_cv2(cv2)
    cs2 = lengths.spread(profile, p, cv2)["service_cv2"]
    rservice = service * residualtail.mean_factor(r, c2)
    rcs2 = residualtail.service_cv2(r, c2)
    dep = leastloaded.departing(lam, base, p, profile.max_batched_tokens)
    chunk = profile.max_batched_tokens
    b = chunk / p if chunk else 0.0
    decoding, rho = lam * o * base, lam * w
    slack, rslack = slo.ttft_s - service - step, slo.ttft_s - rservice - step
    old = [lam * service, slack / service * 2.0 / (ca2 + cs2), 0.0, decoding, rho, index, n, cs2, dep]
    new = [lam * rservice, rslack / rservice * (1.0 + rcs2) / (ca2 + rcs2), 0.0, decoding, rho, index, n]
    new += [rcs2, dep, (r, c2, b)]
    return {"slack": slack, "rslack": rslack, "old": old, "new": new}


def run(arrival: np.ndarray, xs: np.ndarray, ys: np.ndarray, n: int) -> np.ndarray:
    trace = Trace("probe", arrival, xs, ys)
    result = simulate(trace, REFERENCE_70B, StaticPolicy(n), warmup_s=WARMUP_S, max_tail_s=1e6)
    return np.asarray((result.requests.admitted_s - arrival)[arrival >= WARMUP_S])


def arrivals(
    rng: np.random.Generator, lam: float, pairs: int, window_arrivals: np.ndarray, window_rate: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Poisson arrivals at `lam` and the window's own, rescaled to `lam`, each with the indices of
    the (prompt, output) pairs they carry, over the warm-up and the run."""
    k = int(lam * (WARMUP_S + RUN_S))
    arrival = np.cumsum(rng.exponential(1.0 / lam, k))
    pick = rng.integers(0, pairs, k)
    own = (window_arrivals - window_arrivals[0]) * (window_rate / lam)
    own = own[own < WARMUP_S + RUN_S]
    return arrival, pick, own, rng.integers(0, pairs, len(own))


def every(points: list[dict[str, Any]], window: Trace) -> None:
    """At each point, main's count and the residual's replayed at the point's rate (Poisson and the
    window's own arrivals): how often each meets the point's wait budget."""
    wx, wy, wa = window.input_tokens, window.output_tokens, window.arrival_s
    wrate = len(wa) / float(wa[-1] - wa[0])
    x = wx.astype(float)
    p, o, cv2 = float(x.mean()), float(wy.mean()), float(x.var() / x.mean() ** 2)
    met = {("old", "poisson"): 0, ("old", "own"): 0, ("new", "poisson"): 0, ("new", "own"): 0}
    ratios: dict[str, list[float]] = {"old": [], "new": []}
    misses: list[tuple[int, float, float]] = []  # main's count past the budget: (n, u, the replay's)
    for i, q in enumerate(points):
        lam = q["requests"]
        arrival, pick, own, pick_own = arrivals(np.random.default_rng(i), lam, len(wx), wa, wrate)
        budget = q["old_args"][0][2]
        for side in ("old", "new"):
            n = q[side]
            slack = terms(lam, n, p, o, cv2, 1.0, 1.0)["slack"]
            wp = float(np.mean(run(arrival, wx[pick], wy[pick], n) > slack))
            wo = float(np.mean(run(own, wx[pick_own], wy[pick_own], n) > slack))
            if side == "old" and wp > budget:
                misses.append((n, q["old_u"], wp))
            met[(side, "poisson")] += wp <= budget
            met[(side, "own")] += wo <= budget
            model = main_tail(n, q["old_args"][0]) if side == "old" else variant_tail(n, q["new_args"][0])
            ratios[side].append(model / max(wp, 1e-5))
    at_i = sorted(variant_tail(q["old"], q["new_args"][0]) for q in points)
    at_1 = sorted(variant_tail(q["old"], [*q["new_args"][0][:5], 1.0, *q["new_args"][0][6:]]) for q in points)
    mid = len(points) // 2
    print(
        f"the residual's tail at main's count, median: {100 * at_i[mid]:.3f} % (I 1: {100 * at_1[mid]:.3f} %)"
    )
    print(f"points: {len(points)}; the replay's waits past the slack within the point's budget:")
    for (side, arr), v in met.items():
        print(f"  {'main' if side == 'old' else 'residual'}'s count, {arr} arrivals: {v}")
    if misses:
        ns = sorted({m[0] for m in misses})
        us, ws = [m[1] for m in misses], [100 * m[2] for m in misses]
        print(
            f"  main's misses: n {ns}, u {min(us):.2f}-{max(us):.2f},",
            f"the replay {min(ws):.1f}-{max(ws):.1f} %",
        )
    for side, rs in ratios.items():
        r = sorted(rs)
        cut = [r[int(f * (len(r) - 1))] for f in (0.1, 0.5, 0.9)]
        name = "main's tail" if side == "old" else "the residual's tail"
        print(
            f"  {name} at its own count over the replay's (Poisson), 10 / 50 / 90 %:",
            f"{cut[0]:.2f} / {cut[1]:.2f} / {cut[2]:.2f}",
        )


def main(argv: list[str]) -> None:
    with open(argv[0]) as f:
        points = json.load(f)
    window = load_trace(TRACE, "servegen", rate_scale=0.048, start_s=39600, end_s=50400)
    if argv[1:] == ["mix"]:  # the window's prompts: their far tail and the cv² of each 20 minutes
        x, a = window.input_tokens.astype(float), window.arrival_s
        q = np.quantile(x, [0.999, 0.9999])
        print(f"{len(x)} prompts; 99.9th / 99.99th percentile {q[0]:.0f} / {q[1]:.0f}")
        print(f"above 8,000: {100 * np.mean(x > 8_000):.3f} %; 14,000+: {int(np.sum(x >= 14_000))}")
        for s in range(0, 10_800, 1_200):
            part = x[(a >= s) & (a < s + 1_200)]
            print(f"{s} s: mean {part.mean():.0f}, cv² {part.var() / part.mean() ** 2:.2f}")
        return
    if argv[1:] == ["all"]:
        every(points, window)
        return
    specs = argv[1:]
    if specs[0].startswith("cap:"):  # the prompts cut at this many tokens: whose waits are they
        cap = int(specs.pop(0)[4:])
        window = Trace(
            window.name, window.arrival_s, np.minimum(window.input_tokens, cap), window.output_tokens
        )
    wx, wy, wa = window.input_tokens, window.output_tokens, window.arrival_s
    wrate = len(wa) / float(wa[-1] - wa[0])
    x = wx.astype(float)
    p, o, cv2 = float(x.mean()), float(wy.mean()), float(x.var() / x.mean() ** 2)
    print(f"window: {wrate:.2f} req/s, prompts {p:.0f} tokens of cv² {cv2:.2f}, outputs {o:.0f}")
    head = "| λ | n | policy's n (main → residual) | I | lengths' cv² | replay Poisson main / res. slack |"
    head += " replay own arrivals main / res. | main (mix, I 1) | residual (mix, I 1) | main (policy's) |"
    head += " residual (policy's) | budget |"
    print(head)
    print("|---" * 12 + "|")
    for spec in specs:
        lam_s, ns = spec.split(":")
        lam = float(lam_s)
        near = sorted(points, key=lambda q: abs(q["requests"] - lam))[0]
        arrival, pick, own, pick_own = arrivals(np.random.default_rng(1), lam, len(wx), wa, wrate)
        for n in (int(v) for v in ns.split(",")):
            t = terms(lam, n, p, o, cv2, 1.0, 1.0)
            wp = run(arrival, wx[pick], wy[pick], n)
            wo = run(own, wx[pick_own], wy[pick_own], n)
            cells = [float(np.mean(wp > t["slack"])), float(np.mean(wp > t["rslack"]))]
            cells += [float(np.mean(wo > t["slack"])), float(np.mean(wo > t["rslack"]))]
            cells += [main_tail(n, t["old"]), variant_tail(n, t["new"])]
            cells += [main_tail(n, near["old_args"][0]), variant_tail(n, near["new_args"][0])]
            c = [f"{100 * v:.3f}" for v in cells]
            print(
                f"| {lam:.1f} | {n} | {near['old']} → {near['new']} | {near['spread']:.2f} |"
                f" {near['lengths_cv2']:.2f} | {c[0]} / {c[1]} | {c[2]} / {c[3]} | {c[4]} | {c[5]} |"
                f" {c[6]} | {c[7]} | {100 * near['old_args'][0][2]:.3f} |",
                flush=True,
            )
    print(f"slack {t['slack']:.3f} s (main), {t['rslack']:.3f} s (residual)")


if __name__ == "__main__":
    main(sys.argv[1:])
