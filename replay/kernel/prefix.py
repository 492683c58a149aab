"""The prefix cache: per replica, an LRU list over the trace's prefix block ids, found through an
open-addressing hash table."""

from __future__ import annotations

from replay.kernel.jit import jit
from replay.kernel.layout import (
    P_HT,
    P_LRU_CAP,
    P_PBT,
    Q_GEN,
    Q_IN,
    Q_REQ,
    R_LRU_HEAD,
    R_LRU_N,
    R_LRU_TAIL,
)

HASH_MUL = -7046029254386353131  # 0x9E3779B97F4A7C15 as int64: Fibonacci hashing of block ids


@jit
def ht_find(hslot, lkey, pi, r, block):
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
def ht_insert(hslot, lkey, pi, r, e):
    mask = pi[P_HT] - 1
    base = r * pi[P_HT]
    h = ((lkey[e] * HASH_MUL) >> 20) & mask
    while hslot[base + h] >= 0:
        h = (h + 1) & mask
    hslot[base + h] = e


@jit
def ht_delete(hslot, lkey, pi, r, block):
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
def prefix_hit(qi, poff, pids, hslot, lkey, pi, r, q):
    pbt = pi[P_PBT]
    req = qi[q, Q_REQ]
    full = min(poff[req + 1] - poff[req], qi[q, Q_IN] // pbt)
    matched = 0
    for j in range(full):
        if ht_find(hslot, lkey, pi, r, pids[poff[req] + j]) < 0:
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
def prefix_use(qi, ri, poff, pids, hslot, lkey, lprev, lnext, pi, r, q, blocks, insert):
    """Mark the first `blocks` prefix blocks of q as just used; insert the missing ones if `insert`."""
    cap = pi[P_LRU_CAP]
    first = poff[qi[q, Q_REQ]]
    for j in range(blocks):
        block = pids[first + j]
        e = ht_find(hslot, lkey, pi, r, block)
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
                ht_delete(hslot, lkey, pi, r, lkey[e])
            lkey[e] = block
            ht_insert(hslot, lkey, pi, r, e)
            _lru_append(ri, lprev, lnext, r, e)
