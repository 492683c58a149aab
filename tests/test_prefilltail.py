"""prefilltail.py: the engines' prefill-time histograms read as the far tail of the holds one long
prompt puts on a replica; leastloaded.held_share, the waits behind a hold; and what they size."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from test_policy_planner import NOW
from test_survival import assert_the_histogram_is_read_and_kept, bucket_reading, capacity_after, planner_spec

from autoscaler.policy import capacity, leastloaded, prefilltail, survival
from autoscaler.policy.capacity import Demand
from autoscaler.policy.capacityspec import SloTarget
from autoscaler.policy.observation import MetricReading
from autoscaler.policy.prefilltail import PrefillTail
from autoscaler.policy.spec import AutoscalerSpec
from autoscaler.policy.survival import BucketsError
from replay import profiles
from replay.policies.predictive import replica_profile

# vLLM's bounds for vllm:request_prefill_time_seconds, as prometheus_client writes them
VLLM_LE = (
    "0.3", "0.5", "0.8", "1.0", "1.5", "2.0", "2.5", "5.0", "10.0", "15.0", "20.0", "30.0", "40.0",
    "50.0", "60.0", "120.0", "240.0", "480.0", "960.0", "1920.0", "7680.0", "+Inf",
)  # fmt: skip


def histogram(prefill_s: np.ndarray, seconds: float = 1.0) -> MetricReading:
    """The bucket rates an engine's histogram of these prefill times gives over `seconds`."""
    return bucket_reading(prefill_s, VLLM_LE, seconds)


def test_a_vllm_histogram_reads_as_the_share_past_each_bound() -> None:
    times = np.array([0.1] * 990 + [0.4] * 5 + [3.0] * 4 + [12.0])
    bounds, over, total = survival.buckets(histogram(times))
    assert bounds[:3] == (0.3, 0.5, 0.8) and len(bounds) == 21 and bounds[-1] == 7680.0
    assert total == 1000.0
    assert over[0] == 10.0 and over[1] == 5.0 and over[6] == 5.0  # past 0.3, 0.5 and 2.5 s
    assert over[7] == 1.0 and over[8] == 1.0 and over[9] == 0.0  # past 5, 10 and 15 s


def test_items_in_any_order_and_a_falling_cumulative_rate_read_as_counts_never_falling() -> None:
    """Two pods' rates read at different moments can sum to a bucket below a lower one's."""
    reading = MetricReading(
        (1000, 900, 950, 400),
        labels=({"le": "+Inf"}, {"le": "2.5"}, {"le": "1.0"}, {"le": "0.3"}),
    )
    bounds, over, total = survival.buckets(reading)
    assert bounds == (0.3, 1.0, 2.5) and total == 1.0
    assert over == pytest.approx((0.6, 0.05, 0.05))  # 0.9 at 2.5 s read as 1.0 s's 0.95


@pytest.mark.parametrize(
    ("reading", "problem"),
    [
        (MetricReading.failed("the adapter is down"), "the adapter is down"),
        (MetricReading((1, 2)), "2 items but 0 with labels"),
        (MetricReading((1, 2), labels=({"le": "1"}, {"bucket": "+Inf"})), "without an `le` label"),
        (MetricReading((1, 2), labels=({"le": "one"}, {"le": "+Inf"})), "`le` is not a number: 'one'"),
        (
            MetricReading((1, 2), labels=({"le": "-1"}, {"le": "+Inf"})),
            "a number of seconds > 0 and at most 1e\\+07",
        ),
        (
            MetricReading((1, 2), labels=({"le": "NaN"}, {"le": "+Inf"})),
            "a number of seconds > 0 and at most 1e\\+07",
        ),
        (MetricReading((1, 2), labels=({"le": "1"}, {"le": "2"})), "no `le`=\\+Inf item"),
        (
            MetricReading((1, 1, 2), labels=({"le": "1"}, {"le": "1.0"}, {"le": "+Inf"})),
            "bound 1 seconds comes twice",
        ),
        (MetricReading((-1, 2), labels=({"le": "1"}, {"le": "+Inf"})), "a bucket rate is finite and >= 0"),
    ],
)
def test_a_reading_that_is_no_histogram_names_its_problem(reading: MetricReading, problem: str) -> None:
    with pytest.raises(BucketsError, match=problem):
        survival.buckets(reading)


def test_the_excess_past_the_slack_is_exact_for_holds_spread_evenly_over_their_buckets() -> None:
    """E[(S - τ)+] from the bounds alone, against the samples': holds uniform within (2.5, 5] and
    (5, 10], the bulk below the first bound, and τ inside a bucket, at a bound and past the holds."""
    rng = np.random.default_rng(7)
    times = np.concatenate(
        (rng.uniform(0.0, 0.3, 200_000), rng.uniform(2.5, 5.0, 30_000), rng.uniform(5.0, 10.0, 10_000))
    )
    tail = survival.track(None, histogram(times), 0.0, 15.0)[0]
    assert tail is not None
    for slack in (1.9, 2.5, 4.0, 7.5, 12.0):
        exact = float(np.maximum(times - slack, 0.0).mean())
        # the bulk's own excess below 0.3 s never counts: τ is past it
        assert prefilltail.excess_s(tail, slack) == pytest.approx(exact, rel=0.03, abs=1e-9)
    assert prefilltail.past_share(tail, 2.5) == pytest.approx(40_000 / len(times), rel=1e-3)
    assert prefilltail.past_share(tail, 7.5) == pytest.approx(5_000 / len(times), rel=0.03)


