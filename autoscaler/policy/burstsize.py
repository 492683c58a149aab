"""Sizing for bursty arrivals: capacity.size with the arrivals' dispersion, per replica.

demand.dispersion() gives the target's index of dispersion I over the TTFT target (1: Poisson).
The router spreads the target's arrivals over n replicas without seeing their prefill queues
(capacity.py), so each replica sees the counts thinned: a random split of counts of index I has
index 1 + (I - 1) / n at each replica, the ca² of its own TTFT tail (Kingman's G/G/1 decay,
capacity.size's arrival_cv2). The count is then the least n whose own ca² sizes at most n.
Pure arithmetic over capacity.size; docs/policy.md ("Defaults and why", arrivals' dispersion).
"""

from __future__ import annotations

from autoscaler.policy import capacity, lengths
from autoscaler.policy.capacity import Demand, Sizing
from autoscaler.policy.spec import ReplicaProfile, SloTarget


def replica_cv2(spread: float, replicas: int) -> float:
    """The ca² each of `replicas` replicas sees of arrivals of index `spread` split at random."""
    return 1.0 + (spread - 1.0) / replicas if replicas > 0 else 1.0


def size(
    profile: ReplicaProfile,
    slo: SloTarget,
    need: Demand,
    speed: float,
    limit: int,
    spread: float,
    shape: lengths.Shape,
) -> Sizing:
    """The least n that serves `need` within the SLO at the ca² n replicas see (replica_cv2). The
    sizing falls as n grows (a thinner ca²), so n is bisected between Poisson's count (the least)
    and the count at that count's ca² (which, sized at its own thinner ca², needs at most itself).
    `shape`: capacity.size's keywords for the prompt lengths' spread and the router (lengths.Shape)."""
    at = capacity.sizer(profile, slo, need, speed, limit, **shape)  # each n's ca² sizes the same demand
    got = at(1.0)
    lo = got.replicas
    if spread <= 1.0 or lo <= 0:
        return got
    top = at(replica_cv2(spread, lo))
    hi = top.replicas
    if hi <= lo:
        return top
    best = None
    while hi - lo > 1:  # s(lo) > lo and s(hi) <= hi, s the count sized at n's own ca²
        mid = (lo + hi) // 2
        sized = at(replica_cv2(spread, mid))
        if sized.replicas <= mid:
            hi, best = mid, sized
        else:
            lo = mid
    if best is None:
        best = at(replica_cv2(spread, hi))
    if best.replicas >= hi:
        return best
    # fewer suffice at hi's ca², but not at their own: hi replicas, each serving its share
    share = best.replicas / hi
    return best._replace(
        replicas=hi, requests_per_s=best.requests_per_s * share, utilization=best.utilization * share
    )
