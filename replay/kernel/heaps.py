"""The kernel's two heaps: the replica event heap (the fleet's next run to end, min by RF_TEND with
its keys kept in `evk`, indexed by replica) and each replica's finish heap (its decoding requests,
min by the decode clock at which each is done)."""

from __future__ import annotations

from replay.kernel.jit import inline_jit, jit
from replay.kernel.layout import (
    G_EVN,
    R_HSIZE,
    RF_TEND,
)

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
def ev_set(ev, evk, evpos, rf, g, r):
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
def ev_pop(ev, evk, evpos, g):
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
def fh_push(hk, hr, ri, r, q, key):
    i = ri[r, R_HSIZE]
    hk[r, i] = key
    hr[r, i] = q
    ri[r, R_HSIZE] = i + 1
    _fh_fix(hk, hr, ri, r, i)


@inline_jit
def fh_remove(hk, hr, ri, r, i):
    """Remove the entry at position i."""
    last = ri[r, R_HSIZE] - 1
    ri[r, R_HSIZE] = last
    if i != last:
        hk[r, i] = hk[r, last]
        hr[r, i] = hr[r, last]
        _fh_fix(hk, hr, ri, r, i)


@jit
def fh_find(hr, ri, r, q):
    for i in range(ri[r, R_HSIZE]):
        if hr[r, i] == q:
            return i
    return -1
