"""Per-replica throughput at the SLO, from the scenario's engine step model: the replay's stand-in
for Dynamo's pre-deployment profile (its profiler sweeps a real engine; the planner interpolates
the sweep), computed in closed form from the same step model the replay's engine runs
(replay/profiles.py EngineProfile: step = base + prefill tokens x a + attention pairs x b +
decoding requests x c + context tokens x d).

- Prefill (Dynamo's prefill interpolator: tokens per second of one prompt of `isl` tokens, run
  alone): isl / prefill_alone_s(isl).
- Decode (Dynamo's `find_best_throughput_per_gpu(itl, context_length)`: the highest decode
  throughput whose inter-token latency meets the ITL target at that context): the largest batch
  b with decode_step_s(b, context) <= tpot target, at most max_num_seqs and what the KV cache
  holds at that context; throughput b / step. b solves base + b (c + d context) <= tpot; when
  even b = 1 misses the target, b = 1 (the profile's slowest point).
"""

from __future__ import annotations

import math

from replay.profiles import EngineProfile


def prefill_tokens_per_s(engine: EngineProfile, isl: float) -> float:
    isl = max(1.0, isl)
    return isl / float(engine.prefill_alone_s(isl))


def decode_batch(engine: EngineProfile, tpot_s: float | None, context: float) -> int:
    """The largest decode batch meeting the TPOT target at `context` tokens each (KV-bound)."""
    most = engine.kv_bound_batch(context)
    if tpot_s is None:
        return most
    per_request = engine.decode_request_s + engine.decode_context_s * context
    if per_request <= 0:
        return most
    fits = math.floor((tpot_s - engine.step_base_s) / per_request + 1e-9)
    return max(1, min(most, fits))


def decode_tokens_per_s(engine: EngineProfile, tpot_s: float | None, context: float) -> float:
    b = decode_batch(engine, tpot_s, context)
    return b / engine.decode_step_s(b, context)
