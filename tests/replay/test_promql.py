"""replay/metrics/promql.py against upstream's own test cases and against a real Prometheus.

The real one (the Debian package, tests/prometheus_server.py) gets the same counter samples through
promtool's OpenMetrics backfill, so every sample has the timestamp we chose; its answers to
rate(c[W]) and to the instant selector `c`, at many evaluation times, must equal ours for the
semantics of its version.
"""

from __future__ import annotations

import math
import random
import shutil
from pathlib import Path

import httpx
import pytest

from replay.metrics.promql import (
    PROMETHEUS_2_42,
    PROMETHEUS_3,
    Semantics,
    instant,
    rate,
    semantics_for,
)
from tests.prometheus_server import PROMETHEUS, backfill, prometheus, prometheus_version

MINUTE = 60.0


def _load(step_s: float, *values: float) -> tuple[list[float], list[float]]:
    """promqltest's `load 5m` + a value list: samples at 0, step, 2 step, ..."""
    return [i * step_s for i in range(len(values))], list(values)


def _series(start: float, step: float, times: int) -> list[float]:
    """promqltest's `start+stepxN`."""
    return [start + step * i for i in range(times + 1)]


# promql/promqltest/testdata/functions.test (v3.x), "Tests for rate()" and "Tests for increase()"
def test_upstream_rate_and_increase_cases() -> None:
    t, v = _load(5 * MINUTE, *_series(0, 27, 4), *_series(0, 27, 5))
    assert rate(t, v, 50 * MINUTE, 50 * MINUTE) == pytest.approx(0.08)
    t, v = _load(5 * MINUTE, *_series(0, 10, 9), 0, 10)
    assert rate(t, v, 50 * MINUTE, 5 * MINUTE) is None  # one sample in (45m, 50m]
    assert rate(t, v, 50 * MINUTE, 6 * MINUTE) == 0
    t, v = _load(5 * MINUTE, *_series(0, 80, 10))
    assert rate(t, v, 50 * MINUTE, 50 * MINUTE) == pytest.approx(0.26666666666666666)
    # increase() is rate() x range: 0 1 2 3 2 3 4 over 30m reads as 7
    t, v = _load(5 * MINUTE, 0, 1, 2, 3, 2, 3, 4)
    assert rate(t, v, 30 * MINUTE, 30 * MINUTE) * 30 * MINUTE == pytest.approx(7)
    for start, want in ((0, 100), (10, 105), (1, 101)):  # zero-point limit of the left extrapolation
        t, v = _load(5 * MINUTE, *_series(start, 10, 10))
        assert rate(t, v, 50 * MINUTE, 100 * MINUTE) * 100 * MINUTE == pytest.approx(want)


@pytest.mark.parametrize(
    ("semantics", "want"),
    [
        # v3.x functions.test: the zero cutoff limits only up to half a sampling interval
        pytest.param(PROMETHEUS_3, [0.5, 0.55, 0.6, 0.6, 0.6, 0.6], id="3.x"),
        # v2.42 promql/testdata/functions.test: the old order lengthened it (0.65, 0.7), then jumped back
        pytest.param(PROMETHEUS_2_42, [0.5, 0.55, 0.6, 0.65, 0.7, 0.6], id="2.42"),
    ],
)
def test_upstream_zero_cutoff_cases(semantics: Semantics, want: list[float]) -> None:
    got = []
    for start_min in range(6):
        t, v = _load(4 * MINUTE, *_series(60 * start_min, 240, 10))
        got.append(rate(t, v, 10 * MINUTE, 20 * MINUTE, semantics))
    assert got == pytest.approx(want)
    for start_min in range(6):  # far from the start: the usual half-interval cut
        t, v = _load(4 * MINUTE, *_series(60 * start_min, 240, 10))
        assert rate(t, v, 50 * MINUTE, 20 * MINUTE, semantics) == pytest.approx(0.6)


def test_range_start_is_open_from_3_0() -> None:
    t, v = [0.0, 10.0, 20.0], [0.0, 10.0, 20.0]
    assert rate(t, v, 20.0, 10.0, PROMETHEUS_3) is None  # only the sample at 20 is in (10, 20]
    assert rate(t, v, 20.0, 10.0, PROMETHEUS_2_42) == pytest.approx(1.0)  # [10, 20] has two
    assert instant(t, 310.0, semantics=PROMETHEUS_3) == 2
    assert instant(t, 310.0 + 1e-3, semantics=PROMETHEUS_3) == 2
    assert instant([0.0], 300.0, semantics=PROMETHEUS_3) is None  # (0, 300] misses the sample at 0
    assert instant([0.0], 300.0, semantics=PROMETHEUS_2_42) == 0


