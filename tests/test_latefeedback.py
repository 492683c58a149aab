"""latefeedback.py: first tokens slow past what the sizing allows or the hour usually sees, from the
engines' TTFT histograms, as evidence (a CUSUM) and, at its alarm, the planner's `late` stage."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from test_policy_planner import FIXED_BAND, NOW, obs, planner_spec, readings
from test_survival import assert_the_histogram_is_read_and_kept, bucket_reading

from autoscaler.policy import latefeedback, survival
from autoscaler.policy.capacityspec import DemandSpec
from autoscaler.policy.decide import decide, record_rescale
from autoscaler.policy.latefeedback import LateCount
from autoscaler.policy.observation import MetricReading
from autoscaler.policy.planstate import PlannerState
from autoscaler.policy.state import PolicyState
from autoscaler.specsections import CapacityModel

# vLLM's vllm:time_to_first_token_seconds bounds (vllm/v1/metrics/loggers.py), +Inf last
VLLM_TTFT = (
    "0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75", "1.0",
    "2.5", "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "160.0", "640.0", "2560.0", "+Inf",
)  # fmt: skip
TTFT = "infscale_ttft_bucket_rate"


def ttfts(on_time: int, late: int, late_s: float = 30.0) -> np.ndarray:
    return np.array([0.3] * on_time + [late_s] * late)


def window(on_time: int, late: int, seconds: float = 15.0, late_s: float = 30.0) -> MetricReading:
    """The bucket rates of a window of first tokens, `late` of them at late_s."""
    return bucket_reading(ttfts(on_time, late, late_s), VLLM_TTFT, seconds)


def binomial_log_pmf(k: int, n: int, p: float) -> float:
    return math.log(math.comb(n, k)) + k * math.log(p) + (n - k) * math.log1p(-p)


# --- the count, the allowance, the evidence ------------------------------------------------------


def test_slow_first_tokens_are_counted_past_the_last_bound_at_or_below_the_target() -> None:
    """A 2 s target on vLLM's bounds counts past 1 s: the (1, 2.5] bucket, which no reading can
    split, is counted whole (its 2.2 s first tokens are late, its 1.2 s ones are not, and the usual
    share weighs the difference); a target on a bound counts past the bound itself. The counts are
    the window's (rates x its seconds)."""
    times = np.array([0.3] * 800 + [1.2] * 100 + [2.2] * 60 + [2.6] * 30 + [50.0] * 10)
    got, why = latefeedback.count(bucket_reading(times, VLLM_TTFT, 15.0), 2.0, 15.0)
    assert why == "" and got is not None
    assert got.bound_s == 1.0
    assert got.late == pytest.approx(200.0, abs=0.02) and got.total == pytest.approx(1000.0, abs=0.02)
    at_bound, _ = latefeedback.count(bucket_reading(times, VLLM_TTFT, 15.0), 2.5, 15.0)
    assert at_bound is not None and at_bound.bound_s == 2.5  # at or below: the bound itself
    assert at_bound.late == pytest.approx(40.0, abs=0.02)
    # counted over another window than the rate's: the rates times its seconds
    half, _ = latefeedback.count(bucket_reading(times, VLLM_TTFT, 15.0), 2.0, 7.5)
    assert half is not None and half.late == pytest.approx(100.0, abs=0.01)


def test_a_histogram_that_cannot_say_slow_is_not_read_and_says_why() -> None:
    assert latefeedback.count(None, 2.0, 15.0) == (None, "")
    got, why = latefeedback.count(window(90, 10), 0.0005, 15.0)
    assert got is None and why == "the TTFT histogram has no bound at or below the 0.0005 s target"
    broken = MetricReading((5, 9), labels=({"le": "soon"}, {"le": "+Inf"}))
    got, why = latefeedback.count(broken, 2.0, 15.0)
    assert got is None and why == "the TTFT histogram is unusable: `le` is not a number: 'soon'"
    failed = MetricReading.failed("the adapter answered 503")
    unusable = "the TTFT histogram is unusable: the adapter answered 503"
    assert latefeedback.count(failed, 2.0, 15.0) == (None, unusable)


