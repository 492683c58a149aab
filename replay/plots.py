"""The replay's figures, drawn from report data (report.json's dict), never from a simulation.

Kept apart from replay/report.py so the report's schema and its pictures change independently.
Panels that compare share their axes: one load binning for every policy (each policy's timeline
is re-binned to the coarsest sampling of them all, so the same trace looks the same), one replica
scale with integer ticks, one TTFT scale; percentages never round up to 100 %.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from replay.report import pareto_front, percent

MIN_BIN_S = 15.0  # the HPA's sync period: no panel bins finer than the coarsest policy's sampling


def draw_all(out: Path, report: Mapping[str, Any]) -> list[Path]:
    """Every figure of a compare/run report, written into `out`."""
    return [plot_timelines(out / "timeline.png", report), plot_frontier(out / "frontier.png", report)]


def load_bin_s(policies: Mapping[str, Mapping[str, Any]]) -> float:
    """The common load binning: the coarsest median sampling interval of the timelines."""
    widths = [MIN_BIN_S]
    for p in policies.values():
        t = [x["t_s"] for x in p.get("timeline", ())]
        if len(t) > 1:
            widths.append(float(np.median(np.diff(t))))
    return max(widths)


def binned_load(
    timeline: Sequence[Mapping[str, Any]], bin_s: float
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(bin starts, arrivals/s) of one timeline on bins of `bin_s`: each sample's arrivals (its
    rate over the interval since the previous sample) spread evenly over that interval, so a
    sample straddling two bins gives each its share."""
    if not timeline:
        return np.zeros(0), np.zeros(0)
    t = np.array([x["t_s"] for x in timeline], dtype=float)
    rate = np.array([x["arrivals_per_s"] for x in timeline], dtype=float)
    cumulative = np.cumsum(rate * np.diff(t, prepend=t[0]))
    start = min(0.0, math.floor(t[0] / bin_s) * bin_s)  # a warm-up's timeline begins before 0
    edges = np.arange(start, t[-1] + bin_s, bin_s)
    if len(edges) < 2:
        edges = np.array([start, start + bin_s])
    counts = np.diff(np.interp(edges, t, cumulative))
    return edges[:-1], counts / bin_s


