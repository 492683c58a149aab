"""The metric pipeline (replay/metrics): the direct and Prometheus paths, hand-checked, and the
Prometheus path's rates against a real Prometheus fed the same samples."""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

import httpx
import numpy as np
import pytest

from replay.engine import Engine
from replay.metrics import (
    PER_POD,
    ClusterScrape,
    DirectPath,
    MetricPipeline,
    MetricsSpec,
    PrometheusPath,
    build_pipeline,
)
from replay.metrics.signals import (
    COLUMNS,
    OUTPUT_LENGTH_BUCKETS,
    PREFILL_TIME_BOUNDS,
    PREFILL_TIME_BUCKETS,
    TTFT_BUCKETS,
    AggregationError,
    Combine,
    UnknownMetricError,
    cluster_scrape,
)
from replay.metrics.spec import mid_phase
from tests.prometheus_server import PROMETHEUS, backfill, prometheus, prometheus_version

I64 = np.int64


def row(
    waiting: int = 0,
    running: int = 0,
    kv: float = 0.0,
    requests: int = 0,
    prompt: int = 0,
    gen: int = 0,
    squares: int = 0,
    output_squares: int = 0,
    output_sums: int = 0,
    prefill: list[int] | None = None,  # the prefill-time histogram's cumulative buckets, +Inf last
    output_lengths: list[int] | None = None,  # the output-length histogram's, likewise
    ttft: list[int] | None = None,  # the time-to-first-token histogram's, likewise
) -> list[float]:
    counts = [requests, prompt, gen, squares, output_squares, output_sums]
    buckets = prefill or [0] * PREFILL_TIME_BUCKETS
    lengths = output_lengths or [0] * OUTPUT_LENGTH_BUCKETS
    firsts = ttft or [0] * TTFT_BUCKETS
    assert len(buckets) == PREFILL_TIME_BUCKETS and len(lengths) == OUTPUT_LENGTH_BUCKETS
    assert len(firsts) == TTFT_BUCKETS
    return [waiting + running, waiting, running, kv, *counts, *buckets, *lengths, *firsts]


def direct_rounds(engine: Engine, n: int, rounds: tuple[float, float] = (12.5, 22.5)) -> MetricPipeline:
    """The direct path (10-s scrapes) after two rounds of the engine's `n` requests on two replicas,
    scraped at the rounds' ends."""
    ready, none = np.arange(2, dtype=np.int64), np.zeros(0, dtype=np.int64)
    rows = engine.run(30.0, np.arange(n, dtype=np.int64), ready, stops=np.array(rounds))
    assert rows is not None
    p = build_pipeline(MetricsSpec(direct=DirectPath(scrape_interval_s=10.0)), sync_period_s=15.0)
    for at, pods in zip(rounds, rows, strict=True):
        p.scrape(cluster_scrape(at, pods, ready, none, 0, 0))
    return p


def bucket_rounds(
    metric: str, column: str, first: tuple[list[int], list[int]], last: tuple[list[int], list[int]]
) -> MetricPipeline:
    """The direct path after two rounds 5 s apart of a histogram's cumulative buckets (row's
    `column`) on pods 0 and 1, `first` then `last`: after the first, `metric` has no rate."""
    p = build_pipeline(MetricsSpec(), sync_period_s=15.0)
    p.scrape(scrape(2.5, {0: row(**{column: first[0]}), 1: row(**{column: first[1]})}))  # type: ignore[arg-type]
    assert p.read(metric, 3.0).values_milli is None  # one round: no rate
    p.scrape(scrape(7.5, {0: row(**{column: last[0]}), 1: row(**{column: last[1]})}))  # type: ignore[arg-type]
    return p


def scrape(
    t: float,
    ready: dict[int, list[float]],
    draining: dict[int, list[float]] | None = None,
    arrivals: float = 0.0,
    pending: float = 0.0,
) -> ClusterScrape:
    draining = draining or {}
    rows = np.array([*ready.values(), *draining.values()], dtype=float).reshape(-1, COLUMNS)
    pods = (np.array(list(ready), dtype=I64), np.array(list(draining), dtype=I64))
    return ClusterScrape(t, *pods, rows, (arrivals, pending))


