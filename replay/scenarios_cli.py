"""`infscale replay scenarios`: the built-in scenarios with their key numbers, as text or JSON.

For each scenario: weights, GPUs, where the weights come from and at what speed, the start-up
phases, the cold-start model's breakdown (one replica on a cold cluster, one on a warm node, eight
started together), the engine profile and the SLO; and the `infscale coldstart` command that
reproduces the breakdown. The numbers come from the policy core's model (coldstart.predict_ready),
which the replay's fleet runs too. Sources of every number: docs/coldstart.md and docs/replay.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import Any

from autoscaler.coldstart_cli import flags_of
from autoscaler.policy.coldstart import ReplicaReadiness, compiled_after, predict_ready
from autoscaler.policy.spec import ColdStartSpec, CompileCache
from replay.profiles import SCENARIOS, ProfileError, Scenario
from replay.scenariofile import get_scenario

SCHEMA = "infscale.replay.scenarios/v1"
TOGETHER = 8  # "eight started together": the seed's contention case


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "names",
        nargs="*",
        metavar="SCENARIO",
        help=f"built-in names ({', '.join(SCENARIOS)}) or YAML/JSON files (default: every built-in)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def run(args: argparse.Namespace) -> int:
    try:
        scenarios = [get_scenario(n) for n in args.names] if args.names else list(SCENARIOS.values())
    except ProfileError as e:
        print(f"infscale replay scenarios: error: {e}", file=sys.stderr)
        return 2
    # --output json is every replay command's convention; --json is this command's own name for it
    if args.json or getattr(args, "output", "text") == "json":
        doc = {"schema": SCHEMA, "scenarios": [summary(s) for s in scenarios]}
        print(json.dumps(doc, indent=2, allow_nan=False))
    else:
        print("\n\n".join(render(s) for s in scenarios))
    return 0


# --- the numbers -----------------------------------------------------------------------------------


def cold_cluster(spec: ColdStartSpec, k: int) -> tuple[ReplicaReadiness, ...]:
    """k replicas on a cluster with no node, image or cache: the slow case."""
    return predict_ready(spec, k)


def warm_node(spec: ColdStartSpec) -> ReplicaReadiness:
    """One replica on a node that already ran one: GPUs free, the image, the weights in its cache
    (with a cache), compile artifacts (with a compile cache) and a ready replica (for peers)."""
    compiled, warm = compiled_after(spec, (0,))
    (r,) = predict_ready(
        spec,
        1,
        free_gpus_per_node=(spec.gpus_per_node,),
        image_cached_nodes=(0,),
        weights_cached=(0,) if spec.local_cache_gbps is not None else (),
        compile_cached_nodes=compiled,
        compile_cache_warm=warm,
        peer_sources=1,
    )
    return r


def summary(s: Scenario) -> dict[str, Any]:
    """Everything the listing shows, as JSON-ready data."""
    spec = s.cold_start
    alone = cold_cluster(spec, 1)[0]
    together = cold_cluster(spec, TOGETHER)
    return {
        "name": s.name,
        "description": s.description,
        "scenario": dataclasses.asdict(s),
        "cold_start": {
            "alone_cold_cluster": dataclasses.asdict(alone),
            "alone_warm_node": dataclasses.asdict(warm_node(spec)),
            f"{TOGETHER}_together_cold_cluster": {
                "first_ready_s": min(r.ready_s for r in together),
                "all_ready_s": max(r.ready_s for r in together),
                "replicas": [dataclasses.asdict(r) for r in together],
            },
        },
        "reproduce": ["infscale", "coldstart", *flags_of(spec), "--replicas", str(TOGETHER)],
    }


# --- the text --------------------------------------------------------------------------------------


def render(s: Scenario) -> str:
    spec = s.cold_start
    alone = cold_cluster(spec, 1)[0]
    warm = warm_node(spec)
    together = cold_cluster(spec, TOGETHER)
    first = min(together, key=lambda r: r.ready_s)
    last = max(together, key=lambda r: r.ready_s)
    if last.ready_s - first.ready_s < 0.05:
        eight = f"{TOGETHER} together: each ready at {last.ready_s:.1f} s = {_sum(last)}"
    else:
        eight = (
            f"{TOGETHER} together: the first ready at {first.ready_s:.1f} s, the last at "
            f"{last.ready_s:.1f} s = {_sum(last)}"
        )
    rows = [
        ("weights", f"{spec.weights_gb:g} GB, {_gpus(spec)}; replicas {s.min_replicas}-{s.max_replicas}"),
        ("load path", _load_path(spec)),
        ("start-up", _phases(spec)),
        ("cold cluster", f"one replica ready at {alone.ready_s:.1f} s = {_sum(alone)}"),
        ("", eight),
        ("warm node", f"one replica ready at {warm.ready_s:.1f} s = {_sum(warm)}"),
        ("engine", _fields(s.engine)),
        ("SLO", _fields(s.slo)),
        ("reproduce", " ".join(["infscale coldstart", *flags_of(spec), "--replicas", str(TOGETHER)])),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join([f"{s.name}: {s.description}", *(f"  {k.ljust(width)}  {v}" for k, v in rows)])


def _gpus(spec: ColdStartSpec) -> str:
    return f"{spec.gpus_per_replica} GPU(s) per replica on {spec.gpus_per_node}-GPU nodes"


def _load_path(spec: ColdStartSpec) -> str:
    cap = "no per-loader cap" if spec.per_loader_gbps is None else f"{spec.per_loader_gbps:g} GB/s per loader"
    parts = [f"shared storage {spec.storage_gbps:g} GB/s, {cap}"]
    if spec.local_cache_gbps is None:
        parts.append("no node cache")
    else:
        room = "unlimited" if spec.node_cache_gb is None else f"{spec.node_cache_gb:g} GB"
        parts.append(f"node cache {spec.local_cache_gbps:g} GB/s ({room}), filled on first load")
    parts.append("no peer-to-peer" if spec.peer_gbps is None else f"peer-to-peer {spec.peer_gbps:g} GB/s")
    gate = spec.max_concurrent_loads
    parts.append("no load gate" if gate is None else f"load gate {gate} slot(s) ({spec.load_gate_scope})")
    return "; ".join(parts)


def _phases(spec: ColdStartSpec) -> str:
    compile_ = f"compile {spec.compile_s:g} s"
    if spec.compile_cache != CompileCache.NONE:
        compile_ += f" ({spec.compile_cached_s:g} s with the {spec.compile_cache} compile cache filled)"
    return (
        f"node {spec.node_provision_s:g} s, image pull {spec.image_pull_s:g} s, engine init "
        f"{spec.engine_init_s:g} s, {compile_}, warm-up {spec.warmup_s:g} s"
    )


def _sum(r: ReplicaReadiness) -> str:
    parts: Sequence[tuple[str, float]] = (
        ("node", r.provision_s),
        ("pull", r.pull_s),
        ("init", r.init_s),
        ("gate", r.gate_wait_s),
        (f"load ({r.tier}{_sharing(r)})", r.load_s),
        ("compile" + ("" if r.compile_s == 0 else " hit" if r.compile_hit else " miss"), r.compile_s),
        ("warm-up", r.warmup_s),
    )
    return " + ".join(f"{seconds:.1f} {name}" for name, seconds in parts if seconds >= 0.05) or "0"


def _sharing(r: ReplicaReadiness) -> str:
    return f", {r.load_wait_s:.1f} of it sharing" if r.load_wait_s >= 0.05 else ""


def _fields(value: object) -> str:
    """A frozen dataclass's fields as name=value, in declaration order."""
    return ", ".join(
        f"{f.name}={getattr(value, f.name):g}"
        if isinstance(getattr(value, f.name), float)
        else f"{f.name}={getattr(value, f.name)}"
        for f in dataclasses.fields(value)  # type: ignore[arg-type]
    )
