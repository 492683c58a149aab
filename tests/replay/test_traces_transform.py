"""Rate scaling (thinned, shifted superposition) and time windows."""

from __future__ import annotations

import numpy as np
import pytest

from replay.trace import Trace
from replay.traces import TraceError, scale_rate, time_window


def poisson_trace(n: int = 20_000, rate: float = 20.0, seed: int = 1) -> Trace:
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0 / rate, n))
    return Trace(
        "poisson",
        arrival - arrival[0],
        rng.integers(1, 4000, n).astype(np.int64),
        rng.integers(1, 500, n).astype(np.int64),
    )


def assert_valid(trace: Trace) -> None:
    assert trace.arrival_s[0] == 0.0
    assert (np.diff(trace.arrival_s) >= 0).all()
    assert (trace.input_tokens >= 1).all() and (trace.output_tokens >= 1).all()


@pytest.mark.parametrize("k", [pytest.param(k, id=f"x{k:g}") for k in (0.1, 0.5, 1.0, 1.5, 2.0, 3.7)])
def test_expected_count_is_k_times_n(k: float) -> None:
    base = poisson_trace()
    scaled = scale_rate(base, k, seed=3)
    assert_valid(scaled)
    n, expected = len(base), k * len(base)
    spread = np.sqrt(n * (k % 1) * (1 - k % 1))  # only the partial copy is random
    assert abs(len(scaled) - expected) <= 5 * spread + 1e-9
    # the duration is kept: superposition does not stretch or squeeze time
    assert abs(scaled.duration_s - base.duration_s) <= 1.0 + 5.0 / 20.0


def test_whole_multiples_repeat_every_request_exactly() -> None:
    base = poisson_trace(2_000)
    scaled = scale_rate(base, 3.0, seed=0)
    assert len(scaled) == 3 * len(base)
    assert np.array_equal(np.sort(scaled.input_tokens), np.sort(np.tile(base.input_tokens, 3)))
    assert np.array_equal(np.sort(scaled.output_tokens), np.sort(np.tile(base.output_tokens, 3)))


def test_shape_in_time_is_kept() -> None:
    """A burst stays where it was and as long as it was; per-minute counts scale by k."""
    rng = np.random.default_rng(5)
    quiet = np.sort(rng.uniform(0, 600, 600))
    burst = np.sort(rng.uniform(300, 360, 1200))  # 60 s at 20/s on top of 1/s
    arrival = np.sort(np.concatenate([quiet, burst]))
    n = len(arrival)
    base = Trace("burst", arrival - arrival[0], np.full(n, 10, np.int64), np.full(n, 10, np.int64))
    scaled = scale_rate(base, 2.5, seed=9)
    offset = float(arrival[0])
    base_counts = np.histogram(base.arrival_s + offset, bins=np.arange(0, 660, 60))[0]
    scaled_counts = np.histogram(scaled.arrival_s + offset, bins=np.arange(0, 660, 60))[0]
    assert int(np.argmax(scaled_counts)) == int(np.argmax(base_counts)) == 5
    np.testing.assert_allclose(scaled_counts[5] / base_counts[5], 2.5, rtol=0.1)


def test_copies_are_not_in_lock_step() -> None:
    scaled = scale_rate(poisson_trace(1_000), 2.0, seed=0)
    assert len(np.unique(scaled.arrival_s)) == len(scaled)


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    base = poisson_trace(5_000)
    a, b, c = scale_rate(base, 1.7, seed=4), scale_rate(base, 1.7, seed=4), scale_rate(base, 1.7, seed=5)
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.input_tokens, b.input_tokens)
    assert len(a) != len(c) or not np.array_equal(a.arrival_s, c.arrival_s)


@pytest.mark.parametrize(
    "k",
    [pytest.param(0.0, id="zero"), pytest.param(-1.0, id="negative"), pytest.param(float("nan"), id="nan")],
)
def test_bad_scale(k: float) -> None:
    with pytest.raises(TraceError, match="rate scale: expected a number > 0"):
        scale_rate(poisson_trace(10), k)


def test_thinning_everything_away_is_an_error() -> None:
    tiny = Trace("one", np.zeros(1), np.ones(1, np.int64), np.ones(1, np.int64))
    with pytest.raises(TraceError, match="kept none of its 1 requests"):
        scale_rate(tiny, 1e-9)


STEPS = Trace(
    "steps", np.array([0.0, 1.0, 2.0, 3.0, 4.0]), np.arange(1, 6, dtype=np.int64), np.ones(5, np.int64)
)


@pytest.mark.parametrize(
    ("start", "end", "arrivals", "inputs"),
    [
        pytest.param(1.0, 3.0, [0.0, 1.0], [2, 3], id="start kept, end excluded"),
        pytest.param(0.5, 3.5, [0.0, 1.0, 2.0], [2, 3, 4], id="re-based on the first kept request"),
        pytest.param(2.0, None, [0.0, 1.0, 2.0], [3, 4, 5], id="open end"),
        pytest.param(0.0, None, [0.0, 1.0, 2.0, 3.0, 4.0], [1, 2, 3, 4, 5], id="everything"),
    ],
)
def test_time_window(start: float, end: float | None, arrivals: list[float], inputs: list[int]) -> None:
    window = time_window(STEPS, start, end)
    assert (window.arrival_s.tolist(), window.input_tokens.tolist()) == (arrivals, inputs)


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        pytest.param(
            10.0, 20.0, r"no request in \[10, 20\) s \(the trace spans 0 to 4 s\)", id="after the end"
        ),
        pytest.param(3.0, 3.0, "expected 0 <= start < end", id="empty interval"),
        pytest.param(-1.0, 3.0, "expected 0 <= start < end", id="negative start"),
    ],
)
def test_bad_windows(start: float, end: float, expected: str) -> None:
    with pytest.raises(TraceError, match=expected):
        time_window(STEPS, start, end)
