"""ServeGen (alibaba/ServeGen) per-client window data → synthesized requests, seeded.

ServeGen publishes no requests, only per client ("chunk") and per 600 s window: the request count
(rate × 600), the fitted inter-arrival distribution (Gamma or Weibull, with its shape), and per
6-hour window the input/output length pmfs. This module turns that into a request trace:

- Arrivals: a window with n requests draws n + 1 gaps from its distribution (scale 1, the window's
  shape) and places request j at start + window × (g₀ + … + g_j) / (g₀ + … + g_n). The window gets
  exactly its n requests, inside it, with the fitted burstiness (only the shape matters: upstream
  rescales gaps to the window rate too). Weibull gaps are drawn in log space so the tiny shapes some
  clients have (≈ 0.02: extremely bursty) cannot overflow.
- Lengths: input and output drawn independently from the client's pmfs of the 6-hour window the
  request falls in (ServeGen gives marginals only, so their correlation is not known). A client whose
  `dataset.json` is missing (files ≥ 4 MiB were not published), or whose window is an empty `{}`,
  draws from the aggregate pmf of the same 6-hour window: the mixture of every other client's pmf
  weighted by that client's request count in the window; if no client has one, the mixture over
  all windows. Input is `input_tokens`, or `text_tokens` for multimodal models (image tokens are not
  added: the engine model has no vision encoder).
- The pmf strings are Python dict literals (replay/traces/pmf.py): a fast numeric parse reads them
  (≈ 10× faster than `ast.literal_eval` on these files), anything it cannot read `ast.literal_eval`.

Options, so a 14-day model can be replayed in pieces: `start_s`/`end_s` (on the model's clock,
where t = 0 is local midnight of day 0), `clients` (chunk ids), `rate_scale` (each window's count
×k, rounded up or down at random so the expected count is exact — the burst shape per window is kept),
`seed`, and `max_requests` (refuses to synthesize more; m-mid is 2.2 billion requests over 14 days).
The path is the `.tar.gz` archive or a folder holding one model's `chunk-<id>-trace.csv` files.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import numpy.typing as npt

from replay.trace import Trace
from replay.traces.errors import TraceError
from replay.traces.pmf import Pmf, mixture
from replay.traces.servegenfiles import Dataset, Model, read_model

OUTPUT_FIELD = "output_tokens"
INPUT_FIELDS = ("input_tokens", "text_tokens")  # the first one a dataset has is used
DEFAULT_MAX_REQUESTS = 20_000_000

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


def load(
    path: Path,
    *,
    start_s: float = 0.0,
    end_s: float | None = None,
    clients: tuple[int, ...] | None = None,
    rate_scale: float = 1.0,
    seed: int = 0,
    max_requests: int = DEFAULT_MAX_REQUESTS,
) -> Trace:
    end = math.inf if end_s is None else float(end_s)
    if not (math.isfinite(start_s) and start_s >= 0 and end > start_s):
        raise TraceError(f"time window: expected 0 <= start < end, got start={start_s!r} end={end_s!r}")
    if not (math.isfinite(rate_scale) and rate_scale > 0):
        raise TraceError(f"rate scale: expected a number > 0, got {rate_scale!r}")
    if clients is not None and not clients:
        raise TraceError(f"{path.name}: clients: expected at least one chunk id, got none")
    model = read_model(path)
    chosen = sorted(model.windows) if clients is None else sorted(set(clients))
    unknown = [c for c in chosen if c not in model.windows]
    if unknown:
        raise TraceError(
            f"{path.name}: clients: no chunk {', '.join(map(str, unknown))} "
            f"(the model has chunks {min(model.windows)}–{max(model.windows)}, {len(model.windows)} in all)"
        )
    count_seed, gap_seed, length_seed = np.random.SeedSequence(seed).spawn(3)
    count_rng = np.random.default_rng(count_seed)

    # Which windows, with how many requests after scaling (stochastic rounding keeps the mean exact).
    picked: list[tuple[int, Floats, Ints, npt.NDArray[np.bool_], Floats, float]] = []
    expected = 0.0
    for client in chosen:
        w = model.windows[client]
        inside = (w.starts + w.window_s > start_s) & (w.starts < end) & (w.counts > 0)
        scaled = w.counts[inside] * rate_scale
        expected += float(scaled.sum())
        counts = np.floor(scaled).astype(np.int64) + (count_rng.random(len(scaled)) < scaled % 1.0)
        picked.append((client, w.starts[inside], counts, w.weibull[inside], w.shape[inside], w.window_s))
    if expected > max_requests:
        raise TraceError(
            f"{path.name}: about {expected:,.0f} requests in the chosen windows and clients, more than "
            f"max_requests={max_requests:,}; pick a time window (start_s/end_s), clients, "
            "or a smaller rate_scale"
        )
    client_ids = np.concatenate([np.full(len(p[1]), p[0], dtype=np.int64) for p in picked])
    window_starts = np.concatenate([p[1] for p in picked])
    counts = np.concatenate([p[2] for p in picked])
    weibull = np.concatenate([p[3] for p in picked])
    shapes = np.concatenate([p[4] for p in picked])
    window_len = np.concatenate([np.full(len(p[1]), p[5]) for p in picked])
    arrival, window_of = synthesize_arrivals(
        window_starts, window_len, counts, weibull, shapes, np.random.default_rng(gap_seed)
    )
    keep = (arrival >= start_s) & (arrival < end)
    arrival, window_of = arrival[keep], window_of[keep]
    if len(arrival) == 0:
        raise TraceError(f"{path.name}: no request in [{start_s:g}, {end:g}) s for the chosen clients")
    input_tokens, output_tokens = _sample_lengths(
        model, client_ids[window_of], window_starts[window_of], np.random.default_rng(length_seed)
    )
    order = np.argsort(arrival, kind="stable")
    arrival = arrival[order]
    return Trace(
        name=model.name,
        arrival_s=arrival - arrival[0],
        input_tokens=np.maximum(input_tokens[order], 1),
        output_tokens=np.maximum(output_tokens[order], 1),
    )


def synthesize_arrivals(
    starts: Floats,
    window_s: Floats,
    counts: Ints,
    weibull: npt.NDArray[np.bool_],
    shapes: Floats,
    rng: np.random.Generator,
) -> tuple[Floats, Ints]:
    """Exactly counts[w] arrivals inside each window w, spaced by its gap distribution.

    Returns the arrival times (window by window, ascending within each) and each one's window index.
    """
    if len(counts) == 0:
        return np.empty(0), np.empty(0, dtype=np.int64)
    draws = counts + 1  # n requests need n + 1 gaps: the last one runs to the window's end
    total = int(draws.sum())
    shape_per = np.repeat(shapes, draws)
    is_weibull = np.repeat(weibull, draws)
    log_gap = np.empty(total)
    gamma_at = np.flatnonzero(~is_weibull)
    # log of Gamma(k) draws; a draw that underflows to 0 becomes -inf and then a zero gap, as it should
    with np.errstate(divide="ignore"):
        log_gap[gamma_at] = np.log(rng.gamma(shape_per[gamma_at]))
        weibull_at = np.flatnonzero(is_weibull)
        # Weibull(c) = E^(1/c) with E ~ Exp(1): in log space, so c ≈ 0.02 (E^50) cannot overflow
        log_gap[weibull_at] = np.log(rng.standard_exponential(len(weibull_at))) / shape_per[weibull_at]
    first = np.concatenate(([0], np.cumsum(draws)[:-1]))
    peak = np.maximum.reduceat(log_gap, first)
    gap = np.exp(log_gap - np.repeat(peak, draws))  # each window's largest gap is 1: no overflow
    sums = np.add.reduceat(gap, first)
    fraction = gap / np.repeat(sums, draws)
    # position of each draw's end inside its window: running sum restarted per window
    running = np.cumsum(fraction)
    before = np.repeat(running[first] - fraction[first], draws)
    position = np.clip(running - before, 0.0, 1.0)
    is_request = np.ones(total, dtype=bool)
    is_request[first + counts] = False  # the last draw of each window only closes it
    window_index = np.repeat(np.arange(len(counts), dtype=np.int64), draws)[is_request]
    arrival = (
        starts[window_index]
        + np.minimum(position[is_request], np.nextafter(1.0, 0.0)) * window_s[window_index]
    )
    return arrival, window_index


def _sample_lengths(
    model: Model, client: Ints, window_start: Floats, rng: np.random.Generator
) -> tuple[Ints, Ints]:
    """Input and output tokens per request, from its client's pmf for its 6-hour window (or the aggregate)."""
    resolver = _PmfResolver(model)
    inputs = np.empty(len(client), dtype=np.int64)
    outputs = np.empty(len(client), dtype=np.int64)
    group = client * len(resolver.keys) + resolver.key_index(window_start)
    # requests come window by window, client by client, so groups are usually runs already
    members = np.arange(len(group)) if (np.diff(group) >= 0).all() else np.argsort(group, kind="stable")
    sorted_group = group[members]
    bounds = np.concatenate(([0], np.flatnonzero(np.diff(sorted_group)) + 1, [len(group)]))
    for lo, hi in itertools.pairwise(bounds):
        who = members[lo:hi]
        c, k = divmod(int(sorted_group[lo]), len(resolver.keys))
        key = float(resolver.keys[k])
        inputs[who] = resolver.pmf(c, key, "input").sample(rng, len(who))
        outputs[who] = resolver.pmf(c, key, "output").sample(rng, len(who))
    return inputs, outputs


