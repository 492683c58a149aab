"""The prompt lengths' spread: what capacity.size's TTFT tail needs of it beyond the mean.

Engines publish a histogram of prompt lengths (vLLM's vllm:request_prompt_tokens, TGI's and
JetStream's own; SGLang's is opt-in and not read yet); the adapter serves its second moment as a
counter's rate (Σ prompt², from the bucket deltas), the demand stage keeps it per request beside
the mix (mix.Mix.prompt_sq), and this module reads the lengths as a gamma distribution of that
mean and squared coefficient of variation (cv² 1: the exponential every count assumed before, and
still the fallback when no engine publishes the histogram). Two things follow from it:

  prefill cs²   a prompt of x tokens takes α·x + β·x² to prefill (β the attention's per pair),
                so its prefill time spreads more than its length: the TTFT tail's cs² from the
                gamma's first four moments, E[X^n] = p^n·Π_{i<n}(1 + i·cv²);
  idle misses   the share of prompts too long to meet the TTFT even on an idle replica: the
                gamma's upper tail past the longest prompt that fits, Q(1/cv², longest / (p·cv²)).

Pure arithmetic on floats; docs/policy.md ("Capacity", "How accurate the capacity model is").
"""

from __future__ import annotations

import math
from typing import Final, TypedDict

from autoscaler.policy import flathold, memo
from autoscaler.policy.capacityspec import ReplicaProfile
from autoscaler.policy.outputsteps import OutputSteps
from autoscaler.policy.prefilltail import PrefillTail

MIN_CV2 = 0.01  # below it the lengths are as good as one length (a gamma of shape 100)
MAX_CV2 = 20.0  # above it a handful of huge prompts dominate: no gamma describes them better
_QUANTUM = 256.0  # the tail is cached on its inputs rounded to 1/256 in log scale (0.4 %)
_tail_cache: dict[tuple[int, int], float] = {}  # cleared when it reaches 4096
_residual_cache: dict[tuple[int | None, ...], float] = {}  # residual_share's, by its rounded inputs


class Shape(TypedDict, total=False):
    """capacity.size's keywords for what the mean leaves out: the prompt and output lengths'
    spreads (here), the router with the arrivals' dispersion it sees, the prefill times' far
    tail and the outputs' decode steps (lookahead.py adds them)."""

    service_cv2: float
    lengths_cv2: float
    outputs_cv2: float
    least_loaded: bool
    arrivals_index: float
    prefill_tail: PrefillTail  # the engines' prefill-time histograms (prefilltail.py)
    output_steps: OutputSteps  # the engines' output-length histograms (outputsteps.py)


_NONE: Final[Shape] = {}  # no histogram: capacity.size's defaults (exponential, cs² 1)


def spread(profile: ReplicaProfile, p: float, cv2: float | None) -> Shape:
    """capacity.size's keywords for prompts of mean p and lengths' cv2 (None: not published):
    the prefill cs² at the profile's per-token and attention costs (the speed scales both alike)
    and the lengths' cv²."""
    if cv2 is None or p <= 0.0:
        return _NONE
    c = clip_cv2(cv2)
    alpha = profile.prefill_s_per_token
    beta = profile.prefill_s_per_attention_pair * 0.5
    return {"service_cv2": prefill_cv2(alpha, beta, p, c), "lengths_cv2": c}


def with_outputs(shape: Shape, cv2: float | None) -> Shape:
    """`shape` with the output lengths' cv² (None: not published, the geometric's 1, left out so
    that capacity.size's default holds)."""
    if cv2 is None:
        return shape
    return Shape(**shape, outputs_cv2=clip_cv2(cv2))


def outputs_cv2(cv2: float | None) -> float:
    """The output lengths' cv² the sizing reads (with_outputs): clipped, 1 where none is published."""
    return 1.0 if cv2 is None else clip_cv2(cv2)


def clip_cv2(cv2: float) -> float:
    return MIN_CV2 if cv2 < MIN_CV2 else (MAX_CV2 if cv2 > MAX_CV2 else cv2)


def prefill_cv2(alpha: float, beta: float, p: float, cv2: float) -> float:
    """The squared coefficient of variation of α·X + β·X² for gamma prompt lengths X of mean p and
    squared coefficient of variation cv2 (1 with β = 0: the exponential's)."""
    if p <= 0.0 or alpha + beta * p <= 0.0:
        return cv2
    c = cv2
    r = beta * p / alpha if alpha > 0.0 else math.inf
    m2 = 1.0 + c
    m3 = m2 * (1.0 + 2.0 * c)
    m4 = m3 * (1.0 + 3.0 * c)
    if math.isinf(r):  # β·X² alone
        return m4 / (m2 * m2) - 1.0
    mean = 1.0 + r * m2
    square = m2 + 2.0 * r * m3 + r * r * m4
    return square / (mean * mean) - 1.0


