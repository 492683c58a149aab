"""The fast engine's compiled core: every replica's vLLM-V1 scheduler (replay/scheduler.py's model),
event by event, with runs of identical steps in closed form.

Why it is fast. A replica's steps change composition only at events: a request arrives (and can be
admitted), a prefill completes, a decoding request finishes, the KV blocks run out. Between two
events every step runs the same decoding requests and the same prompt chunk; only the context they
read grows, by a constant per step, so step k of a run takes D0 + k x G and a run of K steps ends at
T0 + K D0 + G K (K - 1) / 2 (an arithmetic series). All decoding requests of a replica advance one
token per step, so a replica keeps one decode clock DS and each decoding request an offset
(generated = DS + dec_base); the requests' KV blocks grow on a 16-step cycle that one histogram of
(prompt + dec_base) mod block_size describes. An event costs O(log n) (the finish heap), not O(n).
The step that admits a request (a head step) is planned together with the run of identical steps
after it when its end changes nothing a router reads: one event per admission instead of two.

Events of all replicas and the arrivals are processed in time order (replica events first on a
tie): a request is routed when it arrives, to the ready replica with the fewest waiting + running
requests at that instant. A run that could take the arrival in is cut at the first step that
starts after it; requests arriving at the same instant are routed together before an idle replica
starts.

State lives in NumPy arrays owned by replay/engine.py: a slot (`qi` row) per request in flight,
taken when it is routed and freed when it finishes (so the rows the events touch stay few and
close together); per request of the trace only its results (`qf` times, `qo` preemptions and
prefix hits, `rep` its replica); per replica `ri`/`rf` rows (column names below), a histogram, a
finish heap per replica, the replica event heap and the prefix cache (an LRU list and a hash table
per replica). Everything here is compiled
once per machine and cached on disk (`jit` below).
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np

from replay.metrics.signals import (
    GENERATION_TOKENS,
    INFLIGHT,
    KV_USAGE,
    PROMPT_SQUARES,
    PROMPT_TOKENS,
    REQUESTS,
    RUNNING,
    WAITING,
)

# int columns of a request in flight (its slot, a row of `qi`, reused once it finished)
Q_IN, Q_OUT, Q_STATE, Q_GEN, Q_COMP, Q_BLOCKS, Q_DECBASE = 0, 1, 2, 3, 4, 5, 6
Q_NEXT, Q_PREV, Q_WNEXT, Q_KEPT, Q_REQ = 7, 8, 9, 10, 11  # Q_REQ: the request's index in the trace
QI_COLUMNS = 12
# slot states (a free slot is ST_DONE, or ST_NEW if never used; its Q_NEXT links the free list)
ST_NEW, ST_WAIT, ST_PREFILL, ST_DECODE, ST_DONE = 0, 1, 2, 3, 4
# per-request float columns (`qf`, in trace order)
QF_ADMIT, QF_FIRST, QF_FINISH = 0, 1, 2
QF_COLUMNS = 3
# per-request int columns (`qo`, in trace order; zero unless a request was preempted or hit)
O_PREEMPT, O_HIT = 0, 1
QO_COLUMNS = 2
# per-replica int columns
R_DS, R_NDEC, R_SX, R_RHEAD, R_RTAIL, R_NRUN, R_WHEAD, R_WTAIL, R_NWAIT = 0, 1, 2, 3, 4, 5, 6, 7, 8
R_FREE, R_PART, R_HSIZE, R_K, R_P, R_DECADV, R_BUSY, R_HFIRST, R_TAILNEW = 9, 10, 11, 12, 13, 14, 15, 16, 17
R_CANADMIT, R_FIN, R_PTOK, R_GTOK, R_NPRE, R_PQ, R_PH, R_PENDING = 18, 19, 20, 21, 22, 23, 24, 25
R_LRU_HEAD, R_LRU_TAIL, R_LRU_N = 26, 27, 28
# a head step planned with the run after it (_plan's R_MERGE): the head's counters, and the blocks
# the run's first step took, which a scrape during the head step must not see yet
R_MERGE, R_HEAD, R_HPTOK, R_HGTOK, R_HUSED = 29, 30, 31, 32, 33
# the replica's position in advance()'s `ready` (-1: not in it), whose loads it keeps in `lr`
R_RPOS = 34
# Σ prompt tokens² of the prompts prefilled (an engine's prompt-length histogram), and the merged
# head step's share of it (as R_HPTOK)
R_PSQ, R_HPSQ = 35, 36
RI_COLUMNS = 37
# per-replica float columns
RF_T0, RF_D0, RF_G, RF_TEND, RF_LASTFIN = 0, 1, 2, 3, 4
RF_COLUMNS = 5
# int parameters
P_BUDGET, P_SEQS, P_BLOCKS, P_BS, P_MIXED, P_PREFIX, P_PBT, P_LRU_CAP, P_HT = 0, 1, 2, 3, 4, 5, 6, 7, 8
P_KEEP = 9  # prefix caching on (with or without block ids): a preempted request keeps its full blocks
# float parameters
F_BASE, F_PREFILL, F_ATTN, F_DECODE, F_CONTEXT = 0, 1, 2, 3, 4
# global ints (G_FREE: the first free slot of `qi`, -1 if none)
G_EVN, G_INFLIGHT, G_FINISHED, G_NPENDING, G_PLANS, G_CUTS, G_STEPS, G_FREE = 0, 1, 2, 3, 4, 5, 6, 7
G_COLUMNS = 8

BIG = 1 << 60
HASH_MUL = -7046029254386353131  # 0x9E3779B97F4A7C15 as int64: Fibonacci hashing of block ids

# No NRT (numba's reference counting; `_nrt` is numba's own switch, used by its tests): with it,
# every call of a helper increments and decrements each array argument's count atomically, which
# took over half the kernel's time (24-hour day: 20.4 s with it, 9.0 s without). Nothing here
# allocates, which is all that NRT off forbids.
# The helpers on every event's path are inlined into advance() (numba's IR inlining): a call of a
# separately compiled helper passes each array as its data pointer, shape and strides, and LLVM
# cannot inline across them (24-hour day: kernel 9.0 -> about 6 s; compiling it the first time
# on a machine takes about 35 s of CPU instead of 20). Rare paths (preemption, the prefix cache, the
# KV limit's search) stay calls, which keeps the compile shorter.
_OPTIONS: dict[str, Any] = {"cache": True, "_nrt": False}
jit = nb.njit(**_OPTIONS)
inline_jit = nb.njit(inline="always", **_OPTIONS)


@inline_jit
def _cdiv(a, b):
    return -((-a) // b)


# --- the replica event heap (min by RF_TEND, kept in evk), indexed by replica ---------------


@inline_jit
def _ev_fix(ev, evk, evpos, g, i):
    """Sift the entry at position i up or down (by its key in evk, then by replica id); the keys
    sit beside the ids in heap order, so a comparison reads no replica's row."""
    n = g[G_EVN]
    r = ev[i]
    key = evk[i]
    while i > 0:
        p = (i - 1) // 2
        kp = evk[p]
        if key < kp or (key == kp and r < ev[p]):
            ev[i] = ev[p]
            evk[i] = kp
            evpos[ev[i]] = i
            i = p
        else:
            break
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        c = left
        kc = evk[left]
        right = left + 1
        if right < n:
            kr = evk[right]
            if kr < kc or (kr == kc and ev[right] < ev[left]):
                c = right
                kc = kr
        if kc < key or (kc == key and ev[c] < r):
            ev[i] = ev[c]
            evk[i] = kc
            evpos[ev[i]] = i
            i = c
        else:
            break
    ev[i] = r
    evk[i] = key
    evpos[r] = i


