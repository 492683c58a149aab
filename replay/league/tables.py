"""A league's rows -> its tables: per trace, rate scale and scenario the policies side by side
with their deltas against `hpa` and who beats whom on both axes; the start-up sweep with where
each policy's SLO collapses; the summary of who wins where. Pure functions of the rows.

Dominance is Pareto on the two axes a comparison is judged by: policy q beats p when q's
slo_attainment >= p's and q's GPU-hours <= p's, one of them strictly. Only cases that ran to the
end (`ok`) take part, a run cut with requests unserved among them (`requests_unfinished`, each a
miss: it loses on SLO); a failed case is reported as such.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

REFERENCE = "hpa"  # the deltas are against the stock HPA
BOUND = "clairvoyant"  # the reference bound: beating it is not expected, only approached
COLLAPSE_DROP = 0.05  # a start-up sweep collapses where SLO falls 5 points below its shortest start-up's
PREDICTIVE = "predictive"
BASELINES_EXCLUDED = (PREDICTIVE, BOUND)

Row = Mapping[str, Any]


def beats(q: Row, p: Row) -> bool:
    """q is at least as good on both axes and strictly better on one."""
    qs, ps = float(q["slo_attainment"]), float(p["slo_attainment"])
    qg, pg = float(q["gpu_hours"]), float(p["gpu_hours"])
    return qs >= ps and qg <= pg and (qs > ps or qg < pg)


def group_key(row: Row) -> tuple[str, float, str]:
    return (row["trace"], row["rate_scale"], row["scenario"])


def _groups(rows: Iterable[Row], *, sweep: bool) -> dict[tuple[str, float, str], list[Row]]:
    out: dict[tuple[str, float, str], list[Row]] = {}
    for row in rows:
        if (row.get("startup_s") is not None) == sweep:
            out.setdefault(group_key(row), []).append(row)
    return out


def case_tables(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """One table per (trace, rate scale, scenario) of the main league (its own cold start)."""
    tables = []
    for (trace, scale, scenario), group in _groups(rows, sweep=False).items():
        ok = [r for r in group if r["status"] == "ok"]
        ref = next((r for r in ok if r["policy"] == REFERENCE), None)
        entries = []
        for r in group:
            entry: dict[str, Any] = {"policy": r["policy"], "status": r["status"]}
            if r["status"] == "ok":
                entry.update(
                    {
                        k: r[k]
                        for k in (
                            "slo_attainment",
                            "goodput_per_gpu_hour",
                            "gpu_hours",
                            "ttft_p99_s",
                            "tpot_p99_s",
                            "cold_starts",
                        )
                    }
                )
                entry["requests_unfinished"] = r.get("requests_unfinished", 0)
                entry["beaten_by"] = [q["policy"] for q in ok if beats(q, r)]
                if ref is not None:
                    entry["d_slo_points"] = 100.0 * (r["slo_attainment"] - ref["slo_attainment"])
                    entry["d_gpu_hours_pct"] = _pct(r["gpu_hours"], ref["gpu_hours"])
            else:
                entry["error"] = r.get("error", "")
            entries.append(entry)
        front = sorted(
            (e for e in entries if e["status"] == "ok" and not e["beaten_by"]), key=lambda e: e["gpu_hours"]
        )
        tables.append(
            {
                "trace": trace,
                "rate_scale": scale,
                "scenario": scenario,
                "requests": group[0]["requests"],
                "policies": entries,
                "pareto_front": [e["policy"] for e in front],
                "goals": predictive_goals(entries),
            }
        )
    return tables


def predictive_goals(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Issue 11's goals for `predictive` on one case, with the figures (None: not all present)."""
    by = {e["policy"]: e for e in entries if e["status"] == "ok"}
    p = by.get(PREDICTIVE)
    if p is None:
        return None
    baselines = [name for name in by if name not in BASELINES_EXCLUDED]
    out: dict[str, Any] = {
        "beaten_by_no_baseline": not [q for q in p["beaten_by"] if q in baselines],
        "beaten_by": [q for q in p["beaten_by"] if q in baselines],
    }
    hpa = by.get(REFERENCE)
    if hpa is not None:
        out["slo_ge_hpa_at_le_hpa_gpu_hours"] = (
            p["slo_attainment"] >= hpa["slo_attainment"] and p["gpu_hours"] <= hpa["gpu_hours"]
        )
    rivals = [by[n] for n in baselines if not math.isnan(_num(by[n]["goodput_per_gpu_hour"]))]
    if rivals:
        best = max(rivals, key=lambda e: _num(e["goodput_per_gpu_hour"]))
        out["best_goodput_per_gpu_hour"] = _num(p["goodput_per_gpu_hour"]) >= _num(
            best["goodput_per_gpu_hour"]
        )
        out["best_baseline_goodput_per_gpu_hour"] = best["policy"]
    bound = by.get(BOUND)
    if bound is not None:
        out["slo_gap_to_clairvoyant_points"] = 100.0 * (bound["slo_attainment"] - p["slo_attainment"])
        out["gpu_hours_vs_clairvoyant"] = (
            p["gpu_hours"] / bound["gpu_hours"] if bound["gpu_hours"] else math.inf
        )
        out["within_1_point_at_1_10x"] = (
            out["slo_gap_to_clairvoyant_points"] <= 1.0 and out["gpu_hours_vs_clairvoyant"] <= 1.10
        )
    return out


