"""One replica's steps: plan the step starting now and how many identical steps follow it (a run;
scheduler.py's StepScheduler.schedule), bound it by the free KV blocks, end it (blocks, tokens,
first tokens, finishes), and where a run's steps end."""

from __future__ import annotations

import numpy as np

from replay.kernel.heaps import ev_set
from replay.kernel.jit import cdiv, inline_jit, jit
from replay.kernel.layout import (
    BIG,
    F_ATTN,
    F_BASE,
    F_CONTEXT,
    F_DECODE,
    F_PREFILL,
    G_FINISHED,
    G_FREE,
    G_INFLIGHT,
    G_PLANS,
    G_STEPS,
    O_HIT,
    P_BS,
    P_BUDGET,
    P_MIXED,
    P_PBT,
    P_PREFIX,
    P_SEQS,
    Q_BLOCKS,
    Q_COMP,
    Q_DECBASE,
    Q_GEN,
    Q_IN,
    Q_KEPT,
    Q_NEXT,
    Q_OUT,
    Q_REQ,
    Q_STATE,
    QF_ADMIT,
    QF_FINISH,
    QF_FIRST,
    R_BUSY,
    R_CANADMIT,
    R_DECADV,
    R_DS,
    R_FIN,
    R_FREE,
    R_GTOK,
    R_HEAD,
    R_HFIRST,
    R_HSIZE,
    R_HTTFT,
    R_K,
    R_MERGE,
    R_NDEC,
    R_NRUN,
    R_NWAIT,
    R_OLEN,
    R_OSQ,
    R_OSUM,
    R_P,
    R_PART,
    R_PFT,
    R_PH,
    R_PQ,
    R_PSQ,
    R_PTOK,
    R_RPOS,
    R_RTAIL,
    R_SX,
    R_TAILNEW,
    R_TTFT,
    R_WHEAD,
    RF_D0,
    RF_G,
    RF_LASTFIN,
    RF_T0,
    RF_TEND,
    ST_DECODE,
    ST_DONE,
    ST_PREFILL,
)
from replay.kernel.prefix import prefix_hit, prefix_use
from replay.kernel.queues import dec_add, dec_cum, dec_remove, preempt, run_append, run_remove, wait_pop
from replay.metrics.signals import OUTPUT_LENGTH_BOUNDS, PREFILL_TIME_BOUNDS, TTFT_BOUNDS

# numba freezes them into the code (constant arrays)
_PREFILL_BOUNDS = np.array(PREFILL_TIME_BOUNDS)
_OUTPUT_BOUNDS = np.array(OUTPUT_LENGTH_BOUNDS)
_TTFT_BOUNDS = np.array(TTFT_BOUNDS)


