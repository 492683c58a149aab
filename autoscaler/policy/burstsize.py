"""Sizing for bursty arrivals: capacity.size with the arrivals' dispersion, per replica, and the
capacity held for the bursts a request arrives in.

demand.dispersion() gives the target's index of dispersion I over the TTFT target W (1: Poisson).
Two things follow from it:

  thinned ca²   the router spreads the target's arrivals over n replicas without seeing their
                prefill queues (capacity.py), so each replica sees the counts thinned: a random
                split of counts of index I has index 1 + (I - 1) / n at each replica, the ca² of
                its own TTFT tail (Kingman's G/G/1 decay, capacity.size's arrival_cv2). The count
                is the least n whose own ca² sizes at most n.
  burst hold    Kingman's decay is a heavy-traffic one: at a low mean utilization it prices a burst
                at almost nothing, yet most requests of a bursty target arrive in its bursts. The
                rate over W is read as a gamma mixture of mean λ (the typical rate, over which I
                is counted) and variance (I - 1)·λ / W; a request sees it size-biased (gamma of
                shape k + 1, k = λ·W / (I - 1), scale θ = (I - 1) / W), and in a window of rate
                Λ above the rate C the fleet serves at the SLO a share 1 - C / Λ comes too late.
                The fleet holds the least C whose late share, E[(1 - C/Λ)+] =
                Q(k + 1, C/θ) - (C/λ)·Q(k, C/θ), is at most BURST_BUDGET times the SLO's tail.
                Sized at the demand's mix and Poisson arrivals within the burst (capacity.size).
                Where the capacity model gives a curve, the window's late share is its own two
                tails' at u = Λ / C instead of the wall (latecurve.py: the prefill queue within the
                TTFT target, the TPOT tail over the decode; burstprice.py prices the hold by it),
                at the same budget; hold_rate here is the wall's, for a mix with no curve. A
                curve's hold is in the curve's units, r a replica (its rate at the SLO's tail
                within the spell): its prompts take hold / r replicas where that is fewer than
                their steady sizing at the hold's rate, which reads a burst of seconds as a rate
                that lasts (DeepSeek-R1's quiet hours, prefill cs² 30: 9 replicas where the curve
                says 5; docs/policy.md, burst hold).
  lifetime      the hold over W sets the prompts' queue (the TTFT side); the requests in flight
                (the batch and KV ceilings, the decodes' load: Little's law) are the arrivals over
                their time in the system T, held over T: a burst of seconds adds its own requests
                to those minute-long ones hold. The rate over T and its spread are read from the
                counts (lasting.py) where T is longer than a tick, the same gamma mixture with the
                variance read there, its budget the SLO's tail itself (past the KV ceiling a replica
                preempts: the excess is not merely late); else, and never above it, the hold over
                W. (Over W the index grows with W as the variance a tick reads is scaled to it, so
                W cancels out of the hold: held over T from the same index it would be the same.)

The count is the larger of the two. Pure arithmetic over capacity.size; docs/policy.md ("Defaults
and why": the arrivals' dispersion, the burst hold).
"""

from __future__ import annotations

import math
from typing import Final

from autoscaler.policy import capacity, flatkernel, lengths, memo
from autoscaler.policy.capacity import Demand, Sizing
from autoscaler.policy.capacityspec import ReplicaProfile, SloTarget
from autoscaler.policy.lengths import upper_gamma

# The bursts' late share may be twice the SLO's tail: the fleet sized for C at the SLO serves a
# window a little above C mostly in time, which the fluid share counts as late (docs/policy.md)
BURST_BUDGET: Final = 2.0
# A target whose typical demand and level are under a twentieth of one replica's work (GPU-seconds
# a second) is idle: nothing is held for its bursts, which an idle spell cannot tell are over
IDLE_LOAD: Final = 0.05
_GRID: Final = 16.0  # the hold's grid in log k: 6 % apart (the interpolation's error < 0.1 %, tests)
_hold_cache: Final[dict[tuple[int, float], float]] = {}  # C / θ by grid point and budget
# grid points i and i + 1 by (i, budget): a hold's one dict read where two were
_hold_pairs: Final[dict[tuple[int, float], tuple[float, float]]] = {}
_K_MIN: Final = 1e-6  # below it the shape's hold is its limit's (C / θ ~2.5 at a 2 % budget)
_K_MAX: Final = 1e6
_flat: flatkernel.Kernel | None = None  # size() in one compiled call (flatsize.py), where installed