@inline_jit
def _ev_set(ev, evk, evpos, rf, g, r):
    """Insert replica r, or move it after its RF_TEND changed."""
    i = evpos[r]
    if i < 0:
        i = g[G_EVN]
        ev[i] = r
        evpos[r] = i
        g[G_EVN] += 1
    evk[i] = rf[r, RF_TEND]
    _ev_fix(ev, evk, evpos, g, i)


@inline_jit
def _ev_pop(ev, evk, evpos, g):
    r = ev[0]
    g[G_EVN] -= 1
    last = g[G_EVN]
    evpos[r] = -1
    if last > 0:
        ev[0] = ev[last]
        evk[0] = evk[last]
        evpos[ev[0]] = 0
        _ev_fix(ev, evk, evpos, g, 0)
    return r


# --- per-replica finish heap (min by the decode clock at which a decoding request is done) -----
# No position per request: the requests' rows stay untouched while the heap sifts (they are spread
# over the whole trace's table); only a preemption removes an entry from inside, found by a scan.


@inline_jit
def _fh_swap(hk, hr, r, i, j):
    hk[r, i], hk[r, j] = hk[r, j], hk[r, i]
    hr[r, i], hr[r, j] = hr[r, j], hr[r, i]


@inline_jit
def _fh_fix(hk, hr, ri, r, i):
    n = ri[r, R_HSIZE]
    while i > 0:
        p = (i - 1) // 2
        if hk[r, i] < hk[r, p]:
            _fh_swap(hk, hr, r, i, p)
            i = p
        else:
            break
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        c = left
        if left + 1 < n and hk[r, left + 1] < hk[r, left]:
            c = left + 1
        if hk[r, c] < hk[r, i]:
            _fh_swap(hk, hr, r, i, c)
            i = c
        else:
            break


@inline_jit
def _fh_push(hk, hr, ri, r, q, key):
    i = ri[r, R_HSIZE]
    hk[r, i] = key
    hr[r, i] = q
    ri[r, R_HSIZE] = i + 1
    _fh_fix(hk, hr, ri, r, i)


@inline_jit
def _fh_remove(hk, hr, ri, r, i):
    """Remove the entry at position i."""
    last = ri[r, R_HSIZE] - 1
    ri[r, R_HSIZE] = last
    if i != last:
        hk[r, i] = hk[r, last]
        hr[r, i] = hr[r, last]
        _fh_fix(hk, hr, ri, r, i)


@jit
def _fh_find(hr, ri, r, q):
    for i in range(ri[r, R_HSIZE]):
        if hr[r, i] == q:
            return i
    return -1


# --- the running list (admission order) and the waiting queue ----------------------------------


@inline_jit
def _run_append(qi, ri, r, q):
    tail = ri[r, R_RTAIL]
    qi[q, Q_PREV] = tail
    qi[q, Q_NEXT] = -1
    if tail >= 0:
        qi[tail, Q_NEXT] = q
    else:
        ri[r, R_RHEAD] = q
    ri[r, R_RTAIL] = q
    ri[r, R_NRUN] += 1


