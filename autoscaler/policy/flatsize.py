"""burstsize.size in flat floats, one call a sizing, for a compiled copy (replay/policies/sizekernel.py).

A tick sizes one or two demands (lookahead.py), each through ~40 Python calls (capacity.sizer and
its helpers, burstsize's bisection over the ca² and the hold): a quarter of a decision's
instructions. This is the same arithmetic, operation for operation, on the profile's and the
SLO's fields packed once per spec (`consts`), returning the Sizing's fields; it calls the core's
own split_servers, tpottail.prefill_rate and tpottail._rate by their global names, which the
compiled copy replaces with compiled ones. The TTFT search runs at its rounded inputs as
tailsearch.ttft_servers does, and it and the TPOT tail's rate are kept in tables on tailsearch's
rounded keys (_ttft_servers, _tpot_rate). Shapes it
does not cover (a least-loaded router, gamma prompt lengths: their tails need CPython's own
lgamma, which numba's differs from) and inputs the Python path would raise on return UNCOVERED,
and burstsize.size sizes them itself.
tests/test_flatsize.py holds every field to the bit against burstsize.size.
"""

from __future__ import annotations

import math
from typing import Any

from autoscaler.policy.capacity import (
    CONTEXT_OUTPUT_SHARE,
    MAX_UTILIZATION,
    MIN_PROMPT_TOKENS,
    MIN_RATE,
    MIN_SLACK_SHARE,
    MIN_UTILIZATION,
)
from autoscaler.policy.tailsearch import TPOT_QUANTUM, TTFT_QUANTUM, split_servers
from autoscaler.policy.tpottail import _rate, prefill_rate, units

BINDINGS = ("idle", "tpot", "batch", "kv", "ttft")  # a Sizing's binding by its code here
UNCOVERED = -1  # the replicas field of a result burstsize.size must work out itself
TPOT_SLOTS = 4096  # the TPOT tail's rates kept (tailsearch.tpot_rate's cache holds as many)
TTFT_SLOTS = 8192  # the TTFT searches kept (tailsearch.ttft_servers' cache holds as many)
KEYS = 5 * (TPOT_SLOTS + TTFT_SLOTS)  # the tables' ints
_MOST = 1e12  # counts (and loads, which a search divides by 1e-6) past it would overflow an int64
_NO_STEP = -(1 << 62)  # a TTFT search's step for an input <= 0 (capacity's None)

# consts: the profile's and the SLO's fields as floats (flags 0.0 / 1.0), by these indices
BASE, PREFILL, ATTENTION, REQUEST, CONTEXT = 0, 1, 2, 3, 4
HAS_BUDGET, BUDGET, PREFILL_FIRST, SEQS, HAS_KV, KV = 5, 6, 7, 8, 9, 10
HAS_TPOT, TPOT, TTFT, HAS_TOKENS, TOKENS, ATTAINMENT = 11, 12, 13, 14, 15, 16
FIELDS = 17


def consts(profile: Any, slo: Any) -> list[float]:
    """The fields `size` reads, in the order of the indices above."""
    budget, kv, tokens = profile.max_batched_tokens, profile.kv_cache_tokens, slo.ttft_tokens_per_s
    return [
        float(profile.step_base_s),
        float(profile.prefill_s_per_token),
        float(profile.prefill_s_per_attention_pair),
        float(profile.decode_s_per_request),
        float(profile.decode_s_per_context_token),
        0.0 if budget is None else 1.0,
        0.0 if budget is None else float(budget),
        1.0 if profile.prefill_first else 0.0,
        float(profile.max_num_seqs),
        0.0 if kv is None else 1.0,
        0.0 if kv is None else float(kv),
        0.0 if slo.tpot_s is None else 1.0,
        0.0 if slo.tpot_s is None else float(slo.tpot_s),
        float(slo.ttft_s),
        0.0 if tokens is None else 1.0,
        0.0 if tokens is None else float(tokens),
        float(slo.attainment),
    ]


def _finite(x: float) -> bool:
    return x - x == 0.0  # False for inf and NaN


