"""A league document -> Markdown (league.md, and the text `infscale replay league` prints): per case
the policies side by side, the Pareto front and predictive's goals, the start-up sweep, the goal
tally and who wins where."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from replay.cells import ms
from replay.league.tables import COLLAPSE_DROP, GOALS, REFERENCE, goal_tally


def _unfinished(entry: Mapping[str, Any]) -> str:
    n = entry.get("requests_unfinished", 0)
    return f" ({n:,} requests unfinished: the run was cut)" if n else ""


def _warmup_text(doc: Mapping[str, Any]) -> str:
    """The warm-up every case played before its trace (a document before it had none)."""
    setting = doc.get("warmup_s", 0)
    if setting == "auto":
        seconds = sorted({r["warmup_s"] for r in doc["rows"] if "warmup_s" in r})
        each = ", ".join(f"{w:,.0f} s" for w in seconds)
        return f"Each case played a warm-up of its trace before it, unscored ({each}: docs/replay.md)."
    if setting:
        return f"Each case played a warm-up of {setting:,.0f} s of its trace before it, unscored."
    return "No warm-up: every case began on its warm start with empty engines."


def markdown(doc: Mapping[str, Any]) -> str:
    lines = ["# infscale replay league", ""]
    lines += [
        f"{len(doc['rows'])} cases ({doc['cpu_seconds']:.0f} CPU-s, {doc['wall_seconds']:.0f} s wall). "
        f"SLO: {doc['slo']}. Deltas are against `{REFERENCE}` (SLO in points, GPU-hours in %); "
        "`beaten by`: better or equal on both axes, strictly on one. " + _warmup_text(doc),
        "",
    ]
    for t in doc["tables"]:
        lines += [
            f"## {t['trace']} × {t['rate_scale']:g} on {t['scenario']} ({t['requests']:,} requests)",
            "",
            "| policy | SLO | goodput / GPU-h | GPU-h | TTFT p99 | TPOT p99 | cold starts | ΔSLO | ΔGPU-h "
            "| beaten by |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for e in t["policies"]:
            if e["status"] != "ok":
                lines.append(
                    f"| {e['policy']} | {e['status']} | | | | | | | | {_first_line(e.get('error', ''))} |"
                )
                continue
            lines.append(
                f"| {e['policy']} | {e['slo_attainment']:.2%} | {_f(e['goodput_per_gpu_hour'], 0)} | "
                f"{e['gpu_hours']:.1f} | {_f(e['ttft_p99_s'], 2)} s | {ms(e['tpot_p99_s'])} | "
                f"{e['cold_starts']} | {_signed(e.get('d_slo_points'), 2)} | "
                f"{_signed(e.get('d_gpu_hours_pct'), 1)} % | "
                f"{', '.join(e['beaten_by']) or '—'}{_unfinished(e)} |"
            )
        lines += ["", f"Pareto front (by GPU-hours): {', '.join(t['pareto_front']) or '—'}."]
        g = t.get("goals")
        if g:
            lines.append("")
            lines.append("predictive against its goals: " + _goals_text(g) + ".")
        lines.append("")
    if doc["sweeps"]:
        lines += [
            "## Start-up sweep",
            "",
            "SLO attainment as the cold start of one replica on a cold cluster grows "
            f"({doc['startup']['mode']}: {_mode_text(doc['startup']['mode'])}); *collapses at*: the first "
            "start-up at which the SLO is more than "
            f"{COLLAPSE_DROP * 100:g} points below the policy's own at the shortest.",
            "",
        ]
        for s in doc["sweeps"]:
            head = " | ".join(f"{x:g} s" for x in s["startups_s"])
            lines += [
                f"### {s['trace']} × {s['rate_scale']:g} on {s['scenario']}",
                "",
                f"| policy | {head} | collapses at |",
                "|---|" + "---:|" * len(s["startups_s"]) + "---:|",
            ]
            for p in s["policies"]:
                cells = " | ".join(
                    f"{pt['slo_attainment']:.1%}" if pt["slo_attainment"] is not None else pt["status"]
                    for pt in p["points"]
                )
                at = "holds" if p["collapses_at_s"] is None else f"{p['collapses_at_s']:g} s"
                lines.append(f"| {p['policy']} | {cells} | {at} |")
            lines.append("")
    tally = goal_tally(doc["tables"], doc["sweeps"])
    if tally is not None:
        lines += ["## Predictive against issue 11's goals", "", _tally_text(tally), ""]
    lines += ["## Who wins where", ""]
    for name, p in doc["summary"]["policies"].items():
        parts = [f"on the front in {len(p['on_front'])}"]
        if p["beaten"]:
            by: dict[str, int] = {}
            for winners in p["beaten"].values():
                for w in winners:
                    by[w] = by.get(w, 0) + 1
            parts.append(
                f"beaten in {len(p['beaten'])} (by "
                + ", ".join(f"{w} ×{n}" for w, n in sorted(by.items()))
                + ")"
            )
        if p["not_ok"]:
            parts.append(f"did not finish in {len(p['not_ok'])}")
        collapses = p.get("collapses_at_s")
        if collapses:
            held = sum(1 for v in collapses.values() if v is None)
            parts.append(f"holds the SLO over the whole start-up sweep in {held} of {len(collapses)}")
        lines.append(f"- **{name}**: " + "; ".join(parts) + ".")
    lines.append("")
    return "\n".join(lines)


def _goals_text(g: Mapping[str, Any]) -> str:
    margins = g.get("beaten_by_margins") or {}
    parts = [
        "beaten by no baseline"
        if g["beaten_by_no_baseline"]
        else "beaten by " + ", ".join(_beaten_text(name, margins.get(name)) for name in g["beaten_by"])
    ]
    if "slo_ge_hpa_at_le_hpa_gpu_hours" in g:
        parts.append(("" if g["slo_ge_hpa_at_le_hpa_gpu_hours"] else "not ") + "SLO ≥ hpa at ≤ hpa GPU-h")
    if "best_goodput_per_gpu_hour" in g:
        parts.append(
            "best goodput/GPU-h"
            if g["best_goodput_per_gpu_hour"]
            else f"goodput/GPU-h below {g['best_baseline_goodput_per_gpu_hour']}"
            + (" (so is the clairvoyant's)" if g.get("clairvoyant_below_best_goodput") else "")
        )
    if "within_1_point_at_1_10x" in g:
        parts.append(
            f"{g['slo_gap_to_clairvoyant_points']:.2f} points below clairvoyant at "
            f"{g['gpu_hours_vs_clairvoyant']:.2f}× its GPU-h "
            f"({'met' if g['within_1_point_at_1_10x'] else 'not met'}"
            + _also_met_by(g.get("baselines_within_1_point_at_1_10x"))
            + ")"
        )
    return "; ".join(parts)


def _beaten_text(name: str, margin: Mapping[str, Any] | None) -> str:
    """A baseline that beats predictive, and by how much where the margin is known."""
    if margin is None:
        return name
    more = margin["requests"]
    fewer = margin["gpu_hours"]
    slo = f"{more:+,} request{'s' if abs(more) != 1 else ''} in time of {margin['of_requests']:,}"
    if fewer >= 0.05:
        cost = f"{fewer:.1f} GPU-h fewer"
    else:
        cost = "under 0.05 GPU-h fewer" if fewer > 0.0 else "the same GPU-h"
    return f"{name} ({slo}, {cost})"


def _also_met_by(names: Sequence[str] | None) -> str:
    """The baselines that meet the last goal too, after predictive's verdict on it."""
    return f"; baselines within it: {', '.join(names)}" if names else ""


