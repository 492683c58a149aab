"""One replica's costs and rates by the step-time model (capacityspec.ReplicaProfile): a prompt
token's prefill cost and an output token's decode cost, the GPU-seconds a request costs, the
prompt tokens/s a replica prefills while prompts queue, and the output tokens/s it decodes at the
TPOT target. capacity.py sizes fleets from them; latecurve.py, speedlearn.py and the replay read
them too. docs/policy.md ("Capacity") derives each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from autoscaler.policy.capacityspec import ReplicaProfile, SloTarget
from autoscaler.policy.tpottail import CONTEXT_OUTPUT_SHARE

MAX_UTILIZATION: Final = 0.95  # without a TPOT target: steps grow as base / (1 - ρ), 20x at 0.95


@dataclass(frozen=True, slots=True)
class Engine:
    """The profile's step-time fields the idle misses read each tick, copied once per capacity spec
    (capacityfacts.facts) into a compiled class: the profile stays a Python dataclass (compiledcore.py),
    each field of which a compiled module reads by a generic getattr (~100 instructions with the
    float's unboxing, eight a call), a compiled class's as a C field."""

    step_base_s: float
    prefill_s_per_token: float
    prefill_s_per_attention_pair: float
    decode_s_per_request: float
    decode_s_per_context_token: float
    max_batched_tokens: int | None
    prefill_first: bool


def engine(profile: ReplicaProfile) -> Engine:
    return Engine(
        profile.step_base_s,
        profile.prefill_s_per_token,
        profile.prefill_s_per_attention_pair,
        profile.decode_s_per_request,
        profile.decode_s_per_context_token,
        profile.max_batched_tokens,
        profile.prefill_first,
    )


def prefill_token_s(profile: ReplicaProfile, p: float) -> float:
    """One prompt token's prefill cost for prompts of p tokens: its own, and its attention over the
    tokens before it ((p + 1) / 2 of them on average; the mean prompt stands for all of them)."""
    return profile.prefill_s_per_token + profile.prefill_s_per_attention_pair * 0.5 * (p + 1.0)


def decode_token_s(profile: ReplicaProfile, p: float, o: float, share: float = CONTEXT_OUTPUT_SHARE) -> float:
    """One output token's decode cost: per request in the step, and reading the mean context
    (`share` of o in it: lengths.context_share at the outputs' cv², the geometric's 1 without)."""
    return profile.decode_s_per_request + profile.decode_s_per_context_token * (p + share * o)


def work_per_request(
    profile: ReplicaProfile, p: float, o: float, speed: float, share: float = CONTEXT_OUTPUT_SHARE
) -> float:
    """GPU-seconds one request costs beyond the steps' fixed part (a·p + d·o), at `speed`."""
    return (prefill_token_s(profile, p) * p + decode_token_s(profile, p, o, share) * o) / speed


def prefill_rate(
    profile: ReplicaProfile, x: float, p: float, o: float, base: float, w: float, speed: float
) -> float:
    """Prompt tokens/s of one replica while prompts queue, with the decodes it carries at x req/s:
    full steps of prompt chunks beside the decodes (vLLM V1), of prompt chunks alone (prefill-first
    engines, whose decodes wait), or whole prompts without a token budget."""
    a = prefill_token_s(profile, p) / speed
    return prefill_rate_of(profile, x, o, base, w, a, decode_token_s(profile, p, o) / speed)


def prefill_rate_of(
    profile: ReplicaProfile, x: float, o: float, base: float, w: float, a: float, d: float
) -> float:
    """prefill_rate with the per-token prefill (a) and decode (d) costs at this speed given."""
    return prefill_rate_at(x, o, base, w, a, d, profile.max_batched_tokens, profile.prefill_first)


def prefill_rate_at(
    x: float, o: float, base: float, w: float, a: float, d: float, budget: int | None, prefill_first: bool
) -> float:
    """prefill_rate_of with the profile's token budget and prefill_first given: tpottail.prefill_rate's
    arithmetic, which numba reads from tpottail's source, so that module stays Python and the
    compiled core called into the interpreter for it (~2,600 instructions a decision); repeated
    here, tests/test_sizer.py holds the two to the bit."""
    if budget is None:
        return 1.0 / a
    tokens = float(budget)
    if prefill_first:
        return tokens / (base + a * tokens)
    carried = decodes_carried(x, o, base, x * w, tokens)
    chunk = tokens - carried
    return chunk / (base + a * chunk + d * carried)


def decodes_carried(x: float, o: float, base: float, rho: float, tokens: float) -> float:
    """The decodes a full step of `tokens` carries beside the prompt chunks (vLLM V1) at x req/s of
    o-token outputs, utilization rho: the running requests of a step of base / (1 - rho), rho held
    at 0.95 at most, and at most half the budget."""
    carried = x * o * base / (1.0 - (0.95 if rho > 0.95 else rho))
    half = tokens * 0.5
    return half if half < carried else carried


def decode_rate(
    profile: ReplicaProfile, slo: SloTarget, base: float, p: float, o: float, speed: float, seqs: float
) -> float:
    """Output tokens/s of one replica that only decodes, at the largest batch whose step fits TPOT."""
    return decode_rate_of(profile, slo, base, decode_token_s(profile, p, o) / speed, seqs)


def decode_rate_of(profile: ReplicaProfile, slo: SloTarget, base: float, d: float, seqs: float) -> float:
    """decode_rate with the per-token decode cost at this speed (d) given."""
    room = (slo.tpot_s if slo.tpot_s is not None else base / (1.0 - MAX_UTILIZATION)) - base
    batch = room / d if d > 0.0 and room / d < seqs else seqs
    if batch < 1.0:
        batch = 1.0
    return batch / (base + d * batch)