def _prefill(c: Any, x: float, o: float, base: float, w: float, a: float, d: float) -> float:
    """capacity._prefill_rate_of."""
    return prefill_rate(x, o, base, w, a, d, c[HAS_BUDGET] != 0.0, c[BUDGET], c[PREFILL_FIRST] != 0.0)


def _decode(c: Any, base: float, d: float, seqs: float) -> float:
    """capacity._decode_rate_of."""
    room = (c[TPOT] if c[HAS_TPOT] != 0.0 else base / (1.0 - MAX_UTILIZATION)) - base
    batch = room / d if d > 0.0 and room / d < seqs else seqs
    if batch < 1.0:
        batch = 1.0
    return batch / (base + d * batch)


def _idle_misses(c: Any, p: float, rate: float, beta: float, room_s: float) -> float:
    """capacity._idle_misses for exponential prompt lengths (lengths_cv2 1)."""
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


def _ttft_servers(keys: Any, offered: float, slack_services: float, budget: float) -> int:
    """tailsearch.ttft_servers, kept in a direct-mapped table after the TPOT tail's (_tpot_rate):
    5 ints a slot, a flag, the three steps (_NO_STEP for capacity's None) and the count."""
    q, log = TTFT_QUANTUM, math.log
    k0 = round(log(offered) * q) if offered > 0.0 else _NO_STEP
    k1 = round(log(slack_services) * q) if slack_services > 0.0 else _NO_STEP
    k2 = round(log(budget) * q) if budget > 0.0 else _NO_STEP
    slot = ((k0 * 73856093) ^ (k1 * 19349663) ^ (k2 * 83492791)) & (TTFT_SLOTS - 1)
    at = 5 * (TPOT_SLOTS + slot)
    if keys[at] == 1 and keys[at + 1] == k0 and keys[at + 2] == k1 and keys[at + 3] == k2:
        return int(keys[at + 4])
    got = split_servers(
        0.0 if k0 == _NO_STEP else math.exp(k0 / q),
        0.0 if k1 == _NO_STEP else math.exp(k1 / q),
        0.0 if k2 == _NO_STEP else math.exp(k2 / q),
    )
    keys[at], keys[at + 1], keys[at + 2], keys[at + 3], keys[at + 4] = 1, k0, k1, k2, got
    return got


def _tpot_rate(c: Any, keys: Any, tail: float, p: float, o: float, speed: float) -> float:
    """tailsearch.tpot_rate at lengths' cv² 1 (its key's last step 0), cached on its keys in a
    direct-mapped table: the value in c[FIELDS + slot], the slot's key in keys[5 slot:5 slot + 5]
    (a flag, then the steps). A slot a new key hashes to is overwritten."""
    q = TPOT_QUANTUM
    k0 = round(math.log(tail) * q)
    k1 = round(math.log(p) * q)
    k2 = round(math.log(o) * q)
    k3 = round(math.log(speed) * q)
    slot = ((k0 * 73856093) ^ (k1 * 19349663) ^ (k2 * 83492791) ^ (k3 * 50331653)) & (TPOT_SLOTS - 1)
    at = 5 * slot
    if (
        keys[at] == 1
        and keys[at + 1] == k0
        and keys[at + 2] == k1
        and keys[at + 3] == k2
        and keys[at + 4] == k3
    ):
        return float(c[FIELDS + slot])
    tail_r = math.exp(k0 / q)
    o_r = math.exp(k2 / q)
    got = _rate(
        c[BASE],
        c[PREFILL],
        c[ATTENTION],
        c[REQUEST],
        c[CONTEXT],
        c[HAS_BUDGET] != 0.0,
        c[BUDGET],
        c[PREFILL_FIRST] != 0.0,
        c[SEQS],
        c[TPOT],
        tail_r if tail_r < 1.0 else 1.0,  # min(tail_r, 1.0): equal floats are the same bits
        math.exp(k1 / q),
        o_r if o_r > 1.0 else 1.0,
        math.exp(k3 / q),
        2.0,
        units(math.exp(0.0 / q)),
    )
    c[FIELDS + slot] = got
    keys[at], keys[at + 1], keys[at + 2], keys[at + 3], keys[at + 4] = 1, k0, k1, k2, k3
    return got


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
) -> tuple[float, float, float, float]:
    """capacity.sizer's terms(n): the prefill rate, the offered load, twice the slack in mean
    prefills and the wait budget."""
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
    lost = _idle_misses(c, p, rate, beta, ttft_s - step)  # capacity._wait_budget
    budget = lost if lost > tail - lost else tail - lost
    return rate, lam * service, slack / service * 2.0, budget


