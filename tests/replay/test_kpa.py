"""Knative's KPA in the replay loop: 1 s buckets and a 2 s decider, start in panic, ready pods
only, scale to zero and the cold start back from it through the gateway (the activator)."""

from __future__ import annotations

import math
from dataclasses import replace
from functools import cache

import numpy as np

from replay.cli import run_policy
from replay.policies import PolicyParams, build_policy
from replay.policies.kpa import KpaPolicy
from replay.simulate import RunResult, simulate
from replay.trace import Trace
from tests.replay.test_simulate import FAST, PARAMS, ramp_trace


def _kpa(trace: Trace, params: PolicyParams = PARAMS) -> KpaPolicy:
    policy = build_policy("kpa", FAST, trace, params, lambda: 0.0)
    assert isinstance(policy, KpaPolicy)
    return policy


@cache
def _ramp_run() -> tuple[KpaPolicy, RunResult]:
    policy = _kpa(ramp_trace())
    return policy, simulate(ramp_trace(), FAST, policy)


def test_the_decider_runs_every_two_seconds_on_one_second_buckets() -> None:
    policy, _ = _ramp_run()
    times = [d.t_s for d in policy.decisions]
    assert times[:3] == [0.0, 2.0, 4.0]
    assert np.allclose(np.diff(times), 2.0)
    # a 1 s window of the collector: the stable average is a mean of per-second samples
    assert policy.decider.target_value == PARAMS.target * 0.7  # target utilization 70 %
    assert len(policy._stable.buckets) == 60 and len(policy._panic.buckets) == 6


def test_it_starts_in_panic_and_holds_the_warm_fleet_for_a_stable_window() -> None:
    policy, result = _ramp_run()
    assert policy.initial_replicas > 1
    early = [d for d in policy.decisions if d.t_s <= 60.0]
    assert all(d.panicking for d in early)
    assert all(p.desired >= policy.initial_replicas for p in result.timeline if p.t_s <= 60.0)


def test_the_decider_counts_ready_pods_not_draining_ones() -> None:
    policy, result = _ramp_run()
    assert any(math.isfinite(r.drain_s) for r in result.replicas)
    for d in policy.decisions:
        # drained at d.t_s itself: by this decision, after it observed them ready
        ready = sum(1 for r in result.replicas if r.ready_s <= d.t_s and not r.drain_s < d.t_s)
        assert d.ready == ready, d


def _gap_trace() -> Trace:
    """A minute of traffic, a quarter of an hour of nothing, then a burst."""
    rng = np.random.default_rng(3)
    first = np.sort(rng.uniform(0, 60, 120))
    burst = np.sort(rng.uniform(960, 990, 90))
    arrival = np.concatenate((first, burst))
    n = len(arrival)
    return Trace("gap", arrival, rng.integers(100, 2_000, n), rng.integers(10, 200, n))


def test_scales_to_zero_and_cold_starts_back_from_the_gateway() -> None:
    trace = _gap_trace()
    policy = _kpa(trace)
    result = simulate(trace, FAST, policy)
    assert np.isfinite(result.requests.finished_s).all()
    idle = [p for p in result.timeline if 200 < p.t_s < 950]
    assert idle and all(p.desired == 0 and p.ready == 0 for p in idle)
    # scale to zero came after a stable window idle (marked inactive first), the activator in path
    zero_at = next(d.t_s for d in policy.decisions if d.applied == 0)
    last_arrival_before = float(trace.arrival_s[trace.arrival_s < 900].max())
    assert zero_at >= last_arrival_before + 60.0
    # the burst waited at the gateway for a cold start: the node was removed meanwhile
    burst = trace.arrival_s >= 960
    ttft = result.requests.first_token_s[burst] - trace.arrival_s[burst]
    cold = FAST.cold_start
    lower = cold.node_provision_s + cold.image_pull_s + cold.weights_gb / cold.storage_gbps + cold.warmup_s
    assert ttft.max() >= lower
    woke = next(d for d in policy.decisions if d.t_s >= 960 and d.applied)
    assert woke.ready == 0 and woke.t_s <= 962.0  # the held requests wake it within a tick


def test_scale_to_zero_off_keeps_the_scenario_minimum() -> None:
    trace = _gap_trace()
    result = run_policy(trace, FAST, "kpa", replace(PARAMS, scale_to_zero=False))
    assert min(p.desired for p in result.timeline) == FAST.min_replicas
