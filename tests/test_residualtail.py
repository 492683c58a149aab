"""residualtail.py against simulated M/G/1 prefill queues (Lindley's recursion on Poisson arrivals
and gamma prompt lengths, each prompt's prefill α·x + β·x²): the share of requests whose wait
exceeds the mean request's slack, and the residual's survival against its sample."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autoscaler.policy import lengths, residualtail

ALPHA, BETA = 5.55e-05, 4.425e-09  # reference-70b's prefill per token and attention per pair / 2


def _r(p: float) -> float:
    return BETA * p / ALPHA


def _prefills(p: float, cv2: float, n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.gamma(1.0 / cv2, p * cv2, n)
    return ALPHA * x + BETA * x * x


def _waits(service: np.ndarray, rate: float, seed: int = 2) -> np.ndarray:
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, len(service))
    waits = np.empty(len(service))
    w = 0.0
    for i, (s, a) in enumerate(zip(service.tolist(), gaps.tolist(), strict=True)):
        waits[i] = w
        w = max(0.0, w + s - a)
    return waits


@pytest.mark.parametrize(
    ("p", "cv2", "rate"),
    [
        pytest.param(4000.0, 0.5, 0.9, id="4k prompts cv2 0.5, u 0.30"),
        pytest.param(4000.0, 0.5, 1.9, id="4k prompts cv2 0.5, u 0.62"),
        pytest.param(700.0, 10.0, 2.7, id="700-token prompts cv2 10, u 0.17"),
        pytest.param(2200.0, 7.3, 1.0, id="2,200-token prompts cv2 7.3, u 0.30"),
    ],
)
def test_the_wait_tail_is_the_simulated_queues(p: float, cv2: float, rate: float) -> None:
    service = _prefills(p, cv2, 300_000)
    mean = float(service.mean())
    slack_s = 2.0 - mean
    simulated = float((_waits(service, rate) > slack_s).mean())
    r = _r(p)
    e_s = ALPHA * p * (1.0 + r * (1.0 + cv2))  # the gamma's own E[S]
    assert mean == pytest.approx(e_s, rel=0.03)
    model = residualtail.wait_tail(rate * e_s, slack_s / e_s, r, cv2)
    assert model == pytest.approx(simulated, rel=0.12)


def test_the_exponential_misses_a_heavy_tailed_residual() -> None:
    """Why the module exists: at cv² 10 the residual's tail past 1.9 s is 0.095 in the sample, 0.074
    for an exponential of its mean, and 0.017 for the exponential capacity.py takes without it (the
    mean prompt's prefill for E[S], the gamma's cs²: E[R] 0.47 s where the sample's is 0.71)."""
    p, cv2 = 700.0, 10.0
    service = _prefills(p, cv2, 400_000)
    e_s = float(service.mean())
    sample = float(np.maximum(service - 1.9, 0.0).mean() / e_s)
    model = residualtail.residual_survival(1.9 / e_s, _r(p), cv2)
    mean_prompt = ALPHA * p + BETA * p * p
    exponential = math.exp(-1.9 / (mean_prompt * (1.0 + lengths.prefill_cv2(ALPHA, BETA, p, cv2)) / 2.0))
    assert model == pytest.approx(sample, rel=0.15)
    assert model > 4.0 * exponential


def test_moments_are_the_gammas() -> None:
    r, cv2 = 0.5, 2.0
    rng = np.random.default_rng(3)
    y = rng.gamma(1.0 / cv2, cv2, 2_000_000)
    s = (y + r * y * y) / (1.0 + r * (1.0 + cv2))
    assert float(s.mean()) == pytest.approx(1.0, rel=0.01)
    assert residualtail.service_cv2(r, cv2) == pytest.approx(float(s.var()), rel=0.05)
    assert residualtail.mean_factor(r, cv2) == pytest.approx((1.0 + r * 3.0) / 1.5)


def test_exponential_prefills_are_the_mm1() -> None:
    """β = 0 and exponential lengths: the M/M/1's u·exp(-(1 - u)·t), to within the one gamma that
    stands for two or more residuals."""
    for u in (0.1, 0.5, 0.8):
        for t in (0.5, 2.0, 6.0):
            exponential = u * math.exp(-(1.0 - u) * t)
            assert residualtail.wait_tail(u, t, 0.0, 1.0) == pytest.approx(exponential, rel=0.05)


def test_the_search_is_the_least_count_under_the_budget() -> None:
    r, cv2, tau = _r(2000.0), 3.0, 4.0
    offered = 3.0
    n = residualtail.servers(offered, tau, 0.01, r, cv2)
    assert residualtail.wait_tail(offered / n, tau, r, cv2) <= 0.0101
    assert residualtail.wait_tail(offered / (n - 1), tau, r, cv2) > 0.0099