# A sizer (capacity.sizer before its closure) is a tuple: kind (0: the result in its fields, 1: the
# TTFT search from `first`, UNCOVERED), replicas, binding, first, then 18 floats (_sizer's return)


def _fixed(
    kind: int, replicas: int, binding: int, rate: float, decode: float, rps: float, util: float
) -> Any:
    z = 0.0
    return (kind, replicas, binding, 0, rate, decode, rps, util, z, z, z, z, z, z, z, z, z, z, z, z, z, z)


def _sizer(c: Any, keys: Any, lam: float, prompt: float, output: float, speed: float, limit: int) -> Any:
    """capacity.sizer for a demand of `lam` requests/s of `prompt` and `output` tokens/s."""
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
    if c[HAS_KV] != 0.0 and c[KV] / context < seqs:
        seqs = c[KV] / context
    batch_n = lam * (o * base + seqs * w) / seqs
    if batch_n > n:
        n = batch_n
        binding = 2 if seqs == c[SEQS] else 3
    decode = _decode(c, base, d, seqs)
    load = lam * w
    if not n < _MOST:
        return _fixed(UNCOVERED, 0, 0, 0.0, 0.0, 0.0, 0.0)
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
            return _fixed(UNCOVERED, 0, 0, 0.0, 0.0, 0.0, 0.0)
        tpot_n = lam / _tpot_rate(c, keys, tpot_tail, p, o, speed)
        if tpot_n > n:
            n, binding = tpot_n, 1
    if not n < _MOST:
        return _fixed(UNCOVERED, 0, 0, 0.0, 0.0, 0.0, 0.0)
    first = math.ceil(n - 1e-9)
    if first < 1:
        first = 1
    rate, offered, slack2, budget = _terms(c, first, lam, p, o, base, w, a, d, load, tail, beta)
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
        0.0,
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
    offered, slack2, budget = s[18], s[19], s[20]
    replicas, bound = first, binding
    rate_at = first
    for again in (False, True):
        if again:
            rate, offered, slack2, budget = _terms(c, replicas, lam, p, o, base, w, a, d, load, tail, beta)
            rate_at = replicas
        slack_services = slack2 / (arrival_cv2 + service_cv2)
        if not (offered < _MOST and _finite(slack_services) and _finite(budget)):
            return UNCOVERED, 0, 0.0, 0.0, 0.0, 0.0
        ttft_n = _ttft_servers(keys, offered, slack_services, budget)
        if ttft_n <= replicas:
            break
        replicas, bound = ttft_n, 4
    if limit < replicas:
        replicas = limit
    if rate_at != replicas:
        rate = _prefill(c, lam / replicas, o, base, w, a, d)
    return replicas, bound, rate, decode, lam / replicas, load / replicas


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
    s = _sizer(c, keys, lam, prompt, output, speed, limit)
    if s[0] == UNCOVERED:
        return UNCOVERED, 0, 0.0, 0.0, 0.0, 0.0
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
) -> Any:
    """burstsize.size at exponential prompt lengths and a random router, in flat floats: the
    Sizing's fields, its binding by its code in BINDINGS, replicas UNCOVERED where burstsize.size
    must size it itself."""
    got = _thinned(c, keys, lam, prompt, output, speed, limit, spread, service_cv2)
    if got[0] == UNCOVERED or hold <= lam or lam <= 0.0:
        return got
    f = hold / lam
    s = _sizer(c, keys, lam * f, prompt * f, output * f, speed, limit)
    if s[0] == UNCOVERED:
        return UNCOVERED, 0, 0.0, 0.0, 0.0, 0.0
    held = _at(c, keys, s, 1.0, service_cv2, limit)
    if held[0] == UNCOVERED:
        return held
    return held if held[0] > got[0] else got
