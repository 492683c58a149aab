"""burstsize.size in flat floats, one call a sizing, for a compiled copy (replay/policies/sizekernel.py).

A tick sizes one or two demands (lookahead.py), each through ~40 Python calls (capacity.sizer and
its helpers, burstsize's bisection over the ca² and the hold): a quarter of a decision's
instructions. This is the same arithmetic, operation for operation, on the profile's and the
SLO's fields packed once per spec (flattables.consts), returning the Sizing's fields; it calls the
core's own tailsearch.tail_share and servers_at, tpottail.prefill_rate and tpottail._rate by their
global names, which the compiled copy replaces with compiled ones. The TTFT search runs at its
rounded inputs as tailsearch.ttft_servers does, and it, its utilization and the TPOT tail's rate
are kept in tables on tailsearch's rounded keys (flattables.ttft_servers, flattables.tpot_rate).
Shapes it does not cover (a least-loaded router, gamma prompt lengths: their tails need CPython's
own lgamma, which numba's differs from; an output-length histogram's cv² or decode steps, which the
engines that publish one publish with the prompt lengths') and inputs the Python path would raise
on return UNCOVERED, and burstsize.size sizes them itself.
tests/test_flatsize.py holds every field to the bit against burstsize.size.
"""

from __future__ import annotations

import math
from typing import Any

from autoscaler.policy.capacity import (
    CONTEXT_OUTPUT_SHARE,
    MIN_PROMPT_TOKENS,
    MIN_RATE,
    MIN_SLACK_SHARE,
    MIN_UTILIZATION,
)
from autoscaler.policy.flattables import (
    ATTAINMENT,
    ATTENTION,
    BASE,
    BUDGET,
    CONTEXT,
    HAS_BUDGET,
    HAS_KV,
    HAS_TOKENS,
    HAS_TPOT,
    KEPT_FLOATS,
    KEPT_KEYS,
    KV,
    PREFILL,
    PREFILL_FIRST,
    REQUEST,
    SEQS,
    TOKENS,
    TPOT,
    TTFT,
    tpot_rate,
    ttft_servers,
)
from autoscaler.policy.kvceiling import INV_SQRT_2PI, KV_G0, KV_NEWTON, SQRT_HALF
from autoscaler.policy.replicarates import MAX_UTILIZATION
from autoscaler.policy.tpottail import prefill_rate

BINDINGS = ("idle", "tpot", "batch", "kv", "ttft")  # a Sizing's binding by its code here
UNCOVERED = -1  # the replicas field of a result burstsize.size must work out itself
_UNCOVERED_RESULT = (UNCOVERED, 0, 0.0, 0.0, 0.0, 0.0)  # size()'s result burstsize.size must work out
_MOST = 1e12  # counts (and loads, which a search divides by 1e-6) past it would overflow an int64


def _finite(x: float) -> bool:
    return x - x == 0.0  # False for inf and NaN


def _prefill(c: Any, x: float, o: float, base: float, w: float, a: float, d: float) -> float:
    """replicarates.prefill_rate_of."""
    return prefill_rate(x, o, base, w, a, d, c[HAS_BUDGET] != 0.0, c[BUDGET], c[PREFILL_FIRST] != 0.0)


def _decode(c: Any, base: float, d: float, seqs: float) -> float:
    """replicarates.decode_rate_of."""
    room = (c[TPOT] if c[HAS_TPOT] != 0.0 else base / (1.0 - MAX_UTILIZATION)) - base
    batch = room / d if d > 0.0 and room / d < seqs else seqs
    if batch < 1.0:
        batch = 1.0
    return batch / (base + d * batch)


def _idle_misses(c: Any, p: float, rate: float, beta: float, room_s: float) -> float:
    """idlemiss.misses_at for exponential prompt lengths (lengths_cv2 1)."""
    alpha = 1.0 / rate - beta * p - (1.0 / c[TOKENS] if c[HAS_TOKENS] != 0.0 else 0.0)
    if room_s <= 0.0:
        return 1.0
    if beta > 0.0:
        longest = (math.sqrt(alpha * alpha + 4.0 * beta * room_s) - alpha) / (2.0 * beta)
        if longest <= 0.0:
            return 1.0
        return math.exp(-longest / p)
    if alpha > 0.0:
        return math.exp(-room_s / (alpha * p))
    return 0.0


