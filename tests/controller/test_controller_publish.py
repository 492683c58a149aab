"""mode hpa: infscale_desired_replicas served as an External metric from the controller's port, the
adapter's delegate target. Real HTTP against a controller that ticked on the fake kube-apiserver."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from controller_harness import FAST, NAME, NS, T0, autoscaler, environment, only

from autoscaler.controller import publish
from autoscaler.controller.kubetime import rfc3339
from autoscaler.controller.telemetry import Telemetry, make_app
from common.clock import ManualClock
from common.selector import parse_selector

PATH = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/infscale_desired_replicas"


@pytest.mark.parametrize(
    ("text", "served"),
    [
        pytest.param("autoscaler=llama", ["llama"], id="equal"),
        pytest.param("autoscaler==llama", ["llama"], id="double equal"),
        pytest.param("autoscaler!=llama", ["other"], id="not equal"),
        pytest.param("autoscaler in (llama,other)", ["llama", "other"], id="set-based too"),
        pytest.param("autoscaler=llama,namespace=x", [], id="and"),
        pytest.param("", ["llama", "other"], id="everything"),
    ],
)
def test_selectors_as_the_adapter_reads_them(text: str, served: list[str]) -> None:
    objects = [status_object("hpa", 6, T0), status_object("hpa", 2, T0, name="other")]
    items = publish.items_from(objects, parse_selector(text), T0, 60)
    assert [i["metricLabels"]["autoscaler"] for i in items] == served


def status_object(mode: str, desired: int | None, decided: float, *, name: str = NAME) -> dict[str, Any]:
    obj = autoscaler(mode=mode, name=name)
    if desired is not None:
        obj["status"] = {"desiredReplicas": desired, "lastDecision": {"time": rfc3339(decided)}}
    return obj


@pytest.mark.parametrize(
    ("obj", "served"),
    [
        pytest.param(status_object("hpa", 6, T0 - 10), "6", id="fresh recommendation of a mode hpa object"),
        pytest.param(status_object("hpa", 6, T0 - 61), None, id="older than max_age_s: not served"),
        pytest.param(status_object("direct", 6, T0), None, id="mode direct: infscale is the actuator itself"),
        pytest.param(status_object("hpa", None, T0), None, id="no decision yet"),
    ],
)
def test_items_from(obj: dict[str, Any], served: str | None) -> None:
    obj["spec"]["mode"] = obj["spec"].get("mode", "direct")
    items = publish.items_from([obj], parse_selector("autoscaler=llama"), T0, 60)
    assert [i["value"] for i in items] == ([served] if served else [])


async def test_served_over_http_after_a_tick() -> None:
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST, mode="hpa"))
        env.queue(24)
        controller = env.controller()
        only(await controller.step())
        clock = ManualClock(T0 + 5)
        app = make_app(Telemetry(), clock, publish.handler(env.kube.list_autoscalers, clock, 60))
        async with TestClient(TestServer(app)) as http:
            answer = await http.get(PATH, params={"labelSelector": f"autoscaler={NAME}"})
            body = await answer.json()
            assert answer.status == 200 and body["kind"] == "ExternalMetricValueList"
            assert [(i["value"], i["metricLabels"]) for i in body["items"]] == [
                ("6", {"namespace": NS, "autoscaler": NAME})
            ]
            # the HPA's AverageValue target of 1: desired = ceil(6 / 1) = 6, infscale's decision
            assert env.fake.scale_writes == []  # infscale itself wrote nothing (mode hpa)

            other = await http.get(PATH, params={"labelSelector": "autoscaler=other"})
            assert other.status == 404 and (await other.json())["kind"] == "Status"
            wrong = await http.get(PATH.replace("infscale_desired_replicas", "queue"))
            assert wrong.status == 404
            bad = await http.get(PATH, params={"labelSelector": "autoscaler in (a"})
            assert bad.status == 400

            env.fake.fail("GET", "inferenceautoscalers$", 500)
            failed = await http.get(PATH, params={"labelSelector": f"autoscaler={NAME}"})
            assert failed.status == 503 and "500" in (await failed.json())["message"]

            clock.set(T0 + 3600)  # the controller stopped deciding: the HPA must hold
            assert (await http.get(PATH, params={"labelSelector": f"autoscaler={NAME}"})).status == 404


async def test_hpa_mode_status_is_rewritten_often_enough_to_stay_fresh() -> None:
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST, mode="hpa"))
        controller = env.controller(status_interval_s=3600, publish_max_age_s=30)
        for t in range(0, 31, 5):
            env.clock.set(T0 + t)
            env.queue(8)
            only(await controller.step())
        assert env.status["lastDecision"]["time"] == rfc3339(T0 + 30)  # every 10 s, not every hour
