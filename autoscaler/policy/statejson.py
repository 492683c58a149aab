"""The JSON form of the predictive stages' memory (demand.DemandState, planstate.PlannerState).

The controller keeps it in the InferenceAutoscaler's status (status.policyState.planner), which a
user, another controller version or a corrupted etcd can change, so reading is strict: every number
finite and within the range the policy itself keeps it in, every list within the policy's own
history bound and in the order the policy keeps it (the scale-down and scoring loops rely on that
order: a need history out of order would index past its front). A malformed field raises
ValueError naming its path and value; the caller starts afresh.

Times go through a codec: seconds as numbers by default; the controller writes RFC 3339 with
nanoseconds (controller/crd.py), as the rest of its status.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from autoscaler.policy.band import MAX_ERROR, MAX_HEIGHT, MAX_SCORED
from autoscaler.policy.capacity import Demand
from autoscaler.policy.demand import MAX_PENDING, DemandState, Series
from autoscaler.policy.lasting import Lasting
from autoscaler.policy.levelbins import BINS, MAX_RATIO, Heights, Relative
from autoscaler.policy.mix import Mix

DEMAND_VERSION = 2  # 1 (positional lists) was never persisted by a release: it is refused
# Rates, loads, trends and levels of a real fleet are far inside 1e15 (tokens/s of a whole
# cluster are ~1e8); a larger one is a corrupted state whose arithmetic could overflow to inf.
MAX_MAGNITUDE = 1e15
# pending forecasts: at most MAX_PENDING (band.track drops the oldest); their peaks one more
MAX_PENDING_ENTRIES = MAX_PENDING
MAX_PEAK_ENTRIES = MAX_PENDING + 1

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlist = 4
_repr.maxdict = 4


class TimeCodec(NamedTuple):
    """How times are written (`encode`) and read back (`decode`: ValueError when not a time)."""

    encode: Callable[[float], Any]
    decode: Callable[[Any], float]


def _finite_in(value: Any, low: float, high: float) -> bool:
    """A JSON number (not a bool), finite, in [low, high]."""
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and low <= value <= high
    )


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError("expected a finite time in seconds")
    return float(value)


SECONDS = TimeCodec(float, _seconds)


class Reader:
    """Reads one mapping of a state, each error naming `path.key` and the value found."""

    def __init__(self, data: Any, path: str, codec: TimeCodec) -> None:
        if not isinstance(data, Mapping):
            raise ValueError(f"{path}: expected an object, got {_repr.repr(data)}")
        self.data, self.path, self.codec = data, path, codec

    def fail(self, key: str, what: str, value: Any) -> ValueError:
        return ValueError(f"{self.path}.{key}: {what}, got {_repr.repr(value)}")

    def raw(self, key: str, default: Any = ...) -> Any:
        if key not in self.data:
            if default is ...:
                raise ValueError(f"{self.path}.{key}: missing")
            return default
        return self.data[key]

    def number(self, key: str, *, low: float = -MAX_MAGNITUDE, high: float = MAX_MAGNITUDE) -> float:
        value = self.raw(key)
        if not _finite_in(value, low, high):
            raise self.fail(key, f"expected a finite number in [{low:g}, {high:g}]", value)
        return float(value)

    def integer(self, key: str, *, low: int = 0, high: int = 2**31 - 1, default: Any = ...) -> int:
        value = self.raw(key, default)
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # a JSON decoder may give 3.0 for 3
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.fail(key, f"expected an integer in [{low}, {high}]", value)
        return value

    def boolean(self, key: str) -> bool:
        value = self.raw(key)
        if not isinstance(value, bool):
            raise self.fail(key, "expected true or false", value)
        return value

    def time(self, key: str, *, nullable: bool = False) -> float | None:
        value = self.raw(key, None if nullable else ...)
        if value is None and nullable:
            return None
        try:
            return self.codec.decode(value)
        except ValueError as exc:
            raise self.fail(key, f"expected a time ({exc})", value) from None

    def moment(self, key: str) -> float:
        t = self.time(key)
        assert t is not None
        return t

    def items(self, key: str, most: int, default: Any = ...) -> list[Reader]:
        """A list of objects, at most `most` long (longer is refused: never read a hostile list)."""
        value = self.raw(key, default)
        if not isinstance(value, list) or len(value) > most:
            raise self.fail(key, f"expected a list of at most {most}", value)
        return [Reader(v, f"{self.path}.{key}[{i}]", self.codec) for i, v in enumerate(value)]

    def numbers(self, key: str, most: int, *, low: float, high: float, default: Any = ...) -> list[float]:
        value = self.raw(key, default)
        if not isinstance(value, list) or len(value) > most:
            raise self.fail(key, f"expected a list of at most {most}", value)
        out = []
        for i, v in enumerate(value):
            if not _finite_in(v, low, high):
                raise self.fail(f"{key}[{i}]", f"expected a finite number in [{low:g}, {high:g}]", v)
            out.append(float(v))
        return out

    def child(self, key: str) -> Reader:
        return Reader(self.raw(key), f"{self.path}.{key}", self.codec)


def _series(s: Series) -> dict[str, float]:
    return {"level": s.level, "trend": s.trend}


def _read_series(r: Reader) -> Series:
    return Series(r.number("level"), r.number("trend"))


def _read_mix(r: Reader) -> Mix:
    if "mix" in r.data:
        m = r.child("mix")
        return Mix(
            m.number("requests", low=0.0),
            m.number("promptPerRequest", low=0.0),
            m.number("outputPerRequest", low=0.0),
            # a state before the prompt lengths' spread (2026-12-03): none read, the fallback
            m.number("promptSquaredPerRequest", low=0.0) if "promptSquaredPerRequest" in m.data else 0.0,
            # a state before the spread's own window (session 22): the mix's
            m.number("spreadRequests", low=0.0)
            if "spreadRequests" in m.data
            else m.number("requests", low=0.0),
            m.number("spreadPromptPerRequest", low=0.0)
            if "spreadPromptPerRequest" in m.data
            else m.number("promptPerRequest", low=0.0),
            # a state before the outputs' spread (session 27): none read, the geometric fallback
            m.number("outputSquaredPerRequest", low=0.0) if "outputSquaredPerRequest" in m.data else 0.0,
            m.number("spreadOutputPerRequest", low=0.0)
            if "spreadOutputPerRequest" in m.data
            else m.number("outputPerRequest", low=0.0),
        )
    # an older state: smoothed rates (finished/s, prompt and generated tokens/s), whose ratios were
    # the mix; it weighs no requests, so the next tick's counts replace it
    finished, prompt, generated = r.number("finished"), r.number("prompt"), r.number("generated")
    if finished <= 0.0:
        return Mix(0.0, 0.0, 0.0)
    p = _ratio(prompt, finished)
    return Mix(0.0, p, _ratio(generated, finished), spread_prompt=p)


def _ratio(tokens: float, requests: float) -> float:
    """tokens / requests (requests > 0) within [0, MAX_MAGNITUDE]: a tiny rate does not overflow."""
    r = tokens / requests
    return 0.0 if r < 0.0 else min(r, MAX_MAGNITUDE)


def demand_to_dict(state: DemandState, codec: TimeCodec = SECONDS) -> dict[str, Any]:
    t = codec.encode
    return {
        "version": DEMAND_VERSION,
        "at": t(state.at),
        "inflight": state.inflight,
        "mix": {
            "requests": state.mix.requests,
            "promptPerRequest": state.mix.prompt,
            "outputPerRequest": state.mix.output,
            "promptSquaredPerRequest": state.mix.prompt_sq,
            "spreadRequests": state.mix.spread_requests,
            "spreadPromptPerRequest": state.mix.spread_prompt,
            "outputSquaredPerRequest": state.mix.output_sq,
            "spreadOutputPerRequest": state.mix.spread_output,
        },
        "requests": _series(state.requests),
        "primed": state.primed,
        "pending": [
            {"madeAt": t(m), "dueAt": t(d), "load": load, "bin": b} for m, d, load, b in state.pending
        ],
        "errorQuantile": state.error_quantile,
        "errorScale": state.error_scale,
        "scored": state.scored,
        "typical": {
            "requests": state.typical.requests,
            "promptTokens": state.typical.prompt_tokens,
            "outputTokens": state.typical.output_tokens,
        },
        "peaks": [{"at": t(at), "load": load} for at, load in state.peaks],
        "typicalPeak": state.typical_peak,
        "bins": [{"scale": scale, "scored": n} for scale, n in state.bins],
        "relative": {
            "quantile": state.relative.quantile,
            "scale": state.relative.scale,
            "scored": state.relative.scored,
        },
        "spread": {"excessPerSecond": state.spread[0], "count": state.spread[1]},
        **({} if state.counted is None else {"counted": _series(state.counted)}),
        "lasting": {
            "timeInSystemS": state.lasting.time_s,
            "rate": state.lasting.rate,
            "excess": state.lasting.excess,
        },
        "heights": {
            "quantile": state.heights.quantile,
            "scale": state.heights.scale,
            "scored": state.heights.scored,
            "mean": state.heights.mean,
            "variance": state.heights.variance,
            "lean": state.heights.lean,
        },
    }


def demand_from_dict(data: Any, codec: TimeCodec = SECONDS, path: str = "demand") -> DemandState:
    """demand_to_dict's output back. Beyond each field's type and range, the order the scoring
    relies on (band.track): pending forecasts by the time they were made, each made no later than
    it is due; the peaks by time with loads falling."""
    r = Reader(data, path, codec)
    version = r.raw("version", None)
    if version != DEMAND_VERSION:
        raise r.fail("version", f"expected {DEMAND_VERSION}", version)
    at = r.moment("at")
    pending: list[tuple[float, float, float, int]] = []
    for p in r.items("pending", MAX_PENDING_ENTRIES):
        made, due = p.moment("madeAt"), p.moment("dueAt")
        if not made <= due or (pending and made < pending[-1][0]):
            raise p.fail("madeAt", "expected the forecasts in order, each made before it is due", made)
        # load -1: scored early (band.track); bin -1: an older state's forecast, made before the
        # bins, scored into the pooled band alone
        pending.append((made, due, p.number("load"), p.integer("bin", low=-1, high=BINS - 1, default=-1)))
    # an older state has no bins: the pooled band until they have scored errors of their own
    bins = tuple(
        (b.number("scale", low=0.0, high=MAX_ERROR), b.number("scored", low=0.0, high=MAX_SCORED))
        for b in r.items("bins", BINS, default=[])
    )
    rel = r.child("relative") if "relative" in r.data else None
    relative = (
        Relative()
        if rel is None
        else Relative(
            # the ratios are clipped to ±MAX_RATIO; the quantile steps past them by less than one
            rel.number("quantile", low=-2 * MAX_RATIO, high=2 * MAX_RATIO),
            rel.number("scale", low=0.0, high=MAX_RATIO),
            rel.number("scored", low=0.0, high=MAX_SCORED),
        )
    )
    peaks: list[tuple[float, float]] = []
    for p in r.items("peaks", MAX_PEAK_ENTRIES):
        when, load = p.moment("at"), p.number("load")
        if peaks and (when < peaks[-1][0] or load >= peaks[-1][1]):
            raise p.fail("at", "expected the peaks in time order with loads falling", when)
        peaks.append((when, load))
    typical = r.child("typical")
    sp = r.child("spread") if "spread" in r.data else None  # an older state: none counted (Poisson)
    spread = (0.0, 0.0) if sp is None else (sp.number("excessPerSecond"), sp.number("count", low=0.0))
    la = r.child("lasting") if "lasting" in r.data else None  # an older state: none read yet
    lasting = (
        Lasting()
        if la is None
        else Lasting(la.number("timeInSystemS", low=0.0), la.number("rate"), la.number("excess"))
    )
    he = r.child("heights") if "heights" in r.data else None  # an older state: none scored (log space)
    heights = (
        Heights()
        if he is None
        else Heights(
            # the heights are clipped to ±MAX_HEIGHT; the quantile steps past them by less than its
            # bound, and the lean is a mean of quantile losses between bands within them
            he.number("quantile", low=-2 * MAX_HEIGHT, high=2 * MAX_HEIGHT),
            he.number("scale", low=0.0, high=MAX_HEIGHT),
            he.number("scored", low=0.0, high=MAX_SCORED),
            he.number("mean"),
            he.number("variance", low=0.0),
            he.number("lean"),
        )
    )
    return DemandState(
        at,
        r.number("inflight"),  # as the readings came: no sign assumed of an engine's figures
        _read_mix(r),
        _read_series(r.child("requests")),
        r.boolean("primed"),
        tuple(pending),
        # the scored errors are clipped to ±MAX_ERROR; the quantile steps past them by less than one
        r.number("errorQuantile", low=-2 * MAX_ERROR, high=2 * MAX_ERROR),
        r.number("errorScale", low=0.0, high=MAX_ERROR),
        r.number("scored", low=0.0, high=MAX_SCORED),
        Demand(typical.number("requests"), typical.number("promptTokens"), typical.number("outputTokens")),
        tuple(peaks),
        r.number("typicalPeak", low=0.0) if "typicalPeak" in r.data else 0.0,  # an older state: none
        bins,
        relative,
        spread,
        # the gateway's count's own level; absent (an older state, or no reading): none yet
        _read_series(r.child("counted")) if "counted" in r.data else None,
        lasting,
        heights,
    )
