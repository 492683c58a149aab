"""`infscale coldstart`: the cold-start model's per-replica phases and ready times, as a table or JSON.

The edge around autoscaler.policy.coldstart: flags in, a ColdStartSpec and the cluster state
built from them, the model's errors translated back to the flag that caused them (exit code 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

from autoscaler.policy.coldstart import ColdStartInputError, ReplicaReadiness, predict_ready
from autoscaler.policy.spec import ColdStartSpec, CompileCache, GateScope

EXIT_BAD_INPUT = 2  # argparse's own code for a usage error

# model field (before any "[i]") -> the flag it came from
FLAG_OF_FIELD = {
    "weights_gb": "--weights-gb",
    "storage_gbps": "--storage-gbps",
    "per_loader_gbps": "--per-loader-gbps",
    "local_cache_gbps": "--local-cache-gbps",
    "image_pull_s": "--image-pull-s",
    "warmup_s": "--warmup-s",
    "node_provision_s": "--node-provision-s",
    "gpus_per_replica": "--gpus-per-replica",
    "gpus_per_node": "--gpus-per-node",
    "engine_init_s": "--engine-init-s",
    "compile_s": "--compile-s",
    "compile_cached_s": "--compile-cached-s",
    "compile_cache": "--compile-cache",
    "node_cache_gb": "--node-cache-gb",
    "peer_gbps": "--peer-gbps",
    "max_concurrent_loads": "--max-concurrent-loads",
    "load_gate_scope": "--load-gate-scope",
    "k": "--replicas",
    "free_gpus_per_node": "--free-gpus",
    "image_cached_nodes": "--image-cached-nodes",
    "weights_cached": "--weights-cached-nodes",
    "loading_remaining_gb": "--loading-gb",
    "compile_cached_nodes": "--compile-cached-nodes",
    "peer_sources": "--peer-sources",
}

# the ColdStartSpec fields offered as flags: (field, type, help, choices)
SPEC_FLAGS: tuple[tuple[str, Callable[[str], object], str, tuple[str, ...] | None], ...] = (
    ("weights_gb", float, "model weights per replica, GB", None),
    ("storage_gbps", float, "shared storage bandwidth, GB/s, split among the loaders", None),
    ("per_loader_gbps", float, "cap on one loader's speed from shared storage, GB/s", None),
    ("local_cache_gbps", float, "read speed from a node-local weights cache, GB/s", None),
    ("node_cache_gb", float, "capacity of the node-local cache, GB (least recently used evicted)", None),
    ("peer_gbps", float, "one loader's speed reading the weights from a ready replica, GB/s", None),
    ("image_pull_s", float, "image pull on a node without the image, s", None),
    ("engine_init_s", float, "engine init before the load (imports, CUDA/NCCL init), s", None),
    ("compile_s", float, "torch.compile and CUDA-graph capture on a compile-cache miss, s", None),
    ("compile_cached_s", float, "the same on a hit, s", None),
    ("compile_cache", str, "where compile artifacts persist", tuple(c.value for c in CompileCache)),
    ("warmup_s", float, "after compile: warm-up until ready, s", None),
    ("node_provision_s", float, "adding a node when no existing node fits a replica, s", None),
    ("gpus_per_replica", int, "whole GPUs per replica, all on one node", None),
    ("gpus_per_node", int, "GPUs of a new node", None),
    ("max_concurrent_loads", int, "load-gate slots: at most this many replicas loading at once", None),
    ("load_gate_scope", str, "what a gate slot covers", tuple(g.value for g in GateScope)),
)
ALL = "all"
T = TypeVar("T", int, float)


def _list_of(kind: Callable[[str], T], what: str) -> Callable[[str], tuple[T, ...]]:
    def parse(text: str) -> tuple[T, ...]:
        items = [part.strip() for part in text.split(",") if part.strip()]
        try:
            return tuple(kind(item) for item in items)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}, got {text!r}") from None

    return parse


def _node_list(text: str) -> tuple[int, ...] | str:
    if text.strip().lower() == ALL:  # resolved against --free-gpus once both are parsed
        return ALL
    return _list_of(int, f"node indices or {ALL!r}")(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = "Times are seconds from now; GB are 10^9 bytes. See docs/coldstart.md."
    model = parser.add_argument_group("the model (a ColdStartSpec; defaults are the spec's)")
    defaults = {f.name: f.default for f in dataclasses.fields(ColdStartSpec)}
    for field, kind, text, choices in SPEC_FLAGS:
        default = defaults[field]
        required = default is dataclasses.MISSING
        shown = "required" if required else f"default: {'none' if default is None else default}"
        # default=None: an absent flag leaves the spec's own default in force (kept in one place)
        model.add_argument(
            FLAG_OF_FIELD[field],
            dest=field,
            type=kind,
            choices=choices,
            required=required,
            help=f"{text} ({shown})",
        )
    state = parser.add_argument_group("the cluster now")
    state.add_argument("--replicas", type=int, default=1, help="replicas started together now (default 1)")
    state.add_argument(
        "--free-gpus",
        type=_list_of(int, "integers"),
        default=(),
        metavar="N,N,...",
        help="free GPUs on each existing node (default: no node, every replica needs a new one)",
    )
    state.add_argument(
        "--image-cached-nodes",
        type=_node_list,
        default=(),
        metavar="I,I,...|all",
        help="indices into --free-gpus of nodes that already have the image",
    )
    state.add_argument(
        "--weights-cached-nodes",
        type=_node_list,
        default=(),
        metavar="I,I,...|all",
        help="indices into --free-gpus of nodes whose local cache has the weights (needs --local-cache-gbps)",
    )
    state.add_argument(
        "--compile-cached-nodes",
        type=_node_list,
        default=(),
        metavar="I,I,...|all",
        help="indices into --free-gpus of nodes holding compile artifacts (needs --compile-cache node)",
    )
    state.add_argument(
        "--compile-cache-warm",
        action="store_true",
        help="the cluster's shared compile cache is filled (with --compile-cache cluster)",
    )
    state.add_argument(
        "--peer-sources", type=int, default=0, help="ready replicas that can serve weights (with --peer-gbps)"
    )
    state.add_argument(
        "--loading-gb",
        type=_list_of(float, "numbers"),
        default=(),
        metavar="GB,GB,...",
        help="GB still to read for each loader already reading from shared storage",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _flag_message(err: ColdStartInputError) -> str:
    base, bracket, rest = err.field.partition("[")
    flag = FLAG_OF_FIELD.get(base, base)
    where = f" (entry {rest.rstrip(']')})" if bracket else ""
    return f"{flag}{where} must be {err.requirement}, got {err.value!r}"


def _nodes(chosen: tuple[int, ...] | str, nodes: int) -> tuple[int, ...]:
    return tuple(range(nodes)) if isinstance(chosen, str) else chosen  # str: only ever ALL


def run(args: argparse.Namespace) -> int:
    free: tuple[int, ...] = args.free_gpus
    image_cached = _nodes(args.image_cached_nodes, len(free))
    weights_cached = _nodes(args.weights_cached_nodes, len(free))
    compile_cached = _nodes(args.compile_cached_nodes, len(free))
    loading: tuple[float, ...] = args.loading_gb
    given = {field: getattr(args, field) for field, *_ in SPEC_FLAGS}
    spec = ColdStartSpec(**{field: value for field, value in given.items() if value is not None})
    try:
        replicas = predict_ready(
            spec,
            args.replicas,
            free_gpus_per_node=free,
            image_cached_nodes=image_cached,
            weights_cached=weights_cached,
            loading_remaining_gb=loading,
            compile_cached_nodes=compile_cached,
            compile_cache_warm=args.compile_cache_warm,
            peer_sources=args.peer_sources,
        )
    except ColdStartInputError as err:
        print(f"infscale coldstart: error: {_flag_message(err)}", file=sys.stderr)
        return EXIT_BAD_INPUT

    if args.json:
        document = {
            "spec": dataclasses.asdict(spec),
            "free_gpus_per_node": list(free),
            "image_cached_nodes": list(image_cached),
            "weights_cached_nodes": list(weights_cached),
            "compile_cached_nodes": list(compile_cached),
            "compile_cache_warm": args.compile_cache_warm,
            "peer_sources": args.peer_sources,
            "loading_remaining_gb": list(loading),
            "replicas": [dataclasses.asdict(r) for r in replicas],
            "first_ready_s": min((r.ready_s for r in replicas), default=None),
            "all_ready_s": max((r.ready_s for r in replicas), default=None),
        }
        print(json.dumps(document, indent=2, allow_nan=False))
    else:
        print(render_table(spec, replicas, loading, args.peer_sources))
    return 0


def render_table(
    spec: ColdStartSpec, replicas: Sequence[ReplicaReadiness], loading: Sequence[float], peer_sources: int = 0
) -> str:
    """A headline, then one aligned row per replica (times in seconds from now)."""
    return "\n".join([describe(spec, len(replicas), loading, peer_sources), *table(spec, replicas)])


def describe(spec: ColdStartSpec, k: int, loading: Sequence[float] = (), peer_sources: int = 0) -> str:
    """The spec in one sentence: where the weights come from and what stands between them."""
    cap = f", at most {spec.per_loader_gbps:g} GB/s per loader" if spec.per_loader_gbps is not None else ""
    busy = f", {len(loading)} loader(s) already reading {sum(loading):g} GB" if loading else ""
    parts = [f"{k} replica(s) of {spec.weights_gb:g} GB from {spec.storage_gbps:g} GB/s shared{cap}{busy}"]
    if spec.local_cache_gbps is not None:
        room = "" if spec.node_cache_gb is None else f", {spec.node_cache_gb:g} GB"
        parts.append(f"node cache {spec.local_cache_gbps:g} GB/s{room}")
    if spec.peer_gbps is not None:
        parts.append(f"peer-to-peer {spec.peer_gbps:g} GB/s ({peer_sources} ready)")
    if spec.max_concurrent_loads is not None:
        parts.append(f"load gate: {spec.max_concurrent_loads} slot(s), {spec.load_gate_scope}")
    if spec.compile_s > 0:
        cached = "" if spec.compile_cache == CompileCache.NONE else f", {spec.compile_cached_s:g} s cached"
        parts.append(f"compile {spec.compile_s:g} s{cached} (cache: {spec.compile_cache})")
    return "; ".join(parts)


def table(spec: ColdStartSpec, replicas: Sequence[ReplicaReadiness]) -> list[str]:
    """The summary line and the aligned per-replica rows."""
    if not replicas:
        return ["nothing to start"]
    first = min(r.ready_s for r in replicas)
    last = max(r.ready_s for r in replicas)
    summary = f"first ready at {first:.1f} s, all ready at {last:.1f} s (seconds from now)"
    header = (
        "replica",
        "node",
        "provision",
        "pull",
        "init",
        "gate",
        "load from",
        "load start",
        "load",
        "waiting",
        "compile",
        "cache",
        "warm-up",
        "ready",
    )
    cached = spec.compile_cache != CompileCache.NONE
    rows = [
        (
            str(r.replica),
            f"new-{r.node}" if r.new_node else str(r.node),
            f"{r.provision_s:.1f}",
            f"{r.pull_s:.1f}",
            f"{r.init_s:.1f}",
            f"{r.gate_wait_s:.1f}",
            r.tier,
            f"{r.load_start_s:.1f}",
            f"{r.load_s:.1f}",
            f"{r.load_wait_s:.1f}",
            f"{r.compile_s:.1f}",
            ("hit" if r.compile_hit else "miss") if cached else "-",
            f"{r.warmup_s:.1f}",
            f"{r.ready_s:.1f}",
        )
        for r in replicas
    ]
    left_aligned = {1, 6, 11}  # node, load source and cache are words; the rest are numbers
    widths = [max(len(row[c]) for row in (header, *rows)) for c in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.ljust(w) if c in left_aligned else cell.rjust(w)
            for c, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [summary, line(header), *(line(row) for row in rows)]


def flags_of(spec: ColdStartSpec) -> list[str]:
    """The `infscale coldstart` flags that describe `spec` (defaults left out)."""
    defaults = {f.name: f.default for f in dataclasses.fields(ColdStartSpec)}
    out: list[str] = []
    for field, *_ in SPEC_FLAGS:
        value = getattr(spec, field)
        if value is None or value == defaults[field]:
            continue
        out += [FLAG_OF_FIELD[field], f"{value:g}" if isinstance(value, float) else str(value)]
    return out