def test_the_hours_shares_are_slow_past_the_bound_and_late_read_linear_to_the_next() -> None:
    """survival.track's average of the same histogram: 10 % at 1.5 s for ten minutes, slow past
    1 s, and late past the 2 s target read linear in (1, 2.5]: a third of them. Then 40 % for a
    minute: the hour's share moves ~1/40 of the way a tick (weights 1 - exp(-15 s / 1 h) over the
    ten minutes'). First tokens past 2.5 s count whole."""
    tail = None
    for i in range(40):
        tail, _ = survival.track(tail, window(900, 100, late_s=1.5), 15.0 * i, 15.0)
    hour = latefeedback.usual(tail, 1.0, 2.0)
    assert hour.slow == pytest.approx(0.1, rel=1e-3) and hour.late == pytest.approx(0.1 / 3, rel=1e-3)
    for i in range(40, 44):
        tail, _ = survival.track(tail, window(600, 400, late_s=1.5), 15.0 * i, 15.0)
    w = 1.0 - math.exp(-15.0 / survival.MEMORY_S)
    rest = (1.0 - w) ** 4
    over = 100.0 * (1.0 - (1.0 - w) ** 40) * rest + 400.0 * (1.0 - rest)
    total = 1000.0 * (1.0 - (1.0 - w) ** 44)
    assert latefeedback.usual(tail, 1.0, 2.0).slow == pytest.approx(over / total, rel=1e-3)
    past = np.array([0.3] * 880 + [1.5] * 100 + [3.0] * 20)
    tail, _ = survival.track(None, bucket_reading(past, VLLM_TTFT, 15.0), 0.0, 15.0)
    hour = latefeedback.usual(tail, 1.0, 2.0)
    assert hour.slow == pytest.approx(0.12, rel=1e-3)
    assert hour.late == pytest.approx(0.02 + 0.1 / 3, rel=1e-3)
    assert latefeedback.usual(tail, 2.5, 2.5) == pytest.approx((0.02, 0.02), rel=1e-3)  # the target a bound
    assert latefeedback.usual(tail, 2.0, 2.0) == (0.0, 0.0)  # no such bound: none
    assert latefeedback.usual(None, 1.0, 2.0) == (0.0, 0.0)
    last, _ = survival.track(None, bucket_reading(past, ("0.5", "1.0", "+Inf"), 15.0), 0.0, 15.0)
    assert latefeedback.usual(last, 1.0, 2.0) == pytest.approx((0.12, 0.12), rel=1e-3)  # none above


def test_the_allowance_is_the_budget_at_the_hours_slow_to_late_or_the_hours_slow_share() -> None:
    """The attainment's tail, or twice the requests no fleet serves in time where more (capacity's
    TTFT budget), a share of late first tokens, as slow ones at the hour's proportion; the hour's
    slow share where that is more."""
    assert latefeedback.allowance(0.99, 0.0003) == pytest.approx(0.01)  # m-small: a few holds
    assert latefeedback.allowance(0.99, 0.1) == pytest.approx(0.2)
    assert latefeedback.allowance(0.99, 0.36) == pytest.approx(0.72)  # Mooncake on reference-70b
    assert latefeedback.allowance(0.999, 0.0) == pytest.approx(0.001)
    # ServeGen m-large x 0.15 on one-gpu-8b: long prompts' holds put 0.91 % past 1 s, 0.014 % past
    # 2.5 s (0.31 % late read linear): 1 % late is 2.91 % slow, and a hold's window is less evidence
    holds = latefeedback.Usual(0.0091, 0.000135 + (0.0091 - 0.000135) / 3)
    assert latefeedback.allowance(0.99, 0.0003, holds) == pytest.approx(0.01 * 0.0091 / holds.late)
    assert latefeedback.allowance(0.99, 0.0003, holds) == pytest.approx(0.0291, abs=1e-4)
    # stationary 4,000-token prompts at 30 req/s on reference-70b: 9.7 % past 1 s, usually
    long_prompts = latefeedback.Usual(0.097, 0.0043 + (0.097 - 0.0043) / 3)
    assert latefeedback.allowance(0.99, 0.0003, long_prompts) == pytest.approx(0.097)
    # an hour late past the budget: a shift from its own slow share
    assert latefeedback.allowance(0.99, 0.0, latefeedback.Usual(0.05, 0.03)) == pytest.approx(0.05)
    # nothing late in the hour: the budget as it is
    assert latefeedback.allowance(0.99, 0.0, latefeedback.Usual(0.004, 0.0)) == pytest.approx(0.01)


