"""The warm-up prefix (replay/warmup.py) and the run cut back to the scored trace (replay/simulate.py)."""

from __future__ import annotations

import numpy as np
import pytest

from replay import report
from replay.cli import run_policy
from replay.league.runner import Case, Setup, run_case
from replay.league.startup import with_startup
from replay.policies import PolicyParams, StaticPolicy
from replay.profiles import REFERENCE_70B
from replay.simulate import simulate
from replay.trace import Trace
from replay.warmup import default_warmup_s, parse_warmup, with_warmup
from tests.replay.test_simulate import FAST, PARAMS, ramp_trace


def steady_trace(rate: float = 4.0, seconds: float = 1_200.0) -> Trace:
    """Evenly spaced requests of one shape: a constant load whose in-flight count is flat."""
    n = int(rate * seconds)
    return Trace("steady", np.arange(n) / rate, np.full(n, 1_000), np.full(n, 200))


def test_a_warm_up_leaves_the_engines_mid_flight_at_zero() -> None:
    trace = steady_trace()
    cold = simulate(trace, FAST, StaticPolicy(2))
    warm = run_policy(trace, FAST, "static-2", PARAMS, warmup_s=600.0)
    assert cold.timeline[0].t_s == 0.0 and cold.timeline[0].inflight == 0  # today: empty engines
    at_zero = next(p for p in warm.timeline if p.t_s == 0.0)
    steady = np.mean([p.inflight for p in warm.timeline if 60.0 <= p.t_s <= 1_100.0])
    assert steady > 5
    assert at_zero.inflight == pytest.approx(steady, rel=0.3)
    assert warm.timeline[0].t_s == -600.0  # the warm-up's decisions are kept, at negative times


def test_the_prefix_requests_are_never_counted() -> None:
    trace = ramp_trace()
    result = run_policy(trace, FAST, "hpa", PARAMS, warmup_s=600.0)
    assert result.arrival_s is trace.arrival_s
    assert len(result.requests.finished_s) == len(trace)
    summary = report.policy_summary(result)
    assert summary["requests_total"] == summary["requests_finished"] == len(trace)
    assert summary["warmup_s"] == 600.0
    assert np.all(result.requests.first_token_s >= trace.arrival_s - 1e-9)  # trace time again
    assert all(r["t_s"] >= 0 for r in report.ttft_over_time(result))
    # scale events from W: the desired count's changes at t >= 0 only
    desired = [p.desired for p in result.timeline]
    times = [p.t_s for p in result.timeline]
    changes = sum(1 for i in range(1, len(desired)) if desired[i] != desired[i - 1] and times[i] >= 0)
    assert result.scale_events == changes
    assert result.cold_starts == sum(1 for r in result.replicas if r.cold and r.requested_s >= 0)


def test_gpu_hours_count_from_the_end_of_the_warm_up() -> None:
    trace = ramp_trace()
    result = run_policy(trace, FAST, "static-3", PARAMS, warmup_s=600.0)
    gpus = FAST.cold_start.gpus_per_replica
    assert result.gpu_seconds == pytest.approx(3 * gpus * result.end_s, rel=1e-12)
    assert result.replica_seconds == pytest.approx(3 * result.end_s, rel=1e-12)
    assert result.cold_starts == 0 and result.scale_events == 0
    summary = report.policy_summary(result)
    assert summary["mean_ready_replicas"] == pytest.approx(3.0, rel=1e-12)


