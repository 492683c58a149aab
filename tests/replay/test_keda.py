"""KEDA in the replay loop: the HPA on the live query, keda-cached's cache, scale to zero after
the cooldown and the cold start back through the gateway, fallback after scaler errors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from replay.cli import run_policy
from replay.metrics import DirectPath, MetricsSpec
from replay.policies import build_policy
from replay.policies.keda import KedaPolicy
from replay.policies.keda.scaledobject import Fallback, PrometheusTrigger
from replay.simulate import simulate
from replay.trace import Trace
from tests.replay.test_kpa import _gap_trace
from tests.replay.test_simulate import FAST, PARAMS, ramp_trace


def _keda(name: str = "keda", trace: Trace | None = None) -> KedaPolicy:
    policy = build_policy(name, FAST, trace if trace is not None else ramp_trace(), PARAMS, lambda: 0.0)
    assert isinstance(policy, KedaPolicy)
    return policy


def test_default_keda_is_the_hpa_on_the_live_query_while_traffic_flows() -> None:
    keda = run_policy(ramp_trace(), FAST, "keda", PARAMS)
    hpa = run_policy(ramp_trace(), FAST, "hpa", PARAMS)
    assert [p.desired for p in keda.timeline] == [p.desired for p in hpa.timeline]
    assert len({p.desired for p in keda.timeline}) > 2


def test_keda_cached_serves_the_hpa_the_value_of_the_last_polling() -> None:
    policy = _keda("keda-cached")
    simulate(ramp_trace(), FAST, policy)
    polled = None
    checked = 0
    for d in policy.decisions:  # within a sync the HPA reads first, then KEDA polls
        if d.hpa_metric is not None and polled is not None:
            assert d.hpa_metric.value_milli == polled
            checked += 1
        if d.poll is not None:
            polled = d.poll.value_milli
    assert checked > 50
    live = _keda("keda")
    simulate(ramp_trace(), FAST, live)
    assert [d.hpa_metric for d in live.decisions] != [d.hpa_metric for d in policy.decisions]


def test_scales_to_zero_after_the_cooldown_and_cold_starts_back_from_the_gateway() -> None:
    trace = _gap_trace()
    policy = _keda(trace=trace)
    result = simulate(trace, FAST, policy)
    assert np.isfinite(result.requests.finished_s).all()
    zero = next(d for d in policy.decisions if d.keda is not None and d.keda.write == 0)
    last_active = max(d.t_s for d in policy.decisions if d.keda is not None and d.keda.active and d.t_s < 900)
    assert zero.t_s > last_active + 300.0  # cooldownPeriod, strictly after
    assert zero.t_s <= last_active + 300.0 + policy.so.polling_interval_s
    idle = [p for p in result.timeline if zero.t_s < p.t_s < 950]
    assert idle and all(p.desired == 0 for p in idle)
    woke = next(d for d in policy.decisions if d.t_s >= 960 and d.keda is not None and d.keda.write)
    assert woke.keda is not None and woke.keda.write == 1  # KEDA does 0 -> 1, then the HPA
    assert woke.t_s < 960 + policy.so.polling_interval_s + 1e-9
    burst = trace.arrival_s >= 960
    ttft = result.requests.first_token_s[burst] - trace.arrival_s[burst]
    assert ttft.max() > FAST.cold_start.node_provision_s  # they waited at the gateway for a new node


def test_min_replica_count_of_the_scenario_keeps_it_warm() -> None:
    result = run_policy(_gap_trace(), FAST, "keda", replace(PARAMS, scale_to_zero=False))
    assert min(p.desired for p in result.timeline) == FAST.min_replicas


def test_fallback_replicas_after_failure_threshold_errors() -> None:
    # metrics reach Prometheus only after 120 s, and an empty result is an error: the scaler
    # fails; after failureThreshold failures the HPA gets a metric worth the fallback replicas
    slow = replace(FAST, metrics=MetricsSpec(direct=DirectPath(delay_s=120.0)))
    trace = ramp_trace()
    policy = build_policy("keda", slow, trace, PARAMS, lambda: 0.0)
    assert isinstance(policy, KedaPolicy)
    trigger = PrometheusTrigger(threshold=PARAMS.target, ignore_null_values=False)
    policy.so = replace(policy.so, trigger=trigger, fallback=Fallback(failure_threshold=2, replicas=7))
    policy.initial_replicas = 1
    result = simulate(trace, slow, policy)
    early = [d for d in policy.decisions if d.t_s < 120]
    assert early[0].hpa_metric is not None and early[0].hpa_metric.error
    assert not early[0].hpa_metric.fallback_active  # within the threshold: the error goes through
    active = [d for d in early if d.hpa_metric is not None and d.hpa_metric.fallback_active]
    assert active and active[0].hpa_metric is not None
    assert active[0].hpa_metric.value_milli == 7 * PARAMS.target * 1000
    assert max(p.desired for p in result.timeline if p.t_s < 120) == 7
    later = [d for d in policy.decisions if d.t_s >= 135]
    assert all(d.hpa_metric is None or not d.hpa_metric.error for d in later)  # data again: happy
