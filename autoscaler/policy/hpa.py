"""Upstream HPA arithmetic for External metrics, transcribed from kubernetes/kubernetes
`pkg/controller/podautoscaler/horizontal.go` (docs/policy.md, "Parity with the HPA"): the metrics'
proposals combined, stabilization, rate limits and bounds. One metric's proposal
(`replica_calculator.go`) is replicacalc.py's.

Everything here is float64 and int arithmetic exactly as upstream does it, off-by-ones included:
`ceil(100 * (1 + 10/100))` is 111, not 110, and we keep it that way on purpose.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, NamedTuple, final

from autoscaler.policy import memo
from autoscaler.policy.record import Record
from autoscaler.policy.replicacalc import MAX_INT32, MIN_INT32, MetricError, MetricProposal
from autoscaler.policy.spec import (
    LEGACY_SCALE_UP_MINIMUM,
    RatePolicyType,
    ScalingRules,
    SelectPolicy,
)
from autoscaler.policy.state import Recommendation, ScaleEvent


class Condition(NamedTuple):
    type: str  # AbleToScale | ScalingActive | ScalingLimited
    status: bool
    reason: str
    message: str


@final
class MetricsRecommendation(Record):
    """The max over all metrics, or why there is none (upstream's computeReplicasForMetrics)."""

    FIELDS = ("replicas", "metric", "proposals", "condition")

    replicas: int | None  # None: no usable recommendation, do not scale
    metric: str  # the first metric that reached the maximum
    proposals: Mapping[str, MetricProposal | MetricError]
    condition: Condition  # ScalingActive

    def __init__(
        self,
        replicas: int | None,
        metric: str,
        proposals: Mapping[str, MetricProposal | MetricError],
        condition: Condition,
    ) -> None:
        self.replicas = replicas
        self.metric = metric
        self.proposals = proposals
        self.condition = condition


def combine_metrics(
    proposals: Mapping[str, MetricProposal | MetricError], spec_replicas: int
) -> MetricsRecommendation:
    """Largest proposal wins; an invalid metric blocks a scale-down but never a scale-up."""
    best = 0
    best_metric = ""
    first_error: tuple[str, MetricError] | None = None
    invalid = 0
    table = proposals if isinstance(proposals, dict) else dict(proposals)  # a dict's walk is compiled
    for name, proposal in table.items():
        if isinstance(proposal, MetricError):
            invalid += 1
            if first_error is None:
                first_error = (name, proposal)
        elif best == 0 or proposal.replicas > best:
            best, best_metric = proposal.replicas, name
    if first_error is not None and (invalid >= len(proposals) or best < spec_replicas):
        err = first_error[1]
        return MetricsRecommendation(
            None,
            "",
            proposals,
            Condition(
                "ScalingActive",
                False,
                err.reason,
                f"the HPA was unable to compute the replica count: {err.message}",
            ),
        )
    valid = _VALID_METRIC.get(best_metric)
    if valid is None:
        valid = Condition(
            "ScalingActive",
            True,
            "ValidMetricFound",
            f"the HPA was able to successfully calculate a replica count from external metric {best_metric}",
        )
        memo.remember(_VALID_METRIC, best_metric, valid, 1024)
    return MetricsRecommendation(best, best_metric, proposals, valid)


_VALID_METRIC: Final[dict[str, Condition]] = {}  # ScalingActive for each metric name (immutable, so shared)


# --- stabilization ---------------------------------------------------------------------------

READY_FOR_NEW_SCALE: Final = Condition(
    "AbleToScale", True, "ReadyForNewScale", "recommended size matches current size"
)
SCALE_UP_STABILIZED: Final = Condition(
    "AbleToScale",
    True,
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
)
SCALE_DOWN_STABILIZED: Final = Condition(
    "AbleToScale",
    True,
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent recommendation",
)


def _store(
    history: Sequence[Recommendation], new: Recommendation, cutoff: float
) -> tuple[Recommendation, ...]:
    """Upstream's bookkeeping, slot for slot: overwrite the LAST entry older than `cutoff`, else append.

    The other expired entries stay; a window lengthened later would read them again.
    """
    for i in range(len(history) - 1, -1, -1):
        if history[i].at < cutoff:
            return (*history[:i], new, *history[i + 1 :])
    return (*history, new)


def stabilize_legacy(
    history: Sequence[Recommendation], raw: int, now: float, window_s: float
) -> tuple[int, tuple[Recommendation, ...], Condition]:
    """Max over recommendations with age <= window; the raw value is stored."""
    cutoff = now - window_s
    stabilized = raw
    for r in history:
        if r.at >= cutoff and r.replicas > stabilized:  # upstream: !Before(cutoff)
            stabilized = r.replicas
    cond = SCALE_DOWN_STABILIZED if stabilized != raw else READY_FOR_NEW_SCALE
    return stabilized, _store(history, Recommendation(now, raw), cutoff), cond


def stabilize_behavior(
    history: Sequence[Recommendation],
    raw: int,
    current: int,
    now: float,
    up: ScalingRules,
    down: ScalingRules,
) -> tuple[int, tuple[Recommendation, ...], Condition]:
    """Scale-up window takes the min, scale-down window the max, both over one history."""
    up_cutoff = now - up.stabilization_window_s
    down_cutoff = now - down.stabilization_window_s
    cutoff = down_cutoff if down_cutoff < up_cutoff else up_cutoff  # min(), without the builtin's call
    up_rec = down_rec = raw
    last = -1  # _store's slot: the last entry older than cutoff, found here rather than by a second walk
    kept = tuple(history)  # walked by index when compiled (a Sequence is iterated); concatenated below
    for i, r in enumerate(kept):
        at, replicas = r.at, r.replicas
        if at > up_cutoff and replicas < up_rec:  # upstream: After(cutoff), age < window
            up_rec = replicas
        if at > down_cutoff:
            if replicas > down_rec:
                down_rec = replicas
        elif at < cutoff:  # older than both cutoffs (cutoff <= down_cutoff), so never in the window
            last = i
    stabilized = current
    if stabilized < up_rec:
        stabilized = up_rec
    if stabilized > down_rec:
        stabilized = down_rec
    if stabilized == raw:
        cond = READY_FOR_NEW_SCALE
    else:
        cond = SCALE_UP_STABILIZED if raw >= current else SCALE_DOWN_STABILIZED
    new = Recommendation(now, raw)
    if last < 0:  # _store's result, its slot found above
        return stabilized, kept + (new,), cond  # noqa: RUF005
    return stabilized, kept[:last] + (new,) + kept[last + 1 :], cond  # noqa: RUF005


# --- rate limits and bounds ------------------------------------------------------------------


def _changes_in_period(events: Iterable[ScaleEvent], now: float, period_s: int) -> int:
    cutoff = now - period_s
    total = 0
    for at, change in events:
        if at > cutoff:  # strictly newer than now - period
            total += change
    return total


def period_start(
    current: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    now: float,
    period_s: int,
) -> int:
    """The count at the start of the period: both lists count, whatever the direction of the limit."""
    if not up_events and not down_events:  # most ticks: nothing scaled within any period
        return current
    return (
        current
        - _changes_in_period(up_events, now, period_s)
        + _changes_in_period(down_events, now, period_s)
    )


def scale_up_limit(
    current: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    rules: ScalingRules,
    now: float,
) -> int:
    """calculateScaleUpLimitWithScalingRules."""
    if rules.select_policy is SelectPolicy.DISABLED:
        return current
    pick_min = rules.select_policy is SelectPolicy.MIN
    result = MAX_INT32 if pick_min else 0
    for policy in rules.policies:
        start = period_start(current, up_events, down_events, now, policy.period_s)
        if policy.type is RatePolicyType.PODS:
            proposed = start + policy.value
        else:  # the proposal is rounded up so that a small percentage still adds a pod
            proposed = math.ceil(float(start) * (1 + float(policy.value) / 100))
        result = min(result, proposed) if pick_min else max(result, proposed)
    return result


def scale_down_limit(
    current: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    rules: ScalingRules,
    now: float,
) -> int:
    """calculateScaleDownLimitWithBehaviors: Max selects the lowest floor (the most change)."""
    if rules.select_policy is SelectPolicy.DISABLED:
        return current
    pick_max = rules.select_policy is SelectPolicy.MIN
    result = MIN_INT32 if pick_max else MAX_INT32
    for policy in rules.policies:
        start = period_start(current, up_events, down_events, now, policy.period_s)
        if policy.type is RatePolicyType.PODS:
            proposed = start - policy.value
        else:  # int32(float64) truncates toward zero: the number removed is rounded up
            proposed = int(float(start) * (1 - float(policy.value) / 100))
        result = max(result, proposed) if pick_max else min(result, proposed)
    return result


WITHIN_RANGE: Final = Condition(
    "ScalingLimited", False, "DesiredWithinRange", "the desired count is within the acceptable range"
)
TOO_FEW_REPLICAS = Condition(
    "ScalingLimited",
    True,
    "TooFewReplicas",
    "the desired replica count is less than the minimum replica count",
)


def limit_with_behavior(
    desired: int,
    current: int,
    min_replicas: int,
    max_replicas: int,
    up: ScalingRules,
    down: ScalingRules,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    now: float,
) -> tuple[int, Condition]:
    """convertDesiredReplicasWithBehaviorRate: max applies only going up, min only going down."""
    if desired > current:
        limit = max(scale_up_limit(current, up_events, down_events, up, now), current)
        if max_replicas > limit:
            upper, reason = limit, "ScaleUpLimit"
            message = "the desired replica count is increasing faster than the maximum scale rate"
        else:
            upper, reason = max_replicas, "TooManyReplicas"
            message = "the desired replica count is more than the maximum replica count"
        if desired > upper:
            return upper, Condition("ScalingLimited", True, reason, message)
    elif desired < current:
        limit = min(scale_down_limit(current, up_events, down_events, down, now), current)
        if min_replicas < limit:
            lower, reason = limit, "ScaleDownLimit"
            message = "the desired replica count is decreasing faster than the maximum scale rate"
        else:
            lower, reason = min_replicas, "TooFewReplicas"
            message = "the desired replica count is less than the minimum replica count"
        if desired < lower:
            return lower, Condition("ScalingLimited", True, reason, message)
    return desired, WITHIN_RANGE


def limit_legacy(
    desired: int,
    current: int,
    min_replicas: int,
    max_replicas: int,
    scale_up_factor: float,
    start: int | None = None,
) -> tuple[int, Condition]:
    """convertDesiredReplicasWithRules: the scale-up cap is max(factor × current, 4).

    Upstream applies it once per sync period; `start` (the count before the changes of the
    current period, None: `current`) keeps it per period when decisions come more often: at a 5 s
    tick, 2x per 15 s rather than 8x. Never below `current`: a cap cannot turn into a scale-down."""
    base = current if start is None else start
    scale_up_cap = max(int(max(scale_up_factor * base, LEGACY_SCALE_UP_MINIMUM)), current)
    if max_replicas > scale_up_cap:
        upper, reason = scale_up_cap, "ScaleUpLimit"
        message = "the desired replica count is increasing faster than the maximum scale rate"
    else:
        upper, reason = max_replicas, "TooManyReplicas"
        message = "the desired replica count is more than the maximum replica count"
    if desired < min_replicas:
        return min_replicas, TOO_FEW_REPLICAS
    if desired > upper:
        return upper, Condition("ScalingLimited", True, reason, message)
    return desired, WITHIN_RANGE


def record_scale_event(
    events: Sequence[ScaleEvent], change: int, now: float, longest_period_s: int
) -> tuple[ScaleEvent, ...]:
    """storeScaleEvent: overwrite the last event older than the direction's longest period, else append.

    The other outdated events stay, and a policy of the other direction with a longer period
    still counts them when it works out its period start, exactly as upstream.
    """
    for i in range(len(events) - 1, -1, -1):
        if events[i].at < now - longest_period_s:
            return (*events[:i], ScaleEvent(now, change), *events[i + 1 :])
    return (*events, ScaleEvent(now, change))