@pytest.mark.parametrize(
    ("late", "total", "allowed"),
    [(12, 600, 0.01), (6, 100, 0.03), (18, 294, 0.01), (3, 40, 0.3), (300, 400, 0.72), (390, 400, 0.72)],
)
def test_the_evidence_is_the_binomial_log_likelihood_ratio_of_twice_the_odds(
    late: int, total: int, allowed: float
) -> None:
    """One window from 0 adds log(P(late | n, p') / P(late | n, p)) from the binomial's pmfs, p' the
    share at twice p's odds (2p / (1 + p)), at most half the alarm and the sum at least 0."""
    twice = 2 * allowed / (1 + allowed)
    want = binomial_log_pmf(late, total, twice) - binomial_log_pmf(late, total, allowed)
    got = latefeedback.evidence(0.0, LateCount(late, total, 2.0), allowed)
    assert got == pytest.approx(min(max(want, 0.0), latefeedback.MOST_WINDOW), rel=1e-9)


def test_the_evidence_sums_windows_and_never_falls_below_zero() -> None:
    """On time (the allowed share or less) takes evidence away, down to 0 and no further, so a
    long quiet spell stores nothing against the next; no window alone reaches the alarm (half of it
    at most), two late ones do, and a few moderately late ones add up to it. m-small x 0.14's replay
    (holdout seed 4): its quiet windows (10-23 late of ~1,900) stay at 0, the window before its
    backlog (63 of 1,941) is half the alarm and the one after it (42 of 2,121) the other half."""
    quiet = [LateCount(10, 1943, 2.0), LateCount(23, 1868, 2.0), LateCount(0, 1940, 2.0)]
    s = 0.0
    for w in quiet:
        s = latefeedback.evidence(s, w, 0.01)
        assert s == 0.0
    half = latefeedback.evidence(0.0, LateCount(63, 1941, 2.0), 0.01)
    assert half == latefeedback.MOST_WINDOW
    assert latefeedback.evidence(half, LateCount(42, 2121, 2.0), 0.01) >= latefeedback.ALARM
    moderate = LateCount(12, 600, 2.0)  # 2 % of 600: twice the allowed share
    once = latefeedback.evidence(0.0, moderate, 0.01)
    assert 0.0 < once < latefeedback.MOST_WINDOW
    twice = latefeedback.evidence(once, moderate, 0.01)
    assert twice < latefeedback.ALARM <= latefeedback.evidence(twice, moderate, 0.01)
    assert 0.0 < latefeedback.evidence(once, LateCount(6, 600, 2.0), 0.01) < once  # on time: less
    # Mooncake's allowance (72 %): its usual 42 % late is no evidence, all of them late is
    assert latefeedback.evidence(0.0, LateCount(420, 1000, 2.0), 0.72) == 0.0
    assert latefeedback.evidence(0.0, LateCount(1000, 1000, 2.0), 0.72) == latefeedback.MOST_WINDOW
    # nothing counted, or no share to read against (none allowed, or all): as it was
    assert latefeedback.evidence(3.0, LateCount(0, 0, 2.0), 0.01) == 3.0
    assert latefeedback.evidence(3.0, LateCount(5, 100, 2.0), 0.0) == 3.0
    assert latefeedback.evidence(3.0, LateCount(5, 100, 2.0), 1.2) == 3.0


# --- the planner's late stage ------------------------------------------------------------------


def late_spec(metric: str | None = TTFT):  # type: ignore[no-untyped-def]
    return planner_spec(cold=None, demand=replace(FIXED_BAND, ttft_metric=metric))


def test_the_planner_asks_one_replica_more_at_the_alarm_and_starts_again_from_zero() -> None:
    """40 req/s of short requests need 8 (test_policy_planner's steady table, a 10 s TTFT target:
    slow past vLLM's 10 s bound, these at 30 s). On-time windows leave no evidence; a window with
    3 % of its first tokens late (thrice the 1 % allowance, 600 of them) raises it half-way, no
    more; the next such window alarms: the `late` stage asks for 9, the scale-up starts it at once
    (the floor's way, no confirmation), and the evidence restarts at half the alarm, which an
    on-time window takes away."""
    spec = late_spec()
    state, replicas = PolicyState(), 8
    on_time, late = readings(40.0) | {TTFT: window(600, 0)}, readings(40.0) | {TTFT: window(582, 18)}
    for i, metrics in enumerate([on_time] * 4 + [late]):
        decision, state = decide(spec, state, obs(replicas, metrics), NOW + 15 * i)
        assert [s.name for s in decision.stages if s.name == "late"] == []
        assert decision.desired_replicas == 8
    assert state.planner is not None and state.planner.late_evidence == latefeedback.MOST_WINDOW
    decision, state = decide(spec, state, obs(replicas, late), NOW + 15 * 5)
    stage = next(s for s in decision.stages if s.name == "late")
    assert (stage.before, stage.after, stage.reason) == (8, 9, "LateFirstTokens")
    said = "18 of 600 first tokens past 10 s in the last 15 s (3.00 %; 1.00 % allowed, the sizing's budget"
    assert stage.message.startswith(said)
    assert stage.message.endswith("that the odds are twice that; one replica above the 8")
    assert decision.desired_replicas == 9
    assert state.planner is not None and state.planner.late_evidence == latefeedback.MOST_WINDOW
    state = record_rescale(spec, state, NOW + 15 * 5, replicas, 9)
    # the replica it asked for is a need like any other: the scale-down keeps it its break-even
    decision, state = decide(spec, state, obs(9, on_time), NOW + 15 * 6)
    assert decision.desired_replicas == 9
    assert state.planner is not None and state.planner.late_evidence == 0.0


