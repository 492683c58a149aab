"""The capacity model's late share of a window at u times the rate C its fleet serves at the SLO,
per engine: the curve the bursts' hold is priced by (burstprice.py), in place of burstsize's wall.

A fleet of n replicas sized to serve C at the SLO serves a window of rate Λ at x = u·r requests/s
a replica (r = C / n, u = Λ / C), Poisson within the window (as the held sizing has it), and there

  TTFT   the prompts queue at the replica's prefill rate (capacity's, with the decodes it carries):
         their work less the time served is a Brownian motion of drift v - 1 (v = x·service) from
         an empty queue, and a request t into the window's spell waits its maximum over t. The
         rate persists over the spell S (persistence: the seconds its dispersion was counted over,
         the TTFT target at least), so the share late is the mean over the spell's requests of the
         first passage past the slack by their time (spell_wait): over a long spell below v = 1
         Kingman's decay, the capacity model's TTFT tail; all but the first slack / (v - 1) seconds'
         requests above it. A replica whose prefill has headroom above the SLO rate (the 70B at
         Azure code's mix: 2.7×) absorbs a spell of twice C as queueing within the target; one with
         little (the 8B: 1.7×) does not.
  TPOT   the decodes' steps carry the window's prompt chunks: the per-request TPOT tail at x
         (tpottail.miss, the share of requests over their TPOT), all of them past the mean step
         at the target; a decode of D seconds longer than the spell sees the rate over D, its D / S
         spells' mean (burstprice's scale θ·S / D).

so late(u) = min(1, TTFT miss + TPOT miss) at x = u·r, r the rate where that is the SLO's tail (the
curve's own C), kept at points of u (_POINTS) and cached by the curve's key (the mix and speed
rounded as tailsearch.tpot_rate's, 1/16 in log). Nothing fitted: the two tails are capacity.size's
own; docs/policy.md ("Defaults and why", burst hold).

A curve reads both shares at ~100 points; the replay reads them by copies numba compiles from
these sources (spell_wait here, tpottail.miss's _miss; replay/policies/holdkernel.py and
tailkernel.py, installed with use()), with the same bits: tests/test_latecurve.py.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Final

from autoscaler.policy import capacity, lengths, memo, replicarates, tpottail
from autoscaler.policy.capacityspec import ReplicaProfile, SloTarget
from autoscaler.policy.flathold import spell_wait
from autoscaler.policy.flathold import window_wait as window_wait  # the curve's own, re-exported
from autoscaler.policy.outputsteps import OutputSteps

# the curve's points, in u = Λ / C: fine about C, where the late share turns, coarser above
_POINTS: Final = (
    0.0,
    0.25,
    0.5,
    0.7,
    0.85,
    1.0,
    *tuple(1.0 + 0.05 * i for i in range(1, 21)),
    *tuple(2.0 + 0.1 * i for i in range(1, 31)),
)
_QUANTUM: Final = 16.0  # the curve's key: the mix and speed rounded to 1/16 in log (tailsearch's)
Points = tuple[tuple[float, ...], tuple[float, ...]]  # u and a share late at u, rising to 1 at the last
# the TTFT tail's points, the TPOT tail's, the decode's time at C (a request's o steps), seconds,
# the seconds a window's rate persists (persistence: the longer of the TTFT target and the count's),
# and r, the requests/s a replica serves with the SLO's tail late (u = 1 a replica)
Curve = tuple[Points, Points, float, float, float]
_curves: Final[dict[tuple[object, ...], Curve | None]] = {}
# a curve's key names its profile and SLO by a number, one for each pair of values, found by the
# objects' identity: hashing the frozen specs (their every field, each tick, for each table the key
# is read in) cost more than the rest of the lookup (memo.py); a pair of values keeps its number
# (the table grows by the distinct specs a process sees, a handful), so the curves are cached and
# evicted as when keyed by the specs themselves, and a curve is shared by equal copies
# _curves' miss (None is a curve's value); Optional, so compiled it is an object compared by identity
_MISSING: Final[Curve | None] = (((), ()), ((), ()), 0.0, 0.0, 0.0)
_spec_numbers: Final[dict[tuple[ReplicaProfile, SloTarget], int]] = {}
_spec_ids: Final[dict[tuple[int, int], tuple[ReplicaProfile, SloTarget, int]]] = {}
_next_number: Final = itertools.count()


def _steps(
    slo: SloTarget,
    p: float,
    o: float,
    speed: float,
    cv2: float,
    service_cv2: float,
    persist_s: float,
    outputs_cv2: float = 1.0,
) -> tuple[int, int, int, int, int, int, int]:
    """The mix, speed and persistence in steps of 1/16 in log, a curve's key after the profile and
    the SLO's number (the curve is made at exp(step / 16))."""
    q = _QUANTUM
    spell = persistence(slo, persist_s)
    return (
        _round(math.log(p if p > 1.0 else 1.0) * q),
        _round(math.log(o if o > 1.0 else 1.0) * q),
        _round(math.log(speed) * q),
        _round(math.log(cv2 if cv2 > 1e-3 else 1e-3) * q),
        _round(math.log(service_cv2 if service_cv2 > 1e-3 else 1e-3) * q),
        _round(math.log(spell) * q),
        _round(math.log(outputs_cv2 if outputs_cv2 > 1e-3 else 1e-3) * q),
    )