def use(kernel: flatkernel.Kernel | None) -> None:
    """Size by `kernel` (flatkernel.py; the bench installs the compiled copy, None: in Python)."""
    global _flat
    _flat = kernel


def replica_cv2(spread: float, replicas: int) -> float:
    """The ca² each of `replicas` replicas sees of arrivals of index `spread` split at random."""
    return 1.0 + (spread - 1.0) / replicas if replicas > 0 else 1.0


def late_share(c: float, rate: float, theta: float) -> float:
    """The share of requests that arrive in a window whose rate is above c, late in proportion to
    the excess (1 - c / Λ): rates gamma of mean `rate` and scale `theta`, seen size-biased."""
    k = rate / theta
    x = c / theta
    return upper_gamma(k + 1.0, x) - c / rate * upper_gamma(k, x)


def hold_rate(rate: float, spread: float, window_s: float, budget: float) -> float:
    """The least rate C whose late share (late_share) is at most `budget`, for arrivals of mean
    `rate` and index of dispersion `spread` over `window_s`; `rate` itself when they are Poisson."""
    if not rate > 0.0:  # NaN too: no hold
        return 0.0
    if not (spread > 1.0 and budget > 0.0 and window_s > 0.0):
        return rate
    theta = (spread - 1.0) / window_s
    k = rate / theta
    if not k < _K_MAX:  # the rate's spread a thousandth of it or less: Poisson's
        return rate
    # C / θ depends on the shape k and the budget alone, and smoothly: interpolated in log k
    # between two points of a grid 1/_GRID apart, each solved once (a solve is ~250 µs)
    at = math.log(k if k > _K_MIN else _K_MIN) * _GRID
    i = math.floor(at)
    # the two points' cache read inline (two holds a tick): a miss reads them by _grid_x
    pair = _hold_pairs.get((i, budget))
    if pair is None:
        pair = memo.remember(_hold_pairs, (i, budget), (_grid_x(i, budget), _grid_x(i + 1, budget)), 4096)
    below, above = pair
    x = below + (at - i) * (above - below)
    held = x * theta
    return held if held > rate else rate  # max(), without the builtin's call


def _grid_x(i: int, budget: float) -> float:
    key = (i, budget)
    x = _hold_cache.get(key)
    if x is None:
        x = memo.remember(_hold_cache, key, _hold_x(math.exp(i / _GRID), budget), 4096)
    return x


def _hold_x(k: float, budget: float) -> float:
    """C / θ for shape k: Newton's method from the mean, k. The late share is convex and falling,
    its slope -Q(k, x) / k, so each step lands short of the root: it converges from the left."""
    x = k
    for _ in range(30):
        q = upper_gamma(k, x)
        # Q(k + 1, x) = Q(k, x) + x^k e^(-x) / Γ(k + 1)
        late = q + math.exp(k * math.log(x) - x - math.lgamma(k + 1.0)) - x / k * q
        if late <= budget * 1.001 or q <= 0.0:
            break
        x += (late - budget) * k / q
    return x


