"""The KV ceiling: how many running requests a replica's KV cache holds, their contexts' sum
kept under it at a tail priced by what an overflow costs (capacity.sizer's batch ceiling).

A replica's B running requests hold contexts whose sum S fluctuates (the prompts' lengths, the
decoded tokens' ages). When S passes the cache the engine preempts contexts and recomputes them
later: they are late, and each recompute's prefill rides in the steps of the batch. Sized at the
SLO's own tail quantile (2.33 at 99 %) the ceiling held long-output traffic 11 % under its mean
where the loop's band already covers it (docs/policy-history.md, session 21); at the mean it let
the stationary long answers at 30 on reference-70b sit on the KV cliff (37 where 39 are needed).

Pure arithmetic on floats; flatsize.py repeats kv_z in the same operations.
"""

from __future__ import annotations

import math
from typing import Final

SQRT_HALF: Final = math.sqrt(0.5)
INV_SQRT_2PI: Final = 1.0 / math.sqrt(2.0 * math.pi)
KV_G0: Final = INV_SQRT_2PI  # G(0)
KV_NEWTON: Final = 60  # Newton's steps at most (a few from z = 0 do)


def kv_z(tail: float, spread: float, context: float, kv_tokens: float, redo_steps: float) -> float:
    """How far (in standard deviations) above their mean a replica's contexts may sum: the least
    z whose expected overflow, priced, fits the SLO's tail. The contexts past the cache are
    preempted and recomputed: they are late, and each recompute holds the batch `redo_steps`
    steps, as many late tokens more. With B = kv_tokens / context contexts of variance `spread`
    the sum's cv is √(spread / (context·kv_tokens)), and E[(S - K)+] / E[S] = cv·G(z), G the
    normal's loss function: cv·G(z)·(1 + redo_steps) = tail. Never below the mean (z >= 0)."""
    target = tail / (math.sqrt(spread / (context * kv_tokens)) * (1.0 + redo_steps))
    if not target < KV_G0:
        return 0.0
    z = 0.0  # Newton's steps on the convex, falling G from the left stay left of the root
    for _ in range(KV_NEWTON):
        upper = 0.5 * math.erfc(z * SQRT_HALF)
        step = (math.exp(-0.5 * z * z) * INV_SQRT_2PI - z * upper - target) / upper
        z += step
        if step < 1e-9:
            break
    return z


def kv_requests(kv_tokens: float, context: float, spread: float, z: float) -> float:
    """Running requests a replica's KV holds at the tail z (kv_z): B contexts of mean `context` and
    variance `spread` (the prompts' lengths_cv2·p², and the decoded tokens' age, o² for geometric
    outputs, lengths.age_variance·o² at the outputs' cv²) kept under kv_tokens at z standard
    deviations, L·B + z·√(spread·B) = kv_tokens, a quadratic in √B. 1,000-token prompts and
    1,500-token answers fill reference-70b's 440,000 tokens at 176 on average, 169 at
    reference-70b's priced z 0.85 (geometric outputs)."""
    root = math.sqrt(z * z * spread + 4.0 * context * kv_tokens) - z * math.sqrt(spread)
    root = root / (2.0 * context)
    return root * root
