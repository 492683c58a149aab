"""The per-request TPOT tail of capacity.size: the most requests/s one replica serves with at most
a given share of them over their TPOT target. tailsearch.tpot_rate caches it; this is its miss.

A request's TPOT is the mean of the steps it decodes in, and a step that carries a prefill chunk
is longer by a (the prefill cost) per prompt token: a request of few output tokens whose steps
meet a long prompt misses its TPOT though the mean step meets it. Per replica at x requests/s:
decode-only steps take s0 = base + d·B (B the running batch, Little's law), so a request of D
steps after its first token misses when the prefill tokens its D steps carry exceed D·m,
m = (tpot - s0) / a (never when one step's token budget is below m). Those tokens are the
prefill backlog it finds (the M/M/1 workload of the replica's prefill queue at utilization u: a
geometric number of prompts) plus the prompts arriving during its first D - 1 steps (Poisson,
x·(D - 1)·s of them, s the mean step: over D - 1 TPOT targets instead the model asked for 6
replicas where the replay needs 4), outputs geometric with the mean o. The outputs' spread where
an engine publishes it (lengths.context_share) sets the context a step reads, d, and not the
outputs' lengths D here: the share that miss is of the short outputs, which a second moment does
not tell (a gamma of Azure code's cv² 4.57 puts half its outputs at <= 4 tokens, where it has none:
docs/policy.md, "How accurate the capacity model is"). Prompts are counted in
units of p·(1 + c) / 2 tokens, c the lengths' cv² (lengths.py; 1 without a histogram: the
exponential, to the bit): the backlog is then the M/G/1 workload with the TTFT tail's decay and
the Pollaczek-Khinchine mean, the arrivals a compound Poisson sum of their mean and variance
(within 0.025 of simulation at cv² 2 and 0.25, where exponential prompts miss the backlog's
tail 2-4x: tests/test_capacity.py). The share of requests that miss, over D, is held within the
SLO's tail by the least count n whose x = λ / n fits.

Pure Python, as the policy core is; the replay runs a copy compiled by numba from this same source
(replay/policies/tailkernel.py, installed with use()): a miss sums ~40 series of up to ~150 terms
at each of 15 bisection steps, 1.7-3.1 ms interpreted and ~40 µs compiled, and a sweep's
configuration misses ~11 times. So the source keeps to what numba compiles to the same bits:
floats only, no reassociation the compiler could see through, and every power with a run-time
exponent (`keep ** float(width)`, `** two`): LLVM rewrites a constant one (x ** 2.0 as x·x), which
rounds differently from the C library's pow that Python calls (854 of 1,000,000 random squares).
tests/test_tpottail.py holds the compiled copy to these bits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from autoscaler.policy import lengths
from autoscaler.policy.capacityspec import ReplicaProfile
from autoscaler.policy.outputsteps import OutputSteps

# of the mean output o in the mean context a decode step reads and the KV holds (capacity.py's
# too): a request of o outputs reads p + o/2 on average over its steps and a step meets requests
# as their steps weigh (by o), so p + E[o²] / (2·E[o]) = p + o·(1 + cv²) / 2: 1 for outputs
# geometric around their mean, as this tail has them, where no engine publishes the output lengths
# (lengths.context_share at their cv² where one does; 0.5, all outputs equal, under-sized 1,500-token
# reasoning outputs by 3 of 12 replicas: docs/policy.md, "Defaults and why")
CONTEXT_OUTPUT_SHARE = 1.0

NO_STEPS: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())  # no histogram: the geometric alone
TPOT_SERIES_MAX = 60.0  # a tail of more mean prompts than this is read off the normal approximation
_EXACT_STEPS = 16  # output lengths summed one by one up to here, then over bins 1.25x wide


def rate(
    profile: ReplicaProfile,
    tpot_s: float,
    tail: float,
    p: float,
    o: float,
    speed: float,
    cv2: float = 1.0,
    outputs_cv2: float = 1.0,
    steps: OutputSteps | None = None,
) -> float:
    """The most requests/s one replica serves with at most `tail` of them over `tpot_s` (inf when
    no request can miss it by the prefill it shares its steps with), for p-token prompts of
    lengths' squared coefficient of variation `cv2` (1: exponential) and o-token outputs at
    `speed` (o >= 1, 0 < tail <= 1), the outputs' lengths of cv² `outputs_cv2` in the context a
    decode step reads (lengths.context_share) and their decode steps `steps` where an engine
    publishes them (outputsteps.py; None: geometric around o alone)."""
    budget = profile.max_batched_tokens
    dn, dm = NO_STEPS if steps is None else (steps.steps, steps.masses)
    return float(
        _kernel(
            float(profile.step_base_s),
            float(profile.prefill_s_per_token),
            float(profile.prefill_s_per_attention_pair),
            float(profile.decode_s_per_request),
            float(profile.decode_s_per_context_token),
            budget is not None,
            0.0 if budget is None else float(budget),
            bool(profile.prefill_first),
            float(profile.max_num_seqs),
            float(tpot_s),
            float(tail),
            float(p),
            float(o),
            float(speed),
            2.0,
            units(float(cv2)),
            lengths.context_share(float(outputs_cv2)),
            dn,
            dm,
        )
    )


def units(cv2: float) -> float:
    """The unit prompts are counted in, over the mean prompt, for lengths of squared coefficient
    of variation cv2 (_miss): (1 + cv2) / 2, 1 for the exponential."""
    return 0.5 * (1.0 + cv2)


def _rate(
    base_s: float,
    prefill_s: float,
    attention_s: float,
    request_s: float,
    context_s: float,
    has_budget: bool,
    budget: float,
    prefill_first: bool,
    seqs: float,
    tpot_s: float,
    tail: float,
    p: float,
    o: float,
    speed: float,
    two: float,
    unit: float,
    share: float,
    dn: Sequence[float],
    dm: Sequence[float],
) -> float:
    """rate() on the profile's fields (`two` = 2.0, the variance's exponent, see the module; `unit`
    the prompt's unit of tokens over p, (1 + cv²) / 2, see _miss; `share` the outputs' in the
    context a decode step reads, lengths.context_share; `dn`, `dm` the decode steps and their
    shares, outputsteps.py's, empty for the geometric alone)."""
    base = base_s / speed
    # replicarates.prefill_token_s and decode_token_s, over the speed
    a = (prefill_s + attention_s * 0.5 * (p + 1.0)) / speed
    d = (request_s + context_s * (p + share * o)) / speed
    w = a * p + d * o
    hi = (1.0 - base / tpot_s) / w  # the mean step at the target: longer outputs miss past it
    if hi <= 0.0:
        return math.inf
    args = (base, a, d, w, has_budget, budget, prefill_first, seqs, tpot_s, tail, p, o, two, unit)
    if _miss(*args, hi, dn, dm) <= tail:
        return math.inf
    lo = 0.0
    for _ in range(14):  # to 1/16384 of the mean bound
        x = 0.5 * (lo + hi)
        if _miss(*args, x, dn, dm) <= tail:
            lo = x
        else:
            hi = x
    return lo


