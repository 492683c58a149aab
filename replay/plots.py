"""The replay's figures, drawn from report data (report.json's dict), never from a simulation.

Kept apart from replay/report.py so the report's schema and its pictures change independently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from replay.report import pareto_front, slo_text


def draw_all(out: Path, report: Mapping[str, Any]) -> list[Path]:
    """Every figure of a compare/run report, written into `out`."""
    return [plot_timelines(out / "timeline.png", report), plot_frontier(out / "frontier.png", report)]


def plot_timelines(path: Path, report: Mapping[str, Any]) -> Path:
    """Per policy: arrivals/s (left axis) against ready and desired replicas (right axis)."""
    plt = _pyplot()
    policies = report["policies"]
    fig, axes = plt.subplots(len(policies), 1, figsize=(10, 2.4 * len(policies)), sharex=True, squeeze=False)
    for ax, (name, p) in zip(axes[:, 0], policies.items(), strict=True):
        tl = p["timeline"]
        t = [x["t_s"] / 60 for x in tl]
        ax.fill_between(t, [x["arrivals_per_s"] for x in tl], color="0.85", step="post", label="arrivals/s")
        ax.set_ylabel("req/s")
        ax2 = ax.twinx()
        ax2.step(t, [x["desired"] for x in tl], where="post", color="tab:orange", label="desired")
        ax2.step(t, [x["ready"] for x in tl], where="post", color="tab:blue", label="ready")
        ax2.set_ylabel("replicas")
        ax.set_title(f"{name}: SLO {p['slo_attainment']:.1%}, {p['gpu_hours']:.1f} GPU-h", fontsize=9)
        if ax is axes[0, 0]:
            ax2.legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("minutes")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_frontier(path: Path, report: Mapping[str, Any], points: Sequence[Mapping[str, Any]] = ()) -> Path:
    """GPU-hours against SLO attainment for each policy (and each sweep point), Pareto front drawn."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    if points:
        xs = [p["gpu_hours"] for p in points]
        ys = [p["slo_attainment"] for p in points]
        ax.scatter(xs, ys, s=12, color="0.6", label="sweep")
        front = pareto_front(points)
        ax.step(
            [p["gpu_hours"] for p in front],
            [p["slo_attainment"] for p in front],
            where="post",
            color="tab:red",
            label="Pareto front",
        )
    for name, p in report["policies"].items():
        ax.scatter([p["gpu_hours"]], [p["slo_attainment"]], s=40)
        ax.annotate(
            name, (p["gpu_hours"], p["slo_attainment"]), fontsize=8, xytext=(4, 4), textcoords="offset points"
        )
    ax.set_xlabel("GPU-hours")
    ax.set_ylabel(f"SLO attainment ({slo_text(report['scenario'])})")
    ax.set_title("cost vs SLO")
    if points:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt

    return plt