def _terms(
    c: Any,
    n: int,
    lam: float,
    p: float,
    o: float,
    base: float,
    w: float,
    a: float,
    d: float,
    load: float,
    tail: float,
    beta: float,
    burst: float,
) -> tuple[float, float, float, float]:
    """capacity.sizer's terms(n): the prefill rate, the offered load, twice the slack in mean
    prefills and the wait budget (`burst`: capacity's prefill_burst)."""
    ttft_s = c[TTFT]
    rate = _prefill(c, lam / n, o, base, w, a, d)
    service = p / rate
    free = 1.0 - load / n
    step = base / (1e-3 if free < 1e-3 else free)
    slack = ttft_s - service - step
    if c[HAS_TOKENS] != 0.0:
        slack += p / c[TOKENS]
    if slack < MIN_SLACK_SHARE * service:
        slack = MIN_SLACK_SHARE * service
    lost = _idle_misses(c, p, rate, beta, ttft_s - step)  # idlemiss.wait_budget
    budget = tail - lost
    if lost > budget:  # as many may wait as miss on an idle replica, not at this count's load
        idle = _idle_misses(c, p, _prefill(c, 0.0, o, base, w, a, d), beta, ttft_s - base)
        if idle > budget:
            budget = idle
    return rate, lam * service * burst, slack / service * 2.0, budget


# A sizer (capacity.sizer before its closure) is a tuple: kind (0: the result in its fields, 1: the
# TTFT search from `first`, UNCOVERED), replicas, binding, first, then 18 floats (_sizer's return:
# the last one the prefill burst)


def _fixed(
    kind: int, replicas: int, binding: int, rate: float, decode: float, rps: float, util: float
) -> Any:
    z = 0.0
    return (kind, replicas, binding, 0, rate, decode, rps, util, z, z, z, z, z, z, z, z, z, z, z, z, z, z)


_UNCOVERED_SIZER = _fixed(UNCOVERED, 0, 0, 0.0, 0.0, 0.0, 0.0)  # a sizer burstsize.size must work out


def _sizer(
    c: Any, keys: Any, lam: float, prompt: float, output: float, speed: float, limit: int, burst: float
) -> Any:
    """capacity.sizer for a demand of `lam` requests/s of `prompt` and `output` tokens/s, its
    prompts queued at `burst` times that rate (capacity's prefill_burst)."""
    if lam < MIN_RATE:  # capacity._idle
        base = c[BASE] / speed
        a = (c[PREFILL] + c[ATTENTION] * 0.5 * (1.0 + 1.0)) / speed
        d = (c[REQUEST] + c[CONTEXT] * (1.0 + CONTEXT_OUTPUT_SHARE * 1.0)) / speed
        rate = _prefill(c, 0.0, 1.0, base, 0.0, a, d)
        return _fixed(0, 0, 0, rate, _decode(c, base, d, c[SEQS]), 0.0, 0.0)
    p = prompt / lam
    o = output / lam
    if o < 1.0:
        o = 1.0
    base = c[BASE] / speed
    a_token = c[PREFILL] + c[ATTENTION] * 0.5 * (p + 1.0)
    context = p + CONTEXT_OUTPUT_SHARE * o
    d_token = c[REQUEST] + c[CONTEXT] * context
    w = (a_token * p + d_token * o) / speed
    a = a_token / speed
    d = d_token / speed
    rho_tpot = MAX_UTILIZATION if c[HAS_TPOT] == 0.0 else 1.0 - base / c[TPOT]
    if rho_tpot > MAX_UTILIZATION:
        rho_tpot = MAX_UTILIZATION
    binding = 1
    if rho_tpot < MIN_UTILIZATION:
        rho_tpot = MIN_UTILIZATION
    n = lam * w / rho_tpot
    seqs = c[SEQS]
    if c[HAS_KV] != 0.0:  # capacity's KV at its priced tail, the prompts' lengths_cv2 1
        kv_tokens = c[KV]
        spread = 1.0 * p * p + CONTEXT_OUTPUT_SHARE * o * CONTEXT_OUTPUT_SHARE * o
        redo = c[PREFILL] + c[ATTENTION] * 0.5 * (context + 1.0)
        redo_steps = redo * context / speed * (1.0 - rho_tpot) / base
        target = (1.0 - c[ATTAINMENT]) / (math.sqrt(spread / (context * kv_tokens)) * (1.0 + redo_steps))
        z = 0.0  # capacity.kv_z
        if target < KV_G0:
            for _ in range(KV_NEWTON):
                upper = 0.5 * math.erfc(z * SQRT_HALF)
                step = (math.exp(-0.5 * z * z) * INV_SQRT_2PI - z * upper - target) / upper
                z += step
                if step < 1e-9:
                    break
        root = math.sqrt(z * z * spread + 4.0 * context * kv_tokens) - z * math.sqrt(spread)
        root = root / (2.0 * context)
        kv = root * root
        if kv < seqs:
            seqs = kv
    batch_n = lam * (o * base + seqs * w) / seqs
    if batch_n > n:
        n = batch_n
        binding = 2 if seqs == c[SEQS] else 3
    decode = _decode(c, base, d, seqs)
    load = lam * w
    if not n < _MOST:
        return _UNCOVERED_SIZER
    if p < MIN_PROMPT_TOKENS:
        first = math.ceil(n - 1e-9)
        replicas = first if first > 1 else 1
        if limit < replicas:
            replicas = limit
        rate = _prefill(c, lam / replicas, o, base, w, a, d)
        return _fixed(0, replicas, binding, rate, decode, lam / replicas, load / replicas)
    tail = 1.0 - c[ATTAINMENT]
    beta = c[ATTENTION] * 0.5 / speed
    if c[HAS_TPOT] != 0.0:
        idle_rate = _prefill(c, 0.0, o, base, w, a, d)
        idle_misses = _idle_misses(c, p, idle_rate, beta, c[TTFT] - base)
        tpot_tail = idle_misses if idle_misses > tail else tail
        if not (tpot_tail > 0.0 and _finite(p) and _finite(o) and speed > 0.0 and _finite(speed)):
            return _UNCOVERED_SIZER
        tpot_n = lam / tpot_rate(c, keys, tpot_tail, p, o, speed)
        if tpot_n > n:
            n, binding = tpot_n, 1
    if not n < _MOST:
        return _UNCOVERED_SIZER
    first = math.ceil(n - 1e-9)
    if first < 1:
        first = 1
    rate, offered, slack2, budget = _terms(c, first, lam, p, o, base, w, a, d, load, tail, beta, burst)
    return (
        1,
        0,
        binding,
        first,
        rate,
        decode,
        0.0,
        0.0,
        lam,
        p,
        o,
        base,
        w,
        a,
        d,
        load,
        tail,
        beta,
        offered,
        slack2,
        budget,
        burst,
    )


