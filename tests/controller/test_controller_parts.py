"""The controller's pure parts, table-driven: pod facts, learned cold starts, GPU capacity, timestamps,
metric lists, spec and state parsing, settings."""

from __future__ import annotations

from typing import Any

import pytest
from controller_harness import T0, autoscaler
from pydantic import ValidationError

from adapter.backend import MetricSample
from adapter.wire import metric_value_list
from autoscaler.controller import capacity, crd
from autoscaler.controller.coldstarts import ColdStartHistory, quantile
from autoscaler.controller.kubetime import micro_time, parse_time, rfc3339
from autoscaler.controller.metrics import reading_from_list
from autoscaler.controller.podfacts import Startup, gpu_request, summarize
from autoscaler.controller.report import with_deletions
from autoscaler.controller.settings import ControllerSettings
from autoscaler.policy.state import PolicyState, Recommendation, ScaleEvent


def pod(
    name: str = "p",
    *,
    phase: str = "Running",
    created: float = T0,
    ready_at: float | None = None,
    scheduled_at: float | None = None,
    unschedulable: bool = False,
    restarts: int = 0,
    deleting: bool = False,
    gpus: dict[str, Any] | None = None,
    node: str | None = None,
) -> dict[str, Any]:
    conditions = []
    if scheduled_at is not None:
        conditions.append(
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc3339(scheduled_at)}
        )
    if unschedulable:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"})
    if ready_at is not None:
        conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": rfc3339(ready_at)})
    meta: dict[str, Any] = {"name": name, "creationTimestamp": rfc3339(created)}
    if deleting:
        meta["deletionTimestamp"] = rfc3339(created + 1)
    container: dict[str, Any] = {"name": "c", "image": "vllm/vllm-openai:v1"}
    if gpus:
        container["resources"] = gpus
    spec: dict[str, Any] = {"containers": [container]}
    if node:
        spec["nodeName"] = node
    return {
        "metadata": meta,
        "spec": spec,
        "status": {
            "phase": phase,
            "conditions": conditions,
            "containerStatuses": [{"restartCount": restarts}],
        },
    }


@pytest.mark.parametrize(
    ("pods", "ready", "starting", "unschedulable", "startups"),
    [
        pytest.param(
            [pod(ready_at=T0 + 90, scheduled_at=T0 + 10)],
            1,
            0,
            0,
            [Startup("p", T0 + 90, 90.0, 80.0)],
            id="ready pod: creation -> Ready 90 s, of which 80 s after scheduling",
        ),
        pytest.param(
            [pod(ready_at=T0 + 90, restarts=1)],
            1,
            0,
            0,
            [],
            id="restarted container: ready, but no startup sample",
        ),
        pytest.param([pod(phase="Pending", scheduled_at=T0)], 0, 1, 0, [], id="scheduled, loading: starting"),
        pytest.param(
            [pod(phase="Pending", unschedulable=True)],
            0,
            1,
            1,
            [],
            id="unschedulable: starting, needs a node",
        ),
        pytest.param(
            [pod(ready_at=T0 + 5, deleting=True), pod("q", phase="Succeeded")],
            0,
            0,
            0,
            [],
            id="terminating and finished pods are ignored",
        ),
        pytest.param([pod(phase="Running")], 0, 1, 0, [], id="running without Ready: not ready"),
    ],
)
def test_pod_facts(
    pods: list[dict[str, Any]], ready: int, starting: int, unschedulable: int, startups: list[Startup]
) -> None:
    facts = summarize(pods)
    assert (facts.ready, len(facts.starting), facts.unschedulable, list(facts.startups)) == (
        ready,
        starting,
        unschedulable,
        startups,
    )


@pytest.mark.parametrize(
    ("resources", "init", "expected"),
    [
        pytest.param({"limits": {"nvidia.com/gpu": "8"}}, None, 8, id="limit alone is the request"),
        pytest.param(
            {"requests": {"nvidia.com/gpu": 2}, "limits": {"nvidia.com/gpu": 2}}, None, 2, id="request"
        ),
        pytest.param({"requests": {"cpu": "4"}}, None, 0, id="no GPUs"),
        pytest.param({"limits": {"nvidia.com/gpu": "1"}}, 4, 4, id="a larger init container wins"),
    ],
)
def test_gpu_request(resources: dict[str, Any], init: int | None, expected: int) -> None:
    obj = pod(gpus=resources)
    if init:
        obj["spec"]["initContainers"] = [
            {"name": "i", "resources": {"limits": {"nvidia.com/gpu": str(init)}}}
        ]
    assert gpu_request(obj) == expected


def startup(name: str, ready_at: float, seconds: float) -> Startup:
    return Startup(name, ready_at, seconds, seconds - 5)


