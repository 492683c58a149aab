"""The engines' time-to-first-token histogram (vllm:time_to_first_token_seconds, observed at a
request's first token, from its arrival at the replica): each pod's cumulative buckets at many
scrapes against the requests' own first tokens and routing times, scrapes inside merged head steps
(whose first tokens the kernel has applied before the step ends) included."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt

from replay.engine import Engine, RequestResults
from replay.kernel import layout
from replay.metrics.signals import TTFT, TTFT_BOUNDS, TTFT_BUCKETS
from replay.trace import Trace
from tests.replay.test_engine import P70

BUCKETS = slice(TTFT, TTFT + TTFT_BUCKETS)
# vLLM's histogram_time_to_first_token buckets (vllm/v1/metrics/loggers.py), written out
BOUNDS = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0, 160.0, 640.0, 2560.0,
]  # fmt: skip
INTERVAL_S = 5.0  # the run loop's rounds: a request held at the gateway is routed at the next one's start
REPLICAS = 2


def ttft_histogram(
    results: RequestResults, routed_s: npt.NDArray[np.float64], at: float
) -> npt.NDArray[np.int64]:
    """Per replica, the cumulative histogram (`le` buckets, then all) of first token - routed over
    the requests whose first token came by `at`."""
    out = np.zeros((REPLICAS, len(BOUNDS) + 1), dtype=np.int64)
    for r in range(REPLICAS):
        mine = (results.replica == r) & (results.first_token_s <= at)
        seconds = results.first_token_s[mine] - routed_s[mine]
        out[r] = [*((seconds <= bound).sum() for bound in BOUNDS), len(seconds)]
    return out


def test_the_bounds_are_vllms() -> None:
    assert list(TTFT_BOUNDS) == BOUNDS and len(BOUNDS) + 1 == TTFT_BUCKETS


def test_the_ttft_buckets_count_the_first_tokens_by_each_scrape_from_the_routing() -> None:
    """Rounds of 5 s, each routing the requests that arrived in it, and the requests of the round
    before held at the gateway (one in five) at its start; scraped every 0.25 s, once by a call per
    scrape (whose state shows when a scrape falls inside a merged head step) and once by one call per
    round with the scrapes as its stops. At every scrape each pod's buckets count the requests on it
    whose first token came by then, bucketed by first token - routed. Long prompts are chunked,
    the KV budget preempts, and some scrapes fall inside merged head steps that produce first tokens
    after the scrape: a count of the kernel's first tokens so far would differ there."""
    rng = np.random.default_rng(31)
    n = 200
    arrival = np.sort(rng.uniform(0, 40.0, n))
    long = rng.random(n) < 0.15  # past 8,192 tokens: chunked over steps
    inputs = np.where(long, rng.integers(9_000, 16_000, n), rng.integers(1, 3_000, n)).astype(np.int64)
    outputs = rng.integers(1, 200, n).astype(np.int64)
    trace = Trace("t", arrival, inputs, outputs)
    profile = replace(P70, kv_budget_tokens=120_000)
    per_stop, per_round = Engine(profile, trace), Engine(profile, trace)
    ready, none = np.arange(REPLICAS, dtype=np.int64), np.zeros(0, dtype=np.int64)
    held = np.arange(n) % 5 == 0
    routed_s = arrival.copy()  # when each request reaches its replica: its arrival, or the round after
    got_per_stop: list[npt.NDArray[np.float64]] = []
    got_per_round: list[npt.NDArray[np.float64]] = []
    all_stops: list[float] = []
    heads: list[tuple[int, float]] = []  # (replica, its merged head step's end) for scrapes inside one
    t, waiting = 0.0, np.zeros(0, dtype=np.int64)
    while t < 40.0 or per_stop.in_flight or len(waiting):
        assert t < 1_000.0, "the engines never drained"
        end = t + INTERVAL_S
        arrived = np.flatnonzero((arrival >= t) & (arrival < end))
        now = arrived[~held[arrived]]
        routed_s[waiting] = t
        stops = np.arange(t + 0.13, end, 0.25)
        rows = per_round.run(end, np.concatenate([waiting, now]), ready, stops=stops)
        assert rows is not None
        got_per_round.extend(rows)
        prev = t
        for at in stops:
            first = waiting if prev == t else none
            part = now[(arrival[now] >= prev) & (arrival[now] < at)]
            per_stop.run(at, np.concatenate([first, part]), ready)
            ri, rf = per_stop._ri, per_stop._rf
            for r in range(REPLICAS):
                if ri[r, layout.R_BUSY] == 1 and ri[r, layout.R_HEAD] == 1 and at < rf[r, layout.RF_T0]:
                    heads.append((r, float(rf[r, layout.RF_T0])))
            got_per_stop.append(per_stop.pod_rows(REPLICAS, ready, none))
            prev = at
        per_stop.run(end, now[arrival[now] >= prev], ready)
        all_stops.extend(stops)
        t, waiting = end, arrived[held[arrived]]
    assert not per_round.in_flight
    results = per_stop.results()
    for name in ("replica", "first_token_s", "finished_s", "preemptions"):
        np.testing.assert_array_equal(getattr(results, name), getattr(per_round.results(), name))
    counted = []
    for at, a, b in zip(all_stops, got_per_stop, got_per_round, strict=True):
        want = ttft_histogram(results, routed_s, at)
        np.testing.assert_array_equal(a[:, BUCKETS], want, err_msg=f"a call per scrape, at {at}")
        np.testing.assert_array_equal(b[:, BUCKETS], want, err_msg=f"a call per round, at {at}")
        counted.append(int(want[:, -1].sum()))
    # the case has what it says: preemptions, chunked prompts, held requests, counts growing
    assert results.preemptions.sum() > 0 and (inputs > profile.max_num_batched_tokens).sum() > 20
    assert held.sum() == 40 and (routed_s > arrival).sum() == 40
    assert 0 < counted[40] < counted[120] < counted[-1] == n
    final = ttft_histogram(results, routed_s, np.inf)
    assert len(np.unique(final.sum(axis=0))) >= 8  # the times to first token fill seven buckets or more
    # timed from the arrival instead of the routing, the held requests' buckets differ
    assert (final != ttft_histogram(results, arrival, np.inf)).any()
    # scrapes inside merged head steps whose first tokens come after them: the kernel has applied
    # those already, and the buckets above leave them out
    ahead = [(r, t0) for r, t0 in heads if ((results.replica == r) & (results.first_token_s == t0)).any()]
    assert len(ahead) >= 10, heads
