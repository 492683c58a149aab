"""ServeGen's length pmfs: the dict-literal strings parsed (a fast numeric read, `ast.literal_eval`
for anything else), mixed by weight and sampled (replay/traces/servegen.py draws requests from them)."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from replay.traces import bounds
from replay.traces.errors import TraceError

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Pmf:
    values: Ints
    probabilities: Floats  # sums to 1

    def sample(self, rng: np.random.Generator, n: int) -> Ints:
        cumulative = np.cumsum(self.probabilities)
        index = np.searchsorted(cumulative, rng.random(n) * cumulative[-1], side="right")
        drawn: Ints = self.values[np.minimum(index, len(self.values) - 1)]
        return drawn


def mixture(parts: Sequence[tuple[Pmf, float]]) -> Pmf:
    """The pmf of drawing a part with probability ∝ its weight, then a value from it."""
    total = sum(w for _, w in parts)
    values = np.concatenate([p.values for p, _ in parts])
    probs = np.concatenate([p.probabilities * (w / total) for p, w in parts])
    unique, inverse = np.unique(values, return_inverse=True)
    return Pmf(unique, np.bincount(inverse, weights=probs, minlength=len(unique)).astype(np.float64))


def parse_pmf(text: object, where: str) -> Pmf | None:
    """`"{45: 0.0097, 46: 0.0117}"` → Pmf; `"{}"` → None (no data for this window)."""
    if not isinstance(text, str):
        raise TraceError(f"{where}expected a string holding a dict literal, got {type(text).__name__}")
    body = text.strip()
    inner = body[1:-1].strip() if body.startswith("{") and body.endswith("}") else None
    numbers: Floats | None = None
    if inner == "":
        return None
    if inner is not None and _alternates(inner):
        try:
            numbers = np.array(inner.replace(":", ",").split(","), dtype=np.float64)
        except ValueError:
            numbers = None  # e.g. a string key: let the literal parser decide
    if numbers is None:
        try:
            literal = ast.literal_eval(body)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise TraceError(
                f"{where}expected a dict literal {{value: probability}}, got {body[:60]!r}"
            ) from None
        if not isinstance(literal, dict):
            raise TraceError(
                f"{where}expected a dict literal {{value: probability}}, got {type(literal).__name__}"
            )
        if not literal:
            return None
        items = list(literal.items())
        bad = next(
            (
                kv
                for kv in items
                if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in kv)
            ),
            None,
        )
        if bad is not None:
            raise TraceError(f"{where}expected numbers as keys and values, got {bad[0]!r}: {bad[1]!r}")
        numbers = np.array([x for kv in items for x in kv], dtype=np.float64)
    values, probs = numbers[0::2], numbers[1::2]
    if not (np.isfinite(values).all() and (values >= 0).all() and (values == np.rint(values)).all()):
        bad_value = values[~(np.isfinite(values) & (values >= 0) & (values == np.rint(values)))][0]
        raise TraceError(f"{where}expected non-negative whole token counts as keys, got {float(bad_value)!r}")
    if (values > bounds.MAX_TOKENS).any():
        raise TraceError(
            f"{where}{int(values[values > bounds.MAX_TOKENS][0]):,} tokens, more than the "
            f"{bounds.MAX_TOKENS:,} a request may have"
        )
    if not (np.isfinite(probs).all() and (probs >= 0).all()) or probs.sum() <= 0:
        raise TraceError(
            f"{where}expected non-negative probabilities with a positive sum, got {probs[:5].tolist()}…"
        )
    return Pmf(values.astype(np.int64), probs / probs.sum())


def _alternates(inner: str) -> bool:
    """`k: v, k: v, …, k: v` — separators alternate `:` `,` and end on `:` (checked on the bytes)."""
    data = np.frombuffer(inner.encode(), dtype=np.uint8)
    kinds = data[(data == ord(":")) | (data == ord(","))]
    return len(kinds) % 2 == 1 and bool((kinds[0::2] == ord(":")).all() and (kinds[1::2] == ord(",")).all())