def _at(c: Any, keys: Any, s: Any, arrival_cv2: float, service_cv2: float, limit: int) -> Any:
    """The sizer's at(arrival_cv2): (replicas, binding, prefill rate, decode rate, requests/s and
    utilization per replica); replicas UNCOVERED where the Python path must size it."""
    kind = s[0]
    if kind != 1:
        return s[1], s[2], s[4], s[5], s[6], s[7]
    binding, first, rate, decode = s[2], s[3], s[4], s[5]
    lam, p, o, base, w, a, d, load, tail, beta = (
        s[8],
        s[9],
        s[10],
        s[11],
        s[12],
        s[13],
        s[14],
        s[15],
        s[16],
        s[17],
    )
    offered, slack2, budget, burst = s[18], s[19], s[20], s[21]
    replicas, bound = first, binding
    rate_at = first
    # capacity.sizer's at(): the least count asking no more than itself, bisected
    ask = _asks(c, keys, offered, slack2, budget, arrival_cv2, service_cv2)
    if ask < 0:
        return _UNCOVERED_RESULT
    if ask > first:
        bound = 4
        rate, offered, slack2, budget = _terms(c, ask, lam, p, o, base, w, a, d, load, tail, beta, burst)
        rate_at = ask
        again = _asks(c, keys, offered, slack2, budget, arrival_cv2, service_cv2)
        if again < 0:
            return _UNCOVERED_RESULT
        if again > ask:
            replicas = again
        else:
            lo, hi = first, ask
            while hi - lo > 1:
                mid = (lo + hi) // 2
                m_rate, offered, slack2, budget = _terms(
                    c, mid, lam, p, o, base, w, a, d, load, tail, beta, burst
                )
                got = _asks(c, keys, offered, slack2, budget, arrival_cv2, service_cv2)
                if got < 0:
                    return _UNCOVERED_RESULT
                if got <= mid:
                    hi, rate, rate_at = mid, m_rate, mid
                else:
                    lo = mid
            replicas = hi
    if limit < replicas:
        replicas = limit
    if rate_at != replicas:
        rate = _prefill(c, lam / replicas, o, base, w, a, d)
    return replicas, bound, rate, decode, lam / replicas, load / replicas


def _asks(
    c: Any, keys: Any, offered: float, slack2: float, budget: float, arrival_cv2: float, service_cv2: float
) -> int:
    """capacity.sizer's asks() for the random router; -1 where the tail is not covered."""
    slack_services = slack2 / (arrival_cv2 + service_cv2)
    if not (offered < _MOST and _finite(slack_services) and _finite(budget)):
        return -1
    return ttft_servers(c, keys, offered, slack_services, budget)