def _miss(
    base: float,
    a: float,
    d: float,
    w: float,
    has_budget: bool,
    budget: float,
    prefill_first: bool,
    seqs: float,
    tpot_s: float,
    tail: float,
    p: float,
    o: float,
    two: float,
    unit: float,
    x: float,
    dn: Sequence[float],
    dm: Sequence[float],
) -> float:
    """The share of requests over their TPOT at x requests/s per replica (the model above); the
    sum over output lengths stops once what is left is far below `tail`. Where the engines publish
    the outputs' decode steps (`dn` the steps, `dm` their shares: outputsteps.py) the share is
    also summed over them, and the higher of the two is the miss: the shape tells of the short
    answers the geometric misses (ServeGen's), and where it shows fewer than the geometric (Azure's,
    which have none under 9 tokens) the geometric's more is kept as it was, a margin the sizing
    had before a ramp (docs/policy.md, "The outputs' shape"). Prompts of lengths' cv²
    c are counted in units of p·(1 + c) / 2 tokens (`unit` times p), arriving (1 + c) / 2 times
    as rarely: the backlog is then the M/G/1 workload's geometric sum of the lengths' residuals
    (mean p·(1 + c) / 2, the Pollaczek-Khinchine mean, decaying as the TTFT tail's (1 + cs²) / 2)
    and the arrivals a compound Poisson sum of the same mean and variance; unit 1 (exponential
    prompts) leaves every term as it was."""
    rho = x * w
    if rho >= 1.0:
        return 1.0
    step = base / (1.0 - rho)  # the mean step
    batch = min(x * o * step, seqs)
    m = (tpot_s - base - d * batch) / a  # prefill tokens a step may carry on average
    if m <= 0.0:
        return 1.0
    if has_budget and m >= (budget if prefill_first else budget - batch):
        return 0.0
    u = x * p / prefill_rate(x, o, base, w, a, d, has_budget, budget, prefill_first)
    if u >= 1.0:
        return 1.0
    if o <= 1.0:
        return 0.0
    keep = 1.0 - 1.0 / o  # P(D >= n + 1 | D >= n): geometric output lengths of mean o
    missed, mass, n = 0.0, keep, 1  # mass = P(D >= n)
    while mass > 1e-4 * tail:
        width = 1 if n < _EXACT_STEPS else max(1, n // 4)
        share = _beyond(n * m / (p * unit), x * (n - 1) * step / unit, u, two)
        after = mass * keep ** float(width)
        missed += (mass - after) * share
        if share < 1e-3 * tail and n >= _EXACT_STEPS:
            break
        mass, n = after, n + width
    if len(dn) > 0:
        shaped = 0.0
        for i in range(len(dn)):
            k = dn[i]  # decode steps
            share = _beyond(k * m / (p * unit), x * (k - 1.0) * step / unit, u, two)
            shaped += dm[i] * share
            if share < 1e-3 * tail and k >= _EXACT_STEPS:
                break
        if shaped > missed:
            missed = shaped
    return missed


def prefill_rate(
    x: float,
    o: float,
    base: float,
    w: float,
    a: float,
    d: float,
    has_budget: bool,
    budget: float,
    prefill_first: bool,
) -> float:
    """Prompt tokens/s one replica prefills at x requests/s of o-token outputs, its decodes carried
    in the token budget (capacity's model of a step); a (d) the cost of a prefill (decode) token,
    w the work of a request, all at the speed given. In flat floats, for the compiled copy too;
    replicarates.prefill_rate_of repeats it for the mypyc build, which leaves this module as Python."""
    if not has_budget:
        return 1.0 / a
    if prefill_first:
        return budget / (base + a * budget)
    rho = x * w  # min(rho, 0.95) and min(carried, budget / 2) as what the builtin returns, cheaper
    carried = x * o * base / (1.0 - (0.95 if rho > 0.95 else rho))
    if budget * 0.5 < carried:
        carried = budget * 0.5
    chunk = budget - carried
    return chunk / (base + a * chunk + d * carried)


def _beyond(z: float, mu: float, u: float, two: float) -> float:
    """P(the tokens of G + N exponential prompts exceed z mean prompts), G geometric (P(G = k) =
    (1 - u)·u^k: the M/M/1 backlog) and N Poisson of mean mu (the arrivals): an Erlang sum is
    above z when fewer than its count of a rate-1 Poisson process fall within z."""
    if z > TPOT_SERIES_MAX:  # the normal approximation, with the sum's mean and variance
        mean = mu + u / (1.0 - u)
        var = 2.0 * mu + u * (2.0 - u) / (1.0 - u) ** two
        return 0.5 * math.erfc((z - mean) / math.sqrt(2.0 * var))
    pz = math.exp(-z)  # P(Poisson(z) = j)
    pm = math.exp(-mu)  # P(N = j)
    cdf = pm  # P(N <= j)
    h = pm  # sum over i <= j of P(N = i)·u^(j - i): P(G + N <= j) = cdf - u·h
    total = 0.0
    for j in range(int(z + 10.0 * math.sqrt(z) + 12.0)):
        total += pz * (1.0 - cdf + u * h)
        pz *= z / (j + 1)
        pm *= mu / (j + 1)
        cdf += pm
        h = u * h + pm
    return total


RateKernel = Callable[..., float]
_kernel: RateKernel = _rate
_miss_kernel: RateKernel = _miss


def use(kernel: RateKernel | None, miss: RateKernel | None = None) -> None:
    """Compute the tail with `kernel`, a compiled copy of _rate giving its bits (None: _rate), and
    the share that misses (miss()) with `miss`, one of _miss (None: _miss)."""
    global _kernel, _miss_kernel
    _kernel = _rate if kernel is None else kernel
    _miss_kernel = _miss if miss is None else miss


def miss(
    base: float,
    a: float,
    d: float,
    w: float,
    has_budget: bool,
    budget: float,
    prefill_first: bool,
    seqs: float,
    tpot_s: float,
    tail: float,
    p: float,
    o: float,
    two: float,
    unit: float,
    x: float,
    steps: OutputSteps | None = None,
) -> float:
    """_miss, by the compiled copy where one is installed (latecurve's curves read ~100 a curve),
    over the decode steps `steps` where the engines publish them (None: the geometric's alone)."""
    dn, dm = NO_STEPS if steps is None else (steps.steps, steps.masses)
    return _miss_kernel(
        base, a, d, w, has_budget, budget, prefill_first, seqs, tpot_s, tail, p, o, two, unit, x, dn, dm
    )
