"""The synthetic generator: seeded, shaped as specified, sized for reference-70b, validated."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from replay.trace import Trace
from replay.traces import Burst, SyntheticSpec, TraceError, default_trace, synthetic_trace
from replay.traces.synthetic import rate_profile

SHORT = SyntheticSpec(duration_s=1800.0, period_s=1800.0, peak_at_s=900.0, bursts=())


def assert_valid(trace: Trace, spec: SyntheticSpec) -> None:
    assert trace.arrival_s[0] == 0.0
    assert (np.diff(trace.arrival_s) >= 0).all()
    assert trace.duration_s < spec.duration_s
    assert trace.input_tokens.min() >= 1 and trace.input_tokens.max() <= spec.input_max_tokens
    assert trace.output_tokens.min() >= 1 and trace.output_tokens.max() <= spec.output_max_tokens


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    a, b, c = synthetic_trace(SHORT, 7), synthetic_trace(SHORT, 7), synthetic_trace(SHORT, 8)
    for column in ("arrival_s", "input_tokens", "output_tokens"):
        assert np.array_equal(getattr(a, column), getattr(b, column))
    assert len(a) != len(c) or not np.array_equal(a.arrival_s, c.arrival_s)


def test_count_matches_the_rate_it_follows() -> None:
    _, rate = rate_profile(SHORT, seed=3)
    expected = float(rate.sum() * SHORT.resolution_s)
    trace = synthetic_trace(SHORT, seed=3)
    assert_valid(trace, SHORT)
    assert abs(len(trace) - expected) < 5 * np.sqrt(expected)  # Poisson: 5 standard deviations
    # and it follows the rate in time, minute by minute (each minute within 5 sigma)
    per_minute = np.histogram(trace.arrival_s + (trace.arrival_s[0]), bins=np.arange(0, 1860, 60))[0]
    expected_minute = rate.reshape(-1, 60).sum(axis=1)
    assert (np.abs(per_minute[1:] - expected_minute[1:]) < 5 * np.sqrt(expected_minute[1:]) + 5).all()


def test_quiet_spec_is_the_bare_diurnal_curve() -> None:
    spec = dataclasses.replace(SHORT, noise_sigma=0.0, spikes_per_hour=0.0)
    starts, rate = rate_profile(spec)
    np.testing.assert_allclose(rate, spec.base_rate(starts + 0.5))
    assert rate[0] == pytest.approx(spec.trough_rps, rel=1e-3)
    assert rate.max() == pytest.approx(spec.peak_rps, rel=1e-3)
    assert int(np.argmax(rate)) in (899, 900)


def test_a_burst_multiplies_only_its_interval_and_leaves_the_rest_of_the_seed_alone() -> None:
    burst = Burst(start_s=600.0, duration_s=300.0, multiplier=2.0, ramp_s=30.0)
    with_burst = dataclasses.replace(SHORT, bursts=(burst,))
    starts, plain = rate_profile(SHORT, seed=11)
    _, bursty = rate_profile(with_burst, seed=11)
    ratio = bursty / plain
    outside = (starts + 1 <= 600) | (starts >= 900)
    np.testing.assert_allclose(ratio[outside], 1.0)
    np.testing.assert_allclose(ratio[(starts >= 630) & (starts + 1 <= 870)], 2.0)
    ramp = ratio[(starts >= 600) & (starts < 630)]
    assert (np.diff(ramp) > 0).all() and 1.0 < ramp[0] < ramp[-1] < 2.0


def test_spikes_are_short_and_seeded() -> None:
    spec = dataclasses.replace(SHORT, noise_sigma=0.0, spikes_per_hour=20.0)
    starts, rate = rate_profile(spec, seed=2)
    lifted = rate / spec.base_rate(starts + 0.5)
    spiking = lifted > 1.0 + 1e-9
    assert spiking.any() and spiking.mean() < 0.2  # ~10 spikes of 5-20 s in 30 minutes
    assert lifted.max() <= spec.spike_multiplier[1] ** 3  # at most a few overlap
    assert np.array_equal(rate, rate_profile(spec, seed=2)[1])


def test_lengths_follow_the_requested_medians() -> None:
    trace = synthetic_trace(SHORT, seed=1)
    assert np.median(trace.input_tokens) == pytest.approx(SHORT.input_median_tokens, rel=0.05)
    assert np.median(trace.output_tokens) == pytest.approx(SHORT.output_median_tokens, rel=0.05)


def test_default_is_sized_for_reference_70b() -> None:
    """Two hours, a diurnal ramp from ~25 to ~100 req/s and a burst to ~150 req/s: tens of replicas."""
    trace = default_trace(seed=0)
    spec = SyntheticSpec()
    assert_valid(trace, spec)
    assert 7000 < trace.duration_s < 7200
    per_minute = np.histogram(trace.arrival_s, bins=np.arange(0, 7260, 60))[0] / 60.0
    assert per_minute[:5].mean() < 40  # starts near the trough
    assert per_minute[-5:].mean() < 40  # and ends there
    assert 80 < np.median(per_minute[61:70]) < 130  # the peak, mid-trace, just after the burst
    burst_rate = np.median(per_minute[46:59])  # the burst runs 45–60 min
    assert burst_rate > 1.3 * np.median(per_minute[36:44])
    assert 400_000 < len(trace) < 600_000


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param({"duration_s": 0.0}, "synthetic: duration_s: expected > 0, got 0.0", id="no duration"),
        pytest.param({"trough_rps": -1.0}, "synthetic: trough_rps: expected >= 0", id="negative rate"),
        pytest.param(
            {"peak_rps": 10.0}, "synthetic: peak_rps: expected >= trough_rps 25.0", id="peak under trough"
        ),
        pytest.param(
            {"noise_correlation": 1.0}, "synthetic: noise_correlation: expected in [0, 1)", id="unit root"
        ),
        pytest.param(
            {"spike_duration_s": (20.0, 5.0)},
            "synthetic: spike_duration_s: expected 0 < low <= high",
            id="range",
        ),
        pytest.param(
            {"period_s": float("inf")}, "synthetic: period_s: expected a finite number", id="infinite"
        ),
        pytest.param(
            {"bursts": (Burst(10.0, -5.0, 2.0),)},
            "synthetic: bursts[0]: expected duration_s > 0",
            id="bad burst",
        ),
        pytest.param(
            {"bursts": (Burst(float("nan"), 10.0, 2.0),)},
            "synthetic: bursts[0]: expected duration_s > 0, multiplier > 0, ramp_s >= 0 and a finite "
            "start_s, got Burst(start_s=nan",
            id="burst starting at NaN",
        ),
        pytest.param(
            {"bursts": (Burst(10.0, 10.0, float("nan")),)},
            "synthetic: bursts[0]: expected duration_s > 0, multiplier > 0",
            id="NaN multiplier",
        ),
    ],
)
def test_bad_parameters_are_named(change: dict[str, object], expected: str) -> None:
    with pytest.raises(TraceError) as caught:
        SyntheticSpec(**change)  # type: ignore[arg-type]
    assert str(caught.value).startswith(expected), str(caught.value)


def test_absurd_sizes_are_refused_before_allocating() -> None:
    with pytest.raises(TraceError, match="requests expected, more than"):
        synthetic_trace(SyntheticSpec(duration_s=86400.0 * 30, trough_rps=1000.0, peak_rps=1000.0))