def test_at_one_replica_slow_windows_are_no_evidence_and_from_two_they_are() -> None:
    """At one replica the router sends every request behind a long prompt's prefill, so a hold's
    window is as slow as a short fleet's: at 5 req/s (one replica's need), after four on-time
    windows, two with a fifth of their first tokens late raise no evidence on one replica, where on
    two the first raises it half-way and the second alarms, one replica above the two."""
    spec = late_spec()
    on_time, late = readings(5.0) | {TTFT: window(75, 0)}, readings(5.0) | {TTFT: window(60, 15)}
    one, two = PolicyState(), PolicyState()
    for i, metrics in enumerate([on_time] * 4 + [late] * 2):
        decision, one = decide(spec, one, obs(1, metrics), NOW + 15 * i)
        assert [s.name for s in decision.stages if s.name == "late"] == []
        assert decision.desired_replicas == 1
        assert one.planner is not None and one.planner.late_evidence == 0.0
        decision, two = decide(spec, two, obs(2, metrics), NOW + 15 * i)
        assert two.planner is not None
        if i == 4:
            assert two.planner.late_evidence == latefeedback.MOST_WINDOW
    assert two.planner.late_evidence == latefeedback.MOST_WINDOW  # the alarm's restart
    stage = next(s for s in decision.stages if s.name == "late")
    # from the sizing's 1 to one above the 2 running
    assert (stage.before, stage.after, stage.reason) == (1, 3, "LateFirstTokens")
    assert stage.message.endswith("one replica above the 2")
    assert stage.message.startswith("15 of 75 first tokens past 10 s in the last 15 s (20.00 %")


# a histogram whose bounds leave the 10 s target between two: slow past 5 s
COARSE = ("0.5", "5.0", "20.0", "+Inf")


def coarse(on_time: int, slow: int) -> dict[str, MetricReading]:
    """40 req/s, and a window of first tokens, `slow` of them at 7 s: slow, on time for the target."""
    return readings(40.0) | {TTFT: bucket_reading(ttfts(on_time, slow, 7.0), COARSE, 15.0)}


def test_first_tokens_usually_slow_are_no_evidence_and_a_rise_past_their_usual_share_is() -> None:
    """Where the target falls between bounds (10 s between 5 and 20), a tenth of first tokens past
    5 s every window is the traffic's usual (stationary long prompts: 9.7 % past 1 s at a 2 s
    target, 1 % late): ten minutes of it never alarm, though each is ten times the sizing's 1 %.
    The first window, before any usual share, raises the evidence half-way, the next takes it back.
    Thrice the usual share then alarms at its second window, as the onset of m-small x 0.14's
    backlog did (7-11 % past 1 s where under 2 % was usual)."""
    spec = late_spec()
    state = PolicyState()
    for i in range(40):
        decision, state = decide(spec, state, obs(8, coarse(540, 60)), NOW + 15 * i)
        assert [s.name for s in decision.stages if s.name == "late"] == [] and decision.desired_replicas == 8
        assert state.planner is not None
        assert state.planner.late_evidence == (latefeedback.MOST_WINDOW if i == 0 else 0.0)
    hour = latefeedback.usual(state.planner.ttft_tail, 5.0, 10.0)  # late: 2/3 of (5, 20]'s
    assert hour.slow == pytest.approx(0.1, rel=1e-3) and hour.late == pytest.approx(0.1 * 2 / 3, rel=1e-3)
    decision, state = decide(spec, state, obs(8, coarse(420, 180)), NOW + 15 * 40)
    assert state.planner is not None and state.planner.late_evidence == latefeedback.MOST_WINDOW
    decision, state = decide(spec, state, obs(8, coarse(420, 180)), NOW + 15 * 41)
    stage = next(s for s in decision.stages if s.name == "late")
    assert (stage.before, stage.after, stage.reason) == (8, 9, "LateFirstTokens")
    # allowed: the usual share with the first 30 % window in it, 1/38 of the ten minutes' weight
    assert stage.message.startswith("180 of 600 first tokens past 5 s in the last 15 s (30.00 %; 10.5")


