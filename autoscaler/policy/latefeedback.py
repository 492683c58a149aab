"""The SLO's own evidence: how many first tokens came slow, from the engines' TTFT histograms.

The sizing is a model of the engine and the traffic, and where it is wrong about them the count it
asks for is short while every reading it takes says enough. ServeGen m-small at ~130 req/s on
reference-70b (holdout seed 4): a few minutes whose prompts of 10,000-36,000 tokens came three
times as often held replicas in their prefills, the model still asked 6 with 7 ready, and the
fleet tipped into a backlog it took storage-bound minutes to climb out of (98.14 % SLO, TTFT p99
over 16 minutes). The engines saw it first: 3.2 % of the first tokens in the 15 s before were past
the target, against the 1 % the sizing plans for. Two replicas more then kept it at 99.35 %.

vLLM observes every request's time to first token (from its arrival at the engine) when that token
comes, in vllm:time_to_first_token_seconds; the adapter serves its buckets' rates as
`ttft_bucket_rate`, one item per `le` bound, which is what this module reads. A 2 s target falls
between vLLM's bounds 1 and 2.5 s, and neither the bucket's edges nor a line within it reads the
share past 2 s both safely and in time. Past 2.5 s (a count no reading can overstate) saw the onset
above too late: its first tokens came at 2-2.5 s, and m-small's meltdowns barely moved (98.25 %).
Linear within the bucket, as Prometheus's histogram_quantile reads one, saw it but over-reads where
first tokens gather at 1-2 s: stationary 4,000-token prompts at 30 req/s on reference-70b, 0.98 %
late past 2 s and 9.3 % in (1, 2.5], read as 3.5 %; the stage alarmed every minute or so at any
fleet (21 replicas meet the SLO; it held 45-54).

So the stage counts first tokens past the last bound at or below the target (the target itself
where it is a bound: SGLang's 2 s), `slow` ones, and weighs them against their own usual share,
the hour-long average of the same histogram (survival.track): a first token past 1 s is no
evidence where one in ten always is, and is where one in a thousand usually is. The onset above was
7-11 % past 1 s where the hour's usual share was under 2 %; the stationary prompts' 9.7 % is their
usual share, and no window there doubles its odds.

The share the stage allows starts from the sizing's own budget (the TTFT tail's, capacity.py): the
attainment's tail, or twice the requests no fleet serves in time where those are more (their
prefill alone past the target: the waits may miss as often). That budget is a share of late first
tokens and the stage counts slow ones, a wider set, so it is read at the hour's proportion of slow
to late, late read linear between the bounds around the target (where that over-reads, the
allowance comes out smaller, and the hour's slow share bounds it below; the line reads at least
(2.5 - 2) / (2.5 - 1), a third, of the bucket's first tokens late, so the allowance is at most thrice
the budget: an hour with next to nothing late never makes the stage blind). ServeGen m-large's long
prompts hold a replica on one-gpu-8b and put first tokens at 1-2 s, on time (0.91 % past 1 s,
0.014 % past 2.5 s): 1 % late is 2.9 % slow there, and a hold's windows, which against 1 % alarmed
27 times in three hours, mostly are not evidence. The allowance is the larger of that and the
hour's slow share (an hour late past its budget: a shift from there is the evidence). Evidence that a
first token's odds of being slow are twice that share's is summed as Page's CUSUM (1954) of the
Bernoulli log-likelihood ratio, window by window over the first tokens each reading counts, never
below 0: a window of n first tokens, k of them slow, adds k·ln 2 - n·ln(1 + p) at the allowance p
(twice the odds, p' = 2p / (1 + p): twice the share where it is small, and below 1 at any share,
Mooncake's 72 % too). No window adds more than half the alarm: a replica started for one window's
spike (a long prompt's hold, on m-large) is ready a lead after it is gone, the reason the scale-up
waits for a second decision too. At ALARM (odds of 1,000 to 1) the stage asks for one replica above
the count and the sum restarts at half the alarm: the episode confirmed, each slow window after it
asks for one more, each through the scale-up's stagger, while usual windows take the evidence away.
The replicas it asks for are needs like any other, kept their break-even by the scale-down.

At one replica the stage weighs nothing (FEWEST_REPLICAS). There the router has nowhere else to send
the requests that arrive during a long prompt's prefill, so a hold slows every first token of its
window, as a fleet too short would, and the first tokens are not the independent trials the
evidence counts. The sizing already prices the holds there: leastloaded.held_share at one replica is
the backlog behind a hold. ServeGen m-large at ~12.5 req/s on one-gpu-8b runs one replica; its
holds put 9-79 % of a window's 39-106 first tokens past 1 s, and such windows in a row alarmed
1-3 times in three hours (seeds 1 / 4 / 6 / 8 / 9). The replicas the alarms started were ready
after the holds had passed: the same SLO to 0.003 point, at 0.02-0.09 GPU-h more. From two
replicas on, the router sends around a held replica. Pure arithmetic.
"""

