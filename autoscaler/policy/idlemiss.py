"""The requests that miss their TTFT with no wait at all: their prefill alone, on a replica at
some load or on an idle one, is past the target. No fleet serves them in time, so the TTFT tail's
wait budget is what they leave of the SLO's tail (capacity.sizer's), and the late band's allowance
spends them first (lateband.py). A prompt of x tokens takes a·x + b·x² to prefill (b the attention's
cost per pair); x is a gamma of the mix's mean and the lengths' cv² (lengths.py; 1, the exponential,
without an engine's histogram). Pure arithmetic on floats; docs/policy.md ("Defaults and why",
`slo.attainment`).
"""

from __future__ import annotations

import math

from autoscaler.policy import lengths
from autoscaler.policy.capacityspec import SloTarget
from autoscaler.policy.replicarates import Engine, prefill_rate_at

MIN_PROMPT_TOKENS = 1e-6  # a mean prompt below it is none: no prefill to queue (a restored state's
# subnormal mix made the TTFT tail's slack infinite)


def idle_misses(
    e: Engine,
    slo: SloTarget,
    p: float,
    o: float,
    speed: float = 1.0,
    lengths_cv2: float = 1.0,
    outputs_cv2: float = 1.0,
) -> float:
    """The share of requests of mean prompt p (output o, lengths' cv² lengths_cv2) that miss their
    TTFT even on an idle replica: no fleet serves them in time (misses_at, as capacity.sizer reads it).
    The engine's fields as prefill_token_s, decode_token_s and prefill_rate_of read the profile's
    (tests/test_lateband.py holds the two to the bit)."""
    if p < MIN_PROMPT_TOKENS:
        return 0.0
    o = o if o > 1.0 else 1.0
    base = e.step_base_s / speed
    pair = e.prefill_s_per_attention_pair
    a = (e.prefill_s_per_token + pair * 0.5 * (p + 1.0)) / speed
    share = lengths.context_share(outputs_cv2)
    d = (e.decode_s_per_request + e.decode_s_per_context_token * (p + share * o)) / speed
    rate = prefill_rate_at(0.0, o, base, 0.0, a, d, e.max_batched_tokens, e.prefill_first)
    return misses_at(p, rate, pair * 0.5 / speed, slo.ttft_s - base, slo.ttft_tokens_per_s, lengths_cv2)


def wait_budget(
    tail: float,
    p: float,
    rate: float,
    beta: float,
    room_s: float,
    ttft_tokens: float | None,
    lengths_cv2: float = 1.0,
    idle: float | None = None,
    measured: float = 0.0,
) -> float:
    """The share of requests whose wait may exceed its slack: the attainment's tail less the
    requests that miss their TTFT with no wait at this count's prefill `rate` and `room_s`
    (misses_at). Once those take half of the tail or more, the waits may miss as often as the
    requests that miss on an *idle* replica do (`idle`, misses_at there; at most doubling the
    misses no fleet avoids): a 1 % tail planned where more miss anyway buys replicas and little
    SLO (Mooncake x 0.52 on one-gpu-8b, where a fifth of the prompts cannot meet 2 s: 14.3 GPU-h for
    77.9 % with the 1 % tail, 3.1 for 75.3 % with this budget; the HPA 52.8 % at 2). Read at this
    count's load instead, the allowance grew with the demand and a larger demand could be sized
    fewer replicas (tests/test_capacity.py's monotonicity property). `measured`: the share of
    prefills the engines' histograms show past the target (prefilltail.missed), at least lost."""
    lost = misses_at(p, rate, beta, room_s, ttft_tokens, lengths_cv2)
    if measured > lost:
        lost = measured
    budget = tail - lost
    if lost > budget:
        if idle is not None:
            lost = idle
        if lost > budget:
            budget = lost
    return budget


def misses_at(
    p: float, rate: float, beta: float, room_s: float, ttft_tokens: float | None, lengths_cv2: float = 1.0
) -> float:
    """The share of requests that miss their TTFT with no wait, at a prefill `rate` (an idle
    replica's: the misses no fleet avoids). A prompt of x tokens
    takes α·x + β·x² to prefill (β the attention's per pair, α the rest, so that p tokens take
    p / rate) of the room_s its target leaves after the first step (plus x / ttft_tokens if the
    target grows with the prompt); x is gamma with mean p and squared coefficient of variation
    lengths_cv2 (lengths.py; 1: exponential, what counters alone allow)."""
    alpha = 1.0 / rate - beta * p - (1.0 / ttft_tokens if ttft_tokens is not None else 0.0)
    if room_s <= 0.0:
        return 1.0
    if beta > 0.0:
        longest = (math.sqrt(alpha * alpha + 4.0 * beta * room_s) - alpha) / (2.0 * beta)
        return lengths.longer_share(longest, p, lengths_cv2)
    if alpha > 0.0:
        if lengths_cv2 == 1.0:
            return math.exp(-room_s / (alpha * p))
        return lengths.longer_share(room_s / alpha, p, lengths_cv2)
    return 0.0
