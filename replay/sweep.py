"""`infscale replay sweep`: a grid over policy parameters, run in parallel processes, and the
cheapest configuration meeting the SLO printed as a complete HPA and as InferenceAutoscaler
settings.

    infscale replay sweep --policy hpa --grid target=4,8,16 --slo 0.95 \\
        --target-ref Deployment/llama-70b --selector deployment=llama-70b

A progress bar counts finished configurations (on a terminal, unless --quiet); a winner at the
edge of a numeric grid axis is reported, since the optimum may lie beyond it.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, fields, replace
from typing import Any

from autoscaler.policy.spec import ForecasterKind
from replay import report as rep
from replay.engine import load_kernel
from replay.policies import PolicyParams, build_policy
from replay.policies.planner.predictors import PredictorKind
from replay.profiles import Scenario
from replay.sweepwinner import SweepError, TargetRef, hpa_yaml, match_selector, settings_yaml
from replay.trace import Trace

SWEEP_SCHEMA = "infscale.replay.sweep/v1"


# --- the grid ---------------------------------------------------------------------------------------


def parse_grid(items: Sequence[str]) -> list[dict[str, Any]]:
    """`["target=8,16", "warm_floor=0,2"]` -> every combination, typed like PolicyParams."""
    axes = grid_axes(items)
    return [
        dict(zip([k for k, _ in axes], combo, strict=True))
        for combo in itertools.product(*(v for _, v in axes))
    ]


def grid_axes(items: Sequence[str]) -> list[tuple[str, list[Any]]]:
    known = {f.name: f for f in fields(PolicyParams)}
    axes: list[tuple[str, list[Any]]] = []
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or key not in known:
            raise SweepError(f"--grid {item!r}: expected PARAM=V1,V2 with PARAM one of {', '.join(known)}")
        parsed = [param(key, v.strip()) for v in values.split(",") if v.strip()]
        if not parsed:  # else the grid would be empty: "no configuration meets the SLO"
            raise SweepError(f"--grid {item!r}: give at least one value")
        axes.append((key, parsed))
    if not axes:
        raise SweepError("sweep: give at least one --grid PARAM=V1,V2,...")
    return axes


def param(key: str, text: str) -> Any:
    try:
        if key == "forecaster":
            return ForecasterKind(text)
        if key == "planner_predictor":
            return PredictorKind(text)
        if key == "scale_to_zero":
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if key in ("lead_time_s", "lead_quantile", "static_replicas"):
            return (
                None
                if text in ("model", "none")
                else (int(text) if key == "static_replicas" else float(text))
            )
        if key in ("downscale_window_s", "warm_floor"):
            return int(text)
        return float(text)
    except ValueError:
        raise SweepError(f"--grid {key}: cannot read {text!r}") from None


def edge_warnings(axes: Sequence[tuple[str, list[Any]]], winner: dict[str, Any]) -> list[str]:
    """One line per numeric axis of 2+ values on which the winner sits at the lowest or highest."""
    lines = []
    for key, values in axes:
        numeric = sorted({v for v in values if isinstance(v, int | float) and not isinstance(v, bool)})
        value = winner.get(key)
        if len(numeric) < 2 or value not in numeric or numeric[0] < value < numeric[-1]:
            continue
        side = "lowest" if value == numeric[0] else "highest"
        lines.append(
            f"warning: the winner's {key}={value:g} is the {side} value of the grid"
            f" ({', '.join(f'{v:g}' for v in numeric)}): the optimum may lie beyond it; extend --grid {key}"
        )
    return lines


# --- running it -------------------------------------------------------------------------------------

_SWEEP: tuple[Trace, Scenario, str, PolicyParams, float] | None = None


def _init_worker(trace: Trace, scenario: Scenario, policy: str, base: PolicyParams, warmup_s: float) -> None:
    global _SWEEP
    _SWEEP = (trace, scenario, policy, base, warmup_s)


def _sweep_point(changes: dict[str, Any]) -> dict[str, Any]:
    assert _SWEEP is not None
    return _sweep_point_of(_SWEEP, changes)


def _sweep_point_of(
    setup: tuple[Trace, Scenario, str, PolicyParams, float], changes: dict[str, Any]
) -> dict[str, Any]:
    """One configuration's summary: what a worker process or a Ray task runs."""
    from replay.cli import run_policy  # the one way a policy is built and replayed

    trace, scenario, policy, base, warmup_s = setup
    cpu = time.process_time()
    result = run_policy(trace, scenario, policy, replace(base, **changes), warmup_s=warmup_s)
    return {
        "params": {
            k: str(v) if isinstance(v, ForecasterKind | PredictorKind) else v for k, v in changes.items()
        },
        **rep.policy_summary(result),
        "cpu_seconds": time.process_time() - cpu,  # of this configuration, in its worker
    }