from __future__ import annotations

import bisect
import math
from typing import Final, NamedTuple

from autoscaler.policy import survival
from autoscaler.policy.observation import MetricReading
from autoscaler.policy.survival import Survival

ALARM: Final = math.log(1000.0)  # the evidence, in nats, at which the odds are read as twice the allowance's
MOST_WINDOW: Final = ALARM / 2.0  # the most one window adds, and where the sum restarts after an alarm
FEWEST_REPLICAS: Final = 2  # at one replica a long prompt's hold slows every first token behind it
LN2: Final = math.log(2.0)


class LateCount(NamedTuple):
    """First tokens in a reading's window, and how many of them came past `bound_s`, the last
    bound at or below the target."""

    late: float
    total: float
    bound_s: float


def count(reading: MetricReading | None, ttft_s: float, window_s: float) -> tuple[LateCount | None, str]:
    """The first tokens of the last window_s seconds and the slow ones (past the last bound at or
    below ttft_s) from a reading of the TTFT histogram's bucket rates; (None, why) when there is
    none to read (no reading, no bound at or below the target, or a reading that is no histogram:
    survival.BucketsError's words)."""
    if reading is None:
        return None, ""
    try:
        bounds, over, total = survival.buckets(reading)
    except survival.BucketsError as e:
        return None, f"the TTFT histogram is unusable: {e}"
    at = bisect.bisect_right(bounds, ttft_s) - 1  # the last bound at or below: survival.buckets' increase
    if at < 0:
        return None, f"the TTFT histogram has no bound at or below the {ttft_s:g} s target"
    return LateCount(over[at] * window_s, total * window_s, bounds[at]), ""


class Usual(NamedTuple):
    """The hour's shares of first tokens: slow (past the count's bound) and late (past the target,
    read linear between the bounds around it)."""

    slow: float
    late: float


NONE_USUAL: Final = Usual(0.0, 0.0)


def usual(tail: Survival | None, bound_s: float, ttft_s: float) -> Usual:
    """The hour or so's shares of slow and late first tokens (survival.track's average of the same
    histogram, before this tick's reading), late read linear from bound_s to the next bound above
    the target ttft_s (as slow where bound_s is the target or the last bound): none before any
    reading, or where bound_s is not one of the tail's bounds (bounds that changed start afresh)."""
    if tail is None or bound_s not in tail.bounds:
        return NONE_USUAL
    shares = survival.shares(tail)
    at = tail.bounds.index(bound_s)
    slow = shares[at]
    if bound_s >= ttft_s or at + 1 == len(shares):
        return Usual(slow, slow)
    above, above_s = shares[at + 1], tail.bounds[at + 1]
    return Usual(slow, above + (slow - above) * (above_s - ttft_s) / (above_s - bound_s))


def allowance(attainment: float, idle_misses: float, hour: Usual = NONE_USUAL) -> float:
    """The slow share the stage allows: the sizing's own budget of late first tokens (the
    attainment's tail, or twice the requests no fleet serves in time where that is more: capacity.py's
    TTFT budget) as slow ones at the hour's proportion of slow to late, or the hour's slow share
    where that is more (an hour late past the budget: a shift from there is the evidence)."""
    tail = 1.0 - attainment
    doubled = 2.0 * idle_misses
    budget = doubled if doubled > tail else tail
    if hour.late > 0.0:
        budget *= hour.slow / hour.late
    return hour.slow if hour.slow > budget else budget


def evidence(before: float, counted: LateCount, allowed: float) -> float:
    """The CUSUM after one window: before + the log-likelihood ratio of its slow first tokens at
    twice the allowed share's odds against the allowed share, k·ln 2 - n·ln(1 + p), at most
    MOST_WINDOW, the sum at least 0. As it was where nothing was counted or any share is allowed."""
    if not 0.0 < allowed < 1.0 or counted.total <= 0.0:
        return before
    late = counted.late if counted.late < counted.total else counted.total
    ratio = late * LN2 - counted.total * math.log1p(allowed)
    after = before + (ratio if ratio < MOST_WINDOW else MOST_WINDOW)
    return after if after > 0.0 else 0.0
