"""`infscale coldstart`: the cold-start model's per-replica ready times, as a table or JSON.

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
from autoscaler.policy.spec import ColdStartSpec

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
    "k": "--replicas",
    "free_gpus_per_node": "--free-gpus",
    "image_cached_nodes": "--image-cached-nodes",
    "weights_cached": "--weights-cached-nodes",
    "loading_remaining_gb": "--loading-gb",
}

# the ColdStartSpec fields offered as flags: (field, type, help)
SPEC_FLAGS: tuple[tuple[str, Callable[[str], object], str], ...] = (
    ("weights_gb", float, "model weights per replica, GB"),
    ("storage_gbps", float, "shared storage bandwidth, GB/s, split among the loaders"),
    ("per_loader_gbps", float, "cap on one loader's speed, GB/s"),
    ("local_cache_gbps", float, "read speed from a node-local weights cache, GB/s"),
    ("image_pull_s", float, "image pull on a node without the image, s"),
    ("warmup_s", float, "engine init and warm-up after the load, s"),
    ("node_provision_s", float, "adding a node when no existing node fits a replica, s"),
    ("gpus_per_replica", int, "whole GPUs per replica, all on one node"),
    ("gpus_per_node", int, "GPUs of a new node"),
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
    for field, kind, text in SPEC_FLAGS:
        default = defaults[field]
        required = default is dataclasses.MISSING
        shown = "required" if required else f"default: {'none' if default is None else default}"
        # default=None: an absent flag leaves the spec's own default in force (kept in one place)
        model.add_argument(
            FLAG_OF_FIELD[field], dest=field, type=kind, required=required, help=f"{text} ({shown})"
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
    loading: tuple[float, ...] = args.loading_gb
    given = {field: getattr(args, field) for field, _, _ in SPEC_FLAGS}
    spec = ColdStartSpec(**{field: value for field, value in given.items() if value is not None})
    try:
        replicas = predict_ready(
            spec,
            args.replicas,
            free_gpus_per_node=free,
            image_cached_nodes=image_cached,
            weights_cached=weights_cached,
            loading_remaining_gb=loading,
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
            "loading_remaining_gb": list(loading),
            "replicas": [dataclasses.asdict(r) for r in replicas],
            "first_ready_s": min((r.ready_s for r in replicas), default=None),
            "all_ready_s": max((r.ready_s for r in replicas), default=None),
        }
        print(json.dumps(document, indent=2, allow_nan=False))
    else:
        print(render_table(spec, replicas, loading))
    return 0


def render_table(spec: ColdStartSpec, replicas: Sequence[ReplicaReadiness], loading: Sequence[float]) -> str:
    """A headline, then one aligned row per replica (times in seconds from now)."""
    cap = f", at most {spec.per_loader_gbps:g} GB/s per loader" if spec.per_loader_gbps is not None else ""
    busy = f", {len(loading)} loader(s) already reading {sum(loading):g} GB" if loading else ""
    size = f"{len(replicas)} replica(s) of {spec.weights_gb:g} GB"
    head = f"{size} from {spec.storage_gbps:g} GB/s shared{cap}{busy}"
    if not replicas:
        return f"{head}\nnothing to start"
    first = min(r.ready_s for r in replicas)
    last = max(r.ready_s for r in replicas)
    headline = f"{head}\nfirst ready at {first:.1f} s, all ready at {last:.1f} s (seconds from now)"

    header = (
        "replica",
        "node",
        "provision",
        "pull",
        "load from",
        "load start",
        "load",
        "waiting",
        "warm-up",
        "ready",
    )
    rows = [
        (
            str(r.replica),
            f"new-{r.node}" if r.new_node else str(r.node),
            f"{r.provision_s:.1f}",
            f"{r.pull_s:.1f}",
            "cache" if r.from_cache else "shared",
            f"{r.load_start_s:.1f}",
            f"{r.load_s:.1f}",
            f"{r.load_wait_s:.1f}",
            f"{r.warmup_s:.1f}",
            f"{r.ready_s:.1f}",
        )
        for r in replicas
    ]
    left_aligned = {1, 4}  # node and load source are words; the rest are numbers
    widths = [max(len(row[c]) for row in (header, *rows)) for c in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.ljust(w) if c in left_aligned else cell.rjust(w)
            for c, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([headline, line(header), *(line(row) for row in rows)])