def test_cold_start_history_takes_each_pod_once_and_keeps_the_newest() -> None:
    history = ColdStartHistory().add(
        [startup("a", 100, 60), startup("b", 100, 70)], keep=3, max_startup_s=3600
    )
    again = history.add(
        [startup("a", 100, 60), startup("b", 100, 70), startup("c", 100, 80)], keep=3, max_startup_s=3600
    )
    assert [s.pod for s in again.samples] == ["a", "b", "c"]  # c shares the newest second, under another name
    later = again.add([startup("d", 200, 90), startup("old", 50, 10)], keep=3, max_startup_s=3600)
    assert [s.pod for s in later.samples] == ["b", "c", "d"]  # older than the newest sample: already seen
    assert later.add([startup("e", 300, 7200)], keep=3, max_startup_s=3600) == later  # not a startup
    assert ColdStartHistory.from_dict(later.to_dict()) == later


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        pytest.param([10.0], 0.9, 10.0, id="one sample"),
        pytest.param([10.0, 20.0, 30.0, 40.0], 0.5, 25.0, id="median between two"),
        pytest.param([60.0, 62.0, 61.0, 300.0], 0.5, 61.5, id="median ignores the outlier"),
        pytest.param([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0], 0.9, 10.0, id="p90"),
    ],
)
def test_quantile(values: list[float], q: float, expected: float) -> None:
    assert quantile(values, q) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param({"x": 1}, "expected a list", id="not a list"),
        pytest.param(
            [{"readyTime": "2026-11-29T10:00:00Z", "startupSeconds": 5}], "missing loadSeconds", id="missing"
        ),
        pytest.param(
            [{"readyTime": "yesterday", "startupSeconds": 5, "loadSeconds": 1}],
            "not an RFC 3339",
            id="bad time",
        ),
        pytest.param(
            [{"readyTime": "2026-11-29T10:00:00Z", "startupSeconds": 5, "loadSeconds": 9}],
            "0 <= loadSeconds <= startupSeconds",
            id="load longer than startup",
        ),
    ],
)
def test_cold_start_history_errors_name_the_entry(data: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ColdStartHistory.from_dict(data)


def node(
    name: str, gpus: int, *, images: tuple[str, ...] = (), ready: bool = True, cordoned: bool = False
) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "images": [{"names": list(images)}],
        },
    }


def test_gpu_nodes_subtract_requests_and_skip_unusable_nodes() -> None:
    nodes = [
        node("b", 8, images=("docker.io/vllm/vllm-openai:v1",)),
        node("a", 8),
        node("cpu", 0),
        node("down", 8, ready=False),
        node("cordoned", 8, cordoned=True),
    ]
    pods = [
        pod("x", node="a", gpus={"limits": {"nvidia.com/gpu": "4"}}),
        pod("y", node="b", gpus={"limits": {"nvidia.com/gpu": "8"}}),
        pod("done", node="a", phase="Succeeded", gpus={"limits": {"nvidia.com/gpu": "4"}}),
    ]
    gpu = capacity.gpu_nodes(nodes, pods)
    assert (gpu.names, gpu.free_gpus) == (("a", "b"), (4, 0))
    assert gpu.image_cached_nodes("vllm/vllm-openai:v1") == (1,)
    # hashed once, as the plain tuple: the cold-start model's caches find it under either
    assert hash(gpu.free_gpus) == hash((4, 0)) == hash(gpu.free_gpus)
    assert {(4, 0): "hit"}[gpu.free_gpus] == "hit"


@pytest.mark.parametrize(
    ("free", "g", "k", "fitting"),
    [
        pytest.param((4, 4, 4, 4), 8, 1, 0, id="16 idle GPUs as 4+4+4+4 hold no 8-GPU replica"),
        pytest.param((8, 8), 8, 3, 2, id="two of three fit"),
        pytest.param((16,), 8, 2, 2, id="two on one node"),
        pytest.param((), 0, 3, 3, id="no GPUs requested: everything fits"),
    ],
)
def test_fit(free: tuple[int, ...], g: int, k: int, fitting: int) -> None:
    assert capacity.fit(free, g, k).fitting == fitting


@pytest.mark.parametrize(
    ("ref", "normalized"),
    [
        pytest.param("nginx", "docker.io/library/nginx:latest", id="official image"),
        pytest.param("vllm/vllm-openai:v1", "docker.io/vllm/vllm-openai:v1", id="Docker Hub user image"),
        pytest.param("ghcr.io/a/b:1", "ghcr.io/a/b:1", id="registry kept"),
        pytest.param("localhost:5000/b", "localhost:5000/b:latest", id="registry with port"),
        pytest.param("a/b@sha256:ff", "docker.io/a/b@sha256:ff", id="digest"),
    ],
)
def test_normalize_image(ref: str, normalized: str) -> None:
    assert capacity.normalize_image(ref) == normalized


def test_micro_time_always_has_six_digits_and_z() -> None:
    assert micro_time(T0) == "2026-11-29T10:00:00.000000Z"
    assert micro_time(T0 + 0.25) == "2026-11-29T10:00:00.250000Z"
    assert parse_time("2026-11-29T11:00:00+01:00") == T0
    with pytest.raises(ValueError, match="without a zone"):
        parse_time("2026-11-29T10:00:00")