class _PmfResolver:
    """Client pmf → same-window aggregate → all-window aggregate, as the module docstring says."""

    def __init__(self, model: Model) -> None:
        self.model = model
        keys = sorted({k for d in model.datasets.values() for k in d.raw})
        if not keys:
            raise TraceError(
                f"{model.name}: no chunk-<id>-dataset.json, so no length distribution to draw from"
            )
        self.keys = np.array(keys, dtype=np.float64)
        self._aggregate: dict[tuple[float | None, str], Pmf] = {}

    def key_index(self, window_start: Floats) -> Ints:
        """The dataset window each start falls in (the first one for starts before it)."""
        return np.maximum(np.searchsorted(self.keys, window_start, side="right") - 1, 0).astype(np.int64)

    def _field(self, dataset: Dataset, direction: str) -> str:
        if direction == "output":
            return OUTPUT_FIELD
        present = {name for fields in dataset.raw.values() for name in fields}
        return next((f for f in INPUT_FIELDS if f in present), INPUT_FIELDS[0])

    def pmf(self, client: int, key: float, direction: str) -> Pmf:
        dataset = self.model.datasets.get(client)
        if dataset is not None and (own := dataset.pmf(key, self._field(dataset, direction))) is not None:
            return own
        return self.aggregate(key, direction)

    def _requests(self, client: int, key: float | None) -> float:
        w = self.model.windows[client]
        if key is None:
            return float(w.counts.sum())
        upper = self.keys[self.keys > key]
        end = float(upper[0]) if len(upper) else math.inf
        return float(w.counts[(w.starts >= key) & (w.starts < end)].sum())

    def aggregate(self, key: float | None, direction: str) -> Pmf:
        """Request-weighted mixture of every client's pmf for `key` (None: over all windows)."""
        if (key, direction) in self._aggregate:
            return self._aggregate[key, direction]
        parts: list[tuple[Pmf, float]] = []
        for client, dataset in self.model.datasets.items():
            name = self._field(dataset, direction)
            for k in [key] if key is not None else list(self.keys):
                pmf = dataset.pmf(k, name)
                weight = self._requests(client, k) if client in self.model.windows else 0.0
                if pmf is not None and weight > 0:
                    parts.append((pmf, weight))
        if parts:
            result = mixture(parts)
        elif key is not None:
            result = self.aggregate(None, direction)
        else:
            raise TraceError(f"{self.model.name}: no client has a {direction}-length pmf in any window")
        self._aggregate[key, direction] = result
        return result