def longer_share(longest: float, p: float, cv2: float) -> float:
    """P(X > longest) for gamma lengths of mean p and squared coefficient of variation cv2 (the
    exponential exp(-longest / p) at cv2 = 1, exactly)."""
    if longest <= 0.0:
        return 1.0
    if cv2 == 1.0:
        return math.exp(-longest / p)
    key = (round(math.log(cv2) * _QUANTUM), round(math.log(longest / p) * _QUANTUM))
    got = _tail_cache.get(key)
    if got is None:
        shape = 1.0 / math.exp(key[0] / _QUANTUM)
        got = upper_gamma(shape, math.exp(key[1] / _QUANTUM) * shape)
        memo.remember(_tail_cache, key, got, 4096)
    return got


def residual_share(wait_s: float, p: float, alpha: float, beta: float, cv2: float) -> float:
    """P(R > wait_s): the share of a prefill's residual R (what is left of the prompt in prefill when
    a request arrives) past wait_s, for gamma prompt lengths X of mean p and squared coefficient of
    variation cv2, a prompt of x tokens taking S = α·x + β·x² (β the attention's per pair):
    E[(S - t)+] / E[S], with x* the length whose prefill is t, z = x*·k / p (k = 1 / cv2) and the
    gamma's partial moments E[X^j; X > x*] = E[X^j]·Q(k + j, z). The light-traffic wait tail is
    u·P(R > t) (capacity.py): a request waits behind one long prompt, whose quadratic attention
    makes the residual's tail far fatter than the heavy-traffic decay on spread prompts. Cached on
    its inputs rounded to 1/256 in log scale."""
    if wait_s <= 0.0:
        return 1.0
    inputs = (wait_s, p, alpha, beta, cv2)
    key = tuple(round(math.log(v) * _QUANTUM) if v > 0.0 else None for v in inputs)
    got = _residual_cache.get(key)
    if got is None:
        w, m, a, b, c = (0.0 if k is None else math.exp(k / _QUANTUM) for k in key)
        if b > 0.0:
            longest = (math.sqrt(a * a + 4.0 * b * w) - a) / (2.0 * b)
        else:
            longest = w / a if a > 0.0 else math.inf
        k = 1.0 / c
        mean = a * m + b * m * m * (1.0 + c)
        if longest == math.inf or mean <= 0.0:
            got = 0.0
        else:
            z = longest * k / m
            past = a * m * upper_gamma(k + 1.0, z) + b * m * m * (1.0 + c) * upper_gamma(k + 2.0, z)
            got = (past - w * upper_gamma(k, z)) / mean
            got = 0.0 if got < 0.0 else (1.0 if got > 1.0 else got)
        memo.remember(_residual_cache, key, got, 4096)
    return got


def upper_gamma(a: float, x: float) -> float:
    """The regularized upper incomplete gamma Q(a, x): its series below x = a + 1, its continued
    fraction (modified Lentz) above, each to a relative 1e-10 (Numerical Recipes, 6.2)."""
    if x <= 0.0:
        return 1.0
    return flathold.upper_gamma_at(a, x, math.lgamma(a))


def context_share(outputs_cv2: float) -> float:
    """Of the mean output o, the share in the mean context a running request holds and a decode
    step reads, for output lengths of squared coefficient of variation outputs_cv2 (the engines'
    output-length histograms; 1 without: the geometric, tpottail.CONTEXT_OUTPUT_SHARE to the bit):
    E[o²] / (2·E[o]·o) = (1 + cv²) / 2."""
    return 0.5 * (1.0 + outputs_cv2)


def age_variance(outputs_cv2: float) -> float:
    """The variance of a running request's decoded tokens (its age: a step meets requests as their
    steps weigh, and a request at a uniform point of its own), over o², for gamma output lengths of
    squared coefficient of variation outputs_cv2 (E[O^n] = o^n·Π_{i<n}(1 + i·cv²), the prompts'
    family here): E[O³] / (3·E[O]) less the mean's square, (1 + c)·(1 + 2c) / 3 - ((1 + c) / 2)². 1 at
    cv² 1, the exponential age of the geometric, exactly (kvceiling.py's spread)."""
    share = context_share(outputs_cv2)
    return share * (2.0 * (1.0 + 2.0 * outputs_cv2) / 3.0 - share)
