"""The built-in synthetic trace: a diurnal cycle with bursts, spikes and slow noise, seeded.

It is the embedded default of `infscale replay` (no file needed) and the 24-hour benchmark load.
Arrivals are a non-homogeneous Poisson process whose rate is, per `resolution_s` bin,

    rate(t) = diurnal(t) × bursts(t) × spikes(t) × noise(t)

- diurnal: a raised cosine from `trough_rps` up to `peak_rps` (at `peak_at_s`) and back, period
  `period_s`. The default squeezes one "day" into the 2-hour trace, so a short replay sees a full
  ramp up and down (a real day ramps slower; set `period_s=86400` for that).
- bursts: listed, deterministic multiplicative plateaus with linear ramps — the default one lifts the
  rate 1.5× within 60 s on the way to the peak, faster than any fleet can load 140 GB replicas, so it
  forces cold starts under load.
- spikes: random (seeded) short surges, `spikes_per_hour` on average; too short for any autoscaler
  to follow, they test queueing and TTFT.
- noise: a mean-one log-normal AR(1) step every `noise_step_s`, the minute-to-minute wobble real
  traces show on top of Poisson.

Lengths are independent log-normals (median and sigma per direction, clipped to [1, max]); the
defaults sit near the Azure 2023 conversation trace (input p50 ≈ 1,000, output p50 ≈ 130).

Generation is vectorized: Poisson counts per bin, uniform offsets inside each bin, one sort.
Each random ingredient draws from its own child of the seed, so changing e.g. `spikes_per_hour`
does not move the noise of the same seed, and a burst changes the rate only where it is.

Sizing for the reference-70b scenario (teaching numbers): at ≈ 3 requests/s per 4×H100 replica the
default's peak (100 req/s, 150 during the burst) needs ≈ 35–50 replicas, inside the 1–64 range, with
≈ 527 k requests in 2 hours (seed 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np
import numpy.typing as npt

from replay.trace import Trace
from replay.traces.errors import TraceError

MAX_EXPECTED_REQUESTS = 200_000_000  # ~5 GB of columns; beyond this, generate in windows


@dataclass(frozen=True, slots=True)
class Burst:
    """The rate × `multiplier` from `start_s` for `duration_s`, reached and left over `ramp_s`."""

    start_s: float
    duration_s: float
    multiplier: float
    ramp_s: float = 60.0

    def envelope(self, t: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        end = self.start_s + self.duration_s
        ramp = max(self.ramp_s, 1e-9)
        strength = np.clip(np.minimum(t - self.start_s, end - t) / ramp, 0.0, 1.0)
        return np.asarray(1.0 + (self.multiplier - 1.0) * strength, dtype=np.float64)


def _default_bursts() -> tuple[Burst, ...]:
    return (Burst(start_s=2700.0, duration_s=900.0, multiplier=1.5, ramp_s=60.0),)


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    """Parameters of the synthetic trace. The defaults are the embedded default trace."""

    duration_s: float = 7200.0  # 2 hours
    trough_rps: float = 25.0  # requests/s at the bottom of the cycle
    peak_rps: float = 100.0  # requests/s at the top of the cycle (before bursts and spikes)
    period_s: float = 7200.0  # one compressed "day"
    peak_at_s: float = 3600.0  # the trace starts at the trough and peaks mid-way
    bursts: tuple[Burst, ...] = field(default_factory=_default_bursts)
    spikes_per_hour: float = 3.0
    spike_duration_s: tuple[float, float] = (5.0, 20.0)  # uniform range
    spike_multiplier: tuple[float, float] = (2.0, 4.0)  # uniform range
    noise_sigma: float = 0.1  # log-space standard deviation of the slow wobble; 0 turns it off
    noise_step_s: float = 60.0
    noise_correlation: float = 0.8  # AR(1) coefficient between consecutive steps
    input_median_tokens: float = 1000.0
    input_sigma: float = 0.6
    input_max_tokens: int = 16384
    output_median_tokens: float = 130.0
    output_sigma: float = 0.8
    output_max_tokens: int = 2048
    resolution_s: float = 1.0  # the rate is constant within a bin of this width
    name: str = "synthetic"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float | int) and not math.isfinite(value):
                raise TraceError(f"synthetic: {f.name}: expected a finite number, got {value!r}")
        positive: tuple[str, ...] = (
            "duration_s",
            "period_s",
            "noise_step_s",
            "resolution_s",
            "input_median_tokens",
        )
        positive += ("output_median_tokens", "input_max_tokens", "output_max_tokens")
        for name in positive:
            if getattr(self, name) <= 0:
                raise TraceError(f"synthetic: {name}: expected > 0, got {getattr(self, name)!r}")
        for name in ("trough_rps", "spikes_per_hour", "noise_sigma", "input_sigma", "output_sigma"):
            if getattr(self, name) < 0:
                raise TraceError(f"synthetic: {name}: expected >= 0, got {getattr(self, name)!r}")
        if self.peak_rps < self.trough_rps:
            raise TraceError(
                f"synthetic: peak_rps: expected >= trough_rps {self.trough_rps}, got {self.peak_rps}"
            )
        if not 0 <= self.noise_correlation < 1:
            raise TraceError(
                f"synthetic: noise_correlation: expected in [0, 1), got {self.noise_correlation}"
            )
        for name in ("spike_duration_s", "spike_multiplier"):
            lo, hi = getattr(self, name)
            if not 0 < lo <= hi:
                raise TraceError(f"synthetic: {name}: expected 0 < low <= high, got ({lo}, {hi})")
        for i, burst in enumerate(self.bursts):
            # written so that NaN fails every comparison; a duration may be infinite (to the end)
            if not (
                math.isfinite(burst.start_s)
                and burst.duration_s > 0
                and 0 < burst.multiplier < math.inf
                and 0 <= burst.ramp_s < math.inf
            ):
                raise TraceError(
                    f"synthetic: bursts[{i}]: expected duration_s > 0, multiplier > 0, ramp_s >= 0 and a "
                    f"finite start_s, got {burst}"
                )

    def bin_starts(self) -> npt.NDArray[np.float64]:
        return np.arange(0.0, self.duration_s, self.resolution_s, dtype=np.float64)

    def base_rate(self, t: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """The deterministic part, diurnal × bursts, in requests/s at times `t`."""
        phase = 2.0 * np.pi * (t - self.peak_at_s) / self.period_s
        rate = self.trough_rps + (self.peak_rps - self.trough_rps) * (1.0 + np.cos(phase)) / 2.0
        for burst in self.bursts:
            rate = rate * burst.envelope(t)
        return np.asarray(rate, dtype=np.float64)


def rate_profile(
    spec: SyntheticSpec, seed: int = 0
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(bin start times, requests/s in each bin): the rate the arrivals of `synthetic_trace` follow."""
    noise_seed, spike_seed, _, _ = np.random.SeedSequence(seed).spawn(4)
    starts = spec.bin_starts()
    widths = np.minimum(spec.resolution_s, spec.duration_s - starts)
    rate = spec.base_rate(starts + widths / 2.0)
    if spec.noise_sigma > 0:
        rate = (
            rate
            * _noise(spec, np.random.default_rng(noise_seed))[(starts // spec.noise_step_s).astype(np.int64)]
        )
    spikes = np.random.default_rng(spike_seed)
    ends = starts + widths
    for _ in range(int(spikes.poisson(spec.spikes_per_hour * spec.duration_s / 3600.0))):
        start = spikes.uniform(0.0, spec.duration_s)
        length = spikes.uniform(*spec.spike_duration_s)
        multiplier = spikes.uniform(*spec.spike_multiplier)
        first = int(np.searchsorted(ends, start, side="right"))  # bins overlapping the spike
        last = int(np.searchsorted(starts, start + length, side="left"))
        rate[first:last] *= multiplier
    return starts, rate


def _noise(spec: SyntheticSpec, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """Mean-one multipliers per noise step: exp(x − σ²/2) with x a stationary AR(1) of std σ."""
    steps = math.ceil(spec.duration_s / spec.noise_step_s)
    rho, sigma = spec.noise_correlation, spec.noise_sigma
    shocks = rng.normal(0.0, sigma, steps)
    x = np.empty(steps)
    x[0] = shocks[0]
    innovation = math.sqrt(1.0 - rho * rho)
    for i in range(1, steps):  # a few thousand steps at most: not worth a vectorized filter
        x[i] = rho * x[i - 1] + innovation * shocks[i]
    return np.exp(x - sigma * sigma / 2.0)


def synthetic_trace(spec: SyntheticSpec | None = None, seed: int = 0) -> Trace:
    """Draw a trace from `spec` (default: the embedded default). Same spec and seed, same trace."""
    spec = SyntheticSpec() if spec is None else spec
    minutes = np.arange(0.0, spec.duration_s, 60.0) + 30.0
    _refuse_if_too_big(float(spec.base_rate(minutes).mean() * spec.duration_s))  # cheap, before the profile
    starts, rate = rate_profile(spec, seed)
    widths = np.minimum(spec.resolution_s, spec.duration_s - starts)
    _refuse_if_too_big(float((rate * widths).sum()))
    _, _, arrival_seed, length_seed = np.random.SeedSequence(seed).spawn(4)
    arrivals_rng = np.random.default_rng(arrival_seed)
    counts = arrivals_rng.poisson(rate * widths)
    total = int(counts.sum())
    if total == 0:
        raise TraceError("synthetic: the rates produced no request; raise trough_rps/peak_rps or duration_s")
    arrival = np.repeat(starts, counts) + arrivals_rng.random(total) * np.repeat(widths, counts)
    arrival.sort()
    lengths_rng = np.random.default_rng(length_seed)
    return Trace(
        name=spec.name if seed == 0 else f"{spec.name}-seed{seed}",
        arrival_s=arrival - arrival[0],
        input_tokens=_lognormal(
            lengths_rng, spec.input_median_tokens, spec.input_sigma, spec.input_max_tokens, total
        ),
        output_tokens=_lognormal(
            lengths_rng, spec.output_median_tokens, spec.output_sigma, spec.output_max_tokens, total
        ),
    )


def _refuse_if_too_big(expected: float) -> None:
    if expected > MAX_EXPECTED_REQUESTS:
        raise TraceError(
            f"synthetic: about {expected:,.0f} requests expected, more than {MAX_EXPECTED_REQUESTS:,}; "
            "shorten duration_s or lower the rates"
        )


def _lognormal(
    rng: np.random.Generator, median: float, sigma: float, maximum: int, n: int
) -> npt.NDArray[np.int64]:
    draws = rng.lognormal(math.log(median), sigma, n) if sigma > 0 else np.full(n, median)
    return np.clip(np.rint(draws), 1, maximum).astype(np.int64)


def default_trace(seed: int = 0) -> Trace:
    """The embedded default: `SyntheticSpec()` drawn with `seed`."""
    return synthetic_trace(SyntheticSpec(), seed)
