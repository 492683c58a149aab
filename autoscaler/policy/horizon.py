"""Horizon: when the marginal replica would be ready, i.e. how far ahead a sizing must look.

A replica asked for now serves only from its ready time, so the demand that matters for it is
the demand then. For the *marginal* replica — the last of those the demand needs — that time
depends on how many are asked for (they share the storage), on the loaders already in progress
and the caches, all of which the cold-start model (coldstart.py) knows, and on when the scale-up
starts them: without a load gate it staggers their starts over the decisions to come (scaleup.py),
and a start held back a decision holds back its pull and warm-up too. So the marginal replica's
ready time is that of the last of the stagger's own schedule (scaleup.staggered_ready_s).

The horizon is found by a short fixed point: one more replica's ready time -> the replicas needed
then -> the ready time of the last of them as the stagger starts them -> ... It cannot run away:
the demand forecast's trend is damped (demand.py), so the need at any horizon is bounded, and the
loop stops as soon as the need stops growing. Nor does it feed back into itself: the stagger's
starts depend on the cluster alone, never on a horizon, and nothing of it is kept between ticks.

Pure; the cold-start answers are cached on their (hashable) inputs, as a cluster looks the same
most ticks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache, partial
from typing import Final

from autoscaler.policy import coldstart, memo, scaleup
from autoscaler.policy.clusterview import Cluster
from autoscaler.policy.spec import ColdStartSpec

MAX_ROUNDS: Final = 4  # fixed-point rounds; each can only lengthen the horizon, and it converges in 1-2


def pacing_s(cold: ColdStartSpec, period_s: float) -> float:
    """The storage's idle time per load when the policy staggers loads itself (no gate): a load of
    L seconds alone is followed by the next at the first decision after it ends, ceil(L / period)
    periods later; loads much shorter than a period start several at a time and lose nothing."""
    if cold.max_concurrent_loads is not None or cold.weights_gb <= 0.0:
        return 0.0
    alone = cold.weights_gb / coldstart.loader_gbps(1, cold.storage_gbps, cold.per_loader_gbps)
    if alone < 0.5 * period_s:
        return 0.0
    return math.ceil(alone / period_s - 1e-9) * period_s - alone


@lru_cache(maxsize=4096)
def recreate_s(cold: ColdStartSpec, k: int = 1, period_s: float = 15.0) -> float:
    """Seconds until the last of k replicas released now would be back if all were asked for
    again together, on the nodes they leave (their GPUs free, the image there, the weights in the
    node cache if there is one, no other loader), loads staggered by decisions period_s apart as
    the scale-up does: the rent-or-buy break-even's re-creation, since a replica holds its GPUs
    from scheduling to ready and serves nothing before."""
    per_node = max(cold.gpus_per_node // cold.gpus_per_replica, 1)
    nodes = -(-k // per_node)
    free = tuple(min(per_node, k - n * per_node) * cold.gpus_per_replica for n in range(nodes))
    on = tuple(range(nodes))
    cached = on if cold.local_cache_gbps is not None else ()  # each reads its node's cache
    compiled, warm = coldstart.compiled_after(cold, on)  # they compiled there
    back = coldstart.predict_ready(
        cold,
        k,
        free_gpus_per_node=free,
        image_cached_nodes=on,
        weights_cached=cached,
        compile_cached_nodes=compiled,
        compile_cache_warm=warm,
    )
    queued = 0.0 if cached else (k - 1) * pacing_s(cold, period_s)
    return max(r.ready_s for r in back) + queued


def find(
    cold: ColdStartSpec | None,
    have: int,
    room: int,
    need_at: Callable[[float], int],
    cluster: Cluster,
    lead_s: float | None,
    period_s: float = 15.0,
) -> tuple[float, int, int, float]:
    """(horizon s, replicas needed then, rounds, lead s): the ready time of the marginal replica and
    the need at that time, with `have` replicas counted (ready or starting) and at most `room` more,
    and the first round's horizon, one replica's ready time: the band is scored at that lead
    (planner.py), since the marginal replica also waits for the loads the policy itself asks for, and
    scored at that wait the band widened with what it asked (docs/policy.md, "band scored at").

    `lead_s` is the caller's time to ready of one more replica started now (a learned startup
    quantile, the replay's own projection) or the spec's fixed one; it replaces the model's for the
    first replica, and later ones add what the model's stagger adds to that: the wait for the
    storage and for the decisions their starts are spread over (decisions period_s apart).
    """
    if cold is None:
        horizon = lead_s or 0.0
        return horizon, need_at(horizon), 1, horizon
    # on the stagger's exact schedule, as the later ones: the offset is the caller's correction
    # of the model, not the gap between the model's two arithmetics
    got = _staggers.get(id(cold))  # memo.by_identity's hit inline: once a tick
    stagger = got[1] if got is not None and got[0] is cold else memo.by_identity(_staggers, cold, _stagger_of)
    first = stagger(1, cluster, period_s, True)[0]
    offset = 0.0 if lead_s is None else lead_s - first
    horizon = lead = first + offset
    need = need_at(horizon)
    rounds = 1
    while rounds < MAX_ROUNDS:
        extra = need - have
        if room < extra:  # min(), without the builtin's call
            extra = room
        if extra < 1:
            break
        later = stagger(extra, cluster, period_s, False)[0] + offset
        if later <= horizon:
            break
        horizon = later
        rounds += 1
        again = need_at(horizon)
        if again <= need:
            break
        need = again
    return horizon, need, rounds, lead


_staggers: Final[memo.Table] = {}  # by cold-start spec (memo.py)


def _stagger_of(cold: ColdStartSpec) -> Callable[[int, Cluster, float, bool], tuple[float, int]]:
    """scaleup.staggered_ready_s for one spec, cached on the rest: its own cache hashed the frozen
    spec at every call, which cost more than the hit (the horizon asks it every tick)."""
    return lru_cache(maxsize=4096)(partial(scaleup.staggered_ready_s.__wrapped__, cold))
