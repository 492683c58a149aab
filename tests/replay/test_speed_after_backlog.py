"""The learned speed after a backlog, on real traffic (../shared/traces, when present): ServeGen
m-small (alibaba/ServeGen, language, day 1, 11:00-14:00) at x 0.13 on reference-70b, seed 0, as
the holdout league plays it. Its warm-up tips a fleet of six into a backlog (rare 10,000-38,000-token
prompts among a mean of ~210) and the fleet grows to twelve while the backlog drains on the six it
came to. The replay's engine is the profile, so the speed is the profile's but for the mix's own
step share; read from the twelve's totals, it was x0.50, and the fleet then ran 24-37 replicas
for an hour where 13-17 were needed (166 GPU-h against the HPA's 104). Since session 46 a tick is
saturated only when the prompts waiting exceed one step's token budget on every replica
(speedlearn.py), and this warm-up's backlog never does: no tick of it is a sample, and the speed
stays the profile's (session 37's backlog rule, which this test was written for, is held to its
cases in tests/test_speedlearn.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.cli import run_policy
from replay.policies import PolicyParams
from replay.profiles import REFERENCE_70B
from replay.traces import load_trace

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
M_SMALL = SHARED / "servegen_language_m-small.tar.gz"
pytestmark = pytest.mark.skipif(not M_SMALL.is_file(), reason=f"{M_SMALL} is absent")


def test_replicas_joining_a_backlog_do_not_teach_a_slow_engine() -> None:
    trace = load_trace(M_SMALL, "servegen", start_s=39600, end_s=50400, rate_scale=0.13, seed=0)
    result = run_policy(trace, REFERENCE_70B, "predictive", PolicyParams(), warmup_s=1800.0)
    warmup = [(t, d.plan.speed) for t, _, d in result.decisions if d.plan is not None and t < 0]
    backlog = [t for t, obs, _ in result.decisions if t < 0 and obs.ready_pods == 12]
    assert backlog, "the warm-up no longer grows through a backlog to twelve: the test shows nothing"
    slowest = min(s for _, s in warmup)
    assert slowest > 0.7, f"learned x{slowest:.2f} from the drain"
