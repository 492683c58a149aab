"""replay/kernel.py's own data structures, against Python's (the engine as a whole is checked
against the exact scheduler in test_engine.py)."""

from __future__ import annotations

import numpy as np

from replay import kernel as k


def test_prefix_hash_table_finds_inserts_and_deletes_as_a_dict_does() -> None:
    rng = np.random.default_rng(3)
    slots, replicas, cap = 64, 2, 24  # at most cap entries a replica: the table stays under half full
    pi = np.zeros(10, dtype=np.int64)
    pi[k.P_HT] = slots
    hslot = np.full(replicas * slots, -1, dtype=np.int64)
    lkey = np.full(replicas * cap, -1, dtype=np.int64)
    model: list[dict[int, int]] = [{} for _ in range(replicas)]
    free = [list(range(r * cap, (r + 1) * cap)) for r in range(replicas)]
    for _ in range(5_000):
        r = int(rng.integers(0, replicas))
        block = int(rng.integers(0, 60)) * 1_000_003  # collide often in 64 slots
        e = int(k._ht_find(hslot, lkey, pi, r, block))
        assert e == model[r].get(block, -1)
        if e >= 0 and rng.random() < 0.5:
            k._ht_delete(hslot, lkey, pi, r, block)
            del model[r][block]
            free[r].append(e)
        elif e < 0 and free[r]:
            e = free[r].pop()
            lkey[e] = block
            k._ht_insert(hslot, lkey, pi, r, e)
            model[r][block] = e
    for r in range(replicas):
        held = sorted(int(e) for e in hslot[r * slots : (r + 1) * slots] if e >= 0)
        assert held == sorted(model[r].values())