def value(reading: object) -> float:
    milli = reading.values_milli  # type: ignore[attr-defined]
    assert milli is not None, reading
    return sum(milli) / 1000


def test_mid_phase_gives_the_mean_age() -> None:
    assert mid_phase(5, 15) == 2.5  # always 2.5 s old at a sync
    assert mid_phase(30, 15) == 7.5  # 7.5 s and 22.5 s in turn: 15 on average
    assert mid_phase(10, 15) == 2.5  # 2.5 and 7.5 in turn
    assert mid_phase(0.5, 2) == 0.25


# --- direct ---------------------------------------------------------------------------------------


def test_direct_reads_the_last_round_mid_way_between_syncs() -> None:
    p = build_pipeline(MetricsSpec(), sync_period_s=15.0)
    assert p.next_scrape_s == 2.5
    assert p.read("infscale_inflight", 0.0).values_milli is None  # no round yet: a failed read
    p.scrape(scrape(2.5, {0: row(3, 10), 1: row(5, 12)}, draining={2: row(50, 10)}))
    assert p.next_scrape_s == 7.5
    got = p.read("infscale_inflight", 6.0)
    assert (value(got), got.age_s) == (30.0, 3.5)  # the draining pod is not the adapter's target
    assert value(p.read("infscale_queue_size", 6.0)) == 8.0
    assert value(p.read("infscale_batch_size", 6.0)) == 22.0
    assert p.read("infscale_inflight", 6.0, PER_POD).values_milli == (13_000, 17_000)
    p.scrape(scrape(7.5, {0: row(0, 1, kv=0.2), 1: row(0, 1, kv=0.5)}))
    assert value(p.read("infscale_inflight", 7.5)) == 2.0
    assert value(p.read("infscale_kv_cache_usage", 7.5)) == pytest.approx(0.35)  # a mean over pods
    with pytest.raises(UnknownMetricError, match="no metric 'infscale_nope'"):
        p.read("infscale_nope", 8.0)


def test_direct_rates_need_two_rounds_and_read_a_drop_as_a_restart() -> None:
    p = build_pipeline(MetricsSpec(), sync_period_s=15.0)
    p.scrape(scrape(2.5, {0: row(requests=10, prompt=1_000, gen=50)}, arrivals=100))
    assert p.read("infscale_request_rate", 3.0).values_milli is None  # one round: no rate anywhere
    p.scrape(scrape(7.5, {0: row(requests=20, prompt=3_000, gen=150), 1: row(requests=100)}, arrivals=200))
    assert value(p.read("infscale_request_rate", 8.0)) == 2.0  # pod 1's first round: no rate yet
    assert value(p.read("infscale_prompt_token_rate", 8.0)) == 400.0
    assert value(p.read("infscale_generation_token_rate", 8.0)) == 20.0
    assert value(p.read("infscale_arrival_rate", 8.0)) == 20.0
    assert p.read("infscale_output_token_square_rate", 8.0).values_milli == (0,)  # none finished anew
    p.scrape(scrape(12.5, {0: row(requests=3), 1: row(requests=110)}, arrivals=260))
    assert value(p.read("infscale_request_rate", 13.0)) == pytest.approx(3 / 5 + 10 / 5)  # pod 0 restarted
    assert value(p.read("infscale_arrival_rate", 13.0)) == 12.0
    # a rate states the window it was measured over, as the adapter's answer does; a gauge none
    assert p.read("infscale_request_rate", 13.0).window_s == 5.0
    assert p.read("infscale_inflight", 13.0).window_s is None


def test_the_output_squares_read_as_a_rate_summed_over_pods() -> None:
    """infscale_output_token_square_rate and infscale_finished_output_token_rate: Σ o² and Σ o of
    the requests finished, per second, as the adapter serves output_token_square_rate and
    finished_output_token_rate (the engines' output-length histograms' buckets and _sum)."""
    p = build_pipeline(MetricsSpec(), sync_period_s=15.0)
    p.scrape(scrape(2.5, {0: row(requests=1, output_squares=400, output_sums=20), 1: row()}))
    p.scrape(
        scrape(
            7.5,
            {
                0: row(requests=3, output_squares=400 + 2 * 90_000, output_sums=20 + 2 * 300),
                1: row(requests=1, output_squares=10_000, output_sums=100),
            },
        )
    )
    assert value(p.read("infscale_output_token_square_rate", 8.0)) == (2 * 90_000 + 10_000) / 5.0
    # and their sum, the same histogram's _sum (counted at finish, not as decoded)
    assert value(p.read("infscale_finished_output_token_rate", 8.0)) == (2 * 300 + 100) / 5.0