def test_the_planner_keeps_the_ttft_survival_and_reads_it_back() -> None:
    state, plain = PolicyState(), PolicyState()
    for i in range(3):
        _, state = decide(late_spec(), state, obs(8, coarse(540, 60)), NOW + 15 * i)
        _, plain = decide(late_spec(None), plain, obs(8, coarse(540, 60)), NOW + 15 * i)
    assert_the_histogram_is_read_and_kept(late_spec(), late_spec(None), TTFT, state, plain, "ttft_tail")
    tail = state.planner.ttft_tail if state.planner is not None else None
    assert tail is not None and (tail.at, tail.bounds) == (NOW + 30, (0.5, 5.0, 20.0))
    assert survival.shares(tail) == pytest.approx((0.1, 0.1, 0.0), abs=1e-6)


def test_without_the_metric_or_its_reading_nothing_changes() -> None:
    """The same late windows: a spec without ttftMetric reads none of it (not among its metrics,
    decisions as without the reading); with it but no reading, the evidence is kept as it was."""
    late = readings(40.0) | {TTFT: window(500, 100)}
    plain, with_reading = PolicyState(), PolicyState()
    for i in range(4):
        a, plain = decide(late_spec(None), plain, obs(8, readings(40.0)), NOW + 15 * i)
        b, with_reading = decide(late_spec(None), with_reading, obs(8, late), NOW + 15 * i)
        assert a == b and a.desired_replicas == 8
    assert TTFT not in late_spec(None).capacity.metric_names  # type: ignore[union-attr]
    assert TTFT in late_spec().capacity.metric_names  # type: ignore[union-attr]
    state = PolicyState()
    _, state = decide(late_spec(), state, obs(8, readings(40.0) | {TTFT: window(588, 12)}), NOW)
    assert state.planner is not None
    kept = state.planner.late_evidence
    assert kept > 0.0
    _, state = decide(late_spec(), state, obs(8, readings(40.0)), NOW + 15)
    assert state.planner is not None and state.planner.late_evidence == kept


def test_a_histogram_that_is_none_is_named_in_a_row_and_the_evidence_kept() -> None:
    """A hostile engine's TTFT histogram (a bound that is no number): the late stage says why in
    its row, changes no count, and keeps the evidence it had."""
    state = PolicyState()
    _, state = decide(late_spec(), state, obs(8, readings(40.0) | {TTFT: window(582, 18)}), NOW)
    assert state.planner is not None
    kept = state.planner.late_evidence
    broken = MetricReading((5, 9), labels=({"le": "soon"}, {"le": "+Inf"}))
    decision, state = decide(late_spec(), state, obs(8, readings(40.0) | {TTFT: broken}), NOW + 15)
    row = next(s for s in decision.stages if s.name == "late")
    assert (row.before, row.after, row.reason) == (8, 8, "TTFTHistogramUnread")
    assert row.message == "the TTFT histogram is unusable: `le` is not a number: 'soon'; the evidence kept"
    assert decision.desired_replicas == 8
    assert state.planner is not None and state.planner.late_evidence == kept > 0.0


def test_the_evidence_is_kept_through_the_state_json_and_checked() -> None:
    state = PolicyState()
    _, state = decide(late_spec(), state, obs(8, readings(40.0) | {TTFT: window(588, 12)}), NOW)
    planner = state.planner
    assert planner is not None and planner.late_evidence > 0.0
    doc = planner.to_dict()
    assert doc["lateEvidence"] == planner.late_evidence
    assert PlannerState.from_dict(doc) == planner
    del doc["lateEvidence"]  # written before the field existed: a fresh start
    assert PlannerState.from_dict(doc).late_evidence == 0.0
    for bad in (-1.0, 7.0, "much"):
        with pytest.raises(ValueError, match="lateEvidence"):
            PlannerState.from_dict(planner.to_dict() | {"lateEvidence": bad})


def test_the_spec_field_reads_from_the_document_and_refuses_an_empty_name() -> None:
    spec = late_spec()
    model = CapacityModel.model_validate(CapacityModel.document_of(spec.capacity))  # type: ignore[arg-type]
    assert model.to_spec().demand.ttft_metric == TTFT
    with pytest.raises(ValueError, match=r"capacity\.demand\.ttft_metric"):
        DemandSpec(ttft_metric="")
