"""The replay's figures and report.html: one load binning for every panel, a page that carries
its tables and plots inline and shows fields it was never told about."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from replay import html, plots


def _timeline(period_s: float, rate: float, until_s: float) -> list[dict[str, float]]:
    t = np.arange(0.0, until_s + period_s / 2, period_s)
    return [{"t_s": float(x), "arrivals_per_s": rate if x > 0 else 0.0, "desired": 2, "ready": 2} for x in t]


def test_every_policy_gets_the_coarsest_binning_and_the_same_load() -> None:
    policies = {
        "kpa": {"timeline": _timeline(2.0, 10.0, 300)},
        "hpa": {"timeline": _timeline(15.0, 10.0, 300)},
    }
    bin_s = plots.load_bin_s(policies)
    assert bin_s == 15.0
    (kpa_t, kpa_rate), (hpa_t, hpa_rate) = (
        plots.binned_load(p["timeline"], bin_s) for p in policies.values()
    )
    np.testing.assert_allclose(kpa_t, hpa_t)
    np.testing.assert_allclose(kpa_rate, hpa_rate)
    assert kpa_rate.sum() * bin_s == pytest.approx(10.0 * 300)  # every arrival counted once


def test_report_html_is_self_contained_and_shows_new_fields(tmp_path: Path) -> None:
    png = tmp_path / "timeline.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    doc = {
        "schema": "x/v9",
        "trace": {"name": "t", "requests": 10},
        "policies": {
            "hpa": {
                "slo_attainment": 0.9995,
                "gpu_hours": 12.5,
                "a_field_added_later": 7,
                "timeline": [{"t_s": 0}],
            },
            "kpa": {"slo_attainment": 1.0, "gpu_hours": 10.0},
        },
        "points": [{"params": {"target": 8.0}, "gpu_hours": 3.0, "slo_attainment": 0.5}],
    }
    page = html.render("Replay", doc, [png])
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert "data:image/png;base64," in page
    assert "a_field_added_later" in page and "params.target" in page
    assert "99.95%" in page and "100.00%" in page  # 0.9995 is not 100 %; 1.0 is
    rows = re.findall(r"<tr><td>(hpa|kpa)</td>", page)
    assert rows == ["hpa", "kpa"]


def test_compare_writes_report_html_and_ttft_over_time(tmp_path: Path) -> None:
    from infscale.cli import main

    argv = [
        "replay",
        "compare",
        "--policies",
        "static,hpa",
        "--end-s",
        "300",
        "--quiet",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    for p in report["policies"].values():
        over_time = p["ttft_over_time"]
        assert sum(x["requests"] for x in over_time) == p["requests_finished"]
        assert [x["t_s"] for x in over_time] == sorted(x["t_s"] for x in over_time)
        assert max(x["ttft_p99_s"] for x in over_time) == pytest.approx(p["ttft_p99_s"], rel=2.0)
    page = (tmp_path / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 2  # the timeline and the frontier, inline
    assert "<td>hpa</td>" in page