def test_a_pod_that_left_rounds_gets_its_rate_from_its_own_last_round() -> None:
    # pod 1 drops out of rounds 2-3 (not ready) and comes back: its rate spans 2.5 -> 17.5 s, while
    # pod 0's spans one round each time (the same pods as the last round reuse its rows)
    p = build_pipeline(MetricsSpec(), sync_period_s=15.0)
    per_pod = {2.5: {0: 0, 1: 100}, 7.5: {0: 10}, 12.5: {0: 30}, 17.5: {0: 60, 1: 250}, 22.5: {0: 70, 1: 260}}
    rates = []
    for t, pods in per_pod.items():
        p.scrape(scrape(t, {pod: row(requests=n) for pod, n in pods.items()}))
        got = p.read("infscale_request_rate", t + 2.0, PER_POD)
        rates.append(None if got.values_milli is None else [v / 1000 for v in got.values_milli])
    assert rates == [None, [2.0], [4.0], [6.0, 10.0], [2.0, 2.0]]


def test_direct_delay_and_max_age() -> None:
    spec = MetricsSpec(
        direct=DirectPath(scrape_interval_s=60.0, scrape_offset_s=0.0, delay_s=1.0, max_age_s=30.0)
    )
    p = build_pipeline(spec, sync_period_s=15.0)
    p.scrape(scrape(0.0, {0: row(4)}))
    assert p.read("infscale_inflight", 0.5).values_milli is None  # not at the API yet
    assert value(p.read("infscale_inflight", 1.0)) == 4.0
    stale = p.read("infscale_inflight", 30.5)
    assert stale.values_milli is None and "30 s old" in stale.error  # the adapter's max_age_s


# --- the prefill-time histogram's buckets (a bucketed metric) -------------------------------------

PREFILL_BUCKETS = "infscale_prefill_time_bucket_rate"
LE = [
    "0.3", "0.5", "0.8", "1.0", "1.5", "2.0", "2.5", "5.0", "10.0", "15.0", "20.0", "30.0", "40.0", "50.0",
    "60.0", "120.0", "240.0", "480.0", "960.0", "1920.0", "7680.0", "+Inf",
]  # fmt: skip


def test_the_prefill_time_buckets_are_vllms_written_as_prometheus_client_writes_them() -> None:
    from replay.emulate.metrics import _VLLM_REQUEST
    from replay.emulate.promclient import go_float

    assert PREFILL_TIME_BOUNDS == _VLLM_REQUEST  # the emulator's vllm:request_prefill_time_seconds
    assert [go_float(b) for b in (*PREFILL_TIME_BOUNDS, float("inf"))] == LE
    assert len(LE) == PREFILL_TIME_BUCKETS


def test_direct_reads_each_prefill_time_bucket_as_a_rate_summed_over_pods() -> None:
    """One item per bucket, in bound order, labelled le: per bucket the two pods' increases between
    their rounds over the 5 s apart, summed."""
    first0 = [0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4]
    last0 = [2, 3, 5, 6, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 11]
    first1 = [10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 12]
    last1 = [11, 14, 19, 20, 20, 21, 21, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 22, 25]
    p = bucket_rounds(PREFILL_BUCKETS, "prefill", (first0, first1), (last0, last1))
    got = p.read(PREFILL_BUCKETS, 8.0)
    assert got.values_milli is not None and len(got.values_milli) == len(LE)
    assert [dict(item) for item in got.labels] == [{"le": le} for le in LE]
    want = [(b0 - a0 + b1 - a1) / 5 for a0, b0, a1, b1 in zip(first0, last0, first1, last1, strict=True)]
    assert [v / 1000 for v in got.values_milli] == pytest.approx(want, abs=1e-3)
    assert got.values_milli[0] == 600 and got.values_milli[-1] == 4_000  # (2 + 1) / 5 and (7 + 13) / 5
    assert got.window_s == 5.0
    biggest = p.read(PREFILL_BUCKETS, 8.0, Combine.MAX)  # any combination applies bucket by bucket
    assert biggest.values_milli is not None and biggest.values_milli[-1] == 2_600  # pod 1's 13 / 5
    with pytest.raises(AggregationError, match="one item per bucket"):
        p.read(PREFILL_BUCKETS, 8.0, PER_POD)
    assert p.read("infscale_request_rate", 8.0).labels == ()  # a one-column metric: one item, no labels


