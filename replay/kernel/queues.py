"""A replica's requests: the running list (admission order), the waiting queue, the decoding
requests as aggregates (one decode clock, a histogram of block phases, the finish heap), and the
recompute preemption that moves a request from the first back to the second."""

from __future__ import annotations

from replay.kernel.heaps import fh_find, fh_push, fh_remove
from replay.kernel.jit import cdiv, inline_jit, jit
from replay.kernel.layout import (
    O_PREEMPT,
    P_BS,
    P_KEEP,
    Q_BLOCKS,
    Q_COMP,
    Q_DECBASE,
    Q_GEN,
    Q_IN,
    Q_KEPT,
    Q_NEXT,
    Q_OUT,
    Q_PREV,
    Q_REQ,
    Q_STATE,
    Q_WNEXT,
    R_DS,
    R_FREE,
    R_NDEC,
    R_NPRE,
    R_NRUN,
    R_NWAIT,
    R_PART,
    R_RHEAD,
    R_RTAIL,
    R_SX,
    R_WHEAD,
    R_WTAIL,
    ST_DECODE,
    ST_WAIT,
)

# --- the running list (admission order) and the waiting queue ----------------------------------


@inline_jit
def run_append(qi, ri, r, q):
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
def run_remove(qi, ri, r, q):
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
def wait_push(qi, ri, r, q, front):
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
def wait_pop(qi, ri, r):
    q = ri[r, R_WHEAD]
    ri[r, R_WHEAD] = qi[q, Q_WNEXT]
    ri[r, R_NWAIT] -= 1
    if ri[r, R_NWAIT] == 0:
        ri[r, R_WTAIL] = -1
    return q


# --- decoding requests as aggregates -----------------------------------------------------------


@inline_jit
def dec_add(qi, ri, hist, hk, hr, pi, r, q):
    """q (prefill done, Q_GEN tokens generated) decodes from the replica's current clock on."""
    bs = pi[P_BS]
    base = qi[q, Q_GEN] - ri[r, R_DS]
    qi[q, Q_DECBASE] = base
    x = qi[q, Q_IN] + base
    hist[r, x % bs] += 1
    ri[r, R_SX] += x
    ri[r, R_NDEC] += 1
    qi[q, Q_STATE] = ST_DECODE
    fh_push(hk, hr, ri, r, q, qi[q, Q_OUT] - base)


@inline_jit
def dec_remove(qi, ri, hist, hk, hr, pi, r, q, i):
    """Take q (at position i of the finish heap) out of the decoding aggregates; returns the KV
    blocks it holds now."""
    bs = pi[P_BS]
    x = qi[q, Q_IN] + qi[q, Q_DECBASE]
    hist[r, x % bs] -= 1
    ri[r, R_SX] -= x
    ri[r, R_NDEC] -= 1
    fh_remove(hk, hr, ri, r, i)
    qi[q, Q_GEN] = ri[r, R_DS] + qi[q, Q_DECBASE]
    return cdiv(x + ri[r, R_DS] - 1, bs)


@inline_jit
def dec_cum(hist, r, ds0, steps, n, bs):
    """New blocks the decoding requests take over the `steps` steps after the one at clock ds0."""
    if steps <= 0 or n == 0:
        return 0
    full = steps // bs
    total = full * n
    for j in range(1, steps - full * bs + 1):
        total += hist[r, (1 - ds0 - j) % bs]
    return total


@jit
def preempt(qi, qo, ri, hist, hk, hr, pi, r, q):
    """Recompute preemption: q's blocks are freed, its progress dropped; it waits at the front.
    With prefix caching its full blocks stay cached (Q_KEPT, scheduler.py's Request.kept)."""
    if qi[q, Q_STATE] == ST_DECODE:
        held = dec_remove(qi, ri, hist, hk, hr, pi, r, q, fh_find(hr, ri, r, q))
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
    run_remove(qi, ri, r, q)
    wait_push(qi, ri, r, q, True)
