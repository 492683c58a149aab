"""Where predictive's GPU-hours over the clairvoyant go on Mooncake (docs/policy-history.md,
"Mooncake: the replicas over the clairvoyant", session 20). A probe, not part of the policy.

  python probes/mooncake_excess.py reach
      the requests (and prompt tokens) whose prefill alone on an idle replica is past the TTFT
      target, per engine, and the TTFT count at the trace's mix by rate: capacity.size as the
      replay's predictive calls it, and with the waits counted only among the prompts that fit,
      each at its own slack (the "fitting" rule of session 18)
  python probes/mooncake_excess.py split REPORT.json SCENARIO CLAIRVOYANT_GPU_H
      a report's scored window, decision by decision: the GPU time of replicas loading, and the
      ready fleet split into the count at the forecast's mean (plan.needed x count(mean) /
      count(upper), the counts from capacity.size at the trace's mix), the band's margin (the rest
      of plan.needed) and what the scale-down kept above it, by the scale-down stage's reason
  python probes/mooncake_excess.py summary REPORT.json...
      each report's predictive over its scored window: SLO, GPU-hours, the band's median width,
      the mean fleet (billed replicas), the median plan.needed, the mean forecast's rate and mean
      prompt, the median capacity a replica at the SLO, cold starts (session 21, "Mooncake x 0.52
      at seed 2" in docs/policy-history.md)
  python probes/mooncake_excess.py plans REPORT.json...
      what the need history records against the demand: in the warm-up and in the scored window,
      the peak of plan.needed (the count planned at the horizon, which the scale-down's history
      records), the peaks of the counts the demand read now and the mean forecast need at the
      decision's capacity a replica (rate / capacity, rounded up: no bursts' hold), and the median
      plan over the count now (session 21, "What the need history records")
"""

from __future__ import annotations

import collections
import json
import math
import os
import sys

import numpy as np

from autoscaler.policy import capacity, leastloaded, lengths, replicarates
from autoscaler.policy.capacityspec import SloTarget
from replay.policies.predictive import replica_profile, slo_target
from replay.profiles import LLAMA_8B_H100, LLAMA_70B_TP4_H100, SCENARIOS, EngineProfile

TRACES = os.environ.get("TRACES", "traces")  # the folder holding the traces (docs/traces.md)

# docs/traces.md says where to get it
TRACE = os.environ.get("MOONCAKE_TRACE", f"{TRACES}/mooncake_fast25_synthetic.jsonl")
INDEX = 1.09  # the arrivals' index of dispersion the decisions report on Mooncake x 0.52


def _trace() -> tuple[np.ndarray, np.ndarray]:
    with open(TRACE) as f:
        rows = [json.loads(line) for line in f]
    prompts = np.array([r["input_length"] for r in rows], dtype=float)
    outputs = np.array([r["output_length"] for r in rows], dtype=float)
    return prompts, outputs


def _count(engine: EngineProfile, slo: SloTarget, rate: float, p: float, o: float, cv2: float) -> int:
    if rate <= 1e-6:
        return 0
    prof = replica_profile(engine)
    shape = lengths.spread(prof, p, cv2)
    demand = capacity.Demand(rate, rate * p, rate * o)
    return capacity.size(prof, slo, demand, least_loaded=True, arrivals_index=INDEX, **shape).replicas