def test_no_prefill_seen_has_no_excess() -> None:
    empty = PrefillTail(0.0, (1.0, 2.0), (0.0, 0.0), 0.0)
    assert prefilltail.excess_s(empty, 0.5) == 0.0 and prefilltail.past_share(empty, 0.5) == 0.0


def test_the_shares_are_averaged_over_the_memory_from_the_first_tick() -> None:
    """Each tick weighs w = 1 - exp(-dt / MEMORY_S) against what came before (the first too, from
    0): a tick with a hold then one without read as (1 - w)·its share / (2 - w), about half; a
    failed or malformed read keeps the average; a histogram with other bounds starts afresh."""
    hold = histogram(np.array([0.1] * 99 + [4.0]))
    calm = histogram(np.array([0.1] * 100))
    one = survival.track(None, hold, 100.0, 15.0)[0]
    two = survival.track(one, calm, 115.0, 15.0)[0]
    assert one is not None and two is not None and two.at == 115.0
    assert prefilltail.past_share(one, 2.5) == pytest.approx(0.01)
    w = -math.expm1(-15.0 / survival.MEMORY_S)
    assert prefilltail.past_share(two, 2.5) == pytest.approx((1 - w) * 0.01 / (2 - w))
    assert survival.track(two, MetricReading.failed("timeout"), 130.0, 15.0) == (two, "timeout")
    kept, why = survival.track(two, MetricReading((5,)), 130.0, 15.0)
    assert kept is two and why == "1 items but 0 with labels: no `le` to read"
    assert survival.track(two, None, 130.0, 15.0) == (two, "no reading")
    other = MetricReading((900, 1000), labels=({"le": "1.0"}, {"le": "+Inf"}))
    fresh = survival.track(two, other, 130.0, 15.0)[0]
    assert (
        fresh is not None
        and fresh.bounds == (1.0,)
        and prefilltail.past_share(fresh, 1.0) == pytest.approx(0.1)
    )
    # a tick an hour long weighs 1 - 1/e against all before it
    later = survival.track(two, calm, 115.0 + survival.MEMORY_S, 15.0)[0]
    assert later is not None and two is not None
    before = prefilltail.past_share(two, 2.5)
    keep = math.exp(-1.0)
    assert prefilltail.past_share(later, 2.5) == pytest.approx(
        keep * before * two.total / (keep * two.total + (1 - keep) * 100.0)
    )


def test_the_wait_behind_a_hold_falls_as_the_router_sends_the_held_replica_less() -> None:
    """u·residual / (n - u): one replica's backlog behind the hold at n = 1, the λ/n² the router
    still sends the held replica from n = 2 on."""
    u1, residual = 0.39, 0.042
    assert leastloaded.held_share(1, u1, residual) == pytest.approx(u1 * residual / (1 - u1))
    shares = [leastloaded.held_share(n, u1 / n, residual) for n in range(1, 9)]
    assert all(a > b for a, b in itertools.pairwise(shares))
    assert shares[1] == pytest.approx(u1 / 2 * residual / (2 - u1 / 2))
    assert leastloaded.held_share(3, 0.1, 0.0) == 0.0


# reference-70b's engine as the replay's predictive profiles it, and ServeGen m-large's mix
REFERENCE_70B = replica_profile(profiles.REFERENCE_70B.engine)
M_LARGE = Demand(9.5, 9.5 * 665.0, 9.5 * 140.0)


def test_holds_of_four_seconds_size_a_second_replica_where_the_gamma_saw_one() -> None:
    """0.09 % of prefills at 4 s (m-large's 24,000-token prompts on a 70B replica; the replay's
    late share at one replica is 6.7 %): one replica where the prompt lengths' gamma alone says so,
    two with the engines' histogram; holds shorter than the slack change nothing."""
    slo = SloTarget(ttft_s=2.0, tpot_s=0.2)
    shape = {"lengths_cv2": 1.85, "least_loaded": True, "arrivals_index": 1.5}

    def count(tail: PrefillTail | None) -> int:
        return capacity.size(REFERENCE_70B, slo, M_LARGE, prefill_tail=tail, **shape).replicas  # type: ignore[arg-type]

    def tail_of(hold_s: float) -> PrefillTail:
        times = np.array([0.05] * 99_910 + [hold_s] * 90)
        got = survival.track(None, histogram(times), 0.0, 15.0)[0]
        assert got is not None
        return got

    assert count(None) == 1
    assert count(tail_of(1.2)) == 1
    assert count(tail_of(4.0)) == 2