def sweep(
    trace: Trace,
    scenario: Scenario,
    policy: str,
    base: PolicyParams,
    grid: list[dict[str, Any]],
    workers: int,
    *,
    progress: bool = False,
    ray_address: str | None = None,
    warmup_s: float = 0.0,
) -> list[dict[str, Any]]:
    """Every grid point's summary, in grid order; `workers` processes share the points, or, with
    `ray_address` ("" for a local cluster), one Ray task each, the trace in the object store."""
    if ray_address is not None:
        from replay.league.ray_runner import ray_map

        shared = {"sweep": (trace, scenario, policy, base, warmup_s)}
        return ray_map(_sweep_point_of, shared, [("sweep", g) for g in grid], address=ray_address)
    bar: Any = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(grid), desc=f"sweep {policy}", unit="config", leave=False)
    try:
        if workers <= 1:
            _init_worker(trace, scenario, policy, base, warmup_s)
            points = []
            for g in grid:
                points.append(_sweep_point(g))
                if bar is not None:
                    bar.update(1)
            return points
        load_kernel()  # once, here: forked workers inherit it instead of each loading it
        with ProcessPoolExecutor(
            workers, initializer=_init_worker, initargs=(trace, scenario, policy, base, warmup_s)
        ) as pool:
            points = []
            for point in pool.map(_sweep_point, grid):  # in grid order, as they finish
                points.append(point)
                if bar is not None:
                    bar.update(1)
            return points
    finally:
        if bar is not None:
            bar.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", default="predictive", help="the policy whose parameters vary")
    parser.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="PARAM=V1,V2,...",
        help="values of one parameter (repeatable); parameters: "
        + ", ".join(f.name for f in fields(PolicyParams)),
    )
    parser.add_argument(
        "--slo",
        type=float,
        default=0.99,
        help="slo_attainment to reach: the share of good requests, TTFT and TPOT met (default 0.99)",
    )
    parser.add_argument("--workers", type=int, default=None, help="processes (default: cores)")
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="one Ray task per configuration (infscale[ray]); ADDRESS of a cluster, none: a local one",
    )
    parser.add_argument(
        "--target-ref",
        default=None,
        metavar="KIND/NAME",
        help="the printed HPA's scaleTargetRef (an apps/v1 kind, e.g. Deployment/llama-70b)",
    )
    parser.add_argument(
        "--selector",
        default=None,
        metavar="SELECTOR",
        help="the printed metric's label selector (default deployment=NAME of --target-ref)",
    )


def run(
    args: argparse.Namespace, trace: Trace, scenario: Scenario, params: PolicyParams, warmup_s: float = 0.0
) -> int:
    import os

    target = TargetRef.parse(args.target_ref)
    selector = match_selector(args.selector if args.selector is not None else f"deployment={target.name}")
    axes = grid_axes(args.grid)
    grid = parse_grid(args.grid)
    for g in grid:  # a bad value fails before the first long run
        build_policy(args.policy, scenario, trace, replace(params, **g), lambda: 0.0)
    workers = max(1, args.workers if args.workers is not None else os.cpu_count() or 1)
    start = time.perf_counter()
    points = sweep(
        trace,
        scenario,
        args.policy,
        params,
        grid,
        workers,
        progress=not args.quiet and sys.stderr.isatty(),
        ray_address=args.ray,
        warmup_s=warmup_s,
    )
    wall = time.perf_counter() - start
    front = rep.pareto_front(points)
    meeting = [p for p in points if p["slo_attainment"] >= args.slo]
    best = min(meeting, key=lambda p: p["gpu_hours"]) if meeting else None
    chosen = replace(params, **_typed(best)) if best else None
    warnings = edge_warnings(axes, _typed(best)) if best else []
    doc: dict[str, Any] = {
        "schema": SWEEP_SCHEMA,
        "policy": args.policy,
        "slo_attainment_goal": args.slo,
        "warmup_s": warmup_s,
        "wall_seconds": wall,
        "points": points,
        "pareto_front": front,
        "cheapest_meeting_slo": best,
        "warnings": warnings,
    }
    if chosen is not None:
        doc["hpa_yaml"] = hpa_yaml(scenario, chosen, target, selector)
        doc["inference_autoscaler_yaml"] = settings_yaml(scenario, chosen, selector)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sweep.json").write_text(rep.to_json(doc) + "\n", encoding="utf-8")
    figures = []
    if not args.no_plots:
        from replay import plots

        summary = {"scenario": asdict(scenario), "policies": {}}
        figures.append(plots.plot_frontier(args.out / "frontier.png", summary, points))
    from replay.html import write_html

    write_html(args.out / "report.html", f"Sweep: {args.policy} on {scenario.name}", doc, figures)
    if getattr(args, "output", "text") == "json":
        print(rep.to_json(doc))
        return 0 if best is not None else 1
    print(f"{len(points)} configurations of {args.policy} in {wall:.1f} s on {workers} processes")
    print("Pareto front (GPU-hours, SLO attainment, parameters):")
    for p in front:
        print(f"  {p['gpu_hours']:8.1f}  {rep.percent(p['slo_attainment'], 2)}  {p['params']}")
    if best is None or chosen is None:
        print(f"no configuration meets SLO attainment >= {args.slo}")
        return 1
    print(
        f"\ncheapest meeting SLO attainment >= {args.slo}: {best['gpu_hours']:.1f} GPU-hours, "
        f"{rep.percent(best['slo_attainment'], 2)} {best['params']}"
    )
    for line in warnings:
        print(line)
    print()
    print(doc["hpa_yaml"])
    print(doc["inference_autoscaler_yaml"])
    return 0


def _typed(point: dict[str, Any]) -> dict[str, Any]:
    return {k: None if v is None else param(k, str(v)) for k, v in point["params"].items()}
