"""An engine profile fitted from an online run's measured latencies (`infscale replay calibrate --fit`).

The fit (`fit_profile`) finds the step-time coefficients (EngineProfile.step_s: base, per prefill
token, per attention pair, per decoding request, per context token) and a fixed per-request overhead
(HTTP, tokenization: added to TTFT and e2e) that make the offline engine reproduce every request's
measured TTFT and end-to-end latency. A latency is a sum of step times, linear in the coefficients
once the steps' compositions are fixed, so each iteration simulates the run exactly at the current
estimate (each request on the endpoint it was sent to), solves the linear least squares for the
coefficients (clipped at 0) and repeats until they move by < 0.1 %. A coefficient the run cannot
tell (no long prompts: the attention term; one context length: the context term) keeps the base
profile's value. The scheduler's limits (max_num_seqs, token budget, KV) are not identifiable from
latencies and keep the base's values. Fit from a run well below saturation: queueing inside a real
engine is where models differ most.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

from replay.online.records import RequestRecord, Status
from replay.profiles import EngineProfile, ProfileError
from replay.referencerun import reference_run

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


class FitError(ValueError):
    """Too little of the right data to fit a profile; the message says what to change."""


FIT_FIELDS = ("step_base_s", "prefill_token_s", "prefill_attention_s", "decode_request_s", "decode_context_s")


@dataclass(frozen=True, slots=True)
class Fit:
    profile: EngineProfile
    overhead_s: float  # fixed time per request outside the engine model (HTTP, tokenization)
    requests: int
    fitted: tuple[str, ...]  # the coefficients the run determined; the others kept the base's value
    rms_s: float  # residual of the per-request TTFT and e2e


def fit_profile(records: Sequence[RequestRecord], base: EngineProfile, iterations: int = 10) -> Fit:
    ok = [r for r in records if r.status is Status.OK and r.generated_tokens >= 1]
    if not ok:
        raise FitError("no successful request to fit from")
    ep = np.array([r.endpoint for r in ok])
    sent = np.array([r.sent_s for r in ok])
    first = np.array([r.first_token_s for r in ok])
    fin = np.array([r.finished_s for r in ok])
    gen = np.array([r.generated_tokens for r in ok], dtype=np.int64)
    inp = np.array([r.input_tokens for r in ok], dtype=np.int64)
    if int((gen >= 3).sum()) < 3:
        raise FitError(
            f"need >= 3 requests with >= 3 generated tokens for the decode fit, got {int((gen >= 3).sum())}"
        )
    idle = _idle_at_send(ep, sent, fin)
    if idle.sum() < 3:  # a run that never drains is one long queue: fit from a lighter one
        raise FitError(
            f"need >= 3 requests sent to an idle endpoint, got {int(idle.sum())}: replay at a lower "
            "rate (--speedup < 1 or --rate-scale < 1)"
        )
    order = np.argsort(sent, kind="stable")
    sent, first, fin, gen, inp, ep = sent[order], first[order], fin[order], gen[order], inp[order], ep[order]
    observed = np.concatenate((first - sent, fin - sent))
    profile = base
    theta = np.array([getattr(base, f) for f in FIT_FIELDS])
    overhead, live = 0.0, np.ones(len(FIT_FIELDS), dtype=bool)
    for _ in range(iterations):
        # every request's latencies as sums of the steps they spanned, with the step compositions of
        # a run at the current estimate: linear in the coefficients (the step time is)
        features = _latency_features(profile, sent, inp, gen, ep)
        design = np.column_stack((features, np.ones(len(observed))))
        norms = np.linalg.norm(design, axis=0)
        live = norms[:-1] > 1e-9 * norms[-1]
        keep = np.append(live, True)
        fixed = features[:, ~live] @ theta[~live]
        solution, *_ = np.linalg.lstsq(design[:, keep] / norms[keep], observed - fixed, rcond=None)
        solution = solution / norms[keep]
        new = theta.copy()
        new[live] = np.maximum(solution[:-1], 0.0)
        overhead = float(solution[-1])
        done = bool(np.allclose(new, theta, rtol=1e-3, atol=0))
        theta = new
        try:
            profile = _with(base, theta)
        except ProfileError as e:
            raise FitError(f"fitted values out of range: {e}") from e
        if done:
            break
    residual = _latency_features(profile, sent, inp, gen, ep) @ theta + overhead - observed
    fitted = tuple(f for f, keep in zip(FIT_FIELDS, live, strict=True) if keep)
    return Fit(profile, overhead, len(ok), fitted, float(np.sqrt(np.mean(residual**2))))


def _latency_features(profile: EngineProfile, sent: F64, inp: I64, gen: I64, ep: I64) -> F64:
    """Per request (TTFT rows, then e2e rows): the steps of its endpoint from its send to its first
    token (to its end), summed as (1, prefill tokens, attention pairs, decodes, context tokens); the
    step in progress when it arrived counts for the part of it the request waited."""
    steps: list[list[tuple[float, float, int, int, int, int]]] = [[] for _ in range(int(ep.max()) + 1)]
    run = reference_run(
        profile,
        (sent - sent[0]).tolist(),
        inp.tolist(),
        gen.tolist(),
        replicas=len(steps),
        targets=ep.tolist(),
        on_step=lambda k, s: steps[k].append(
            (s.start_s, s.end_s, s.prefill_tokens, s.attention_pairs, s.decode_requests, s.context_tokens)
        ),
    )
    arrival = sent - sent[0]
    out = np.zeros((2 * len(sent), len(FIT_FIELDS)))
    for k, rows in enumerate(steps):
        mine = np.flatnonzero(ep == k)
        if not rows or not len(mine):
            continue
        table = np.array(rows, dtype=np.float64)  # in time order
        start, end = table[:, 0], table[:, 1]
        feats = np.column_stack((np.ones(len(table)), table[:, 2:6]))
        cum = np.vstack((np.zeros(feats.shape[1]), np.cumsum(feats, axis=0)))
        lo = np.searchsorted(end, arrival[mine], side="right")  # the step in progress (or next)
        wait = np.clip((end[lo] - arrival[mine]) / (end[lo] - start[lo]), 0.0, 1.0)
        for offset, until in (
            (0, np.asarray(run.first_token_s)[mine]),
            (len(sent), np.asarray(run.finished_s)[mine]),
        ):
            hi = np.searchsorted(start, until, side="left")  # steps that started before it
            out[offset + mine] = cum[hi] - cum[lo + 1] + wait[:, None] * feats[lo]
    return out


def _idle_at_send(ep: F64, sent: F64, fin: F64) -> npt.NDArray[np.bool_]:
    """Requests sent while nothing else was in flight on their endpoint."""
    out = np.zeros(len(ep), dtype=bool)
    for i in range(len(ep)):
        same = ep == ep[i]
        others = int(np.count_nonzero((sent[same] <= sent[i]) & (fin[same] > sent[i]))) - 1
        out[i] = others == 0
    return out


def _with(base: EngineProfile, theta: F64) -> EngineProfile:
    values: dict[str, Any] = {f: float(v) for f, v in zip(FIT_FIELDS, theta, strict=True)}
    return replace(base, **values)


def fitted_yaml(fit: Fit, name: str) -> str:
    doc = {"base": "reference-70b", "name": name, "engine": asdict(fit.profile)}
    return (
        f"# fitted by `infscale replay calibrate --fit` from {fit.requests} requests "
        f"({', '.join(fit.fitted)}; the rest kept); fixed overhead {fit.overhead_s * 1000:.1f} ms "
        "per request is outside the engine model\n" + yaml.safe_dump(doc, sort_keys=False)
    )