def spec_number(profile: ReplicaProfile, slo: SloTarget) -> int:
    """The number of the pair's values (equal specs share it), by the objects' identity: each entry
    holds its objects, so their ids are not reused while it stands (memo.by_identity's reasoning).
    capacityfacts.facts keeps its spec's, which the Lookahead passes to curve_for."""
    ids = (id(profile), id(slo))
    got = _spec_ids.get(ids)
    if got is not None and got[0] is profile and got[1] is slo:
        return got[2]
    number = _spec_numbers.get((profile, slo))
    if number is None:  # never cleared (above)
        number = _spec_numbers[profile, slo] = next(_next_number)
    memo.remember(_spec_ids, ids, (profile, slo, number), 256)
    return number


def _round(y: float) -> int:
    """round(y), half to even, by math.floor, which mypyc compiles (round(), a call into Python's)."""
    whole = math.floor(y)
    rest = y - whole
    if rest > 0.5 or (rest == 0.5 and whole % 2 == 1):
        return whole + 1
    return whole


def persistence(slo: SloTarget, persist_s: float) -> float:
    """The seconds a window's rate persists: the hold's gamma gives the rate over the TTFT target the
    excess variance of the counted rate (demand.dispersion: a count's excess scaled by the window,
    bursts longer than it), read over `persist_s` (the count's window): that rate holds over them,
    and over the TTFT target where they are shorter (a count of none, or over no finite time, a
    degenerate state's ratio: the target's own)."""
    window = slo.ttft_s
    return persist_s if window < persist_s < math.inf else window


def curve(
    profile: ReplicaProfile,
    slo: SloTarget,
    p: float,
    o: float,
    speed: float,
    cv2: float,
    service_cv2: float,
    persist_s: float = 0.0,
    outputs_cv2: float = 1.0,
    output_steps: OutputSteps | None = None,
) -> tuple[tuple[object, ...], Curve | None]:
    """The late share of a window at u times C (the module's), cached by its key (the specs' number,
    _steps and the output steps' key); None where the model has nothing to price (no prompt or no
    rate at which the tail is met): the wall then; a window's rate persisting over `persist_s`
    seconds (persistence); the outputs' lengths of cv² `outputs_cv2` in the context a decode reads
    (lengths.context_share) and their decode steps `output_steps` in the TPOT tail (outputsteps.py)."""
    return curve_for(
        spec_number(profile, slo),
        profile,
        slo,
        p,
        o,
        speed,
        cv2,
        service_cv2,
        persist_s,
        outputs_cv2,
        output_steps,
    )


def curve_for(
    number: int,
    profile: ReplicaProfile,
    slo: SloTarget,
    p: float,
    o: float,
    speed: float,
    cv2: float,
    service_cv2: float,
    persist_s: float = 0.0,
    outputs_cv2: float = 1.0,
    output_steps: OutputSteps | None = None,
) -> tuple[tuple[object, ...], Curve | None]:
    """curve, the specs' number given (spec_number(profile, slo), which a tick's asks looked up
    by identity, ~600 instructions each)."""
    k_p, k_o, k_speed, k_cv2, k_service, k_spell, k_out = _steps(
        slo, p, o, speed, cv2, service_cv2, persist_s, outputs_cv2
    )
    # built as a tuple of its items: a starred one (`(number, *steps)`) is built through a list
    k_steps = None if output_steps is None else output_steps.key  # rounded already
    key: tuple[object, ...] = (number, k_p, k_o, k_speed, k_cv2, k_service, k_spell, k_out, k_steps)
    got = _curves.get(key, _MISSING)
    if got is _MISSING:
        # made at the key's own values (tailsearch's way), never at the first mix to land in its
        # step: a cached curve is then a function of its key alone, so a decision does not depend on
        # which decisions the process made before it (or on which curves were evicted)
        q = _QUANTUM
        made = _curve(
            profile,
            slo,
            math.exp(k_p / q),
            math.exp(k_o / q),
            math.exp(k_speed / q),
            math.exp(k_cv2 / q),
            math.exp(k_service / q),
            math.exp(k_spell / q),
            math.exp(k_out / q),
            output_steps,
        )
        got = memo.remember(_curves, key, made, 1024)
    return key, got