def test_prometheus_reads_each_prefill_time_bucket_as_promqls_rate_summed_over_pods() -> None:
    """Per bucket, rate(bucket[120s]) of each pod, summed: two samples 30 s apart read at the
    second. Pod 0 is new (its buckets start at 0): each rate is extrapolated to the zero point only,
    increase / 120. Pod 1's samples start at least half their increase up: extrapolated by half an
    interval (15 s) before the first, increase x 45 / 30 / 120 = increase / 80."""
    spec = MetricsSpec(
        path="prometheus",
        prometheus=PrometheusPath(scrape_interval_s=30.0, offset_step_s=0.0, rate_window_s=120.0),
    )
    p = build_pipeline(spec, sync_period_s=15.0)
    assert p.next_scrape_s == 7.5
    increase0 = [min(k, 15) for k in range(PREFILL_TIME_BUCKETS)]
    first1 = [10 * (k + 1) for k in range(PREFILL_TIME_BUCKETS)]
    increase1 = [min(2 * k, 30) for k in range(PREFILL_TIME_BUCKETS)]
    last1 = [a + d for a, d in zip(first1, increase1, strict=True)]
    p.scrape(scrape(7.5, {0: row(), 1: row(prefill=first1)}))
    assert p.read(PREFILL_BUCKETS, 8.0).values_milli is None  # one sample: no rate
    p.scrape(scrape(37.5, {0: row(prefill=increase0), 1: row(prefill=last1)}))
    got = p.read(PREFILL_BUCKETS, 37.5)
    assert got.values_milli is not None and len(got.values_milli) == len(LE)
    assert [dict(item) for item in got.labels] == [{"le": le} for le in LE]
    want = [d0 / 120 + d1 / 80 for d0, d1 in zip(increase0, increase1, strict=True)]
    assert [v / 1000 for v in got.values_milli] == pytest.approx(want, abs=1e-3)
    assert got.window_s == 120.0
    cached = p.read(PREFILL_BUCKETS, 40.0)  # the adapter's answer from 37.5, reused for 5 s
    assert (cached.values_milli, cached.labels, cached.age_s) == (got.values_milli, got.labels, 2.5)
    with pytest.raises(AggregationError, match="cannot also be read per pod"):
        p.read(PREFILL_BUCKETS, 40.0, PER_POD)


# --- prometheus -------------------------------------------------------------------------------------


def _prom(**kw: object) -> MetricsSpec:
    return MetricsSpec(path="prometheus", prometheus=PrometheusPath(cache_ttl_s=0.0, **kw))


def test_prometheus_scrapes_each_pod_at_its_own_offset() -> None:
    p = build_pipeline(_prom(scrape_interval_s=30.0, offset_step_s=5.0), sync_period_s=15.0)
    pods = {k: row(k + 1) for k in range(6)}  # pod k has k + 1 requests waiting
    times = []
    for _ in range(6):  # six offsets 5 s apart, pod k at the k-th
        times.append(p.next_scrape_s)
        p.scrape(scrape(p.next_scrape_s, pods))
    assert times == [2.5, 7.5, 12.5, 17.5, 22.5, 27.5]
    shifted = build_pipeline(_prom(scrape_interval_s=30.0, offset_step_s=5.0, scrape_offset_s=1.0), 15.0)
    assert shifted.next_scrape_s == 1.0
    assert value(p.read("infscale_inflight", 20.0)) == 1 + 2 + 3 + 4  # pods 4 and 5 not scraped yet
    assert value(p.read("infscale_inflight", 28.0)) == 21
    got = p.read("infscale_inflight", 28.0)
    assert got.age_s == 0.0  # the adapter stamps the query time: the data's age is invisible