@inline_jit
def _run_remove(qi, ri, r, q):
    prev, nxt = qi[q, Q_PREV], qi[q, Q_NEXT]
    if prev >= 0:
        qi[prev, Q_NEXT] = nxt
    else:
        ri[r, R_RHEAD] = nxt
    if nxt >= 0:
        qi[nxt, Q_PREV] = prev
    else:
        ri[r, R_RTAIL] = prev
    ri[r, R_NRUN] -= 1


@inline_jit
def _wait_push(qi, ri, r, q, front):
    if ri[r, R_NWAIT] == 0:
        qi[q, Q_WNEXT] = -1
        ri[r, R_WHEAD] = q
        ri[r, R_WTAIL] = q
    elif front:
        qi[q, Q_WNEXT] = ri[r, R_WHEAD]
        ri[r, R_WHEAD] = q
    else:
        qi[q, Q_WNEXT] = -1
        qi[ri[r, R_WTAIL], Q_WNEXT] = q
        ri[r, R_WTAIL] = q
    ri[r, R_NWAIT] += 1
    qi[q, Q_STATE] = ST_WAIT


@inline_jit
def _wait_pop(qi, ri, r):
    q = ri[r, R_WHEAD]
    ri[r, R_WHEAD] = qi[q, Q_WNEXT]
    ri[r, R_NWAIT] -= 1
    if ri[r, R_NWAIT] == 0:
        ri[r, R_WTAIL] = -1
    return q


# --- decoding requests as aggregates -----------------------------------------------------------


@inline_jit
def _dec_add(qi, ri, hist, hk, hr, pi, r, q):
    """q (prefill done, Q_GEN tokens generated) decodes from the replica's current clock on."""
    bs = pi[P_BS]
    base = qi[q, Q_GEN] - ri[r, R_DS]
    qi[q, Q_DECBASE] = base
    x = qi[q, Q_IN] + base
    hist[r, x % bs] += 1
    ri[r, R_SX] += x
    ri[r, R_NDEC] += 1
    qi[q, Q_STATE] = ST_DECODE
    _fh_push(hk, hr, ri, r, q, qi[q, Q_OUT] - base)


@inline_jit
def _dec_remove(qi, ri, hist, hk, hr, pi, r, q, i):
    """Take q (at position i of the finish heap) out of the decoding aggregates; returns the KV
    blocks it holds now."""
    bs = pi[P_BS]
    x = qi[q, Q_IN] + qi[q, Q_DECBASE]
    hist[r, x % bs] -= 1
    ri[r, R_SX] -= x
    ri[r, R_NDEC] -= 1
    _fh_remove(hk, hr, ri, r, i)
    qi[q, Q_GEN] = ri[r, R_DS] + qi[q, Q_DECBASE]
    return _cdiv(x + ri[r, R_DS] - 1, bs)


@inline_jit
def _dec_cum(hist, r, ds0, steps, n, bs):
    """New blocks the decoding requests take over the `steps` steps after the one at clock ds0."""
    if steps <= 0 or n == 0:
        return 0
    full = steps // bs
    total = full * n
    for j in range(1, steps - full * bs + 1):
        total += hist[r, (1 - ds0 - j) % bs]
    return total


@jit
def _preempt(qi, qo, ri, hist, hk, hr, pi, r, q):
    """Recompute preemption: q's blocks are freed, its progress dropped; it waits at the front.
    With prefix caching its full blocks stay cached (Q_KEPT, scheduler.py's Request.kept)."""
    if qi[q, Q_STATE] == ST_DECODE:
        held = _dec_remove(qi, ri, hist, hk, hr, pi, r, q, _fh_find(hr, ri, r, q))
        computed = qi[q, Q_IN] + qi[q, Q_GEN] - 1
    else:
        held = qi[q, Q_BLOCKS]
        computed = qi[q, Q_COMP]
        if ri[r, R_PART] == q:
            ri[r, R_PART] = -1
    if pi[P_KEEP] == 1:
        qi[q, Q_KEPT] = computed // pi[P_BS] * pi[P_BS]
    ri[r, R_FREE] += held
    qi[q, Q_BLOCKS] = 0
    qi[q, Q_COMP] = 0
    qo[qi[q, Q_REQ], O_PREEMPT] += 1
    ri[r, R_NPRE] += 1
    _run_remove(qi, ri, r, q)
    _wait_push(qi, ri, r, q, True)


# --- prefix cache: per replica, LRU over the trace's prefix block ids ----------------------------


@jit
def _ht_find(hslot, lkey, pi, r, block):
    """The LRU entry holding `block` in replica r's cache, or -1 (open addressing, linear probing)."""
    mask = pi[P_HT] - 1
    base = r * pi[P_HT]
    h = ((block * HASH_MUL) >> 20) & mask
    while True:
        e = hslot[base + h]
        if e < 0 or lkey[e] == block:
            return e
        h = (h + 1) & mask


@jit
def _ht_insert(hslot, lkey, pi, r, e):
    mask = pi[P_HT] - 1
    base = r * pi[P_HT]
    h = ((lkey[e] * HASH_MUL) >> 20) & mask
    while hslot[base + h] >= 0:
        h = (h + 1) & mask
    hslot[base + h] = e


@jit
def _ht_delete(hslot, lkey, pi, r, block):
    """Remove `block` (present), shifting back the entries that probed past its slot."""
    mask = pi[P_HT] - 1
    base = r * pi[P_HT]
    h = ((block * HASH_MUL) >> 20) & mask
    while lkey[hslot[base + h]] != block:
        h = (h + 1) & mask
    hole = h
    j = h
    while True:
        j = (j + 1) & mask
        e = hslot[base + j]
        if e < 0:
            break
        home = ((lkey[e] * HASH_MUL) >> 20) & mask
        # e may fill the hole unless its home lies cyclically in (hole, j]
        if (j > hole and (home <= hole or home > j)) or (j < hole and home <= hole and home > j):
            hslot[base + hole] = e
            hole = j
    hslot[base + hole] = -1