def sweep_tables(rows: Sequence[Row], drop: float = COLLAPSE_DROP) -> list[dict[str, Any]]:
    """Per (trace, rate scale, scenario): each policy's SLO at each start-up time, and where it
    collapses (the first start-up at which it falls more than `drop` below its own SLO at the
    shortest start-up; None: it holds over the whole sweep)."""
    tables = []
    for (trace, scale, scenario), group in _groups(rows, sweep=True).items():
        startups = sorted({r["startup_s"] for r in group})
        policies: dict[str, dict[str, Any]] = {}
        for r in sorted(group, key=lambda r: r["startup_s"]):
            p = policies.setdefault(r["policy"], {"policy": r["policy"], "points": []})
            p["points"].append(
                {
                    "startup_s": r["startup_s"],
                    "status": r["status"],
                    "slo_attainment": r.get("slo_attainment") if r["status"] == "ok" else None,
                    "gpu_hours": r.get("gpu_hours") if r["status"] == "ok" else None,
                }
            )
        for p in policies.values():
            p["collapses_at_s"] = _collapse(p["points"], drop)
        tables.append(
            {
                "trace": trace,
                "rate_scale": scale,
                "scenario": scenario,
                "startups_s": startups,
                "policies": list(policies.values()),
            }
        )
    return tables


def _collapse(points: Sequence[Mapping[str, Any]], drop: float) -> float | None:
    first = points[0]
    if first["slo_attainment"] is None:
        return float(first["startup_s"])
    for pt in points[1:]:
        if pt["slo_attainment"] is None or pt["slo_attainment"] < first["slo_attainment"] - drop:
            return float(pt["startup_s"])
    return None


def summary(tables: Sequence[Mapping[str, Any]], sweeps: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Who wins where: per policy, the cases where it is on the Pareto front, where it is beaten
    (and by whom), and where it holds the SLO in the sweep."""
    policies: dict[str, dict[str, Any]] = {}
    for t in tables:
        case = f"{t['trace']}@{t['rate_scale']:g} on {t['scenario']}"
        for e in t["policies"]:
            p = policies.setdefault(e["policy"], {"on_front": [], "beaten": {}, "not_ok": []})
            if e["status"] != "ok":
                p["not_ok"].append(f"{case} ({e['status']})")
            elif e["beaten_by"]:
                p["beaten"][case] = e["beaten_by"]
            else:
                p["on_front"].append(case)
    for s in sweeps:
        case = f"{s['trace']}@{s['rate_scale']:g} on {s['scenario']}"
        for e in s["policies"]:
            p = policies.setdefault(e["policy"], {"on_front": [], "beaten": {}, "not_ok": []})
            p.setdefault("collapses_at_s", {})[case] = e["collapses_at_s"]
    return {"policies": policies}


def _pct(x: float, ref: float) -> float:
    return 100.0 * (x / ref - 1.0) if ref else math.inf


def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


# --- Markdown ---------------------------------------------------------------------------------------


def _unfinished(entry: Mapping[str, Any]) -> str:
    n = entry.get("requests_unfinished", 0)
    return f" ({n:,} requests unfinished: the run was cut)" if n else ""


def markdown(doc: Mapping[str, Any]) -> str:
    lines = ["# infscale replay league", ""]
    lines += [
        f"{len(doc['rows'])} cases ({doc['cpu_seconds']:.0f} CPU-s, {doc['wall_seconds']:.0f} s wall). "
        f"SLO: {doc['slo']}. Deltas are against `{REFERENCE}` (SLO in points, GPU-hours in %); "
        "`beaten by`: better or equal on both axes, strictly on one.",
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
                f"{e['gpu_hours']:.1f} | {_f(e['ttft_p99_s'], 2)} s | {_ms(e['tpot_p99_s'])} | "
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
    parts = [
        "beaten by no baseline" if g["beaten_by_no_baseline"] else f"beaten by {', '.join(g['beaten_by'])}"
    ]
    if "slo_ge_hpa_at_le_hpa_gpu_hours" in g:
        parts.append(("" if g["slo_ge_hpa_at_le_hpa_gpu_hours"] else "not ") + "SLO ≥ hpa at ≤ hpa GPU-h")
    if "best_goodput_per_gpu_hour" in g:
        parts.append(
            "best goodput/GPU-h"
            if g["best_goodput_per_gpu_hour"]
            else f"goodput/GPU-h below {g['best_baseline_goodput_per_gpu_hour']}"
        )
    if "within_1_point_at_1_10x" in g:
        parts.append(
            f"{g['slo_gap_to_clairvoyant_points']:.2f} points below clairvoyant at "
            f"{g['gpu_hours_vs_clairvoyant']:.2f}× its GPU-h "
            f"({'met' if g['within_1_point_at_1_10x'] else 'not met'})"
        )
    return "; ".join(parts)


def _mode_text(mode: str) -> str:
    return "every phase slower or faster alike" if mode == "dilate" else "the storage bandwidth alone"


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def _f(x: Any, digits: int) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def _ms(x: Any) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x * 1000:.0f} ms"


def _signed(x: Any, digits: int) -> str:
    return "—" if x is None else f"{x:+.{digits}f}"