def _curve(
    profile: ReplicaProfile,
    slo: SloTarget,
    p: float,
    o: float,
    speed: float,
    cv2: float,
    service_cv2: float,
    persist_s: float = 0.0,
    outputs_cv2: float = 1.0,
    output_steps: OutputSteps | None = None,
) -> Curve | None:
    if p < capacity.MIN_PROMPT_TOKENS:
        return None
    if o < 1.0:
        o = 1.0
    spell = persistence(slo, persist_s)
    both = late_at(profile, slo, p, o, speed, cv2, service_cv2, spell, outputs_cv2, output_steps)
    share = lengths.context_share(outputs_cv2)

    def late(x: float) -> float:
        ttft, tpot = both(x)
        return ttft + tpot if ttft + tpot < 1.0 else 1.0

    tail = 1.0 - slo.attainment
    # r: the rate a replica serves with the SLO's tail late (late rises with x)
    hi = 1.0 / (replicarates.work_per_request(profile, p, o, speed, share) + 1e-12)
    if late(hi * 1e-6) > tail:
        return None
    lo = 0.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if late(mid) <= tail:
            lo = mid
        else:
            hi = mid
    r = lo
    us: list[float] = []
    ttfts: list[float] = []
    tpots: list[float] = []
    for u in _POINTS:
        ttft, tpot = both(u * r) if u > 0.0 else (0.0, 0.0)
        us.append(u)
        ttfts.append(ttft)
        # the TPOT's misses among the requests in time for their first token (the two independent)
        tpots.append(tpot * (1.0 - ttft))
        if ttft >= 1.0:
            break
    ttfts[-1], tpots[-1] = 1.0, 0.0  # past the last point: all late (a window past the prefill's work)
    # a request's decode at C: its o steps at the mean step there (capacity's step at a count)
    base = profile.step_base_s / speed
    free = 1.0 - r * replicarates.work_per_request(profile, p, o, speed, share)
    decode_s = o * base / (free if free > 1e-3 else 1e-3)
    return (tuple(us), tuple(ttfts)), (tuple(us), tuple(tpots)), decode_s, spell, r


def late_at(
    profile: ReplicaProfile,
    slo: SloTarget,
    p: float,
    o: float,
    speed: float,
    cv2: float,
    service_cv2: float,
    spell_s: float | None = None,
    outputs_cv2: float = 1.0,
    output_steps: OutputSteps | None = None,
) -> Callable[[float], tuple[float, float]]:
    """late(x): the shares of requests over their TTFT target and over their TPOT target at x
    requests/s a replica, Poisson arrivals, at this mix (the module's two tails, capacity.size's own),
    x persisting over `spell_s` seconds (spell_wait; None: the TTFT target's), the outputs' cv²
    `outputs_cv2` in the context a decode reads and their decode steps `output_steps` (None: geometric)."""
    spell = slo.ttft_s if spell_s is None else spell_s
    base = profile.step_base_s / speed
    a = replicarates.prefill_token_s(profile, p) / speed
    d = replicarates.decode_token_s(profile, p, o, lengths.context_share(outputs_cv2)) / speed
    w = a * p + d * o
    budget = profile.max_batched_tokens
    has_budget = budget is not None
    tokens = 0.0 if budget is None else float(budget)
    unit = tpottail.units(cv2)
    tail = 1.0 - slo.attainment

    def late(x: float) -> tuple[float, float]:
        rho = x * w
        if rho >= 1.0 and not has_budget:
            return 1.0, 1.0
        rate = replicarates.prefill_rate_of(profile, x, o, base, w, a, d)
        service = p / rate
        v = x * service
        # the mean step, never above a step full of the token budget: past the replica's work
        # (rho >= 1) the decodes hold up to half the budget and the prompts queue at the rest
        # (tpottail.prefill_rate)
        step = base / (1.0 - rho) if rho < 1.0 else math.inf
        if has_budget:
            carried = 0.0 if profile.prefill_first else replicarates.decodes_carried(x, o, base, rho, tokens)
            step = min(step, base + a * (tokens - carried) + d * carried)
        slack = slo.ttft_s - service - step
        if slo.ttft_tokens_per_s is not None:
            slack += p / slo.ttft_tokens_per_s
        ttft = _spell_wait(v, service, service_cv2, slack, spell)
        tpot = 0.0
        if slo.tpot_s is not None:
            tpot = tpottail.miss(
                base,
                a,
                d,
                w,
                has_budget,
                tokens,
                profile.prefill_first,
                float(profile.max_num_seqs),
                slo.tpot_s,
                tail,
                p,
                o,
                2.0,
                unit,
                x,
                output_steps,
            )
        return (ttft if ttft < 1.0 else 1.0), (tpot if tpot < 1.0 else 1.0)

    return late


SpellKernel = Callable[[float, float, float, float, float], float]
_spell_wait: SpellKernel = spell_wait  # late_at's, replaced by a compiled copy in the replay (use)


def use(kernel: SpellKernel | None) -> None:
    """A curve's TTFT shares by `kernel`, a compiled copy of spell_wait giving its bits (None:
    spell_wait): a curve reads ~100 of them, each the mean of 16 window_wait."""
    global _spell_wait
    _spell_wait = spell_wait if kernel is None else kernel