def test_semantics_by_version() -> None:
    assert semantics_for((3, 5)) == PROMETHEUS_3
    assert semantics_for((2, 53)) == Semantics(left_open=False, cut_before_zero=True)
    assert semantics_for((2, 42)) == PROMETHEUS_2_42


# --- against a real Prometheus ---------------------------------------------------------------------

BASE = 1_700_000_000.0  # epoch seconds; every time below is on a 1/8 s grid: exact in float and in ms
GRID = 0.125


def _on_grid(x: float) -> float:
    return round(x / GRID) * GRID


def _random_series(rng: random.Random) -> tuple[list[float], list[float]]:
    """A counter as scrapes see it: a regular interval with jitter, missed scrapes, a late start or
    an early end, flat stretches, resets to a small value, and first values from 0 to large."""
    interval = rng.choice([5.0, 15.0, 30.0])
    t = BASE + _on_grid(rng.uniform(0, 400))
    end = BASE + _on_grid(rng.uniform(600, 1_500))
    value = rng.choice([0.0, float(rng.randint(1, 50)), float(rng.randint(100, 10_000))])
    times, values = [], []
    while t < end:
        if rng.random() > 0.08:  # a missed scrape now and then
            times.append(t)
            values.append(value)
        t += _on_grid(interval * rng.uniform(0.9, 1.1))
        if rng.random() < 0.03:
            t += _on_grid(rng.uniform(60, 400))  # a long gap: past the rate window, sometimes the lookback
        r = rng.random()
        if r < 0.05:
            value = float(rng.randint(0, 20))  # reset (engine restart)
        elif r > 0.2:
            value += rng.randint(1, 500)
    return times, values


def _query_range(
    url: str, query: str, start: float, end: float, step: float
) -> dict[str, dict[float, float]]:
    """case label -> {evaluation time: value}."""
    r = httpx.get(
        f"{url}/api/v1/query_range",
        params={"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:.3f}"},
        timeout=30,
    )
    body = r.json()
    assert body["status"] == "success", body
    return {
        item["metric"]["case"]: {float(ts): float(v) for ts, v in item["values"]}
        for item in body["data"]["result"]
    }


def test_rate_and_instant_selection_equal_a_real_prometheus(tmp_path: Path) -> None:
    if PROMETHEUS is None or shutil.which("promtool") is None:
        pytest.skip("prometheus/promtool not installed (apt-get install prometheus)")
    semantics = semantics_for(prometheus_version())
    rng = random.Random(20240601)
    cases = {str(k): _random_series(rng) for k in range(60)}
    # one case with a sample exactly on many range starts: a 10 s interval and 30 s ranges on the grid
    cases["edge"] = ([BASE + 10.0 * i for i in range(120)], [3.0 * i for i in range(120)])
    lines = ["# TYPE c gauge"]  # a gauge: OpenMetrics counters need _total names; rate() does not care
    for case, (times, values) in cases.items():
        lines += [f'c{{case="{case}"}} {v:.1f} {t:.3f}' for t, v in zip(times, values, strict=True)]
    lines.append("# EOF")
    backfill(tmp_path, "\n".join(lines) + "\n")
    start, end, step = BASE, BASE + 1_900.0, 2.5  # evaluations on the grid, often on a sample's time
    evaluations = [start + step * i for i in range(round((end - start) / step) + 1)]
    compared = absent = 0
    with prometheus(tmp_path, []) as url:
        for window in (30, 60, 120):
            theirs = _query_range(url, f"rate(c[{window}s])", start, end, step)
            for case, (times, values) in cases.items():
                for at in evaluations:
                    ours = rate(times, values, at, float(window), semantics)
                    got = theirs.get(case, {}).get(at)
                    if ours is None:
                        assert got is None, (case, window, at, got)
                        absent += 1
                    else:
                        assert got is not None and math.isclose(got, ours, rel_tol=1e-9, abs_tol=1e-12), (
                            case,
                            window,
                            at,
                            got,
                            ours,
                        )
                        compared += 1
        theirs = _query_range(url, "c", start, end, step)
        for case, (times, values) in cases.items():
            for at in evaluations:
                i = instant(times, at, semantics=semantics)
                assert theirs.get(case, {}).get(at) == (None if i is None else values[i]), (case, at)
    assert compared > 20_000 and absent > 1_000  # the cases exercised both answers