@jit
def _prefix_hit(qi, poff, pids, hslot, lkey, pi, r, q):
    pbt = pi[P_PBT]
    req = qi[q, Q_REQ]
    full = min(poff[req + 1] - poff[req], qi[q, Q_IN] // pbt)
    matched = 0
    for j in range(full):
        if _ht_find(hslot, lkey, pi, r, pids[poff[req] + j]) < 0:
            break
        matched += 1
    return min(matched * pbt, qi[q, Q_IN] + qi[q, Q_GEN] - 1)


@jit
def _lru_unlink(ri, lprev, lnext, r, e):
    p, n = lprev[e], lnext[e]
    if p >= 0:
        lnext[p] = n
    else:
        ri[r, R_LRU_HEAD] = n
    if n >= 0:
        lprev[n] = p
    else:
        ri[r, R_LRU_TAIL] = p


@jit
def _lru_append(ri, lprev, lnext, r, e):
    tail = ri[r, R_LRU_TAIL]
    lprev[e] = tail
    lnext[e] = -1
    if tail >= 0:
        lnext[tail] = e
    else:
        ri[r, R_LRU_HEAD] = e
    ri[r, R_LRU_TAIL] = e


@jit
def _prefix_use(qi, ri, poff, pids, hslot, lkey, lprev, lnext, pi, r, q, blocks, insert):
    """Mark the first `blocks` prefix blocks of q as just used; insert the missing ones if `insert`."""
    cap = pi[P_LRU_CAP]
    first = poff[qi[q, Q_REQ]]
    for j in range(blocks):
        block = pids[first + j]
        e = _ht_find(hslot, lkey, pi, r, block)
        if e >= 0:
            _lru_unlink(ri, lprev, lnext, r, e)
            _lru_append(ri, lprev, lnext, r, e)
        elif insert:
            if ri[r, R_LRU_N] < cap:
                e = r * cap + ri[r, R_LRU_N]
                ri[r, R_LRU_N] += 1
            else:  # evict the least recently used
                e = ri[r, R_LRU_HEAD]
                _lru_unlink(ri, lprev, lnext, r, e)
                _ht_delete(hslot, lkey, pi, r, lkey[e])
            lkey[e] = block
            _ht_insert(hslot, lkey, pi, r, e)
            _lru_append(ri, lprev, lnext, r, e)


# --- one replica: plan a run, end it ------------------------------------------------------------


@inline_jit
def _plan(
    t, r, qi, qf, qo, ri, rf, hist, hk, hr, pi, pf, poff, pids, hslot, lkey, lprev, lnext, ev, evk, evpos, g
):
    """Schedule the step starting at t (scheduler.py's StepScheduler.schedule) and how many
    identical steps follow it; set the replica's event at the run's end."""
    bs = pi[P_BS]
    budget = pi[P_BUDGET]
    mixed = pi[P_MIXED] == 1
    ds = ri[r, R_DS]
    preempted = False
    part = ri[r, R_PART]
    rem = 0
    pchunk = 0
    if part >= 0:
        rem = qi[part, Q_IN] + qi[part, Q_GEN] - qi[part, Q_COMP]
        pbudget = budget - ri[r, R_NDEC] if mixed else budget
        pchunk = min(rem, pbudget)
        if pchunk > 0:
            pneed = _cdiv(qi[part, Q_COMP] + pchunk, bs) - qi[part, Q_BLOCKS]
            md = hist[r, (1 - ds) % bs] if mixed else 0
            if md + pneed > ri[r, R_FREE]:  # the partial is the newest running request: it goes first
                _preempt(qi, qo, ri, hist, hk, hr, pi, r, part)
                preempted = True
                part = -1
                pchunk = 0
            else:
                qi[part, Q_BLOCKS] += pneed
                ri[r, R_FREE] -= pneed
    hfirst = part if pchunk > 0 else -1
    tailnew = pchunk if (pchunk > 0 and pchunk < rem) else -1
    # a request whose prefill completes in this step and finishes with its first token
    done_first = pchunk > 0 and pchunk == rem and qi[part, Q_GEN] + 1 >= qi[part, Q_OUT]
    prefill = pchunk
    pairs = pchunk * qi[part, Q_COMP] + pchunk * (pchunk + 1) // 2 if pchunk > 0 else 0
    left = budget - pchunk - (ri[r, R_NDEC] if mixed else 0)
    admitted = 0
    if not preempted:
        while ri[r, R_NWAIT] > 0 and left > 0 and ri[r, R_NRUN] < pi[P_SEQS]:
            q = ri[r, R_WHEAD]
            hit = _prefix_hit(qi, poff, pids, hslot, lkey, pi, r, q) if pi[P_PREFIX] == 1 else 0
            tokens = qi[q, Q_IN] + qi[q, Q_GEN]
            start = max(hit, min(qi[q, Q_KEPT], tokens - 1))
            new = min(tokens - start, left)
            need = _cdiv(start + new, bs)
            # in mixed batches the decodes' blocks for this step come first
            reserve = hist[r, (1 - ds) % bs] if mixed else 0
            if need + reserve > ri[r, R_FREE]:
                break
            _wait_pop(qi, ri, r)
            if pi[P_PREFIX] == 1:
                ri[r, R_PQ] += tokens
                ri[r, R_PH] += hit
                if hit > 0:
                    qo[qi[q, Q_REQ], O_HIT] += hit
                _prefix_use(qi, ri, poff, pids, hslot, lkey, lprev, lnext, pi, r, q, hit // pi[P_PBT], False)
            qi[q, Q_COMP] = start
            qi[q, Q_KEPT] = 0
            qi[q, Q_BLOCKS] = need
            ri[r, R_FREE] -= need
            qi[q, Q_STATE] = ST_PREFILL
            req = qi[q, Q_REQ]
            if qf[req, QF_ADMIT] != qf[req, QF_ADMIT]:  # NaN: first admission
                qf[req, QF_ADMIT] = t
            _run_append(qi, ri, r, q)
            if hfirst < 0:
                hfirst = q
            tailnew = new if new < tokens - start else -1
            if qi[q, Q_GEN] + 1 >= qi[q, Q_OUT]:
                done_first = True
            prefill += new
            pairs += new * start + new * (new + 1) // 2
            left -= new
            admitted += 1
    decadv = 1
    n = ri[r, R_NDEC]
    if not mixed and prefill > 0:
        decadv = 0  # a prefill-first step: the decodes wait
    elif n > 0:
        md = hist[r, (1 - ds) % bs]
        while md > ri[r, R_FREE]:  # preempt the newest decoding requests until the rest fit
            q = ri[r, R_RTAIL]
            if qi[q, Q_STATE] == ST_DECODE and (qi[q, Q_IN] + qi[q, Q_DECBASE] + ds - 1) % bs == 0:
                md -= 1
            _preempt(qi, qo, ri, hist, hk, hr, pi, r, q)
            preempted = True
        ri[r, R_FREE] -= md
        n = ri[r, R_NDEC]
    steps_dec = n if decadv == 1 else 0
    if prefill == 0 and steps_dec == 0:
        ri[r, R_BUSY] = 0
        ri[r, R_K] = 0
        ri[r, R_MERGE] = 0
        return
    context = ri[r, R_SX] + n * ds if steps_dec > 0 else 0
    d0 = (
        pf[F_BASE]
        + pf[F_PREFILL] * prefill
        + pf[F_ATTN] * pairs
        + pf[F_DECODE] * steps_dec
        + pf[F_CONTEXT] * context
    )
    k = 1
    steady = hfirst >= 0 and hfirst == part and tailnew > 0 and admitted == 0
    if admitted == 0 and not preempted and (prefill == 0 or steady):
        k = BIG
        if steps_dec > 0:
            k = hk[r, 0] - ds
        if steady:
            k = min(k, rem // pchunk)
        if k > 1:
            k = _kv_limit(qi, ri, hist, pi, r, k, ds, steps_dec, part if steady else -1, pchunk)
    grow = pf[F_CONTEXT] * steps_dec
    if steady:
        grow += pf[F_ATTN] * pchunk * pchunk
    ri[r, R_K] = k
    # A head step whose end changes nothing a router reads (no finish, nobody waiting, no
    # preemption when the run after it reserves its blocks: at most one a decoding request) is
    # planned with that run as one (advance): one event less per admission.
    ri[r, R_MERGE] = (
        1
        if (
            k == 1
            and prefill > 0
            and tailnew < 0
            and not preempted
            and not done_first
            and ri[r, R_NWAIT] == 0
            and (decadv == 0 or ri[r, R_HSIZE] == 0 or hk[r, 0] > ds + 1)
            and ri[r, R_NDEC] + admitted + 1 <= ri[r, R_FREE]
        )
        else 0
    )
    ri[r, R_P] = pchunk if steady else 0
    ri[r, R_DECADV] = decadv
    ri[r, R_HFIRST] = hfirst
    ri[r, R_TAILNEW] = tailnew
    ri[r, R_BUSY] = 1
    # an arrival could join a later step of this run: nobody waits and the steps leave budget
    ri[r, R_CANADMIT] = (
        1
        if (ri[r, R_NWAIT] == 0 and ri[r, R_NRUN] < pi[P_SEQS] and not steady and (not mixed or budget > n))
        else 0
    )
    g[G_PLANS] += 1
    g[G_STEPS] += k
    rf[r, RF_T0] = t
    rf[r, RF_D0] = d0
    rf[r, RF_G] = grow
    rf[r, RF_TEND] = t + k * d0 + grow * (k * (k - 1) / 2.0)
    if ri[r, R_MERGE] == 0:  # else the run after it sets the event
        _ev_set(ev, evk, evpos, rf, g, r)


@jit
def _kv_limit(qi, ri, hist, pi, r, k, ds, n, part, pchunk):
    """The longest run (<= k steps) whose later steps' new blocks fit in the free ones."""
    bs = pi[P_BS]
    free = ri[r, R_FREE]
    c1 = qi[part, Q_COMP] + pchunk if part >= 0 else 0
    ext = k - 1
    bound = (ext // bs + 1) * n + (_cdiv(ext * pchunk, bs) + 1 if part >= 0 else 0)
    if bound <= free:
        return k
    lo, hi = 0, ext  # the largest m in [lo, hi] with need(m) <= free
    while lo < hi:
        m = (lo + hi + 1) // 2
        need = _dec_cum(hist, r, ds, m, n, bs)
        if part >= 0:
            need += _cdiv(c1 + m * pchunk, bs) - _cdiv(c1, bs)
        if need <= free:
            lo = m
        else:
            hi = m - 1
    return lo + 1


@inline_jit
def _step_end(rf, r, k):
    return rf[r, RF_T0] + k * rf[r, RF_D0] + rf[r, RF_G] * (k * (k - 1) / 2.0)


@inline_jit
def _end_run(r, qi, qf, ri, rf, hist, hk, hr, pi, poff, pids, hslot, lkey, lprev, lnext, g, lr):
    """Apply the replica's run (R_K steps) at its end: blocks, tokens, first tokens, finishes."""
    bs = pi[P_BS]
    k = ri[r, R_K]
    t_end = rf[r, RF_TEND]
    ds0 = ri[r, R_DS]
    n = ri[r, R_NDEC]
    decadv = ri[r, R_DECADV] == 1
    part = ri[r, R_PART]
    steady = ri[r, R_P] > 0
    pchunk = ri[r, R_P]
    if k > 1:
        used = 0
        if decadv:
            used += _dec_cum(hist, r, ds0, k - 1, n, bs)
        if steady:
            c1 = qi[part, Q_COMP] + pchunk
            c2 = qi[part, Q_COMP] + k * pchunk
            add = _cdiv(c2, bs) - _cdiv(c1, bs)
            qi[part, Q_BLOCKS] += add
            used += add
        ri[r, R_FREE] -= used
    if decadv:
        ri[r, R_DS] = ds0 + k
        ri[r, R_GTOK] += n * k
    ds = ri[r, R_DS]
    # prompt chunks: the steady partial, or the head step's chunks from hfirst to the tail
    if steady:
        qi[part, Q_COMP] += k * pchunk
        q = part if qi[part, Q_COMP] == qi[part, Q_IN] + qi[part, Q_GEN] else -1
    else:
        q = ri[r, R_HFIRST]
    while q >= 0:
        nxt = qi[q, Q_NEXT]
        if not steady and nxt < 0 and ri[r, R_TAILNEW] >= 0:  # the tail's chunk leaves it unfinished
            qi[q, Q_COMP] += ri[r, R_TAILNEW]
            ri[r, R_PART] = q
            qi[q, Q_STATE] = ST_PREFILL
            break
        # q's prompt (+ tokens generated before a preemption) is computed: it emits a token
        qi[q, Q_COMP] = qi[q, Q_IN] + qi[q, Q_GEN]
        if ri[r, R_PART] == q:
            ri[r, R_PART] = -1
        qi[q, Q_GEN] += 1
        ri[r, R_GTOK] += 1
        if qi[q, Q_GEN] == 1:
            req = qi[q, Q_REQ]
            qf[req, QF_FIRST] = t_end
            ri[r, R_PTOK] += qi[q, Q_IN]
            ri[r, R_PSQ] += qi[q, Q_IN] * qi[q, Q_IN]
            if pi[P_PREFIX] == 1:
                full = min(poff[req + 1] - poff[req], qi[q, Q_IN] // pi[P_PBT])
                _prefix_use(qi, ri, poff, pids, hslot, lkey, lprev, lnext, pi, r, q, full, True)
        if qi[q, Q_GEN] >= qi[q, Q_OUT]:
            _finish(q, r, t_end, qi, qf, ri, rf, g, lr)
            ri[r, R_FREE] += qi[q, Q_BLOCKS]
            qi[q, Q_BLOCKS] = 0
        else:
            _dec_add(qi, ri, hist, hk, hr, pi, r, q)
        if steady:
            break
        q = nxt
    # decoding requests done at the end of this run
    if decadv:
        while ri[r, R_HSIZE] > 0 and hk[r, 0] <= ds:
            q = hr[r, 0]
            held = _dec_remove(qi, ri, hist, hk, hr, pi, r, q, 0)
            ri[r, R_FREE] += held
            qi[q, Q_BLOCKS] = 0
            _finish(q, r, t_end, qi, qf, ri, rf, g, lr)
    ri[r, R_BUSY] = 0
    ri[r, R_K] = 0
    ri[r, R_HEAD] = 0


@inline_jit
def _finish(q, r, t, qi, qf, ri, rf, g, lr):
    """q is done: its finish time, and its slot back on the free list (its row stays readable
    until a later arrival takes it)."""
    qf[qi[q, Q_REQ], QF_FINISH] = t
    if ri[r, R_RPOS] >= 0:
        lr[ri[r, R_RPOS]] -= 1
    qi[q, Q_STATE] = ST_DONE
    _run_remove(qi, ri, r, q)
    qi[q, Q_NEXT] = g[G_FREE]
    g[G_FREE] = q
    ri[r, R_FIN] += 1
    g[G_INFLIGHT] -= 1
    g[G_FINISHED] += 1
    if t > rf[r, RF_LASTFIN]:
        rf[r, RF_LASTFIN] = t


# --- the event loop ------------------------------------------------------------------------------


@jit
def advance(
    until,
    now,
    ids,
    arrival,
    tin,
    tout,
    dropped,
    targets,
    ready,
    qi,
    qf,
    qo,
    rep,
    ri,
    rf,
    hist,
    hk,
    hr,
    pi,
    pf,
    poff,
    pids,
    hslot,
    lkey,
    lprev,
    lnext,
    ev,
    evk,
    evpos,
    pending,
    g,
    lr,
    stops,
    srows,
):
    """Route requests `ids` (in arrival order, each at its arrival or `now` if later, to
    `targets[j]`, or when that is -1 to the least-loaded replica of `ready`; dropped ones are
    skipped) and run every replica's events up to `until`; 0, or -1 (and nothing done) if a replica
    of `ready` is beyond the replica arrays. Each routed request takes a free slot of `qi` (the
    caller leaves enough) and its replica goes in `rep`. `lr` (at least as long as
    `ready`) holds each ready replica's waiting + running count while it runs, for the router: one
    contiguous scan instead of two reads of each replica's row. At each time of `stops` (ascending,
    before `until`) the ready pods' scrape rows go in `srows` (row k * len(ready) + i for stop k and
    pod i), as pod_rows would give them had the call ended there."""
    j = 0
    m = len(ids)
    nr = len(ready)
    for i in range(nr):
        if ready[i] >= ri.shape[0]:
            return -1  # a replica the caller has not grown the arrays for yet: nothing done
    for i in range(nr):
        c = ready[i]
        lr[i] = ri[c, R_NWAIT] + ri[c, R_NRUN]
        ri[c, R_RPOS] = i
    si = 0
    ns = len(stops)
    while True:
        while j < m and dropped[ids[j]]:
            j += 1
        t_ev = evk[0] if g[G_EVN] > 0 else np.inf
        t_ar = max(arrival[ids[j]], now) if j < m else np.inf
        take_ev = g[G_EVN] > 0 and t_ev <= t_ar and t_ev <= until
        if si < ns and (t_ev > stops[si] if take_ev else (j >= m or t_ar >= stops[si])):
            # a stop: what a call that ended there would have done is done (its events up to it,
            # its arrivals before it)
            for i in range(nr):
                _pod_row(stops[si], ready[i], qi, ri, rf, hist, pi, srows, si * nr + i)
            si += 1
            continue
        if take_ev:
            # the replica whose run ends: it stays at the heap's root while its next run is
            # planned (_plan re-keys it there: one sift instead of a pop and a push)
            t = t_ev
            pending[0] = ev[0]
            n_plan = 1
            ending = True
        else:
            if j >= m:
                break
            t = t_ar
            while j < m and max(arrival[ids[j]], now) == t:
                req = ids[j]
                r = targets[j]
                if dropped[req]:
                    j += 1
                    continue
                if r < 0:
                    best = BIG
                    bi = -1
                    for i in range(nr):
                        if lr[i] < best:
                            best = lr[i]
                            bi = i
                    if bi >= 0:
                        r = ready[bi]
                j += 1
                rep[req] = r
                qf[req, QF_ADMIT] = np.nan
                qf[req, QF_FIRST] = np.nan
                qf[req, QF_FINISH] = np.nan
                q = g[G_FREE]
                g[G_FREE] = qi[q, Q_NEXT]
                qi[q, Q_IN] = tin[req]
                qi[q, Q_OUT] = tout[req]
                qi[q, Q_GEN] = 0
                qi[q, Q_COMP] = 0
                qi[q, Q_BLOCKS] = 0
                qi[q, Q_KEPT] = 0
                qi[q, Q_REQ] = req
                g[G_INFLIGHT] += 1
                was_empty = ri[r, R_NWAIT] == 0
                _wait_push(qi, ri, r, q, False)
                if ri[r, R_RPOS] >= 0:
                    lr[ri[r, R_RPOS]] += 1
                if ri[r, R_BUSY] == 0:
                    if ri[r, R_PENDING] == 0:
                        ri[r, R_PENDING] = 1
                        pending[g[G_NPENDING]] = r
                        g[G_NPENDING] += 1
                elif was_empty and ri[r, R_CANADMIT] == 1:
                    # cut the run at the first step that starts after t: the request joins that step
                    if ri[r, R_HEAD] == 1 and t < rf[r, RF_T0]:
                        # within a merged head step: the run ends with it (and gives back the
                        # blocks its next step took)
                        g[G_CUTS] += 1
                        g[G_STEPS] -= ri[r, R_K]
                        ri[r, R_K] = 0
                        ri[r, R_FREE] += ri[r, R_HUSED]
                        ri[r, R_HUSED] = 0
                        rf[r, RF_TEND] = rf[r, RF_T0]
                        _ev_set(ev, evk, evpos, rf, g, r)
                    else:
                        k = _first_step_after(rf, r, t)
                        if k < ri[r, R_K]:
                            g[G_CUTS] += 1
                            g[G_STEPS] -= ri[r, R_K] - k
                            ri[r, R_K] = k
                            rf[r, RF_TEND] = _step_end(rf, r, k)
                            _ev_set(ev, evk, evpos, rf, g, r)
                    ri[r, R_CANADMIT] = 0
            n_plan = g[G_NPENDING]
            ending = False
        # plan the replicas due: the one whose run ended (after ending it), or those an arrival
        # found idle. A head step that can merge (_plan's R_MERGE) is ended at once and the run
        # after it planned from its end, with the head's counters kept apart for scrapes.
        for i in range(n_plan):
            r = pending[i]
            ri[r, R_PENDING] = 0
            tp = t
            stage = 1 if ending else 0  # 1: end the run first; 2: end the merged head step first
            ptok = 0
            psq = 0
            gtok = 0
            free = 0
            while True:
                if stage > 0:
                    ptok = ri[r, R_PTOK]
                    psq = ri[r, R_PSQ]
                    gtok = ri[r, R_GTOK]
                    _end_run(
                        r, qi, qf, ri, rf, hist, hk, hr, pi, poff, pids, hslot, lkey, lprev, lnext, g, lr
                    )
                    tp = rf[r, RF_TEND]
                    free = ri[r, R_FREE]
                _plan(
                    tp,
                    r,
                    qi,
                    qf,
                    qo,
                    ri,
                    rf,
                    hist,
                    hk,
                    hr,
                    pi,
                    pf,
                    poff,
                    pids,
                    hslot,
                    lkey,
                    lprev,
                    lnext,
                    ev,
                    evk,
                    evpos,
                    g,
                )
                if stage == 2:
                    ri[r, R_HEAD] = 1
                    ri[r, R_HPTOK] = ri[r, R_PTOK] - ptok
                    ri[r, R_HPSQ] = ri[r, R_PSQ] - psq
                    ri[r, R_HGTOK] = ri[r, R_GTOK] - gtok
                    ri[r, R_HUSED] = free - ri[r, R_FREE]
                    break
                if ri[r, R_MERGE] == 0:
                    break
                stage = 2
            if ri[r, R_BUSY] == 0 and evpos[r] >= 0:  # idle: only the replica at the root is in the heap
                _ev_pop(ev, evk, evpos, g)
        g[G_NPENDING] = 0
    for i in range(nr):
        ri[ready[i], R_RPOS] = -1
    return 0


@jit
def _first_step_after(rf, r, t):
    """The smallest k >= 1 whose step starts after t (steps of the run end at _step_end(k))."""
    d0, grow, dt = rf[r, RF_D0], rf[r, RF_G], t - rf[r, RF_T0]
    if grow > 0:
        a = grow / 2.0
        b = d0 - grow / 2.0
        k = int(np.floor((-b + np.sqrt(b * b + 4 * a * dt)) / (2 * a)))
    else:
        k = int(np.floor(dt / d0))
    k = max(k, 1)
    while k > 1 and _step_end(rf, r, k - 1) > t:
        k -= 1
    while _step_end(rf, r, k) <= t:
        k += 1
    return k


@inline_jit
def _counters(t, r, qi, ri, rf, hist, pi):
    """Replica r's counters and gauges at t (inside a run: the steps that ended by t): finished,
    prompt tokens, prompt tokens², generation tokens, waiting, running, KV blocks used."""
    bs = pi[P_BS]
    gen = ri[r, R_GTOK]
    used = pi[P_BLOCKS] - ri[r, R_FREE]
    if ri[r, R_BUSY] == 1 and ri[r, R_HEAD] == 1 and t < rf[r, RF_T0]:  # within a merged head step
        return (
            ri[r, R_FIN],
            ri[r, R_PTOK] - ri[r, R_HPTOK],
            ri[r, R_PSQ] - ri[r, R_HPSQ],
            gen - ri[r, R_HGTOK],
            ri[r, R_NWAIT],
            ri[r, R_NRUN],
            used - ri[r, R_HUSED],
        )
    if ri[r, R_BUSY] == 1 and rf[r, RF_TEND] > t and t >= rf[r, RF_T0]:
        done = min(_first_step_after(rf, r, t) - 1, ri[r, R_K])
        ext = min(done, ri[r, R_K] - 1)  # later steps of the run that have started (allocated)
        if ri[r, R_DECADV] == 1:
            gen += ri[r, R_NDEC] * done
            used += _dec_cum(hist, r, ri[r, R_DS], ext, ri[r, R_NDEC], bs)
        part, pchunk = ri[r, R_PART], ri[r, R_P]
        if pchunk > 0 and ext > 0:
            c1 = qi[part, Q_COMP] + pchunk
            used += _cdiv(c1 + ext * pchunk, bs) - _cdiv(c1, bs)
    return ri[r, R_FIN], ri[r, R_PTOK], ri[r, R_PSQ], gen, ri[r, R_NWAIT], ri[r, R_NRUN], used


@jit
def observe(t, n_replicas, qi, ri, rf, hist, pi, out):
    """Every replica's counters and gauges at t (_counters), one column per replica."""
    for r in range(n_replicas):
        fin, ptok, _, gen, nwait, nrun, used = _counters(t, r, qi, ri, rf, hist, pi)
        out[0, r] = fin
        out[1, r] = ptok
        out[2, r] = gen
        out[3, r] = nwait
        out[4, r] = nrun
        out[5, r] = used


@jit
def pod_rows(t, ready, draining, qi, ri, rf, hist, pi, rows):
    """One scrape's rows in replay/metrics/signals.py's columns, ready pods first, then draining
    ones."""
    nr = len(ready)
    for i in range(nr + len(draining)):
        _pod_row(t, ready[i] if i < nr else draining[i - nr], qi, ri, rf, hist, pi, rows, i)


@inline_jit
def _pod_row(t, r, qi, ri, rf, hist, pi, rows, i):
    """Replica r's scrape row at t (_counters) in rows[i]."""
    fin, ptok, psq, gen, nwait, nrun, used = _counters(t, r, qi, ri, rf, hist, pi)
    rows[i, WAITING] = nwait
    rows[i, RUNNING] = nrun
    rows[i, INFLIGHT] = float(nwait) + float(nrun)
    rows[i, KV_USAGE] = used / pi[P_BLOCKS]  # vllm:kv_cache_usage_perc, a fraction
    rows[i, REQUESTS] = fin
    rows[i, PROMPT_TOKENS] = ptok
    rows[i, GENERATION_TOKENS] = gen
    rows[i, PROMPT_SQUARES] = psq
