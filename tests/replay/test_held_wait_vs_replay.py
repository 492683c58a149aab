"""The waits behind one long prefill (leastloaded.held_share) against the replay's static fleets.

ServeGen m-large's busiest hours at its league scale (× 0.048) on reference-70b: ~10 req/s of
665-token prompts, and one prompt in ~1,100 of 24,000 tokens, whose prefill holds a replica for
4 s. At one replica every arrival meets the hold and queues behind its backlog; from two on the
least-loaded router sends the held replica only what keeps it level with the others. The replay's
share of requests that wait past the slack because of the holds (the run less the same trace with
the long prompts at the mean) against held_share at the holds the engine measured (what the
engines' prefill-time histograms show, prefilltail.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from test_light_traffic_wait_vs_replay import prefill_terms

from autoscaler.policy import leastloaded
from replay.policies import StaticPolicy
from replay.profiles import REFERENCE_70B
from replay.simulate import simulate
from replay.trace import Trace

RATE, PROMPT, LONG, OUTPUT = 9.8, 665.0, 24_000, 140.0
LONG_SHARE = 0.0009
WARMUP_S, SPAN_S = 300.0, 3600.0  # the warm-up is played before the trace, unscored


def _traces() -> tuple[Trace, Trace]:
    """The trace with its long prompts, and the same with each of them at the mean."""
    rng = np.random.default_rng(11)
    n = int(RATE * SPAN_S)
    arrival = np.cumsum(rng.exponential(1.0 / RATE, n))
    prompts = np.maximum(1, rng.exponential(PROMPT, n)).astype(np.int64)
    outputs = np.maximum(1, rng.exponential(OUTPUT, n)).astype(np.int64)
    long = rng.random(n) < LONG_SHARE
    held = np.where(long, LONG, prompts)
    return Trace("holds", arrival, held, outputs), Trace("no-holds", arrival, prompts, outputs)


def _slack_and_u(n: int) -> tuple[float, float]:
    """The slack a request's wait has (capacity.py's terms at the mean prompt) and the prefill
    utilization a replica, at n replicas."""
    slack, service, _, _ = prefill_terms(n, RATE, PROMPT, OUTPUT)
    return slack, RATE * service / n


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_the_waits_behind_a_hold_are_the_replays(n: int) -> None:
    """The model over the replay: 1.33 / 1.33 / 1.21 / 1.33 at 1-4 replicas (3.16 / 0.48 / 0.20 /
    0.10 % of requests late behind the trace's 36 holds)."""
    with_holds, without = _traces()
    slack, u = _slack_and_u(n)
    late, prefill = [], np.zeros(0)
    for trace in (with_holds, without):
        result = simulate(trace, REFERENCE_70B, StaticPolicy(n), warmup_s=WARMUP_S, max_tail_s=1e6)
        requests = result.requests
        late.append(float(np.mean(requests.admitted_s - result.arrival_s > slack)))
        if trace is with_holds:  # the holds as the engine measured them: first token - first scheduled
            prefill = requests.first_token_s - requests.admitted_s
    replay = late[0] - late[1]
    service = u * n / RATE
    model = leastloaded.held_share(n, u, float(np.mean(np.maximum(prefill - slack, 0.0))) / service)
    assert replay > 0.0
    assert 0.7 < model / replay < 2.0, (n, replay, model)