def _fitting_count(engine: EngineProfile, slo: SloTarget, rate: float, p: float, o: float, cv2: float) -> int:
    """The least n whose waits past each fitting prompt's own slack are at most the tail, counted
    among all requests as the replay counts them (gamma lengths of the trace's mean and cv²)."""
    prof = replica_profile(engine)
    shape = lengths.spread(prof, p, cv2)
    cs2 = float(shape["service_cv2"])
    xs = np.sort(np.random.default_rng(0).gamma(1.0 / cv2, p * cv2, 4000))[::50]
    own = engine.prefill_token_s * xs + 0.5 * engine.prefill_attention_s * xs * xs
    work = replicarates.work_per_request(prof, p, o, 1.0)
    dep = leastloaded.departing(rate, engine.step_base_s, p, engine.max_num_batched_tokens)
    for n in range(1, 400):
        sized = capacity.size(
            prof, slo, capacity.Demand(rate, rate * p, rate * o), limit=n, least_loaded=True
        )
        service = p / sized.prefill_tokens_per_s
        if rate * work >= n or rate * service >= n:  # unstable: every request waits without bound
            continue
        step = engine.step_base_s / max(1e-3, 1.0 - rate * work / n)
        slack = slo.ttft_s - step - own
        decay = 2.0 / (service * (1.0 + cs2))
        late = [
            leastloaded.wait_tail(
                n, rate * service, s * decay, rate * o * engine.step_base_s, rate * work, INDEX, cs2, dep
            )
            for s in slack[slack > 0.0]
        ]
        if sum(late) / len(xs) <= 1.0 - slo.attainment:
            return n
    return 400


def reach() -> None:
    prompts, outputs = _trace()
    p, o = float(prompts.mean()), float(outputs.mean())
    cv2 = float(prompts.var() / p**2)
    slo = SloTarget(ttft_s=2.0, tpot_s=0.2)
    print(
        f"{len(prompts)} requests: prompts mean {p:.0f}, median {np.median(prompts):.0f}, "
        f"cv² {cv2:.2f}; outputs {o:.0f}"
    )
    for name, engine in (
        ("70B (reference-70b, fast-load-70b)", LLAMA_70B_TP4_H100),
        ("8B (one-gpu-8b)", LLAMA_8B_H100),
    ):
        alone = engine.prefill_alone_s(prompts)
        late = alone > slo.ttft_s
        sizes = np.arange(1000, 200_000)
        longest = int(sizes[engine.prefill_alone_s(sizes) <= slo.ttft_s].max())
        print(
            f"{name}: {100 * late.mean():.1f} % of requests past 2 s alone "
            f"({100 * prompts[late].sum() / prompts.sum():.1f} % of prompt tokens, "
            f"{100 * alone[late].sum() / alone.sum():.1f} % of prefill time); longest that fits {longest}"
        )
        rates = (1.0, 2.0, 3.0, 4.0, 5.0)
        print("  count   " + " ".join(f"{r}:{_count(engine, slo, r, p, o, cv2)}" for r in rates))
        print("  fitting " + " ".join(f"{r}:{_fitting_count(engine, slo, r, p, o, cv2)}" for r in rates))


def split(path: str, scenario: str, clairvoyant: float) -> None:
    prompts, outputs = _trace()
    p, o = float(prompts.mean()), float(outputs.mean())
    cv2 = float(prompts.var() / p**2)
    sc = SCENARIOS[scenario]
    slo = slo_target(sc)
    with open(path) as f:
        report = json.load(f)
    e = next(iter(report["policies"].values()))
    end, reps = e["end_s"], e["replicas"]

    def billed(t0: float, t1: float) -> tuple[float, float]:
        loading = ready = 0.0
        for r in reps:
            start = r["scheduled_s"] if r["scheduled_s"] is not None else r["requested_s"]
            gone = r["deleted_s"] if r["deleted_s"] is not None else end
            up = r["ready_s"] if r["ready_s"] is not None else gone
            loading += max(0.0, min(up, gone, t1) - max(start, t0))
            ready += max(0.0, min(gone, t1) - max(up, t0))
        return loading, ready

    parts: collections.Counter[str] = collections.Counter()
    decisions = [x for x in e["decisions"] if 0 <= x["t_s"] < end]
    for i, x in enumerate(decisions):
        t0 = x["t_s"]
        t1 = decisions[i + 1]["t_s"] if i + 1 < len(decisions) else end
        loading, ready = billed(t0, t1)
        plan = x.get("plan") or {}
        forecast = plan.get("forecast") or {}
        mean = forecast.get("requests_per_s") or 0.0
        upper = (forecast.get("upper") or {}).get("requests_per_s") or 0.0
        needed = plan.get("needed") or 0
        at_upper = _count(sc.engine, slo, upper, p, o, cv2)
        at_mean = needed * _count(sc.engine, slo, mean, p, o, cv2) / at_upper if at_upper else needed
        fleet = ready / (t1 - t0)
        a = min(fleet, at_mean)
        b = min(fleet - a, max(0.0, needed - at_mean))
        down = [s["reason"] for s in x["stages"] if s["name"] == "scale-down"]
        parts["loading"] += loading
        parts["count at the mean"] += a * (t1 - t0)
        parts["band margin"] += b * (t1 - t0)
        parts["kept: " + (down[0] if down else "none")] += (fleet - a - b) * (t1 - t0)
    gpu = e["gpu_hours"] / e["replica_seconds"]
    print(
        f"{path}: SLO {100 * e['slo_attainment']:.2f} %, {e['gpu_hours']:.1f} GPU-h, "
        f"clairvoyant {clairvoyant}, "
        f"excess {e['gpu_hours'] - clairvoyant:.1f}, cold starts {e['cold_starts']}"
    )
    for k, v in sorted(parts.items()):
        if v * gpu >= 0.05:
            print(f"  {k}: {v * gpu:.1f} GPU-h")
    below = parts["count at the mean"] * gpu - clairvoyant
    print(f"  count at the mean less the clairvoyant: {below:+.1f} GPU-h")