def size(
    profile: ReplicaProfile,
    slo: SloTarget,
    need: Demand,
    speed: float,
    limit: int,
    spread: float,
    shape: lengths.Shape,
    hold: float = 0.0,
    lifetime_hold: float | None = None,
    hold_per_replica: float = 0.0,
) -> Sizing:
    """The least n that serves `need` within the SLO at the ca² n replicas see (replica_cv2), and
    at least the count whose prompts queue at `hold` requests/s (hold_rate over the TTFT target)
    while `lifetime_hold` (over the requests' time in the system, at most `hold`; None: `hold`)
    are in flight, at need's mix. `shape`: capacity.size's keywords for the prompt lengths'
    spread and the router (lengths.Shape). `hold_per_replica` > 0: the hold is a late curve's
    (burstprice.py), in the curve's units (n replicas serve n·r at the SLO, r = hold_per_replica),
    so its prompts take hold / r replicas, with at least those the lasting rate asks for; the
    sizing of the prompts queueing at `hold` in capacity's steady tail reads the burst as a rate
    that lasts, and is kept only where it asks for fewer (it knows the router's pooling, the curve
    does not)."""
    lasting = lifetime_hold if lifetime_hold is not None and lifetime_hold <= hold else hold
    steady = _size(profile, slo, need, speed, limit, spread, shape, hold, lasting)
    if hold_per_replica > 0.0 and hold > 0.0:
        count = hold / hold_per_replica
        if not count < limit:  # past the bound (or no number: a subnormal r): the steady sizing
            return steady
        n = math.ceil(count - 1e-9)
        if n >= steady.replicas:
            return steady
        held = _size(profile, slo, need, speed, limit, spread, shape, lasting, lasting)
        return held if n <= held.replicas else _spread(held, n)
    return steady


def _spread(sizing: Sizing, n: int) -> Sizing:
    """`sizing` on n replicas (more than its own count), each serving its share of what they serve."""
    share = sizing.replicas / n
    return Sizing(
        n,
        sizing.binding,
        sizing.prefill_tokens_per_s,
        sizing.decode_tokens_per_s,
        sizing.requests_per_s * share,
        sizing.utilization * share,
    )


def _size(
    profile: ReplicaProfile,
    slo: SloTarget,
    need: Demand,
    speed: float,
    limit: int,
    spread: float,
    shape: lengths.Shape,
    hold: float,
    lasting: float,
) -> Sizing:
    flat = _flat  # a module global read once: a dict lookup each time, compiled
    if flat is not None and (not shape or _flat_covers(shape)):
        fused = flatkernel.sizing(
            flat, profile, slo, need, speed, limit, spread, shape.get("service_cv2", 1.0), hold, lasting
        )
        if fused is not None:
            return fused
    got = thinned(profile, slo, need, speed, limit, spread, shape)
    r = need.requests
    if hold <= r or r <= 0.0:
        return got
    if lasting < r:  # in flight: at least the demand's own
        lasting = r
    scale = lasting / r
    if scale == math.inf:  # a subnormal rate (a restored state's): its mix is no number to hold bursts at
        return got
    burst = hold / lasting
    held = capacity.size(profile, slo, need.scaled(scale), speed, limit, prefill_burst=burst, **shape)
    return held if held.replicas > got.replicas else got


def _flat_covers(shape: lengths.Shape) -> bool:
    """flatsize covers the random router, exponential prompt lengths (any prefill cs²) and
    geometric output lengths (no output-length histogram), without a prefill-time histogram."""
    return (
        not shape.get("least_loaded", False)
        and shape.get("lengths_cv2", 1.0) == 1.0
        and shape.get("outputs_cv2", 1.0) == 1.0
        and "prefill_tail" not in shape
        and "output_steps" not in shape
    )


def thinned(
    profile: ReplicaProfile,
    slo: SloTarget,
    need: Demand,
    speed: float,
    limit: int,
    spread: float,
    shape: lengths.Shape,
) -> Sizing:
    """The least n that serves `need` at the ca² n replicas see (replica_cv2). The sizing falls as
    n grows (a thinner ca²), so n is bisected between Poisson's count (the least) and the count at
    that count's ca² (which, sized at its own thinner ca², needs at most itself)."""
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
    return _spread(best, hi)  # fewer suffice at hi's ca², but not at their own