def test_prometheus_keeps_a_gone_pods_gauge_until_its_stale_marker_is_written() -> None:
    p = build_pipeline(_prom(scrape_interval_s=30.0, offset_step_s=0.0), sync_period_s=15.0)
    assert p.next_scrape_s == 7.5  # one offset for every target
    p.scrape(scrape(7.5, {0: row(4), 1: row(6)}, draining={2: row(8)}))  # draining pods are endpoints too
    assert value(p.read("infscale_inflight", 10.0)) == 18
    p.scrape(scrape(37.5, {0: row(4)}))  # pods 1 and 2 are gone: their next scrape found no target
    # the marker at 37.5 is written one interval + 10 % later: until then the old values stay
    assert value(p.read("infscale_inflight", 70.0)) == 18
    assert value(p.read("infscale_inflight", 37.5 + 33.0)) == 4


def test_prometheus_rates_follow_promql_and_linger_after_a_pod_goes() -> None:
    spec = _prom(scrape_interval_s=30.0, offset_step_s=0.0, rate_window_s=120.0)
    p = build_pipeline(spec, sync_period_s=15.0)
    p.scrape(scrape(7.5, {0: row(requests=0)}))
    assert p.read("infscale_request_rate", 20.0).values_milli is None  # one sample: no rate
    p.scrape(scrape(37.5, {0: row(requests=30)}))
    # rate(x[120s]) at 40 over (-80, 40]: samples 7.5 and 37.5, increase 30; the start extrapolated
    # only to the counter's zero point (it began at 0), the end by 2.5 s: 30 x 32.5 / 30 / 120
    assert value(p.read("infscale_request_rate", 40.0)) == pytest.approx(30 * 32.5 / 30 / 120, abs=1e-3)
    assert p.read("infscale_request_rate", 40.0).window_s == 120.0  # rate(x[120s])'s window
    p.scrape(scrape(67.5, {0: row(requests=60)}))
    p.scrape(scrape(97.5, {}))  # the pod is gone: its samples stay in the range
    # at 100: 3 samples, increase 60, end 32.5 s away (< 1.1 x 30: extrapolated all the way)
    assert value(p.read("infscale_request_rate", 100.0)) == pytest.approx(60 * 92.5 / 60 / 120, abs=1e-3)
    # at 110: the end is 42.5 s away, beyond 1.1 intervals: extrapolated by half an interval
    assert value(p.read("infscale_request_rate", 110.0)) == pytest.approx(60 * 75 / 60 / 120, abs=1e-3)
    # at 130, (10, 130]: 37.5 and 67.5; the start 27.5 s away, short of the zero point (30 s)
    assert value(p.read("infscale_request_rate", 130.0)) == pytest.approx(30 * 72.5 / 30 / 120, abs=1e-3)
    assert p.read("infscale_request_rate", 160.0).values_milli is None  # (40, 160]: one sample left


def test_prometheus_recording_rule_and_adapter_cache() -> None:
    spec = MetricsSpec(
        path="prometheus",
        prometheus=PrometheusPath(
            scrape_interval_s=15.0, offset_step_s=0.0, rule_interval_s=30.0, cache_ttl_s=5.0
        ),
    )
    p = build_pipeline(spec, sync_period_s=15.0)
    assert p.read("infscale_inflight", 5.0).values_milli is None  # the rule's first evaluation is at 7.5
    for t, n in ((7.5, 1), (22.5, 2), (37.5, 3)):
        assert p.next_scrape_s == t
        p.scrape(scrape(t, {0: row(n)}))
        if t == 7.5:
            assert value(p.read("infscale_inflight", 10.0)) == 1  # evaluated at 7.5
    # at 36 the rule last ran at 7.5 (next at 37.5): the 22.5 scrape is not in it
    assert value(p.read("infscale_inflight", 36.0)) == 1
    cached = p.read("infscale_inflight", 40.0)  # the adapter's answer from 36 is reused until 41
    assert (value(cached), cached.age_s) == (1, 4.0)
    assert value(p.read("infscale_inflight", 41.5)) == 3  # asked again: the rule's 37.5 evaluation


