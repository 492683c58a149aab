"""Properties of the decision over random specs, histories and observations (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy.decide import decide
from autoscaler.policy.observation import MetricReading, Observation
from autoscaler.policy.replicacalc import within_tolerance
from autoscaler.policy.spec import (
    AutoscalerSpec,
    Behavior,
    ForecasterKind,
    MetricSpec,
    PredictionSpec,
    RatePolicy,
    RatePolicyType,
    ScalingRules,
    SelectPolicy,
    TargetType,
)
from autoscaler.policy.state import PolicyState, Recommendation, ScaleEvent

NOW = 1_764_410_400.0

policies = st.lists(
    st.builds(
        RatePolicy,
        st.sampled_from(list(RatePolicyType)),
        st.integers(1, 200),
        st.integers(1, 1800),
    ),
    min_size=1,
    max_size=3,
).map(tuple)
rules = st.builds(
    ScalingRules,
    st.integers(0, 3600),
    st.sampled_from(list(SelectPolicy)),
    policies,
    st.one_of(st.none(), st.floats(0, 2)),
)
behaviors = st.one_of(st.none(), st.builds(Behavior, rules, rules))
predictions = st.one_of(
    st.none(),
    st.builds(
        PredictionSpec,
        st.sampled_from([ForecasterKind.LAST, ForecasterKind.LINEAR, ForecasterKind.HOLT]),
        lead_time_s=st.floats(0, 3600),
    ),
)


@st.composite
def specs(draw: st.DrawFn) -> AutoscalerSpec:
    low = draw(st.integers(1, 20))
    high = draw(st.integers(low, 200))
    kind = draw(st.sampled_from(list(TargetType)))
    return AutoscalerSpec(
        min_replicas=low,
        max_replicas=high,
        metrics=(MetricSpec("m", kind, draw(st.integers(1, 10**6))),),
        behavior=draw(behaviors),
        prediction=draw(predictions),
        tolerance=draw(st.floats(0, 1)),
    )


histories = st.lists(
    st.builds(Recommendation, st.floats(NOW - 4000, NOW), st.integers(0, 300)), max_size=8
).map(lambda recs: tuple(sorted(recs, key=lambda r: r.at)))
events = st.lists(st.builds(ScaleEvent, st.floats(NOW - 2000, NOW), st.integers(1, 50)), max_size=4).map(
    tuple
)
values = st.lists(st.integers(0, 10**9), min_size=1, max_size=5).map(tuple)


@settings(max_examples=150, deadline=None)
@given(spec=specs(), history=histories, up=events, down=events, current=st.integers(0, 250), vals=values)
def test_bounds_always_respected(
    spec: AutoscalerSpec,
    history: tuple[Recommendation, ...],
    up: tuple[ScaleEvent, ...],
    down: tuple[ScaleEvent, ...],
    current: int,
    vals: tuple[int, ...],
) -> None:
    state = PolicyState(history, up, down)
    obs = Observation(current, current, current, {"m": MetricReading(vals)})
    decision, _ = decide(spec, state, obs, NOW)
    if current == 0:
        assert decision.desired_replicas == 0  # paused: minReplicas >= 1 here
    elif spec.min_replicas <= current <= spec.max_replicas:
        assert spec.min_replicas <= decision.desired_replicas <= spec.max_replicas
    else:
        assert decision.desired_replicas in (spec.min_replicas, spec.max_replicas)


@settings(max_examples=150, deadline=None)
@given(spec=specs(), current=st.integers(1, 200), ratio=st.floats(0.0, 3.0))
def test_tolerance_band_holds(spec: AutoscalerSpec, current: int, ratio: float) -> None:
    """Inside the band (and with no other history), nothing moves."""
    metric = spec.metrics[0]
    if metric.target_type is TargetType.AVERAGE_VALUE:
        total = round(ratio * metric.target_milli * current)
        actual = total / (metric.target_milli * current)
    else:
        total = round(ratio * metric.target_milli)
        actual = total / metric.target_milli
    if not (spec.min_replicas <= current <= spec.max_replicas) or spec.prediction is not None:
        return
    obs = Observation(current, current, current, {"m": MetricReading((total,))})
    decision, _ = decide(spec, PolicyState(), obs, NOW)
    if within_tolerance(actual, spec.tolerances):
        assert decision.desired_replicas == current
        assert decision.stages[0].after == current


@settings(max_examples=150, deadline=None)
@given(
    spec=specs().filter(lambda s: s.behavior is not None),
    history=histories,
    current=st.integers(1, 200),
    vals=values,
)
def test_stabilization_never_moves_against_the_windows_rule(
    spec: AutoscalerSpec, history: tuple[Recommendation, ...], current: int, vals: tuple[int, ...]
) -> None:
    """Behavior path: the stabilized count lies between current and the raw recommendation."""
    if not spec.min_replicas <= current <= spec.max_replicas:
        return
    obs = Observation(current, current, current, {"m": MetricReading(vals)})
    decision, _ = decide(spec, PolicyState(history), obs, NOW)
    stab = next(s for s in decision.stages if s.name == "stabilization")
    raw = stab.before
    assert min(current, raw) <= stab.after <= max(current, raw)
    # scale-up window: min of recent; scale-down window: max of recent
    history = history or (Recommendation(NOW, current),)  # first sight seeds the current count
    recent_up = [r.replicas for r in history if r.at > NOW - spec.behavior.scale_up.stabilization_window_s]  # type: ignore[union-attr]
    recent_down = [
        r.replicas for r in history if r.at > NOW - spec.behavior.scale_down.stabilization_window_s
    ]  # type: ignore[union-attr]
    if raw > current:
        assert stab.after == max(current, min([raw, *recent_up]))
    elif raw < current:
        assert stab.after == min(current, max([raw, *recent_down]))


@settings(max_examples=150, deadline=None)
@given(spec=specs(), history=histories, current=st.integers(1, 200), vals=values)
def test_legacy_stabilization_only_holds_up(
    spec: AutoscalerSpec, history: tuple[Recommendation, ...], current: int, vals: tuple[int, ...]
) -> None:
    """Legacy path: the stabilized value is the max over the 300 s window, never below raw."""
    if spec.behavior is not None or not spec.min_replicas <= current <= spec.max_replicas:
        return
    obs = Observation(current, current, current, {"m": MetricReading(vals)})
    decision, state = decide(spec, PolicyState(history), obs, NOW)
    stab = next(s for s in decision.stages if s.name == "stabilization")
    history = history or (Recommendation(NOW, current),)  # first sight seeds the current count
    in_window = [r.replicas for r in history if r.at >= NOW - spec.downscale_stabilization_s]
    assert stab.after == max([stab.before, *in_window])
    assert Recommendation(NOW, stab.before) in state.recommendations  # the raw value is stored...
    expired = any(r.at < NOW - spec.downscale_stabilization_s for r in history)
    assert len(state.recommendations) == len(history) + (0 if expired else 1)  # ...in an expired slot
