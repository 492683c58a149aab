"""Capacity in tokens: what one replica serves at the SLO, and how many replicas a demand needs.

Sits under the predictive stages (decide.py -> planner.py): the demand stage says how many
requests, prompt tokens and output tokens arrive per second; this module turns that into
replicas with the replica's step-time model (capacityspec.ReplicaProfile) and the SLO
(capacityspec.SloTarget).
Pure arithmetic on floats; docs/policy.md ("Capacity") derives every formula.

The model of one replica that receives x requests/s of p prompt and o output tokens each:

  work      every request costs w = a·p + d·o GPU-seconds beyond the steps' fixed part, with a the
            prefill cost per token and d = b + c·L the decode cost per token (b per request in the
            step, c per context token read, L the mean context a decode step reads: p + E[o²]/2E[o]
            = p + o·(1 + cv²)/2 at the outputs' cv² (the engines' output-length histograms), p + o
            for outputs geometric around their mean without one, CONTEXT_OUTPUT_SHARE);
  step      in the steady state a step of length s holds x·p·s prefill tokens and x·o·s decodes
            (Little's law), so s = base + x·w·s, i.e. s = base / (1 - ρ) with ρ = x·w;
  TPOT      = s (one token per running request per step): s <= tpot  <=>  ρ <= 1 - base / tpot;
            and per request (tailsearch.tpot_rate, tpottail.py): few decode steps that carry prompt chunks,
            the outputs' steps from the engines' output-length histograms where they publish them
            (outputsteps.py), else geometric around o;
  batch     B = x·o·s running requests, at most max_num_seqs and what the KV holds (kv_requests:
            B contexts whose sum fluctuates, kept under kv_cache_tokens but at the tail whose
            expected overflow, priced by its recompute, fits the SLO's: kv_z);
  TTFT      prefill is FIFO within a replica, and the router (a Service's random or round-robin
            choice, or the least requests in flight, which running decodes dominate) does not see
            the prefill work queued on a replica: each replica's prefill is its own M/G/1 queue
            fed x = λ/n requests/s, served at P tokens/s (1/a, or with a token budget the chunk
            left after the decodes per full step), E[S] = p / P, utilization u = x·E[S]. Its wait
            tail is u·exp(-(1 - u)·t / (E[S]·(1 + cs²)/2)) (exact for M/M/1; the heavy-traffic
            decay rate of M/G/1 for service times of squared coefficient of variation cs²: from
            the prompt lengths' spread where engines publish it, lengths.py, else 1). A request
            meets its TTFT when its wait fits the slack left after its own prefill and first
            step; the count is the least n whose tail at that slack is at most 1 - attainment.
            At light load on prompts spread wider than the exponential a wait is one long prompt's
            residual instead, u·P(R > slack) with R the prefill's residual (lengths.residual_share;
            tests/replay/test_light_traffic_wait_vs_replay.py), where that is larger; its share
            from the engines' prefill-time histograms where they show a fatter tail (prefilltail.py). A pooled
            M/G/n queue (Erlang C) under-sized long prompts by 2-5 replicas (3 req/s of 8,000
            tokens: 4 where the replay needs 9; tests/replay/test_capacity_vs_replay.py). A
            least-requests router pools the prefills part of the way, further the more replicas
            there are: leastloaded.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final, final

from autoscaler.policy import idlemiss, leastloaded, lengths, prefilltail, tailsearch, tpottail
from autoscaler.policy.capacityspec import ReplicaProfile, SloTarget
from autoscaler.policy.kvceiling import kv_requests, kv_z
from autoscaler.policy.outputsteps import OutputSteps
from autoscaler.policy.prefilltail import PrefillTail
from autoscaler.policy.record import Record
from autoscaler.policy.replicarates import (
    MAX_UTILIZATION,
    decode_rate,
    decode_rate_of,
    prefill_rate,
    prefill_rate_of,
)

MIN_RATE = 1e-6  # requests/s below which a target is idle
MIN_PROMPT_TOKENS = idlemiss.MIN_PROMPT_TOKENS
SERVICE_CV2: Final = 1.0  # squared coefficient of variation of prefill times the TTFT tail assumes when
# no engine publishes prompt lengths (lengths.py; docs/policy.md, "How accurate the capacity model is")
CONTEXT_OUTPUT_SHARE = tpottail.CONTEXT_OUTPUT_SHARE  # p + this x o: the mean context a decode reads
MIN_UTILIZATION = 0.05  # a TPOT target below one step at batch 1 cannot be met: plan replicas this light
MOST_REPLICAS = 1e15  # a count past any fleet: the light-traffic count's ratio is held under it
MIN_SLACK_SHARE = 0.25  # when the mean request cannot meet its TTFT even idle, plan as if it may
# wait this share of its own prefill: more replicas would not make it meet the target
# On the sizing's path the min and max of two values are conditionals that return what the builtin
# would (a builtin call costs ~4x the comparison; a sizer made ~13 a tick).


@final
class Demand(Record):
    """Exogenous demand on the whole target, per second. A Record, not a NamedTuple: a tick builds
    ~9 (record.py: a C struct set in place, where tuple.__new__ built an argument tuple first)."""

    FIELDS = ("requests", "prompt_tokens", "output_tokens")

    requests: float
    prompt_tokens: float
    output_tokens: float

    def __init__(self, requests: float, prompt_tokens: float, output_tokens: float) -> None:
        self.requests = requests
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens

    def scaled(self, factor: float) -> Demand:
        return Demand(self.requests * factor, self.prompt_tokens * factor, self.output_tokens * factor)


@final
class Sizing(Record):
    """The replicas a demand needs and what each one serves at the SLO (at this demand's mix)."""

    FIELDS = (
        "replicas",
        "binding",
        "prefill_tokens_per_s",
        "decode_tokens_per_s",
        "requests_per_s",
        "utilization",
    )

    replicas: int
    binding: str  # the constraint that set the count: ttft, tpot, batch, kv or idle
    prefill_tokens_per_s: float  # one replica's prefill rate while prompts queue
    decode_tokens_per_s: float  # one replica's decode throughput at the TPOT target
    requests_per_s: float  # one replica's share of the demand at `replicas` (0 when idle)
    utilization: float  # ρ of one replica at `replicas`

    def __init__(
        self,
        replicas: int,
        binding: str,
        prefill_tokens_per_s: float,
        decode_tokens_per_s: float,
        requests_per_s: float,
        utilization: float,
    ) -> None:
        self.replicas = replicas
        self.binding = binding
        self.prefill_tokens_per_s = prefill_tokens_per_s
        self.decode_tokens_per_s = decode_tokens_per_s
        self.requests_per_s = requests_per_s
        self.utilization = utilization


def size(
    profile: ReplicaProfile,
    slo: SloTarget,
    demand: Demand,
    speed: float = 1.0,
    limit: int = 1_000_000,
    *,
    arrival_cv2: float = 1.0,
    service_cv2: float = SERVICE_CV2,
    lengths_cv2: float = 1.0,
    outputs_cv2: float = 1.0,
    least_loaded: bool = False,
    arrivals_index: float = 1.0,
    prefill_burst: float = 1.0,
    prefill_tail: PrefillTail | None = None,
    output_steps: OutputSteps | None = None,
) -> Sizing:
    """The least replica count (at most `limit`) that serves `demand` within the SLO.

    `speed` scales the profile's times (2.0: steps take half as long), as learned online.
    `arrival_cv2` is the arrivals' squared coefficient of variation (1: Poisson) and `service_cv2`
    the prefill times' (the TTFT tail's decay takes both, as Kingman's G/G/1 heavy-traffic one,
    (ca² + cs²) / 2); `lengths_cv2` the prompt lengths' (the prompts too long for the TTFT even on
    an idle replica, and the chunks the TPOT tail's short requests meet); lengths.py derives the
    second from the third where an engine publishes the lengths. `outputs_cv2` the output lengths'
    (the context a running request holds, p + o·(1 + cv²)/2, in the KV and the decode step's
    reads; 1, the geometric, without a histogram). `least_loaded`: the router sends
    each request to the replica with the fewest in flight (capacityspec.Router.LEAST_REQUESTS;
    leastloaded.py), else at random; `arrivals_index` is then the arrivals' index of dispersion
    over the TTFT target (burstsize.py's), which spreads the requests in flight as it spreads the
    counts. `prefill_burst`: the prompts queue at this multiple of the demand's rate, the decodes
    in flight at the demand's own (a burst shorter than the requests last, burstsize.py's hold).
    `prefill_tail` and `output_steps`: the prefill times' far tail and the outputs' decode steps,
    from the engines' histograms where they publish them (prefilltail.py, outputsteps.py).
    """
    at = sizer(
        profile,
        slo,
        demand,
        speed,
        limit,
        service_cv2=service_cv2,
        lengths_cv2=lengths_cv2,
        outputs_cv2=outputs_cv2,
        least_loaded=least_loaded,
        arrivals_index=arrivals_index,
        prefill_burst=prefill_burst,
        prefill_tail=prefill_tail,
        output_steps=output_steps,
    )
    return at(arrival_cv2)


def sizer(
    profile: ReplicaProfile,
    slo: SloTarget,
    demand: Demand,
    speed: float = 1.0,
    limit: int = 1_000_000,
    *,
    service_cv2: float = SERVICE_CV2,
    lengths_cv2: float = 1.0,
    outputs_cv2: float = 1.0,
    least_loaded: bool = False,
    arrivals_index: float = 1.0,
    prefill_burst: float = 1.0,
    prefill_tail: PrefillTail | None = None,
    output_steps: OutputSteps | None = None,
) -> Callable[[float], Sizing]:
    """size() as a function of arrival_cv2 (burstsize.py sizes one demand at several): what does
    not depend on it (the decode bound, the TPOT tail and its idle misses, the TTFT search's terms
    at the decode bound's count) worked out once, in the same operations, so the same floats."""
    lam = demand.requests
    if lam < MIN_RATE:
        idle = _idle(profile, slo, speed)
        return lambda arrival_cv2: idle
    p = demand.prompt_tokens / lam
    o = demand.output_tokens / lam
    if o < 1.0:  # every request produces at least its first token
        o = 1.0
    base = profile.step_base_s / speed
    # the per-token costs, once (work_per_request, prefill_rate and decode_rate in one place)
    a_token = profile.prefill_s_per_token + profile.prefill_s_per_attention_pair * 0.5 * (p + 1.0)
    share = lengths.context_share(outputs_cv2)  # CONTEXT_OUTPUT_SHARE at cv² 1
    context = p + share * o
    d_token = profile.decode_s_per_request + profile.decode_s_per_context_token * context
    w = (a_token * p + d_token * o) / speed
    a = a_token / speed
    d = d_token / speed
    # decode: utilization at the TPOT target, and the batch and KV ceilings as a rate per replica
    rho_tpot = MAX_UTILIZATION if slo.tpot_s is None else 1.0 - base / slo.tpot_s
    if rho_tpot > MAX_UTILIZATION:
        rho_tpot = MAX_UTILIZATION
    binding = "tpot"
    if rho_tpot < MIN_UTILIZATION:  # the target is below one step even at batch 1: keep replicas light
        rho_tpot = MIN_UTILIZATION
    n = lam * w / rho_tpot
    seqs = float(profile.max_num_seqs)
    if profile.kv_cache_tokens is not None:
        kv_tokens = profile.kv_cache_tokens
        # the prompts' variance and the decoded tokens' age's (o² at cv² 1: the geometric's exponential age)
        spread = lengths_cv2 * p * p + lengths.age_variance(outputs_cv2) * o * o
        # a preempted context's recompute: its prefill, attention over its own length, in steps at the target
        redo = profile.prefill_s_per_token + profile.prefill_s_per_attention_pair * 0.5 * (context + 1.0)
        redo_steps = redo * context / speed * (1.0 - rho_tpot) / base
        z = kv_z(1.0 - slo.attainment, spread, context, kv_tokens, redo_steps)
        kv = kv_requests(kv_tokens, context, spread, z)
        if kv < seqs:
            seqs = kv
    # B = x·o·base / (1 - x·w) reaches `seqs` at x = seqs / (o·base + seqs·w)
    batch_n = lam * (o * base + seqs * w) / seqs
    if batch_n > n:
        n = batch_n
        binding = "batch" if seqs == profile.max_num_seqs else "kv"
    decode = decode_rate_of(profile, slo, base, d, seqs)
    load = lam * w
    if p < MIN_PROMPT_TOKENS:
        replicas = min(max(1, math.ceil(n - 1e-9)), limit)
        rate = prefill_rate_of(profile, lam / replicas, o, base, w, a, d)
        fixed = Sizing(replicas, binding, rate, decode, lam / replicas, load / replicas)
        return lambda arrival_cv2: fixed
    tail = 1.0 - slo.attainment
    beta = profile.prefill_s_per_attention_pair * 0.5 / speed
    ttft_s = slo.ttft_s
    ttft_tokens = slo.ttft_tokens_per_s
    # the requests that miss their TTFT even on an idle replica: no fleet serves them in time
    idle_rate = prefill_rate_of(profile, 0.0, o, base, w, a, d)
    idle_misses = idlemiss.misses_at(p, idle_rate, beta, ttft_s - base, ttft_tokens, lengths_cv2)
    # the prefills the engines measured past the target itself are missed at any count as well
    measured = prefilltail.missed(prefill_tail, ttft_s, ttft_tokens)
    if measured > idle_misses:
        idle_misses = measured
    if slo.tpot_s is not None:  # the short outputs whose steps carry prompt chunks
        # as many may miss their TPOT as miss their TTFT on an idle replica, and at least the tail
        tpot_tail = idle_misses if idle_misses > tail else tail
        tpot_n = lam / tailsearch.tpot_rate(
            profile, slo.tpot_s, tpot_tail, p, o, speed, lengths_cv2, outputs_cv2, output_steps
        )
        if tpot_n > n:
            n, binding = tpot_n, "tpot"
    first = math.ceil(n - 1e-9)
    if first < 1:
        first = 1

    # prompts spread wider than the exponential: the residual's tail is fatter than the heavy-traffic
    # decay at light load (at cv² 1 it never is, and the sizing is as before)
    spread_lengths = lengths_cv2 > 1.0

    def terms(replicas: int) -> tuple[float, float, float, float, float]:
        """The TTFT search's terms at a count: the prefill rate, the offered load, the slack in
        mean prefills times 2 (the tail's decay divides it by ca² + cs²), the wait budget and the
        share of a prefill's residual past the slack (the light-traffic tail; 0 at cv² <= 1)."""
        rate = prefill_rate_of(profile, lam / replicas, o, base, w, a, d)
        service = p / rate
        free = 1.0 - load / replicas
        step = base / (1e-3 if free < 1e-3 else free)
        slack = ttft_s - service - step
        if ttft_tokens is not None:
            slack += p / ttft_tokens
        if slack < MIN_SLACK_SHARE * service:
            slack = MIN_SLACK_SHARE * service
        budget = idlemiss.wait_budget(
            tail, p, rate, beta, ttft_s - step, ttft_tokens, lengths_cv2, idle_misses, measured
        )
        if least_loaded and budget > tail:  # a tail that falls as the replay's: the waits keep at most it
            budget = tail
        slack2 = slack / service * 2.0
        residual = 0.0
        if spread_lengths:  # at light load a wait is one long prompt's residual: u·P(R > slack)
            residual = lengths.residual_share(slack, p, 1.0 / rate - beta * p, beta, lengths_cv2)
        if prefill_tail is not None:  # the holds the engines measured, where past the gamma's
            held = prefilltail.excess_s(prefill_tail, slack) / service
            if held > residual:
                residual = held
        return rate, lam * service * prefill_burst, slack2, budget, residual

    first_terms = terms(first)
    decoding = lam * o * base  # leastloaded.servers' terms
    departing = leastloaded.departing(lam, base, p, profile.max_batched_tokens) if least_loaded else 0.0

    def asks(t: tuple[float, float, float, float, float], arrival_cv2: float) -> int:
        """The count a count's terms `t` ask for: the least whose TTFT tail fits at those terms."""
        _, offered, slack2, budget, residual = t
        slack_services = slack2 / (arrival_cv2 + service_cv2)
        ttft_n = tailsearch.ttft_servers(offered, slack_services, budget)  # the random router's count
        if residual > 0.0 and budget > 0.0:  # u·P(R > slack) within the budget
            # (a subnormal budget, idle misses of ~1e-315, overflows the ratio: no count is that large)
            light = math.ceil(min(offered * residual / budget, MOST_REPLICAS) - 1e-9)
            if light > ttft_n:
                ttft_n = light
        if least_loaded:
            ttft_n = leastloaded.servers(
                offered,
                slack_services,
                budget,
                decoding,
                load,
                arrivals_index,
                ttft_n,
                service_cv2,
                departing,
                residual,
            )
        return ttft_n

    def at(arrival_cv2: float) -> Sizing:
        # prefill: the least count whose TTFT tail fits at its own terms, from the decode bound up.
        # The prefill rate and the step depend on the count, so what a count's terms ask for falls
        # as the count rises: the least count asking no more than itself is bisected between the
        # decode bound and what the decode bound's terms ask for (taking that ask itself, as the
        # search did before, made a larger demand, whose decode bound is higher and its terms
        # lighter, come out with fewer replicas: tests/test_capacity.py's monotonicity)
        replicas, bound = first, binding
        t = first_terms
        rate_at = first
        ask = asks(t, arrival_cv2)
        if ask > first:
            bound = "ttft"
            t = terms(ask)
            rate_at = ask
            again = asks(t, arrival_cv2)
            if again > ask:  # not met at its own terms either: one more step, as before
                replicas = again
            else:
                lo, hi = first, ask  # lo asks for more than itself, hi not
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    mid_terms = terms(mid)
                    if asks(mid_terms, arrival_cv2) <= mid:
                        hi, t, rate_at = mid, mid_terms, mid
                    else:
                        lo = mid
                replicas = hi
        if limit < replicas:
            replicas = limit
        rate = t[0] if rate_at == replicas else prefill_rate_of(profile, lam / replicas, o, base, w, a, d)
        return Sizing(replicas, bound, rate, decode, lam / replicas, load / replicas)

    return at


def _idle(profile: ReplicaProfile, slo: SloTarget, speed: float) -> Sizing:
    base = profile.step_base_s / speed
    seqs = float(profile.max_num_seqs)
    rate = prefill_rate(profile, 0.0, 1.0, 1.0, base, 0.0, speed)
    decode = decode_rate(profile, slo, base, 1.0, 1.0, speed, seqs)
    return Sizing(0, "idle", rate, decode, 0.0, 0.0)