def summary(paths: list[str]) -> None:
    for path in paths:
        with open(path) as f:
            e = json.load(f)["policies"]["predictive"]
        plans = [x["plan"] for x in e["decisions"] if x["t_s"] >= 0 and (x.get("plan") or {}).get("forecast")]
        if not plans:
            print(f"{path}: no scored plans")
            continue
        bands = [p["forecast"].get("band") or 1.0 for p in plans]
        rate = float(np.mean([p["forecast"]["requests_per_s"] for p in plans]))
        prompt = float(np.mean([p["forecast"]["prompt_tokens_per_s"] for p in plans]))
        per = [p["capacity_per_replica"]["requests_per_s"] for p in plans]
        print(
            f"{path}: SLO {100 * e['slo_attainment']:.2f} %, {e['gpu_hours']:.1f} GPU-h, "
            f"band x{np.median(bands):.2f}, fleet {e['replica_seconds'] / e['end_s']:.1f}, "
            f"needed {np.median([p['needed'] for p in plans]):.0f}, forecast {rate:.2f}/s of "
            f"{prompt / rate:.0f} tokens, {np.median(per):.3f}/s a replica, "
            f"{e['cold_starts']} cold starts"
        )


def plans(paths: list[str]) -> None:
    for path in paths:
        with open(path) as f:
            e = json.load(f)["policies"]["predictive"]
        for name, scored in (("warm-up", False), ("scored", True)):
            rows = []
            for x in e["decisions"]:
                p = x.get("plan") or {}
                if (x["t_s"] >= 0) != scored or not p.get("forecast"):
                    continue
                per = p["capacity_per_replica"]["requests_per_s"]
                now = math.ceil(p["demand_now"]["requests_per_s"] / per)
                rows.append((p["needed"], now, math.ceil(p["forecast"]["requests_per_s"] / per)))
            if rows:
                ratio = float(np.median([a / max(b, 1) for a, b, _ in rows]))
                print(
                    f"{path} {name}: peak plan {max(r[0] for r in rows)}, peak count now "
                    f"{max(r[1] for r in rows)}, peak count at the mean "
                    f"{max(r[2] for r in rows)}, median plan / count now {ratio:.2f}"
                )


if __name__ == "__main__":
    if sys.argv[1:2] == ["reach"]:
        reach()
    elif sys.argv[1:2] == ["split"] and len(sys.argv) == 5:
        split(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    elif sys.argv[1:2] == ["summary"] and len(sys.argv) > 2:
        summary(sys.argv[2:])
    elif sys.argv[1:2] == ["plans"] and len(sys.argv) > 2:
        plans(sys.argv[2:])
    else:
        sys.exit(__doc__)