def test_the_reflection_is_continuous_at_zero() -> None:
    trace = ramp_trace()  # 3 req/s, then 12 req/s from 300 s
    warmup = 400.0
    played = with_warmup(trace, warmup)
    prefix = played.arrival_s < warmup
    assert np.array_equal(played.arrival_s[~prefix] - warmup, trace.arrival_s + warmup - warmup)
    for d in (10.0, 100.0, 350.0):  # the rate just before 0 is the rate just after it
        before = np.count_nonzero((played.arrival_s >= warmup - d) & prefix)
        after = np.count_nonzero((trace.arrival_s > 0) & (trace.arrival_s <= d))
        assert before == after
    # the request just before 0 is the one just after it (tokens mirrored, none invented)
    last = int(np.count_nonzero(prefix)) - 1
    assert played.input_tokens[last] == trace.input_tokens[1]
    assert played.output_tokens[last] == trace.output_tokens[1]
    assert np.count_nonzero(prefix) == np.count_nonzero(trace.arrival_s[trace.arrival_s > 0] <= warmup)


def test_a_trace_shorter_than_the_warm_up_reflects_periodically() -> None:
    arrival = np.arange(11) * 10.0  # 0, 10, ..., 100: T = 100 s
    trace = Trace("short", arrival, np.arange(11) + 1, np.full(11, 5))
    played = with_warmup(trace, 350.0)
    # mirrored, repeated, mirrored, ...: an even spacing with no instant twice and none missed
    assert np.array_equal(played.arrival_s, np.arange(46) * 10.0)
    # the prefix's requests, from -350 s on: a = 50..90 (repeat), 100..10 (mirror), 0..90 (repeat),
    # 100..10 (mirror)
    source = [*range(5, 10), *range(10, 0, -1), *range(0, 10), *range(10, 0, -1)]
    assert list(played.input_tokens[:35]) == [i + 1 for i in source]
    assert list(played.input_tokens[35:]) == list(trace.input_tokens)


def test_no_warm_up_is_today_to_the_digit() -> None:
    """Figures of the ramp run at d998848, before the warm-up existed, of two policies whose code
    the warm-up did not touch (predictive's own changes since would move its figures)."""
    pinned = {
        "hpa": (1.0, 7.154552967041662, 0.3509484578108149, 6599.097670337495, 21, 18),
        "kpa": (1.0, 8.29784325097073, 0.33470153420429377, 7728.058925873658, 32, 22),
    }
    for name, figures in pinned.items():
        s = report.policy_summary(run_policy(ramp_trace(), FAST, name, PARAMS, warmup_s=0.0))
        keys = ("slo_attainment", "gpu_hours", "ttft_p99_s", "replica_seconds", "scale_events", "cold_starts")
        assert tuple(s[k] for k in keys) == figures
        assert s["warmup_s"] == 0.0


def test_the_default_warm_up_follows_the_start_up() -> None:
    # three half-lives of predictive's typical demand, unless two start-ups and the HPA's window
    # are longer: reference-70b starts one replica on a cold cluster in 164 s (2 x 164 + 300 = 628)
    assert default_warmup_s(REFERENCE_70B) == 1_800.0
    assert default_warmup_s(with_startup(REFERENCE_70B, 600.0)) == 1_800.0  # 1,500 s
    assert default_warmup_s(with_startup(REFERENCE_70B, 900.0)) == 2_100.0
    assert default_warmup_s(with_startup(REFERENCE_70B, 1_000.0)) == 2_340.0  # whole minutes
    assert parse_warmup("auto") is None and parse_warmup("0") == 0.0
    with pytest.raises(ValueError, match="warmup"):
        parse_warmup("-5")


def test_a_league_case_warms_up_for_its_own_start_up() -> None:
    trace = steady_trace(rate=1.0, seconds=120.0)
    setup = Setup({"reference-70b": REFERENCE_70B}, PolicyParams())  # the HPA's 300 s window
    row = run_case(trace, Case("steady", 1.0, "reference-70b", "static-1", 900.0), setup)
    assert row["status"] == "ok" and row["warmup_s"] == 2_100.0 and row["requests_total"] == 120
    case = Case("steady", 1.0, "reference-70b", "static-1")
    off = run_case(trace, case, Setup(setup.scenarios, setup.params, warmup_s=0))
    assert off["warmup_s"] == 0 and off["requests_total"] == 120