def plot_timelines(path: Path, report: Mapping[str, Any]) -> Path:
    """Per policy: arrivals/s (bars) against desired and ready replicas, on shared scales; then
    every policy's TTFT p99 over time in one panel."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    policies = report["policies"]
    bin_s = load_bin_s(policies)
    loads = {name: binned_load(p.get("timeline", ()), bin_s) for name, p in policies.items()}
    load_top = max((float(r.max()) for _, r in loads.values() if len(r)), default=1.0) * 1.08 or 1.0
    replica_top = max(
        (max(x["desired"], x["ready"]) for p in policies.values() for x in p.get("timeline", ())), default=1
    )
    has_ttft = any(p.get("ttft_over_time") for p in policies.values())
    rows = len(policies) + (1 if has_ttft else 0)
    fig, axes = plt.subplots(rows, 1, figsize=(10, 2.4 * rows), sharex=True, squeeze=False)
    for ax, (name, p) in zip(axes[:, 0], policies.items(), strict=False):
        starts, rate = loads[name]
        ax.bar(
            starts / 60,
            rate,
            width=bin_s / 60,
            align="edge",
            color="0.85",
            label=f"arrivals/s ({bin_s:g} s bins)",
        )
        ax.set_ylim(0, load_top)
        ax.set_ylabel("req/s")
        ax2 = ax.twinx()
        tl = p.get("timeline", ())
        t = [x["t_s"] / 60 for x in tl]
        ax2.step(t, [x["desired"] for x in tl], where="post", color="tab:orange", label="desired")
        ax2.step(t, [x["ready"] for x in tl], where="post", color="tab:blue", label="ready")
        ax2.set_ylim(0, replica_top * 1.08 + 0.5)
        ax2.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax2.set_ylabel("replicas")
        ax.set_title(
            f"{name}: SLO {percent(p['slo_attainment'])}, {p['gpu_hours']:.1f} GPU-h, "
            f"{p.get('cold_starts', 0)} cold starts",
            fontsize=9,
        )
        if ax is axes[0, 0]:
            handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
            labels = ax.get_legend_handles_labels()[1] + ax2.get_legend_handles_labels()[1]
            ax2.legend(handles, labels, loc="upper right", fontsize=8)
    if has_ttft:
        ax = axes[-1, 0]
        slo = _ttft_slo(report)
        for name, p in policies.items():
            points = [x for x in p.get("ttft_over_time", ()) if x.get("ttft_p99_s") is not None]
            ax.step(
                [x["t_s"] / 60 for x in points], [x["ttft_p99_s"] for x in points], where="post", label=name
            )
        if slo is not None:
            ax.axhline(slo, color="tab:red", linestyle="--", linewidth=1, label=f"TTFT SLO {slo:g} s")
        from matplotlib.ticker import FuncFormatter

        ax.set_yscale("log")  # 0.1 s to minutes: the SLO line and the tail on one scale
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_ylabel("TTFT p99 (s)")
        ax.set_title("TTFT p99 over time, by arrival minute", fontsize=9)
        ax.legend(fontsize=7, ncol=4, loc="upper right")
    axes[-1, 0].set_xlabel("minutes")
    return _save(plt, fig, path)


def plot_frontier(path: Path, report: Mapping[str, Any], points: Sequence[Mapping[str, Any]] = ()) -> Path:
    """GPU-hours against SLO attainment for each policy (and each sweep point, each labelled with
    its parameters), the Pareto front drawn; the axes fit the points, never past 100 %."""
    plt = _pyplot()
    from matplotlib.ticker import PercentFormatter

    fig, ax = plt.subplots(figsize=(7, 5))
    xs: list[float] = []
    ys: list[float] = []
    if points:
        front = pareto_front(points)
        on_front = {id(p) for p in front}
        # configurations with the same outcome share one dot and one label: every one is named
        groups: dict[tuple[float, float], list[Mapping[str, Any]]] = {}
        for p in points:
            groups.setdefault((p["gpu_hours"], p["slo_attainment"]), []).append(p)
        for (x, y), same in groups.items():
            xs.append(x)
            ys.append(y)
            best = any(id(p) in on_front for p in same)
            ax.scatter([x], [y], s=18, color="tab:red" if best else "0.6", zorder=3)
            label = " | ".join(
                ", ".join(f"{k}={_short(v)}" for k, v in p.get("params", {}).items()) for p in same
            )
            ax.annotate(label, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
        ax.step(
            [p["gpu_hours"] for p in front],
            [p["slo_attainment"] for p in front],
            where="post",
            color="tab:red",
            linewidth=1,
            label="Pareto front",
        )
    for name, p in report["policies"].items():
        x, y = p["gpu_hours"], p["slo_attainment"]
        if not (_finite(x) and _finite(y)):  # an online run without --gpus-per-endpoint has no cost
            continue
        xs.append(x)
        ys.append(y)
        ax.scatter([x], [y], s=40, zorder=4)
        ax.annotate(f"{name} ({percent(y)})", (x, y), fontsize=8, xytext=(4, 4), textcoords="offset points")
    if xs:
        x_pad = max((max(xs) - min(xs)) * 0.1, max(xs) * 0.05, 0.05)
        y_pad = max((max(ys) - min(ys)) * 0.1, 0.005)
        ax.set_xlim(max(0.0, min(xs) - x_pad), max(xs) + x_pad * 2)
        ax.set_ylim(max(0.0, min(ys) - y_pad), min(1.0 + y_pad / 4, max(ys) + y_pad))
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=1))
    ax.set_xlabel("GPU-hours")
    slo = _ttft_slo(report)
    ax.set_ylabel("SLO attainment" + (f" (TTFT <= {slo:g} s)" if slo is not None else ""))
    ax.set_title("cost vs SLO")
    if points:
        ax.legend(fontsize=8, loc="lower right")
    return _save(plt, fig, path)


def _ttft_slo(report: Mapping[str, Any]) -> float | None:
    scenario = report.get("scenario") or {}
    slo = scenario.get("slo")
    value = slo.get("ttft_s") if isinstance(slo, Mapping) else scenario.get("slo_ttft_s")
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _short(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def plot_league_frontiers(path: Path, doc: Mapping[str, Any]) -> Path:
    """`infscale replay league`: per case, GPU-hours against SLO attainment of every policy."""
    plt = _pyplot()
    cases = doc["tables"]
    fig, axes = _panels(plt, len(cases))
    for ax, t in zip(axes.flat, cases, strict=False):
        for e in t["policies"]:
            if e["status"] != "ok":
                continue
            on_front = not e["beaten_by"]
            ax.scatter([e["gpu_hours"]], [e["slo_attainment"]], s=40 if on_front else 18)
            ax.annotate(
                e["policy"],
                (e["gpu_hours"], e["slo_attainment"]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
        ax.set_title(f"{t['trace']} x{t['rate_scale']:g} on {t['scenario']}", fontsize=9)
        ax.set_xlabel("GPU-hours")
        ax.set_ylabel("SLO attainment")
    return _save(plt, fig, path, unused=list(axes.flat)[len(cases) :])


def plot_league_startup(path: Path, doc: Mapping[str, Any]) -> Path:
    """`infscale replay league`: SLO attainment against the start-up time, one line per policy."""
    plt = _pyplot()
    sweeps = doc["sweeps"]
    fig, axes = _panels(plt, len(sweeps))
    for ax, s in zip(axes.flat, sweeps, strict=False):
        for p in s["policies"]:
            pts = [pt for pt in p["points"] if pt["slo_attainment"] is not None]
            ax.plot(
                [pt["startup_s"] for pt in pts],
                [pt["slo_attainment"] for pt in pts],
                marker="o",
                label=p["policy"],
            )
        ax.set_title(f"{s['trace']} x{s['rate_scale']:g} on {s['scenario']}", fontsize=9)
        ax.set_xlabel("start-up of one replica on a cold cluster (s)")
        ax.set_ylabel("SLO attainment")
    axes.flat[0].legend(fontsize=7)
    return _save(plt, fig, path, unused=list(axes.flat)[len(sweeps) :])


def _panels(plt: Any, n: int) -> tuple[Any, Any]:
    """A figure of n panels (one per league case or sweep), three to a row at the most."""
    cols = min(3, max(1, n))
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.8 * rows), squeeze=False)
    return fig, axes


def _save(plt: Any, fig: Any, path: Path, unused: Sequence[Any] = ()) -> Path:
    """Every figure's end: the `unused` panels of a grid hidden, laid out, written at 100 dpi, closed."""
    for ax in unused:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt

    return plt