HIST = "infscale_prefill_time_bucket_rate"


def test_the_planner_reads_the_histogram_into_its_state_and_says_so_in_the_capacity_stage() -> None:
    """decide() with capacity.demand.prefillTimeMetric: the tail is kept in the planner's state
    (and through its JSON, as the controller persists it), the capacity stage says how many
    prefills hold a replica past the TTFT target, and the count at m-large's mix is one more; a
    spec without the metric never reads it (the spec's field and the state's checks: test_survival)."""
    from test_policy_planner import readings

    from autoscaler.policy.capacityspec import DemandSpec

    def spec(metric: str | None) -> AutoscalerSpec:
        return planner_spec(REFERENCE_70B, DemandSpec(prefill_time_metric=metric, prompt_square_metric="sq"))

    holds = np.array([0.05] * 99_910 + [4.0] * 90)
    metrics = readings(9.5, prompt=665.0, output=140.0) | {
        "sq": MetricReading.of(9.5 * 665.0**2 * (1 + 1.85)),
        HIST: histogram(holds, seconds=100_000 / 9.5),
    }
    without, said_without, plain = capacity_after(spec(None), metrics)
    with_tail, said, state = capacity_after(spec(HIST), metrics)
    assert (without, with_tail) == (1, 2)
    assert "% of prefills hold a replica past the TTFT target" not in said_without
    # 0.09 %, read from rates in the API's milli-units: 0.008 of 9.5 prefills/s
    assert "; 0.0842 % of prefills hold a replica past the TTFT target (the engines' histograms)" in said
    assert_the_histogram_is_read_and_kept(spec(HIST), spec(None), HIST, state, plain, "prefill_tail")
    # a hostile engine's histogram (a bound that is no number): the tail is kept, the stage says why
    broken = MetricReading((5, 9), labels=({"le": "soon"}, {"le": "+Inf"}))
    after_n, message, after = capacity_after(
        spec(HIST), metrics | {HIST: broken}, state, ticks=1, start=NOW + 15 * 8, replicas=2
    )
    assert (
        "; the prefill-time histogram not read (`le` is not a number: 'soon'), its last tail kept" in message
    )
    assert state.planner is not None and after.planner is not None
    assert after.planner.prefill_tail == state.planner.prefill_tail
    assert after_n == 2


def test_the_prefills_past_the_target_are_missed_at_any_count_and_set_the_waits_budget() -> None:
    """The share of prefills the histograms show past the TTFT target is read as the requests no
    fleet serves in time (idlemiss's): none without a tail or with a token-aware target (a long
    prompt's own length extends it); and the waits' budget takes it as lost, doubling it where it
    is half the tail or more (idlemiss.wait_budget's rule)."""
    from autoscaler.policy import idlemiss

    times = np.array([0.05] * 970 + [3.0] * 30)  # 3 % past a 2 s target
    tail = survival.track(None, histogram(times), 0.0, 15.0)[0]
    assert prefilltail.missed(tail, 2.0, None) == pytest.approx(0.03)
    assert prefilltail.missed(tail, 2.0, 5_000.0) == 0.0 and prefilltail.missed(None, 2.0, None) == 0.0
    args = (0.01, 600.0, 20_000.0, 4e-9, 1.9, None, 1.0)
    assert idlemiss.wait_budget(*args) == pytest.approx(0.01, abs=1e-6)  # short prompts: none lost
    assert idlemiss.wait_budget(*args, 0.03, 0.002) == pytest.approx(0.008, abs=1e-6)
    assert idlemiss.wait_budget(*args, 0.03, 0.03) == pytest.approx(0.03)  # as many again may wait


def test_holds_past_the_target_are_priced_within_the_budget_their_own_misses_leave() -> None:
    """3 % of prefills at 4 s (DeepSeek-R1's quieter hours read by the histogram show 1.4-4.7 %
    past 2 s): requests that miss on their own, so the waits behind them have as much again (the
    doubling rule). A token-aware target of 1e9 tokens/s is the same 2 s to a microsecond but is not
    read from the histogram (prefilltail.missed): sized so, the holds alone ask for more."""
    demand = Demand(2.7, 2.7 * 700.0, 2.7 * 1500.0)
    shape = {"lengths_cv2": 10.0, "least_loaded": True, "arrivals_index": 1.2}
    tail = survival.track(None, histogram(np.array([0.1] * 970 + [4.0] * 30)), 0.0, 15.0)[0]

    def count(slo: SloTarget) -> int:
        return capacity.size(REFERENCE_70B, slo, demand, prefill_tail=tail, **shape).replicas  # type: ignore[arg-type]

    read = count(SloTarget(ttft_s=2.0, tpot_s=0.2))
    unread = count(SloTarget(ttft_s=2.0, tpot_s=0.2, ttft_tokens_per_s=1e9))
    assert unread > read
