"""The prefill times' far tail, from the engines' prefill-time histograms: how long one long
prompt's prefill holds a replica past the slack a waiting request has.

A request that arrives while a replica is prefilling one long prompt waits out what is left of it
(the light-load TTFT tail, capacity.py and leastloaded.py: u·P(R > slack)). Its share of a
prefill, E[(S - τ)+] / E[S], had been read from a gamma of the prompts' mean and cv²
(lengths.residual_share), whose tail is two orders of magnitude too thin on real prompt lengths:
ServeGen m-large's 24,000-token prompts (0.05 % of its requests) hold a 70B replica for 4 s, where
a gamma of the same mean and cv² puts 1e-6 of its mass (docs/policy.md, "The prefill times' far
tail"). vLLM observes every request's prefill time (first token - first scheduled) in
vllm:request_prefill_time_seconds when the request finishes; the adapter serves its buckets' rates as
`prefill_time_bucket_rate`, one item per `le` bound, which is what this module reads.

The survival P(S > s) is known at the bounds (the share of prefills above each, averaged over an
hour: survival.py) and read as linear between them (each bucket's prefills spread evenly over it,
1 at s = 0); past the last finite bound nothing is counted. Pure arithmetic on floats.
"""

from __future__ import annotations

from collections.abc import Iterator

from autoscaler.policy import survival
from autoscaler.policy.survival import Survival

PrefillTail = Survival  # the prefill times' survival, in seconds (survival.track's units SECONDS)


def excess_s(tail: PrefillTail, slack_s: float) -> float:
    """E[(S - slack)+] per prefill, seconds: ∫ P(S > s) ds from the slack to the last finite
    bound, the survival linear between the bounds (1 at 0)."""
    got = 0.0
    for lo_s, lo_p, hi_s, hi_p in _segments(tail):
        if hi_s > slack_s:
            start = lo_s if lo_s > slack_s else slack_s
            got += 0.5 * (_on(lo_s, lo_p, hi_s, hi_p, start) + hi_p) * (hi_s - start)  # a trapezoid
    return got


def missed(tail: PrefillTail | None, ttft_s: float, ttft_tokens: float | None) -> float:
    """The share of prefills past the TTFT target itself: requests no fleet serves in time, as
    idlemiss reads them from the prompt lengths' gamma (0 without a tail, or with a token-aware
    target, which a long prompt's own length extends and the histogram does not show)."""
    if tail is None or ttft_tokens is not None:
        return 0.0
    return past_share(tail, ttft_s)


def past_share(tail: PrefillTail, slack_s: float) -> float:
    """P(S > slack), the survival at the slack on the same lines: for the capacity stage's words."""
    for lo_s, lo_p, hi_s, hi_p in _segments(tail):
        if hi_s >= slack_s:
            return _on(lo_s, lo_p, hi_s, hi_p, slack_s)
    return 0.0


def _segments(tail: PrefillTail) -> Iterator[tuple[float, float, float, float]]:
    """The survival's linear pieces (from s, P(S > s), to s, P(S > s)), from (0, 1) through each
    bound's share, never rising (none without a prefill)."""
    if tail.total <= 0.0:
        return
    lo_s, lo_p = 0.0, 1.0
    for bound, p in zip(tail.bounds, survival.shares(tail), strict=True):
        yield lo_s, lo_p, bound, p
        lo_s, lo_p = bound, p


def _on(lo_s: float, lo_p: float, hi_s: float, hi_p: float, s: float) -> float:
    """The survival at s on the piece from (lo_s, lo_p) to (hi_s, hi_p)."""
    return lo_p + (hi_p - lo_p) * (s - lo_s) / (hi_s - lo_s)
