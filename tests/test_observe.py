"""The observation builder (autoscaler/policy/observe.py): cluster facts -> Observation, the horizon
choice, starting replicas' ready times. Table-driven; the numbers are worked out in each case."""

from __future__ import annotations

import pytest

from autoscaler.policy.observation import MetricReading
from autoscaler.policy.observe import (
    DEFAULT_MIN_STARTUP_SAMPLES,
    ClusterFacts,
    Horizon,
    HorizonSource,
    StartingReplica,
    fit,
    horizon_view,
    observe,
    quantile,
    typical_load_s,
)
from autoscaler.policy.spec import AutoscalerSpec, ColdStartSpec, MetricSpec, PredictionSpec, TargetType

NOW = 1_000.0
# 140 GB at 10 GB/s: 14 s, plus 6 s warm-up = 20 s on a node with room and the image; 300 s for a node
COLD = ColdStartSpec(
    weights_gb=140, storage_gbps=10, warmup_s=6, node_provision_s=300, gpus_per_replica=1, gpus_per_node=8
)
METRIC = MetricSpec("queue", TargetType.VALUE, 8000)


def spec(*, cold: ColdStartSpec | None = COLD, prediction: PredictionSpec | None = None) -> AutoscalerSpec:
    return AutoscalerSpec(
        min_replicas=1, max_replicas=20, metrics=(METRIC,), cold_start=cold, prediction=prediction
    )


PREDICT = PredictionSpec()
SAMPLES = (90.0, 120.0, 200.0)  # p90 = 184, median 120


def facts(**kw: object) -> ClusterFacts:
    base: dict[str, object] = {
        "spec_replicas": 3,
        "status_replicas": 3,
        "ready_pods": 3,
        "metrics": {"queue": MetricReading.of(8)},
        "gpus_per_replica": 1,
        "free_gpus_per_node": (8,),
    }
    base.update(kw)
    return ClusterFacts(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("the_spec", "horizon", "the_facts", "lead"),
    [
        pytest.param(
            spec(), Horizon(), facts(load_samples_s=SAMPLES), None, id="no prediction: the core's rule"
        ),
        pytest.param(
            spec(prediction=PredictionSpec(lead_time_s=30)),
            Horizon(),
            facts(load_samples_s=SAMPLES),
            None,
            id="a fixed leadTimeSeconds wins",
        ),
        pytest.param(
            spec(prediction=PREDICT),
            Horizon(),
            facts(load_samples_s=SAMPLES[:2]),
            None,
            id="Auto, 2 samples: model",
        ),
        pytest.param(
            spec(prediction=PREDICT), Horizon(), facts(load_samples_s=SAMPLES), 184.0, id="Auto, 3: p90"
        ),
        pytest.param(
            spec(prediction=PREDICT),
            Horizon(quantile=0.5),
            facts(load_samples_s=SAMPLES),
            120.0,
            id="Auto, the median",
        ),
        pytest.param(
            spec(prediction=PREDICT),
            Horizon(),
            facts(load_samples_s=SAMPLES, free_gpus_per_node=(0,)),
            184.0 + 300,
            id="no GPU free: the p90 plus node provisioning",
        ),
        pytest.param(
            spec(prediction=PREDICT),
            Horizon(),
            facts(load_samples_s=SAMPLES, free_gpus_per_node=None),
            184.0,
            id="capacity unknown: no provisioning added",
        ),
        pytest.param(
            spec(prediction=PREDICT),
            Horizon(HorizonSource.COLD_START_MODEL),
            facts(load_samples_s=SAMPLES),
            None,
            id="ColdStartModel: the model even with samples",
        ),
        pytest.param(
            spec(prediction=PREDICT),
            Horizon(HorizonSource.OBSERVED),
            facts(load_samples_s=SAMPLES[:1]),
            0.0,
            id="ObservedStartups, too few: no horizon",
        ),
        pytest.param(
            spec(cold=None, prediction=PREDICT),
            Horizon(),
            facts(load_samples_s=()),
            0.0,
            id="no model, no samples: no horizon",
        ),
    ],
)
def test_horizon_choice(
    the_spec: AutoscalerSpec, horizon: Horizon, the_facts: ClusterFacts, lead: float | None
) -> None:
    observation = observe(the_spec, horizon, the_facts, NOW)
    assert observation.lead_time_s == (pytest.approx(lead) if lead is not None else None)


@pytest.mark.parametrize(
    ("replica", "samples", "ready_at"),
    [
        pytest.param(
            StartingReplica(NOW - 30, NOW - 10), (), NOW - 10 + 20, id="scheduled: + the model's 20 s"
        ),
        pytest.param(StartingReplica(NOW - 300, NOW - 200), (), NOW, id="overdue: never in the past"),
        pytest.param(
            StartingReplica(NOW - 30, NOW - 10), SAMPLES, NOW - 10 + 120, id="scheduled: + observed median"
        ),
        pytest.param(
            StartingReplica(NOW - 30, None, unschedulable=True), (), NOW + 300 + 20, id="needs a node"
        ),
        pytest.param(StartingReplica(NOW - 1, None), (), NOW + 20, id="pending, not yet scheduled"),
    ],
)
def test_starting_replicas_ready_times(
    replica: StartingReplica, samples: tuple[float, ...], ready_at: float
) -> None:
    observation = observe(
        spec(prediction=PREDICT), Horizon(), facts(starting=(replica,), load_samples_s=samples), NOW
    )
    assert observation.starting_ready_at == (pytest.approx(ready_at),)


def test_cluster_facts_reach_the_model_only_with_a_cold_start_spec() -> None:
    the_facts = facts(free_gpus_per_node=(4, 8), image_cached_nodes=(1,), loading_remaining_gb=(70.0,))
    with_model = observe(spec(prediction=PREDICT), Horizon(), the_facts, NOW)
    assert (with_model.free_gpus_per_node, with_model.image_cached_nodes) == ((4, 8), (1,))
    assert with_model.loading_remaining_gb == (70.0,)
    without = observe(spec(cold=None), Horizon(), the_facts, NOW)
    assert (without.free_gpus_per_node, without.image_cached_nodes, without.loading_remaining_gb) == (
        (),
        (),
        (),
    )


def test_what_the_horizon_view_reports() -> None:
    view = horizon_view(spec(prediction=PREDICT), Horizon(), facts(load_samples_s=SAMPLES))
    assert (view.observed_load_s, view.expected_load_s, view.provision_s) == (
        pytest.approx(184.0),
        pytest.approx(120.0),
        300.0,
    )
    assert typical_load_s(COLD) == pytest.approx(20.0)
    assert DEFAULT_MIN_STARTUP_SAMPLES == 3


@pytest.mark.parametrize(
    ("free", "g", "k", "fitting"),
    [
        pytest.param((4, 4, 4, 4), 8, 1, 0, id="16 idle GPUs as 4+4+4+4 hold no 8-GPU replica"),
        pytest.param((8, 16), 8, 4, 3, id="one node holds two"),
        pytest.param((), 0, 5, 5, id="no GPUs asked: anything fits"),
    ],
)
def test_fit(free: tuple[int, ...], g: int, k: int, fitting: int) -> None:
    assert fit(free, g, k).fitting == fitting


def test_quantile_interpolates_as_numpy() -> None:
    assert quantile([90, 120, 200], 0.9) == pytest.approx(184.0)
    with pytest.raises(ValueError, match="no values"):
        quantile([], 0.5)
