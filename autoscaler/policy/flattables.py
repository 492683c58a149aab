"""flatsize.py's data: the spec in flat floats and its two direct-mapped tables, apart from its arithmetic."""

from __future__ import annotations

import math
from typing import Any

from autoscaler.policy.tailsearch import (
    SHARE_KEPT,
    TPOT_KEPT,
    TPOT_QUANTUM,
    TTFT_KEPT,
    TTFT_QUANTUM,
    servers_at,
    tail_share,
)
from autoscaler.policy.tpottail import CONTEXT_OUTPUT_SHARE, _rate, units

# as many slots as tailsearch keeps entries (powers of 2: a key's hash is masked to a slot)
TPOT_SLOTS = TPOT_KEPT  # the TPOT tail's rates kept
TTFT_SLOTS = TTFT_KEPT  # the TTFT searches kept
SHARE_SLOTS = SHARE_KEPT  # the TTFT searches' utilizations kept
# the last thinned sizing's (flatsize._thinned_kept): its int inputs (a flag, the limit) after the
# tables' ints, its 6 float inputs and its 6 outputs after the tables' floats
KEPT_KEYS = 5 * (TPOT_SLOTS + TTFT_SLOTS) + 3 * SHARE_SLOTS
KEYS = KEPT_KEYS + 2  # the tables' ints
TABLE_FLOATS = TPOT_SLOTS + SHARE_SLOTS + 12  # the floats the tables keep after the consts
_NO_STEP = -(1 << 62)  # a TTFT search's step for an input <= 0 (capacity's None)

# consts: the profile's and the SLO's fields as floats (flags 0.0 / 1.0), by these indices
BASE, PREFILL, ATTENTION, REQUEST, CONTEXT = 0, 1, 2, 3, 4
HAS_BUDGET, BUDGET, PREFILL_FIRST, SEQS, HAS_KV, KV = 5, 6, 7, 8, 9, 10
HAS_TPOT, TPOT, TTFT, HAS_TOKENS, TOKENS, ATTAINMENT = 11, 12, 13, 14, 15, 16
FIELDS = 17
KEPT_FLOATS = FIELDS + TPOT_SLOTS + SHARE_SLOTS  # the last thinned sizing's floats (KEPT_KEYS)


def consts(profile: Any, slo: Any) -> list[float]:
    """The fields flatsize.size reads, in the order of the indices above."""
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


def ttft_servers(c: Any, keys: Any, offered: float, slack_services: float, budget: float) -> int:
    """tailsearch.ttft_servers, kept in a direct-mapped table after the TPOT tail's (tpot_rate):
    5 ints a slot, a flag, the three steps (_NO_STEP for capacity's None) and the count; and the
    utilization it divides by in one after it, on the slack's and the tail's steps (3 ints a slot,
    a flag and the two steps; its value in c after the TPOT tail's rates: _share)."""
    q, log = TTFT_QUANTUM, math.log
    k0 = round(log(offered) * q) if offered > 0.0 else _NO_STEP
    k1 = round(log(slack_services) * q) if slack_services > 0.0 else _NO_STEP
    k2 = round(log(budget) * q) if budget > 0.0 else _NO_STEP
    slot = ((k0 * 73856093) ^ (k1 * 19349663) ^ (k2 * 83492791)) & (TTFT_SLOTS - 1)
    at = 5 * (TPOT_SLOTS + slot)
    if keys[at] == 1 and keys[at + 1] == k0 and keys[at + 2] == k1 and keys[at + 3] == k2:
        return int(keys[at + 4])
    got = 1 if k0 == _NO_STEP else servers_at(math.exp(k0 / q), _share(c, keys, k1, k2))
    keys[at], keys[at + 1], keys[at + 2], keys[at + 3], keys[at + 4] = 1, k0, k1, k2, got
    return got


def _share(c: Any, keys: Any, k1: int, k2: int) -> float:
    """tailsearch.tail_share at the slack's and the tail's steps, kept in its table (ttft_servers)."""
    slot = ((k1 * 19349663) ^ (k2 * 83492791)) & (SHARE_SLOTS - 1)
    at = 5 * (TPOT_SLOTS + TTFT_SLOTS) + 3 * slot
    if keys[at] == 1 and keys[at + 1] == k1 and keys[at + 2] == k2:
        return float(c[FIELDS + TPOT_SLOTS + slot])
    q = TTFT_QUANTUM
    got = tail_share(
        0.0 if k1 == _NO_STEP else math.exp(k1 / q),
        0.0 if k2 == _NO_STEP else math.exp(k2 / q),
    )
    c[FIELDS + TPOT_SLOTS + slot] = got
    keys[at], keys[at + 1], keys[at + 2] = 1, k1, k2
    return got


def tpot_rate(c: Any, keys: Any, tail: float, p: float, o: float, speed: float) -> float:
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
        CONTEXT_OUTPUT_SHARE,
        (),  # no output-length histogram: the geometric's steps alone (flatsize covers no other)
        (),
    )
    c[FIELDS + slot] = got
    keys[at], keys[at + 1], keys[at + 2], keys[at + 3], keys[at + 4] = 1, k0, k1, k2, k3
    return got