def _thinned(
    c: Any,
    keys: Any,
    lam: float,
    prompt: float,
    output: float,
    speed: float,
    limit: int,
    spread: float,
    service_cv2: float,
) -> Any:
    """burstsize.thinned."""
    s = _sizer(c, keys, lam, prompt, output, speed, limit, 1.0)
    if s[0] == UNCOVERED:
        return _UNCOVERED_RESULT
    got = _at(c, keys, s, 1.0, service_cv2, limit)
    lo = got[0]
    if spread <= 1.0 or lo <= 0:
        return got
    top = _at(c, keys, s, 1.0 + (spread - 1.0) / lo, service_cv2, limit)
    hi = top[0]
    if hi <= lo:
        return top
    found = False
    best = top
    while hi - lo > 1:
        mid = (lo + hi) // 2
        sized = _at(c, keys, s, 1.0 + (spread - 1.0) / mid, service_cv2, limit)
        if sized[0] == UNCOVERED:
            return sized
        if sized[0] <= mid:
            hi, best, found = mid, sized, True
        else:
            lo = mid
    if not found:
        best = _at(c, keys, s, 1.0 + (spread - 1.0) / hi, service_cv2, limit)
    if best[0] >= hi or best[0] == UNCOVERED:
        return best
    share = best[0] / hi
    return hi, best[1], best[2], best[3], best[4] * share, best[5] * share


def _thinned_kept(
    c: Any,
    keys: Any,
    lam: float,
    prompt: float,
    output: float,
    speed: float,
    limit: int,
    spread: float,
    service_cv2: float,
) -> Any:
    """_thinned, the last one kept in the tables (flattables.KEPT_KEYS, KEPT_FLOATS): burstsize.size
    sizes a need at its steady hold and again at its lasting one, two calls whose thinned sizing,
    most of each, is the same. Kept for positive inputs alone, whose floats are equal only where
    their bits are (no -0.0, no NaN)."""
    at, k = KEPT_FLOATS, KEPT_KEYS
    kept = lam > 0.0 and prompt > 0.0 and output > 0.0 and speed > 0.0 and spread > 0.0 and service_cv2 > 0.0
    if (
        kept
        and keys[k] == 1
        and keys[k + 1] == limit
        and c[at] == lam
        and c[at + 1] == prompt
        and c[at + 2] == output
        and c[at + 3] == speed
        and c[at + 4] == spread
        and c[at + 5] == service_cv2
    ):
        return int(c[at + 6]), int(c[at + 7]), c[at + 8], c[at + 9], c[at + 10], c[at + 11]
    got = _thinned(c, keys, lam, prompt, output, speed, limit, spread, service_cv2)
    if kept:
        c[at], c[at + 1], c[at + 2], c[at + 3], c[at + 4], c[at + 5] = (
            lam,
            prompt,
            output,
            speed,
            spread,
            service_cv2,
        )
        c[at + 6], c[at + 7], c[at + 8], c[at + 9], c[at + 10], c[at + 11] = (
            float(got[0]),
            float(got[1]),
            got[2],
            got[3],
            got[4],
            got[5],
        )
        keys[k], keys[k + 1] = 1, limit
    return got


def size(
    c: Any,
    keys: Any,
    lam: float,
    prompt: float,
    output: float,
    speed: float,
    limit: int,
    spread: float,
    service_cv2: float,
    hold: float,
    lasting: float,
) -> Any:
    """burstsize.size at exponential prompt lengths and a random router, in flat floats (`lasting`:
    its lifetime hold, at most `hold`): the Sizing's fields, its binding by its code in BINDINGS,
    replicas UNCOVERED where burstsize.size must size it itself."""
    got = _thinned_kept(c, keys, lam, prompt, output, speed, limit, spread, service_cv2)
    if got[0] == UNCOVERED or hold <= lam or lam <= 0.0:
        return got
    if lasting < lam:
        lasting = lam
    f = lasting / lam
    if f == math.inf:  # burstsize.size: a subnormal rate's mix is no number to hold bursts at
        return got
    s = _sizer(c, keys, lam * f, prompt * f, output * f, speed, limit, hold / lasting)
    if s[0] == UNCOVERED:
        return _UNCOVERED_RESULT
    held = _at(c, keys, s, 1.0, service_cv2, limit)
    if held[0] == UNCOVERED:
        return held
    return held if held[0] > got[0] else got
