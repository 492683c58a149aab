"""What a scrape reads: a replica's counters and gauges at any t, inside a run too (the steps that
ended by t), for the engine's scrape (observe) and the pods' metric rows (pod_rows)."""

from __future__ import annotations

from replay.kernel.jit import cdiv, inline_jit, jit
from replay.kernel.layout import (
    P_BLOCKS,
    P_BS,
    Q_COMP,
    R_BUSY,
    R_DECADV,
    R_DS,
    R_FIN,
    R_FREE,
    R_GTOK,
    R_HEAD,
    R_HGTOK,
    R_HPTOK,
    R_HTTFT,
    R_HUSED,
    R_K,
    R_NDEC,
    R_NRUN,
    R_NWAIT,
    R_OLEN,
    R_OSQ,
    R_OSUM,
    R_P,
    R_PART,
    R_PFT,
    R_PSQ,
    R_PTOK,
    R_TTFT,
    RF_T0,
    RF_TEND,
)
from replay.kernel.queues import dec_cum
from replay.kernel.step import first_step_after
from replay.metrics.signals import (
    GENERATION_TOKENS,
    INFLIGHT,
    KV_USAGE,
    OUTPUT_LENGTH,
    OUTPUT_LENGTH_BUCKETS,
    OUTPUT_SQUARES,
    OUTPUT_SUMS,
    PREFILL_TIME,
    PREFILL_TIME_BUCKETS,
    PROMPT_SQUARES,
    PROMPT_TOKENS,
    REQUESTS,
    RUNNING,
    TTFT,
    TTFT_BUCKETS,
    WAITING,
)


@inline_jit
def counters(t, r, qi, ri, rf, hist, pi):
    """Replica r's counters and gauges at t (inside a run: the steps that ended by t): finished,
    prompt tokens, prompt tokens², generation tokens, waiting, running, KV blocks used, generated
    tokens² and generated tokens of the finished requests."""
    bs = pi[P_BS]
    gen = ri[r, R_GTOK]
    used = pi[P_BLOCKS] - ri[r, R_FREE]
    if in_head(t, r, ri, rf):  # a merged head step finishes no request (step.py's plan, R_MERGE)
        return (
            ri[r, R_FIN],
            ri[r, R_PTOK] - ri[r, R_HPTOK],
            ri[r, R_PSQ],
            gen - ri[r, R_HGTOK],
            ri[r, R_NWAIT],
            ri[r, R_NRUN],
            used - ri[r, R_HUSED],
            ri[r, R_OSQ],
            ri[r, R_OSUM],
        )
    if ri[r, R_BUSY] == 1 and rf[r, RF_TEND] > t and t >= rf[r, RF_T0]:
        done = min(first_step_after(rf, r, t) - 1, ri[r, R_K])
        ext = min(done, ri[r, R_K] - 1)  # later steps of the run that have started (allocated)
        if ri[r, R_DECADV] == 1:
            gen += ri[r, R_NDEC] * done
            used += dec_cum(hist, r, ri[r, R_DS], ext, ri[r, R_NDEC], bs)
        part, pchunk = ri[r, R_PART], ri[r, R_P]
        if pchunk > 0 and ext > 0:
            c1 = qi[part, Q_COMP] + pchunk
            used += cdiv(c1 + ext * pchunk, bs) - cdiv(c1, bs)
    fin, ptok, psq, osq, osum = ri[r, R_FIN], ri[r, R_PTOK], ri[r, R_PSQ], ri[r, R_OSQ], ri[r, R_OSUM]
    return fin, ptok, psq, gen, ri[r, R_NWAIT], ri[r, R_NRUN], used, osq, osum


@inline_jit
def in_head(t, r, ri, rf):
    """Whether t is within replica r's merged head step (advance() has applied it already)."""
    return ri[r, R_BUSY] == 1 and ri[r, R_HEAD] == 1 and t < rf[r, RF_T0]


@jit
def observe(t, n_replicas, qi, ri, rf, hist, pi, out):
    """Every replica's counters and gauges at t (counters), one column per replica."""
    for r in range(n_replicas):
        fin, ptok, _, gen, nwait, nrun, used, _, _ = counters(t, r, qi, ri, rf, hist, pi)
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
        pod_row(t, ready[i] if i < nr else draining[i - nr], qi, ri, rf, hist, pi, rows, i)


@inline_jit
def pod_row(t, r, qi, ri, rf, hist, pi, rows, i):
    """Replica r's scrape row at t (counters, and the histograms' buckets) in rows[i]."""
    fin, ptok, psq, gen, nwait, nrun, used, osq, osum = counters(t, r, qi, ri, rf, hist, pi)
    rows[i, WAITING] = nwait
    rows[i, RUNNING] = nrun
    rows[i, INFLIGHT] = float(nwait) + float(nrun)
    rows[i, KV_USAGE] = used / pi[P_BLOCKS]  # vllm:kv_cache_usage_perc, a fraction
    rows[i, REQUESTS] = fin
    rows[i, PROMPT_TOKENS] = ptok
    rows[i, GENERATION_TOKENS] = gen
    rows[i, PROMPT_SQUARES] = psq
    rows[i, OUTPUT_SQUARES] = osq
    rows[i, OUTPUT_SUMS] = osum
    # the per-request histograms, counted at the finishes with R_FIN (exact at any t, as it is:
    # finishes happen at a run's end, and never in a merged head step)
    cumulate(ri, r, R_PFT, rows, i, PREFILL_TIME, PREFILL_TIME_BUCKETS)
    cumulate(ri, r, R_OLEN, rows, i, OUTPUT_LENGTH, OUTPUT_LENGTH_BUCKETS)
    # the times to first token, counted at the first tokens: within a merged head step, less the
    # step's own (advance() has applied them already, as its prompt tokens)
    if in_head(t, r, ri, rf):
        cumulate_less(ri, r, R_TTFT, R_HTTFT, rows, i, TTFT, TTFT_BUCKETS)
    else:
        cumulate(ri, r, R_TTFT, rows, i, TTFT, TTFT_BUCKETS)


@inline_jit
def cumulate(ri, r, first, rows, i, column, buckets):
    """Replica r's histogram (its counts per bucket from ri's column `first` on) as cumulative `le`
    buckets, +Inf last, in rows[i] from `column` on."""
    n = 0
    for b in range(buckets):
        n += ri[r, first + b]
        rows[i, column + b] = n


@inline_jit
def cumulate_less(ri, r, first, aside, rows, i, column, buckets):
    """As cumulate, less the counts per bucket from ri's column `aside` on."""
    n = 0
    for b in range(buckets):
        n += ri[r, first + b] - ri[r, aside + b]
        rows[i, column + b] = n
