"""The event loop (advance): arrivals routed to the least-loaded ready replica, and every replica's
runs planned and ended in time order, with the scrapes asked for on the way."""

from __future__ import annotations

import numpy as np

from replay.kernel.heaps import ev_pop, ev_set
from replay.kernel.jit import jit
from replay.kernel.layout import (
    BIG,
    G_CUTS,
    G_EVN,
    G_FREE,
    G_INFLIGHT,
    G_NPENDING,
    G_STEPS,
    Q_BLOCKS,
    Q_COMP,
    Q_GEN,
    Q_IN,
    Q_KEPT,
    Q_NEXT,
    Q_OUT,
    Q_REQ,
    QF_ADMIT,
    QF_FINISH,
    QF_FIRST,
    R_BUSY,
    R_CANADMIT,
    R_FREE,
    R_GTOK,
    R_HEAD,
    R_HGTOK,
    R_HPTOK,
    R_HTTFT,
    R_HUSED,
    R_K,
    R_MERGE,
    R_NRUN,
    R_NWAIT,
    R_PENDING,
    R_PTOK,
    R_RPOS,
    RF_T0,
    RF_TEND,
)
from replay.kernel.queues import wait_push
from replay.kernel.scrape import pod_row
from replay.kernel.step import end_run, first_step_after, plan, step_end
from replay.metrics.signals import TTFT_BUCKETS


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
    qr,
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
    """Route requests `ids` (in arrival order, each at its arrival or `now` if later, to `targets[j]`,
    or when that is -1 to the least-loaded replica of `ready`; dropped ones are skipped) and run
    every replica's events up to `until`; 0, or -1 (and nothing done) if a replica of `ready` is
    beyond the replica arrays. Each routed request takes a free slot of `qi` (the caller leaves
    enough; `qr`'s of the same index: when it was routed) and its replica goes in `rep`. `lr` (at
    least as long as `ready`) holds each ready replica's waiting + running count while it runs, for
    the router: one contiguous scan instead of two reads of each replica's row. At each time of
    `stops` (ascending, before `until`) the ready pods' scrape rows go in `srows` (row k *
    len(ready) + i for stop k and pod i), as pod_rows would give them had the call ended there."""
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
                pod_row(stops[si], ready[i], qi, ri, rf, hist, pi, srows, si * nr + i)
            si += 1
            continue
        if take_ev:
            # the replica whose run ends: it stays at the heap's root while its next run is
            # planned (plan re-keys it there: one sift instead of a pop and a push)
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
                qr[q] = t  # its arrival at the engine, which times its first token
                g[G_INFLIGHT] += 1
                was_empty = ri[r, R_NWAIT] == 0
                wait_push(qi, ri, r, q, False)
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
                        ev_set(ev, evk, evpos, rf, g, r)
                    else:
                        k = first_step_after(rf, r, t)
                        if k < ri[r, R_K]:
                            g[G_CUTS] += 1
                            g[G_STEPS] -= ri[r, R_K] - k
                            ri[r, R_K] = k
                            rf[r, RF_TEND] = step_end(rf, r, k)
                            ev_set(ev, evk, evpos, rf, g, r)
                    ri[r, R_CANADMIT] = 0
            n_plan = g[G_NPENDING]
            ending = False
        # plan the replicas due: the one whose run ended (after ending it), or those an arrival
        # found idle. A head step that can merge (step.py's plan, R_MERGE) is ended at once and the run
        # after it planned from its end, with the head's counters kept apart for scrapes.
        for i in range(n_plan):
            r = pending[i]
            ri[r, R_PENDING] = 0
            tp = t
            stage = 1 if ending else 0  # 1: end the run first; 2: end the merged head step first
            ptok = 0
            gtok = 0
            free = 0
            while True:
                if stage > 0:
                    ptok = ri[r, R_PTOK]
                    gtok = ri[r, R_GTOK]
                    if stage == 2:  # end_run keeps the head step's first tokens' TTFT buckets here
                        for b in range(TTFT_BUCKETS):
                            ri[r, R_HTTFT + b] = 0
                    end_run(
                        r, qi, qr, qf, ri, rf, hist, hk, hr, pi, poff, pids, hslot, lkey, lprev, lnext, g, lr
                    )
                    tp = rf[r, RF_TEND]
                    free = ri[r, R_FREE]
                plan(
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
                    ri[r, R_HGTOK] = ri[r, R_GTOK] - gtok
                    ri[r, R_HUSED] = free - ri[r, R_FREE]
                    break
                if ri[r, R_MERGE] == 0:
                    break
                stage = 2
            if ri[r, R_BUSY] == 0 and evpos[r] >= 0:  # idle: only the replica at the root is in the heap
                ev_pop(ev, evk, evpos, g)
        g[G_NPENDING] = 0
    for i in range(nr):
        ri[ready[i], R_RPOS] = -1
    return 0