def test_bad_metrics_settings_name_the_field() -> None:
    from replay.profiles import ProfileError
    from replay.scenariofile import scenario_from_mapping

    for doc, message in (
        ({"metrics": {"path": "otel"}}, "metrics.path must be one of direct, prometheus, got 'otel'"),
        (
            {"metrics": {"direct": {"scrape_interval_s": 0}}},
            "metrics.direct.scrape_interval_s must be a finite number > 0",
        ),
        (
            {"metrics": {"prometheus": {"rate_window_s": 30}}},
            "rate_window_s must be >= 2 x scrape_interval_s (60",
        ),
        (
            {"metrics": {"prometheus": {"version": "three"}}},
            "metrics.prometheus.version must be MAJOR or MAJOR.MINOR",
        ),
        ({"metrics": {"prometheus": {"nope": 1}}}, "unknown field metrics.prometheus.nope"),
        ({"metrics": {"prometheus": 5}}, "metrics.prometheus must be a mapping"),
        (
            {"scrape_interval_s": 5, "metrics": {"path": "direct"}},
            "not both metrics and the older scrape_interval_s",
        ),
    ):
        with pytest.raises(ProfileError, match=re.escape(message)):
            scenario_from_mapping(doc)


def test_earlier_metric_fields_load_where_they_moved() -> None:
    from replay.scenariofile import scenario_from_mapping

    s = scenario_from_mapping({"scrape_interval_s": 10, "metric_delay_s": 2})
    assert (s.metrics.direct.scrape_interval_s, s.metrics.direct.delay_s) == (10.0, 2.0)
    s = scenario_from_mapping(
        {"metrics": {"path": "prometheus", "prometheus": {"scrape_interval_s": 15, "rule_interval_s": 30}}}
    )
    assert s.metrics.path == "prometheus"
    assert (s.metrics.prometheus.scrape_interval_s, s.metrics.prometheus.rule_interval_s) == (15.0, 30.0)
    assert s.metrics.prometheus.rate_window_s == 60.0  # untouched: the base's


# --- the Prometheus path against a real Prometheus ------------------------------------------------

BASE = 1_700_000_000.0


def test_prometheus_path_rates_equal_a_real_prometheus(tmp_path: Path) -> None:
    """Pods come and go, counters grow and restart; every sample the path takes is backfilled into a
    real Prometheus, whose sum(rate(x[60s])) must equal the path's reading at each evaluation."""
    if PROMETHEUS is None or shutil.which("promtool") is None:
        pytest.skip("prometheus/promtool not installed (apt-get install prometheus)")
    major, minor = prometheus_version()
    spec = _prom(scrape_interval_s=15.0, offset_step_s=5.0, rate_window_s=60.0, version=f"{major}.{minor}")
    p = build_pipeline(spec, sync_period_s=15.0)
    rng = random.Random(7)
    counters: dict[int, float] = {}
    live: set[int] = set()
    arrivals, next_pod, groups = 0.0, 0, 3
    samples: list[str] = []
    evaluations = []
    for event in range(240):  # an hour... of 5 s events: 20 minutes
        t = p.next_scrape_s
        if rng.random() < 0.08:
            live.add(next_pod)
            counters[next_pod] = 0.0
            next_pod += 1
        if live and rng.random() < 0.05:
            live.discard(rng.choice(sorted(live)))
        for pod in live:
            counters[pod] = (
                float(rng.randint(0, 5)) if rng.random() < 0.02 else counters[pod] + rng.randint(0, 40)
            )
        arrivals += rng.randint(10, 60)
        p.scrape(
            scrape(t, {pod: row(requests=int(counters[pod])) for pod in sorted(live)}, arrivals=arrivals)
        )
        for pod in sorted(live):  # the path scrapes pod k at the events with k's offset
            if pod % groups == event % groups:
                samples.append(f'requests{{pod="{pod}"}} {counters[pod]:.1f} {BASE + t:.3f}')
        if event % groups == 0:
            samples.append(f"arrivals {arrivals:.1f} {BASE + t:.3f}")
        for at in (t, t + 1.25, t + 2.5, t + 3.75):  # reads between scrapes, on a 1/8 s grid
            evaluations.append((at, p.read("infscale_request_rate", at), p.read("infscale_arrival_rate", at)))
    by_series: dict[str, list[str]] = {}
    for line in samples:  # OpenMetrics wants each series' samples together
        by_series.setdefault(line.split(" ")[0], []).append(line)
    text = "# TYPE requests gauge\n" + "\n".join(
        line for k, v in by_series.items() if k != "arrivals" for line in v
    )
    text += "\n# TYPE arrivals gauge\n" + "\n".join(by_series["arrivals"]) + "\n# EOF\n"
    backfill(tmp_path, text)
    compared = 0
    first, last = evaluations[0][0], evaluations[-1][0]
    with prometheus(tmp_path, []) as url:
        for query, column in (("sum(rate(requests[60s]))", 1), ("sum(rate(arrivals[60s]))", 2)):
            params = {
                "query": query,
                "start": f"{BASE + first:.3f}",
                "end": f"{BASE + last:.3f}",
                "step": "1.25",
            }
            body = httpx.get(f"{url}/api/v1/query_range", params=params, timeout=30).json()
            assert body["status"] == "success", body
            (result,) = body["data"]["result"]
            theirs = {round(float(ts) - BASE, 3): float(v) for ts, v in result["values"]}
            for evaluation in evaluations:
                at, ours = evaluation[0], evaluation[column]
                if ours.values_milli is None:
                    assert at not in theirs, (query, at, theirs.get(at))
                else:  # the path's reading is in milli-units, rounded up
                    assert value(ours) == pytest.approx(theirs[at], abs=1e-3), (query, at)
                    compared += 1
    assert compared > 1_500