@pytest.mark.parametrize(
    ("data", "values", "age", "error"),
    [
        pytest.param(
            {
                "items": [
                    {"value": "1500m", "timestamp": rfc3339(T0 - 20)},
                    {"value": 2, "timestamp": rfc3339(T0 - 5)},
                ]
            },
            (1500, 2000),
            5.0,
            "",
            id="milli-units, the newest sample's age",
        ),
        pytest.param({"items": []}, (), 0.0, "", id="empty list stays empty (never 0)"),
        pytest.param({"items": [{"value": "lots"}]}, None, 0.0, "items[0]", id="bad quantity names the item"),
        pytest.param(["x"], None, 0.0, "not an ExternalMetricValueList", id="not a list object"),
    ],
)
def test_reading_from_list(data: Any, values: tuple[int, ...] | None, age: float, error: str) -> None:
    reading = reading_from_list(data, T0)
    assert reading.values_milli == values
    assert error in reading.error
    if values is not None:
        assert reading.age_s == age


def test_a_rates_window_flows_from_the_adapters_answer_to_the_reading() -> None:
    """The adapter sends each rate's `window` (seconds, an integer); the reading keeps the longest,
    and none for a gauge's items or a window that is not a positive integer."""
    rate = metric_value_list(
        "infscale_request_rate", [MetricSample({}, 2.5, T0, 60), MetricSample({}, 1.0, T0, 5)]
    )
    assert reading_from_list(rate, T0).window_s == 60.0
    gauge = metric_value_list("infscale_inflight", [MetricSample({}, 7.0, T0)])
    assert "window" not in gauge["items"][0]
    assert reading_from_list(gauge, T0).window_s is None
    odd = {"items": [{"value": "1", "window": "60"}, {"value": "1", "window": 0}]}
    assert reading_from_list(odd, T0).window_s is None


def test_policy_state_round_trips_through_the_status() -> None:
    state = PolicyState(
        recommendations=(Recommendation(T0, 3), Recommendation(T0 + 5, 4)),
        scale_up_events=(ScaleEvent(T0, 2),),
        scale_down_events=(ScaleEvent(T0 + 1, 1),),
        scaled_to_zero=True,
    )
    assert crd.state_from_status(crd.state_to_status(state)) == state


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(
            {"recommendations": [{"at": "x", "replicas": 1}]}, r"recommendations\[0\]\.at", id="bad time"
        ),
        pytest.param(
            {"scaleUpEvents": [{"at": 1, "change": 1.5}]}, r"scaleUpEvents\[0\]\.change", id="fraction"
        ),
        pytest.param({"forecasters": {"q": {"version": 99}}}, r"forecasters\.q", id="bad forecaster"),
        pytest.param({"scaledToZero": "yes"}, "scaledToZero", id="not a boolean"),
    ],
)
def test_policy_state_errors_name_the_field(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        crd.state_from_status(data)


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        pytest.param({"scaleTargetRef": None}, "scaleTargetRef is required", id="no target"),
        pytest.param(
            {"scaleTargetRef": {"kind": "Deployment", "name": "x"}}, "missing ['apiVersion']", id="ref"
        ),
        pytest.param({"maxReplicas": 0}, "spec.maxReplicas", id="max below 1"),
        pytest.param({"mode": "yolo"}, "spec.mode", id="unknown mode"),
        pytest.param(
            {"prediction": {"horizon": {"quantile": 0.3}}}, "spec.prediction.horizon.quantile", id="q"
        ),
        pytest.param(
            {"prediction": {"horizon": {"source": "ColdStartModel"}}},
            "needs spec.coldStart",
            id="model without spec",
        ),
    ],
)
def test_spec_errors_name_the_field(patch: dict[str, Any], message: str) -> None:
    obj = autoscaler()
    obj["metadata"]["uid"] = "u"
    obj["spec"].update(patch)
    obj["spec"] = {k: v for k, v in obj["spec"].items() if v is not None}
    with pytest.raises(crd.SpecError) as info:
        crd.parse_autoscaler(obj, tolerance=0.1, downscale_stabilization_s=300, max_metric_age_s=None)
    assert message in str(info.value)


def test_merge_patch_deletes_what_is_gone() -> None:
    old = {"a": 1, "b": {"c": 2, "d": 3}, "e": [1]}
    assert with_deletions(old, {"b": {"c": 5}, "e": []}) == {"a": None, "b": {"c": 5, "d": None}, "e": []}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param({"tick_s": 0}, "tick_s", id="tick must be positive"),
        pytest.param(
            {"retry_period_s": 12}, "retry_period_s < renew_deadline_s < lease_duration_s", id="lease"
        ),
        pytest.param({"metrics_source": "adapter"}, "adapter_url is required", id="adapter without URL"),
        pytest.param({"listen": "8080"}, "listen address .8080. must be host:port", id="listen"),
    ],
)
def test_settings_errors(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ControllerSettings(**values)


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFSCALE_CONTROLLER_TICK_S", "1.5")
    monkeypatch.setenv("INFSCALE_CONTROLLER_NAMESPACE", "serving")
    settings = ControllerSettings()
    assert (settings.tick_s, settings.namespace, settings.lease_namespace) == (
        1.5,
        "serving",
        "infscale-system",
    )
