"""The policies a comparison can name, and build_policy(name, ...) over them.

To add a policy: a module with `build(ctx: PolicyContext) -> ReplayPolicy`, and a row in BUILDERS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from replay.fleet import Fleet
from replay.policies import clairvoyant, hpa, keda, kpa, planner, predictive, static
from replay.policies.base import PolicyContext, PolicyError, ReplayPolicy
from replay.policies.params import PolicyParams
from replay.profiles import Scenario
from replay.trace import Trace

BUILDERS: Mapping[str, Callable[[PolicyContext], ReplayPolicy]] = {
    "static": static.build,
    "static-peak": static.build_peak,
    "static-mean": static.build_mean,
    "hpa": hpa.build,
    "keda": keda.build,
    "keda-cached": keda.build_cached,
    "kpa": kpa.build,
    "planner": planner.build,
    "predictive": predictive.build,
    "clairvoyant": clairvoyant.build,
}
POLICY_NAMES = tuple(BUILDERS)


def build_policy(
    name: str,
    scenario: Scenario,
    trace: Trace,
    params: PolicyParams,
    lead_s: Callable[[], float],
    fleet: Callable[[], Fleet | None] = lambda: None,
    *,
    warmup_s: float = 0.0,
    scored: Trace | None = None,
) -> ReplayPolicy:
    """One policy by name (or static-N); `lead_s` is the fleet's current time to ready and `fleet`
    the fleet it runs on (for the clairvoyant); with a warm-up, `trace` is the prefixed trace the
    loop plays and `scored` the trace itself (PolicyContext)."""
    ctx = PolicyContext(scenario, trace, params, lead_s, fleet, warmup_s, scored)
    builder = BUILDERS.get(name)
    if builder is not None:
        return builder(ctx)
    base, _, arg = name.partition("-")
    if base == "static" and arg:
        try:
            n = int(arg)
        except ValueError:
            raise PolicyError(f"policy {name!r}: expected static-N with N an integer") from None
        return static.build(ctx, n)
    raise PolicyError(f"unknown policy {name!r} (known: {', '.join(POLICY_NAMES)}, static-N)")