# --- in the loop ------------------------------------------------------------------------------------


class _Recorder:
    """Holds a schedule of replica counts and keeps every observation it is given."""

    name = "recorder"
    period_s = 15.0
    fresh_metrics = False
    metric_names = (
        "infscale_inflight",
        "infscale_request_rate",
        "infscale_arrival_rate",
        "infscale_batch_size",
    )
    initial_replicas = 2
    lead_quantile = None

    def __init__(self) -> None:
        self.seen: list[tuple[float, object]] = []

    def desired(self, now: float, obs: object) -> int:
        self.seen.append((now, obs))
        return 4 if 300 <= now < 600 else 3 if now >= 900 else 2


def test_the_policy_sees_what_the_adapter_would_serve_at_its_sync() -> None:
    """Recomputed from the run's per-request results and replica spans alone: at each sync, the
    adapter's last round (every 5 s from 2.5 s) over the pods ready then, the in-flight requests
    of each, and each pod's finished requests since its previous round."""
    from replay.simulate import simulate
    from replay.trace import Trace
    from tests.replay.test_simulate import FAST

    rng = np.random.default_rng(3)
    n = 3_000  # 2.5 requests/s for 20 minutes: light load, so the run is quick
    trace = Trace(
        "light", np.sort(rng.uniform(0, 1_200, n)), rng.integers(100, 2_000, n), rng.integers(5, 200, n)
    )
    policy = _Recorder()
    result = simulate(trace, FAST, policy)
    req, arrival = result.requests, result.arrival_s

    def targets(s: float) -> list[int]:
        return [r.id for r in result.replicas if r.ready_s <= s and not r.drain_s <= s]

    def finished(r: int, s: float) -> int:
        return int(np.count_nonzero((req.replica == r) & (req.finished_s <= s)))

    checked = 0
    for now, obs in policy.seen[1:]:
        s = 2.5 + 5 * np.floor((now - 2.5) / 5)  # the last round at or before the sync
        pods = targets(s)
        inflight = sum(
            int(np.count_nonzero((req.replica == r) & (arrival < s) & ~(req.finished_s <= s))) for r in pods
        )
        rate = sum((finished(r, s) - finished(r, s - 5)) / 5 for r in pods if r in targets(s - 5))
        metrics = obs.metrics  # type: ignore[attr-defined]
        assert metrics["infscale_inflight"].values_milli == (inflight * 1000,), now
        assert metrics["infscale_inflight"].age_s == pytest.approx(now - s)
        assert value(metrics["infscale_request_rate"]) == pytest.approx(rate, abs=1e-3), now
        arrived = (np.searchsorted(arrival, s, "right") - np.searchsorted(arrival, s - 5, "right")) / 5
        assert value(metrics["infscale_arrival_rate"]) == pytest.approx(arrived, abs=1e-3), now
        checked += 1
    assert checked >= 75  # every sync after the first
    assert (
        len(result.replicas) == 5 and sum(np.isfinite(r.drain_s) for r in result.replicas) == 2
    )  # pods came and went
