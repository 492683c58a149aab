"""The output lengths' shape, from the engines' output-length histograms: how many decode steps a
request takes after its first token, for the TPOT tail (tpottail.py).

A request's TPOT is the mean of its decode steps, so the few-step requests are the ones a long
prompt's chunk pushes over the target. tpottail had read the steps as geometric around the mean
output, and the traces' outputs are not: ServeGen m-large has 22.7 % of its outputs at <= 4 tokens
where a geometric of its mean has 2.4 % (the TPOT misses at 3 replicas are mostly 2-4-token
answers), and Azure's conversation and code traces have none at <= 8 tokens where the geometric
puts several percent (docs/policy.md, "The outputs' shape"). vLLM observes each request's output
length when it finishes in vllm:request_generation_tokens (bounds 1, 2, 5, 10, 20, 50, ... up to
the model's length; TGI and JetStream have their own); the adapter serves the buckets' rates as
`output_length_bucket_rate`, one item per `le` bound, averaged over an hour here (survival.py).

Each bucket's requests are spread evenly within it: over every length of a bucket at most
INTEGER_WIDTH tokens wide, over SPREAD_POINTS evenly spaced lengths of a wider one, and those
past the last finite bound at it. A request of o tokens takes D = o - 1 decode steps; one of a
single token has no TPOT and never misses. The buckets' shares are rounded to 1/16 in log scale (6 %)
and the steps made from the rounded shares alone (renormalized), so a TPOT tail cached on the
`key` (tailsearch.tpot_rate, latecurve) is a function of its key, as the other inputs' are.
Pure arithmetic on floats.
"""

from __future__ import annotations

import math
from typing import Final, NamedTuple

from autoscaler.policy import memo, survival
from autoscaler.policy.survival import Survival

QUANTUM: Final = 16.0  # the buckets' shares rounded to 1/16 in log scale (tailsearch's TPOT quantum)
LEAST_SHARE: Final = 1e-7  # a bucket with less is left out: the TPOT tail sums stop at 1e-4 of ~1e-2
INTEGER_WIDTH: Final = 20  # a bucket this narrow is spread over each of its lengths (vLLM's to 20)
SPREAD_POINTS: Final = 8  # and a wider one over this many (a 2.5x-wide bucket's misses within ~1 %)
_KEPT: Final = 64  # the step sets kept, by key (memo.remember clears the table when it holds as many)
UNITS: Final = survival.TOKENS  # the bounds' units, for survival.track


class OutputSteps(NamedTuple):
    """The decode steps D >= 1 a request takes after its first token, increasing, and P(D = d)
    (summing to the share of requests of two tokens or more); `key` what they were made from."""

    key: tuple[object, ...]
    steps: tuple[float, ...]
    masses: tuple[float, ...]


_made: dict[tuple[object, ...], OutputSteps | None] = {}


def of(outputs: Survival | None) -> OutputSteps | None:
    """The decode steps of the output lengths' survival (None before any output is seen, or when
    every bucket's share is below LEAST_SHARE)."""
    if outputs is None or outputs.total <= 0.0 or not outputs.bounds:
        return None
    shares = survival.shares(outputs)
    rounded: list[int | None] = []
    before = 1.0
    for above in shares:
        rounded.append(_rounded(before - above))
        before = above
    rounded.append(_rounded(before))  # past the last finite bound
    key: tuple[object, ...] = (outputs.bounds, tuple(rounded))
    if key in _made:
        return _made[key]
    return memo.remember(_made, key, _steps(key, outputs.bounds, rounded), _KEPT)


def _rounded(share: float) -> int | None:
    return round(math.log(share) * QUANTUM) if share >= LEAST_SHARE else None


def _steps(
    key: tuple[object, ...], bounds: tuple[float, ...], rounded: list[int | None]
) -> OutputSteps | None:
    weights = [0.0 if k is None else math.exp(k / QUANTUM) for k in rounded]
    total = sum(weights)
    if total <= 0.0:
        return None
    at: dict[float, float] = {}
    lo = 0.0
    for i, weight in enumerate(weights):
        if weight > 0.0:
            share = weight / total
            # those past the last finite bound at it
            points = [bounds[-1]] if i == len(bounds) else lengths_in(lo, bounds[i])
            each = share / len(points)
            for length in points:
                d = length - 1.0
                if d >= 1.0:
                    at[d] = at.get(d, 0.0) + each
        if i < len(bounds):
            lo = bounds[i]
    steps = sorted(at)
    return OutputSteps(key, tuple(steps), tuple(at[d] for d in steps))


def lengths_in(lo: float, hi: float) -> list[float]:
    """The output lengths a bucket (lo, hi] is spread over: each whole length in it where it is at
    most INTEGER_WIDTH wide with whole bounds, else SPREAD_POINTS at the middles of its equal parts."""
    width = hi - lo
    if width <= INTEGER_WIDTH and lo == math.floor(lo) and hi == math.floor(hi):
        return [lo + j for j in range(1, int(width) + 1)]
    return [lo + width * (j + 0.5) / SPREAD_POINTS for j in range(SPREAD_POINTS)]
