"""The kernel's arrays, column by column: what replay/engine.py allocates and every compiled
function reads. numba freezes these values into the code it compiles (jit.py's cache stamp covers
this file for that reason, and signals.py, whose bucket counts it takes)."""

from replay.metrics.signals import OUTPUT_LENGTH_BUCKETS, PREFILL_TIME_BUCKETS, TTFT_BUCKETS

# int columns of a request in flight (its slot, a row of `qi`, reused once it finished)
Q_IN, Q_OUT, Q_STATE, Q_GEN, Q_COMP, Q_BLOCKS, Q_DECBASE = 0, 1, 2, 3, 4, 5, 6
Q_NEXT, Q_PREV, Q_WNEXT, Q_KEPT, Q_REQ = 7, 8, 9, 10, 11  # Q_REQ: the request's index in the trace
QI_COLUMNS = 12
# slot states (a free slot is ST_DONE, or ST_NEW if never used; its Q_NEXT links the free list)
ST_NEW, ST_WAIT, ST_PREFILL, ST_DECODE, ST_DONE = 0, 1, 2, 3, 4
# per slot, a float (`qr`, beside `qi`): when the router sent the slot's request to its replica, its
# arrival at that engine, from which the engine times its first token. Per slot, not in `qf`: the
# slots in flight stay in the cache, a request's `qf` row is cold by its first token (24-hour day:
# a `qf` column read there cost the kernel about 6 %)
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
# a head step planned with the run after it (step.py's plan, R_MERGE): the head's counters, and the blocks
# the run's first step took, which a scrape during the head step must not see yet
R_MERGE, R_HEAD, R_HPTOK, R_HGTOK, R_HUSED = 29, 30, 31, 32, 33
# the replica's position in advance()'s `ready` (-1: not in it), whose loads it keeps in `lr`
R_RPOS = 34
# Σ prompt tokens² of the requests finished (an engine's prompt-length histogram, observed at a
# request's finish as vLLM's vllm:request_prompt_tokens; counted with R_FIN, so a merged head step,
# which finishes none, has no share of it)
R_PSQ = 35
# Σ generated tokens² of the requests finished (an engine's output-length histogram, observed at a
# request's finish as vLLM's vllm:request_generation_tokens; counted with R_FIN)
R_OSQ = 36
# Σ generated tokens of the requests finished (the same histogram's _sum, counted with R_FIN; the
# generation counter R_GTOK counts tokens as they are decoded)
R_OSUM = 37
# the prefill times' histogram (vllm:request_prefill_time_seconds: first token - first scheduled,
# QF_FIRST - QF_ADMIT, observed at a request's finish as vLLM V1 does; counted with R_FIN): per
# bucket of signals.py's PREFILL_TIME_BOUNDS, the requests finished whose prefill time is in (the
# bound before, the bound], the last beyond every bound (a scrape cumulates them, as `le` buckets);
# from column R_PFT on
R_PFT = 38
# the output lengths' histogram (vllm:request_generation_tokens: Q_OUT, the tokens a finished request
# generated), per bucket of signals.py's OUTPUT_LENGTH_BOUNDS as R_PFT's; counted with R_FIN
R_OLEN = R_PFT + PREFILL_TIME_BUCKETS
# the times to first token's histogram (vllm:time_to_first_token_seconds: first token - `qr`,
# observed at the first token as vLLM V1 does), per bucket of signals.py's TTFT_BOUNDS as R_PFT's.
# Counted at the first tokens, not with R_FIN: a merged head step's are applied before it ends (as
# its R_HPTOK), so its increments are also kept from R_HTTFT on (step.py's end_run; cleared as the
# next merged head step starts, in advance) for a scrape within it to take off
R_TTFT = R_OLEN + OUTPUT_LENGTH_BUCKETS
R_HTTFT = R_TTFT + TTFT_BUCKETS
RI_COLUMNS = R_HTTFT + TTFT_BUCKETS
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

BIG = 1 << 60  # no limit: a run's length before events bound it, the router's first best load
