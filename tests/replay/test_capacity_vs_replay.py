"""Issue 11 item 2's check: on stationary load the capacity model's count is within ±1 of the least
static fleet that meets the SLO in the replay (found by search: the replay at count - 2 misses
the SLO and at count + 1 meets it, so the least count meeting it is count - 1, count or count + 1).

The replay judges every request against the scenario's SLO; the model plans for the SLO's
attainment (99 %). The model is given the trace's prompt lengths' spread (their cv², as the engines'
prompt-length histograms give it: lengths.py), so the TTFT tail's prefill cs² and the prompts
too long for the TTFT on an idle replica follow the lengths, not the exponential's; and the
outputs' (the output-length histograms'), so the context a running request holds is
p + o·(1 + cv²) / 2, not the geometric's p + o. Prompts and
outputs are gamma-distributed (shape 2, or as the case says) around their means,
arrivals Poisson; the TPOT-bound mixes have exponential lengths (shape 1, the model's own
assumption) with short outputs, where a request's few decode steps meet the chunks of long
prompts (the per-request TPOT tail binds: the mean step alone says 2 replicas for both). The
long-prompt cases (6,000 and 8,000 tokens) are where a pooled Erlang-C tail under-sized by 2-5
replicas (8,000 tokens: it said 4, the replay needs 9): the replay's prefill queues are per
replica, as the model's now are. Known limit: at 12,000-token prompts
(2/s) no fleet up to 9 meets 99 % (97.3 % at 9: prompts of 30,000+ tokens wait behind each
other's chunks) and the model says 24, so the least fleet is not searched there. Nor with lengths
of cv² 2 (docs/policy-history.md, "The plateau", session 21): 30 req/s of 2,000-token prompts on
reference-70b meet 99 % from 18 (98.16 % at 11, 98.91 % at 17) where the random tail says 14 and
the least-requests one 11; 3 req/s of 8,000-token length-aware prompts level off at 98.85 % from 35
(the prompts too long for the TTFT alone: no TPOT misses there) where the random tail says 70 and
the least-requests one 20 (97.22 %; 98.44 % at 25). The TPOT tail at the
lengths' cv² over-sizes one mix by 2: 3,000-token prompts of cv² 2 with 10-token outputs at 10/s on
one-gpu-8b need 4 (98.17 % at 3, 99.41 % at 4) and the model says 6 (4 with exponential prompts
in the tail): the replay's router sends arrivals away from a replica that is prefilling, which a
random router, the model's, does not (one replica fed 2/s of that mix misses 1.53 % of TPOTs).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from autoscaler.policy import lengths
from autoscaler.policy.capacity import Demand, size
from replay import report
from replay import stationary as stationary_grid
from replay.policies import StaticPolicy
from replay.policies.predictive import replica_profile, slo_target
from replay.profiles import ONE_GPU_8B, REFERENCE_70B, Scenario
from replay.simulate import simulate
from replay.slo import SloSpec
from replay.trace import Trace

TOKEN_AWARE = replace(REFERENCE_70B, slo=SloSpec(ttft_s=2.0, ttft_tokens_per_s=4000.0, tpot_s=0.2))


def stationary(
    rate: float,
    prompt: float,
    output: float,
    duration_s: float = 900.0,
    shape: float = 2.0,
    output_shape: float | None = None,
) -> Trace:
    """Poisson arrivals of gamma prompts and outputs around their means (the outputs' shape the
    prompts' unless given)."""
    rng = np.random.default_rng(1)
    n = int(rate * duration_s)
    arrival = np.cumsum(rng.exponential(1.0 / rate, n))
    inputs = np.maximum(1, rng.gamma(shape, prompt / shape, n)).astype(np.int64)
    out_shape = shape if output_shape is None else output_shape
    outputs = np.maximum(1, rng.gamma(out_shape, output / out_shape, n)).astype(np.int64)
    return Trace("stationary", arrival, inputs, outputs)


def attainment(trace: Trace, scenario: Scenario, replicas: int) -> float:
    result = simulate(trace, scenario, StaticPolicy(replicas), max_tail_s=1e6)
    return float(report.policy_summary(result)["slo_attainment"])


# Under the least-loaded router the pooled tail (leastloaded.pooled) is 2 under on two cases: heavy
# prefills (8,000-token prompts; 3,000-token prompts of cv² 2), where one replica's own tail (an
# M/G/1 of the mean prompt's prefill time and an exponential decay) is short of the replay's (at
# 2,000-token prompts of cv² 2, 3 req/s: 2.89 % of waits past the slack where it says 1.07 %); the
# random split's tail, flat in the count, had hidden that at many replicas (docs/policy-history.md,
# "A pooled TTFT tail"). Held here as they are, so that a change to either shows.
POOLED_UNDER = {(3.0, 8000.0), (20.0, 3000.0)}


@pytest.mark.parametrize(
    ("rate", "prompt", "output", "scenario", "shape"),
    [
        pytest.param(60.0, 1000.0, 200.0, REFERENCE_70B, 2.0, id="chat 60/s"),
        pytest.param(150.0, 300.0, 100.0, REFERENCE_70B, 2.0, id="short 150/s (TPOT binds)"),
        pytest.param(15.0, 3000.0, 600.0, REFERENCE_70B, 2.0, id="rag 15/s (KV binds)"),
        pytest.param(30.0, 2000.0, 150.0, REFERENCE_70B, 2.0, id="prompt-heavy 30/s"),
        pytest.param(8.0, 4000.0, 300.0, TOKEN_AWARE, 2.0, id="4k prompts, length-aware TTFT"),
        pytest.param(4.0, 6000.0, 200.0, TOKEN_AWARE, 2.0, id="6k prompts, length-aware TTFT"),
        pytest.param(3.0, 8000.0, 300.0, TOKEN_AWARE, 2.0, id="8k prompts, length-aware TTFT"),
        pytest.param(10.0, 2048.0, 28.0, REFERENCE_70B, 1.0, id="code-like 10/s (TPOT tail binds)"),
        pytest.param(10.0, 3000.0, 10.0, ONE_GPU_8B, 1.0, id="3k prompts, 10-token outputs, 8B (TPOT tail)"),
        # lengths of cv² 2 and 0.25 (the engines' histograms give the spread; lengths.py): at cv² 2
        # the exponential's cs² of 1 said 4 where the least fleet is 7 (94.47 % at 4, 99.21 % at 7)
        pytest.param(60.0, 1000.0, 200.0, REFERENCE_70B, 0.5, id="chat 60/s, lengths cv2 2"),
        pytest.param(20.0, 3000.0, 100.0, ONE_GPU_8B, 0.5, id="3k prompts 20/s on 8B, lengths cv2 2"),
        pytest.param(8.0, 4000.0, 300.0, TOKEN_AWARE, 4.0, id="4k prompts, length-aware, lengths cv2 0.25"),
        # the TPOT tail at the lengths' cv² (tpottail.py): with exponential prompts in it the
        # model said 5 (TTFT) where the least fleet is 7 (98.92 % at 6, 99.11 % at 7); now 6 (TPOT)
        pytest.param(
            10.0, 2048.0, 28.0, REFERENCE_70B, (0.5, 1.0), id="code-like 10/s, prompts cv2 2 (TPOT tail)"
        ),
        # long outputs of cv² 1 (reasoning-like): the KV and the decode steps' reads hold p + o on
        # average, not p + o/2 (capacity.CONTEXT_OUTPUT_SHARE); at p + o/2 the model said 9 where
        # the least fleet is 12 (10: 26.61 %, 11: 39.33 %, the engines thrash on preemptions; 12: 100 %)
        pytest.param(40.0, 1000.0, 1500.0, ONE_GPU_8B, (2.0, 1.0), id="long outputs 40/s on 8B (KV binds)"),
    ],
)
@pytest.mark.parametrize("least_loaded", [False, True], ids=["random router", "least-loaded router"])
def test_the_model_is_within_one_of_the_least_fleet_meeting_the_slo(
    rate: float,
    prompt: float,
    output: float,
    scenario: Scenario,
    shape: float | tuple[float, float],
    least_loaded: bool,
) -> None:
    shapes = shape if isinstance(shape, tuple) else (shape, shape)  # prompts', outputs'
    trace = stationary(rate, prompt, output, shape=shapes[0], output_shape=shapes[1])
    x = trace.input_tokens.astype(float)
    demand = Demand(rate, rate * float(x.mean()), rate * float(trace.output_tokens.mean()))
    slo = slo_target(scenario)
    profile = replica_profile(scenario.engine)
    # the prompts' and the outputs' spreads as the engines' histograms give them (lengths.py)
    y = trace.output_tokens.astype(float)
    spread = lengths.with_outputs(
        lengths.spread(profile, float(x.mean()), float((x * x).mean() / x.mean() ** 2 - 1.0)),
        float((y * y).mean() / y.mean() ** 2 - 1.0),
    )
    n = size(profile, slo, demand, **spread, least_loaded=least_loaded).replicas
    assert n >= 3, "a case too small to tell"
    if least_loaded and (rate, prompt) in POOLED_UNDER:  # the known limit: the least fleet is n + 2
        assert attainment(trace, scenario, n + 1) < slo.attainment
        assert attainment(trace, scenario, n + 2) >= slo.attainment
        return
    assert attainment(trace, scenario, n + 1) >= slo.attainment
    assert attainment(trace, scenario, n - 2) < slo.attainment


@pytest.mark.parametrize(
    ("scenario", "rate"),
    [
        pytest.param(REFERENCE_70B, 50.0, id="mix 50/s on 70B"),
        pytest.param(ONE_GPU_8B, 80.0, id="mix 80/s on 8B"),
    ],
)
def test_a_mix_of_long_answers_among_short_ones_is_within_one_given_the_outputs_spread(
    scenario: Scenario, rate: float
) -> None:
    """The stationary grid's `mix` (replay/stationary.py: 60 % chat, 20 % 4,000-token prompts, 20 %
    1,500-token answers of cv² 1), whose outputs have cv² 3.5: a running request holds p + 2.2·o of
    context, where the geometric of their mean (cv² 1, what no output-length histogram leaves) says
    p + o, and the model said 10 on both where the replay's least fleet is 12 (the grid's `least`,
    behind its warm-up). Given the outputs' spread (replay.stationary.model_count, as the engines'
    histograms give it) it says 11 and 12, within one, under the least-loaded router."""
    trace = stationary_grid.poisson_trace("mix", rate, duration_s=900.0)
    n = stationary_grid.model_count(scenario, trace, rate)
    goal = slo_target(scenario).attainment
    assert attainment(trace, scenario, n + 1) >= goal
    assert attainment(trace, scenario, n - 2) < goal


@pytest.mark.parametrize(
    ("rate", "prompt", "scenario"),
    [
        pytest.param(5.4, 11_600.0, ONE_GPU_8B, id="Mooncake-like 5.4/s on 8B"),
        pytest.param(1.8, 11_200.0, REFERENCE_70B, id="Mooncake-like 1.8/s on 70B"),
    ],
)
def test_where_no_fleet_meets_the_slo_the_least_loaded_count_is_at_the_ceiling(
    rate: float, prompt: float, scenario: Scenario
) -> None:
    """Long prompts of cv² 1.7 and 200-token outputs at about one request in flight a replica: a
    sixth (8B) to a quarter (70B) of the prompts miss 2 s even alone, so no fleet reaches 99 %. The
    replay's least-loaded router sends a request to an idle replica unless every replica holds one,
    so its waits vanish once the replicas outnumber the requests in flight; the least-loaded tail
    (leastloaded.py) plans the waits to miss at most the attainment's 1 %: within 3 replicas of the
    least fleet whose attainment is within 1 point of the ceiling (the replay at 3x the count). The
    random router's per-replica tail is pessimistic there, and its budget (the waits may miss as
    often as the prompts too long) under-sizes: 15 (8B) and 8 (70B), 2.6 and 8.8 points under."""
    trace = stationary(rate, prompt, 200.0, shape=0.6)
    x = trace.input_tokens.astype(float)
    demand = Demand(rate, rate * float(x.mean()), rate * float(trace.output_tokens.mean()))
    slo = slo_target(scenario)
    profile = replica_profile(scenario.engine)
    spread = lengths.spread(profile, float(x.mean()), float((x * x).mean() / x.mean() ** 2 - 1.0))
    n = size(profile, slo, demand, **spread, least_loaded=True).replicas
    random = size(profile, slo, demand, **spread).replicas
    knee = attainment(trace, scenario, 3 * n) - (1.0 - slo.attainment)
    assert knee < slo.attainment - 0.1, "a case where 99 % is reachable"
    assert attainment(trace, scenario, n) >= knee
    assert attainment(trace, scenario, n - 3) < knee
    assert attainment(trace, scenario, random) < knee