@inline_jit
def plan(
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
            pneed = cdiv(qi[part, Q_COMP] + pchunk, bs) - qi[part, Q_BLOCKS]
            md = hist[r, (1 - ds) % bs] if mixed else 0
            if md + pneed > ri[r, R_FREE]:  # the partial is the newest running request: it goes first
                preempt(qi, qo, ri, hist, hk, hr, pi, r, part)
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
            hit = prefix_hit(qi, poff, pids, hslot, lkey, pi, r, q) if pi[P_PREFIX] == 1 else 0
            tokens = qi[q, Q_IN] + qi[q, Q_GEN]
            start = max(hit, min(qi[q, Q_KEPT], tokens - 1))
            new = min(tokens - start, left)
            need = cdiv(start + new, bs)
            # in mixed batches the decodes' blocks for this step come first
            reserve = hist[r, (1 - ds) % bs] if mixed else 0
            if need + reserve > ri[r, R_FREE]:
                break
            wait_pop(qi, ri, r)
            if pi[P_PREFIX] == 1:
                ri[r, R_PQ] += tokens
                ri[r, R_PH] += hit
                if hit > 0:
                    qo[qi[q, Q_REQ], O_HIT] += hit
                prefix_use(qi, ri, poff, pids, hslot, lkey, lprev, lnext, pi, r, q, hit // pi[P_PBT], False)
            qi[q, Q_COMP] = start
            qi[q, Q_KEPT] = 0
            qi[q, Q_BLOCKS] = need
            ri[r, R_FREE] -= need
            qi[q, Q_STATE] = ST_PREFILL
            req = qi[q, Q_REQ]
            if qf[req, QF_ADMIT] != qf[req, QF_ADMIT]:  # NaN: first admission
                qf[req, QF_ADMIT] = t
            run_append(qi, ri, r, q)
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
            preempt(qi, qo, ri, hist, hk, hr, pi, r, q)
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
        ev_set(ev, evk, evpos, rf, g, r)


@jit
def _kv_limit(qi, ri, hist, pi, r, k, ds, n, part, pchunk):
    """The longest run (<= k steps) whose later steps' new blocks fit in the free ones."""
    bs = pi[P_BS]
    free = ri[r, R_FREE]
    c1 = qi[part, Q_COMP] + pchunk if part >= 0 else 0
    ext = k - 1
    bound = (ext // bs + 1) * n + (cdiv(ext * pchunk, bs) + 1 if part >= 0 else 0)
    if bound <= free:
        return k
    lo, hi = 0, ext  # the largest m in [lo, hi] with need(m) <= free
    while lo < hi:
        m = (lo + hi + 1) // 2
        need = dec_cum(hist, r, ds, m, n, bs)
        if part >= 0:
            need += cdiv(c1 + m * pchunk, bs) - cdiv(c1, bs)
        if need <= free:
            lo = m
        else:
            hi = m - 1
    return lo + 1


@inline_jit
def step_end(rf, r, k):
    return rf[r, RF_T0] + k * rf[r, RF_D0] + rf[r, RF_G] * (k * (k - 1) / 2.0)


@inline_jit
def end_run(r, qi, qr, qf, ri, rf, hist, hk, hr, pi, poff, pids, hslot, lkey, lprev, lnext, g, lr):
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
            used += dec_cum(hist, r, ds0, k - 1, n, bs)
        if steady:
            c1 = qi[part, Q_COMP] + pchunk
            c2 = qi[part, Q_COMP] + k * pchunk
            add = cdiv(c2, bs) - cdiv(c1, bs)
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
            # its time to first token, observed now as vLLM V1 does (a first token only: a request
            # recomputed after a preemption emits no second)
            b = bucket(_TTFT_BOUNDS, t_end - qr[q])
            ri[r, R_TTFT + b] += 1
            if ri[r, R_MERGE] == 1:  # a merged head step's, which a scrape within it must not see
                ri[r, R_HTTFT + b] += 1
            if pi[P_PREFIX] == 1:
                full = min(poff[req + 1] - poff[req], qi[q, Q_IN] // pi[P_PBT])
                prefix_use(qi, ri, poff, pids, hslot, lkey, lprev, lnext, pi, r, q, full, True)
        if qi[q, Q_GEN] >= qi[q, Q_OUT]:
            _finish(q, r, t_end, qi, qf, ri, rf, g, lr)
            ri[r, R_FREE] += qi[q, Q_BLOCKS]
            qi[q, Q_BLOCKS] = 0
        else:
            dec_add(qi, ri, hist, hk, hr, pi, r, q)
        if steady:
            break
        q = nxt
    # decoding requests done at the end of this run
    if decadv:
        while ri[r, R_HSIZE] > 0 and hk[r, 0] <= ds:
            q = hr[r, 0]
            held = dec_remove(qi, ri, hist, hk, hr, pi, r, q, 0)
            ri[r, R_FREE] += held
            qi[q, Q_BLOCKS] = 0
            _finish(q, r, t_end, qi, qf, ri, rf, g, lr)
    ri[r, R_BUSY] = 0
    ri[r, R_K] = 0
    ri[r, R_HEAD] = 0


@inline_jit
def bucket(bounds, value):
    """The histogram bucket of `value`: the first of `bounds` it is <= to (a histogram's `le`), or
    len(bounds), beyond them all. Most prefills take less than the first bound: one comparison."""
    b = 0
    while b < len(bounds) and value > bounds[b]:
        b += 1
    return b


@inline_jit
def _finish(q, r, t, qi, qf, ri, rf, g, lr):
    """q is done: its finish time, and its slot back on the free list (its row stays readable
    until a later arrival takes it)."""
    qf[qi[q, Q_REQ], QF_FINISH] = t
    if ri[r, R_RPOS] >= 0:
        lr[ri[r, R_RPOS]] -= 1
    qi[q, Q_STATE] = ST_DONE
    run_remove(qi, ri, r, q)
    qi[q, Q_NEXT] = g[G_FREE]
    g[G_FREE] = q
    ri[r, R_FIN] += 1
    ri[r, R_PSQ] += qi[q, Q_IN] * qi[q, Q_IN]  # the prompt-length histogram, observed at the finish as vLLM's
    ri[r, R_OSQ] += qi[q, Q_OUT] * qi[q, Q_OUT]
    ri[r, R_OSUM] += qi[q, Q_OUT]
    req = qi[q, Q_REQ]  # its prefill time and output length, observed at its finish as vLLM V1 does
    ri[r, R_PFT + bucket(_PREFILL_BOUNDS, qf[req, QF_FIRST] - qf[req, QF_ADMIT])] += 1
    ri[r, R_OLEN + bucket(_OUTPUT_BOUNDS, qi[q, Q_OUT])] += 1
    g[G_INFLIGHT] -= 1
    g[G_FINISHED] += 1
    if t > rf[r, RF_LASTFIN]:
        rf[r, RF_LASTFIN] = t


@jit
def first_step_after(rf, r, t):
    """The smallest k >= 1 whose step starts after t (steps of the run end at step_end(k))."""
    d0, grow, dt = rf[r, RF_D0], rf[r, RF_G], t - rf[r, RF_T0]
    if grow > 0:
        a = grow / 2.0
        b = d0 - grow / 2.0
        k = int(np.floor((-b + np.sqrt(b * b + 4 * a * dt)) / (2 * a)))
    else:
        k = int(np.floor(dt / d0))
    k = max(k, 1)
    while k > 1 and step_end(rf, r, k - 1) > t:
        k -= 1
    while step_end(rf, r, k) <= t:
        k += 1
    return k