def _tally_text(t: Mapping[str, Any]) -> str:
    n = t["cases"]
    text = "; ".join(f"{t[key]} of {n} {text}" for key, text in GOALS)
    if t["clairvoyant_cases"]:
        # the bound's own score says which goals a case allows at the SLO at all
        met = t["clairvoyant_meets"]
        text += ". The clairvoyant's own schedule, scored the same way: " + "; ".join(
            f"{met[key]} of {t['clairvoyant_cases']} {text}" for key, text in GOALS[:3]
        )
    near = t.get("baselines_within_1_point_at_1_10x")
    if near is not None and t["clairvoyant_cases"]:
        # whether a miss is one any policy here avoids without the future (static-peak has it: it
        # is sized from the trace's own peak)
        text += (
            ". Within 1 point of the clairvoyant at ≤ 1.10× its GPU-h, the baselines: "
            + (", ".join(f"{name} in {n}" for name, n in sorted(near.items())) or "none")
            + (" (static-peak is sized from the trace's own peak)" if "static-peak" in near else "")
            + f"; predictive misses it in {t['within_1_point_at_1_10x_missed']}, every baseline too in "
            f"{t['within_1_point_at_1_10x_missed_by_every_baseline']} of those"
        )
    beaten = t.get("beaten")
    if beaten:
        # each with its margin: one request at the same GPU-hours is the replay's own spread
        text += f". Beaten in {len(beaten)}: " + "; ".join(
            f"{b['case']} by " + ", ".join(_beaten_text(name, m) for name, m in b["by"].items())
            for b in beaten
        )
    text += (
        f". Summed: SLO {t['slo_points']:,.2f} points, {t['gpu_hours']:,.1f} GPU-h, "
        f"{t['cold_starts']:,} cold starts."
    )
    if t["sweeps"]:
        text += (
            f" Start-up sweep: holds in {t['sweep_holds']} of {t['sweeps']}, collapses no earlier than hpa "
            f"in {t['sweep_no_earlier_than_hpa']}."
        )
    return text


def _mode_text(mode: str) -> str:
    return "every phase slower or faster alike" if mode == "dilate" else "the storage bandwidth alone"


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def _f(x: Any, digits: int) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def _signed(x: Any, digits: int) -> str:
    return "—" if x is None else f"{x:+.{digits}f}"
