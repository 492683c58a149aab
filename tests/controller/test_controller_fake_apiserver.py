"""The fake kube-apiserver reproduces the real API's sharp edges (../../../shared/kubernetes_api_gotchas.md),
shown with kubernetes-asyncio's own generated API classes, so the controller's tests can trust it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from controller_harness import NAME, NS, T0, autoscaler
from fake_apiserver import FakeKube, serve
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from autoscaler.controller.kube import KubeClient, KubeError
from autoscaler.controller.kubetime import micro_time


def lease(holder: str, renew: str, rv: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "l", "namespace": "ns"}
    if rv is not None:
        meta["resourceVersion"] = rv
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta,
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": renew},
    }


async def _status_as_json_patch(api: client.ApiClient, fake: FakeKube) -> Any:
    # the generated method picks application/json-patch+json for a dict body
    return await client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        "infscale.io", "v1alpha1", NS, "inferenceautoscalers", NAME, {"status": {"desiredReplicas": 3}}
    )


async def _merge_patch_status(api: client.ApiClient, status: dict[str, Any]) -> Any:
    return await client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        "infscale.io",
        "v1alpha1",
        NS,
        "inferenceautoscalers",
        NAME,
        {"status": status},
        _content_type="application/merge-patch+json",
    )


async def _status_as_merge_patch(api: client.ApiClient, fake: FakeKube) -> Any:
    return await _merge_patch_status(api, {"desiredReplicas": 3})


async def _status_unknown_field(api: client.ApiClient, fake: FakeKube) -> Any:
    return await _merge_patch_status(api, {"desiredReplica": 3})


def _condition(kind: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": "R", "lastTransitionTime": "2026-11-29T10:00:00Z"}


async def _status_duplicate_condition(api: client.ApiClient, fake: FakeKube) -> Any:
    # conditions are x-kubernetes-list-type: map keyed by type: two of one type are refused
    return await _merge_patch_status(
        api, {"conditions": [_condition("AbleToScale"), _condition("AbleToScale")]}
    )


async def _status_over_a_corrupt_spec(api: client.ApiClient, fake: FakeKube) -> Any:
    # a spec that breaks the CRD's CEL rule, stored before the rule (etcd restored from a backup):
    # ratcheting lets a /status write through, as the apiserver does since 1.33
    fake.corrupt_autoscaler(NS, NAME, lambda o: o["spec"].update(minReplicas=30))
    return await _merge_patch_status(api, {"desiredReplicas": 3})


async def _lease_with_isoformat(api: client.ApiClient, fake: FakeKube) -> Any:
    whole_second = datetime.fromtimestamp(T0, UTC).isoformat().replace("+00:00", "Z")  # no fraction
    return await client.CoordinationV1Api(api).create_namespaced_lease("ns", lease("a", whole_second))


async def _lease_with_micro_time(api: client.ApiClient, fake: FakeKube) -> Any:
    return await client.CoordinationV1Api(api).create_namespaced_lease("ns", lease("a", micro_time(T0)))


async def _lease_put_without_rv(api: client.ApiClient, fake: FakeKube) -> Any:
    await client.CoordinationV1Api(api).create_namespaced_lease("ns", lease("a", micro_time(T0)))
    return await client.CoordinationV1Api(api).replace_namespaced_lease("l", "ns", lease("b", micro_time(T0)))


async def _lease_put_stale_rv(api: client.ApiClient, fake: FakeKube) -> Any:
    await client.CoordinationV1Api(api).create_namespaced_lease("ns", lease("a", micro_time(T0)))
    return await client.CoordinationV1Api(api).replace_namespaced_lease(
        "l", "ns", lease("b", micro_time(T0), rv="1")
    )


async def _scale_as_string(api: client.ApiClient, fake: FakeKube) -> Any:
    body = {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": NAME},
        "spec": {"replicas": "3"},
    }
    return await client.AppsV1Api(api).replace_namespaced_deployment_scale(NAME, NS, body)


async def _scale_negative(api: client.ApiClient, fake: FakeKube) -> Any:
    body = {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": NAME},
        "spec": {"replicas": -1},
    }
    return await client.AppsV1Api(api).replace_namespaced_deployment_scale(NAME, NS, body)


@pytest.mark.parametrize(
    ("call", "status"),
    [
        pytest.param(_status_as_json_patch, 400, id="CR status: dict body sent as json-patch -> 400"),
        pytest.param(_status_as_merge_patch, None, id="CR status: merge patch is accepted"),
        pytest.param(
            _status_unknown_field, 422, id="CR status: unknown field -> 422 (the API would prune it)"
        ),
        pytest.param(_status_duplicate_condition, 422, id="CR status: two conditions of one type -> 422"),
        pytest.param(_status_over_a_corrupt_spec, None, id="CR status: a stored spec's CEL failure ratchets"),
        pytest.param(_lease_with_isoformat, 400, id="Lease: MicroTime without its fraction -> 400"),
        pytest.param(_lease_with_micro_time, None, id="Lease: six fractional digits are accepted"),
        pytest.param(_lease_put_without_rv, 422, id="Lease: PUT without resourceVersion -> 422"),
        pytest.param(_lease_put_stale_rv, 409, id="Lease: stale resourceVersion -> 409"),
        pytest.param(_scale_as_string, 400, id="Scale: replicas as a string -> 400"),
        pytest.param(_scale_negative, 422, id="Scale: negative replicas -> 422"),
    ],
)
async def test_gotchas(
    call: Callable[[client.ApiClient, FakeKube], Awaitable[Any]], status: int | None
) -> None:
    """`status`: the error code the real API answers with; None: it accepts the request."""
    fake = FakeKube()
    fake.add_deployment(NS, NAME, 2)
    fake.add_autoscaler(autoscaler())
    got: int | None = None
    async with serve(fake) as kube:
        try:
            await call(kube.api, fake)
        except ApiException as exc:
            got = exc.status
            assert '"kind": "Status"' in exc.body or '"kind":"Status"' in exc.body
    assert got == status


async def test_scale_omits_a_zero_spec_count_and_carries_the_selector_as_a_string() -> None:
    fake = FakeKube()
    fake.add_deployment(NS, NAME, 0)
    async with serve(fake) as kube:
        scale = await kube.request("GET", f"/apis/apps/v1/namespaces/{NS}/deployments/{NAME}/scale")
        typed = await client.AppsV1Api(kube.api).read_namespaced_deployment_scale(NAME, NS)
    assert "replicas" not in scale["spec"] and scale["status"]["replicas"] == 0
    assert scale["status"]["selector"] == "app=llama"
    assert typed.spec.replicas is None  # the Python client gives None, not 0


async def test_failures_on_demand_and_status_errors() -> None:
    fake = FakeKube()
    fake.add_deployment(NS, NAME, 1)
    async with serve(fake, timeout_s=0.2) as kube:
        fake.fail("GET", "/scale$", 500)
        with pytest.raises(KubeError) as info:
            await kube.request("GET", f"/apis/apps/v1/namespaces/{NS}/deployments/{NAME}/scale")
        assert (info.value.code, info.value.reason) == (500, "InternalError")
        fake.fail("GET", "/scale$", "timeout")
        with pytest.raises(KubeError) as info:
            await kube.request("GET", f"/apis/apps/v1/namespaces/{NS}/deployments/{NAME}/scale")
        assert (info.value.code, info.value.reason) == (0, "Timeout")
        with pytest.raises(KubeError) as info:
            await kube.request("GET", f"/apis/apps/v1/namespaces/{NS}/deployments/nope/scale")
        assert info.value.not_found and 'deployments.apps "nope" not found' in info.value.message
        assert (await kube.request("GET", f"/apis/apps/v1/namespaces/{NS}/deployments/{NAME}/scale"))[
            "spec"
        ] == {"replicas": 1}


async def test_builtin_list_items_have_no_kind_custom_items_do() -> None:
    fake = FakeKube()
    fake.add_node("n", gpus=8)
    fake.add_autoscaler(autoscaler())
    async with serve(fake) as kube:
        nodes = await kube.list_nodes()
        autoscalers = await kube.list_autoscalers(None)
    assert "kind" not in nodes[0] and autoscalers[0]["kind"] == "InferenceAutoscaler"
    assert autoscalers[0]["spec"]["mode"] == "direct"  # the CRD's default, filled by the server


async def test_discovery_finds_the_plural_and_refuses_kinds_without_scale() -> None:
    from autoscaler.controller.crd import TargetRef

    fake = FakeKube()
    async with serve(fake) as kube:
        assert await kube.plural(TargetRef("apps/v1", "Deployment", "x")) == "deployments"
        with pytest.raises(KubeError, match="no /scale subresource"):
            await kube.plural(TargetRef("apps/v1", "ControllerRevision", "x"))
        with pytest.raises(KubeError, match="serves no kind 'Widget'"):
            await kube.plural(TargetRef("apps/v1", "Widget", "x"))
        with pytest.raises(KubeError) as info:
            await KubeClient(kube.api).plural(TargetRef("example.com/v1", "Thing", "x"))
        assert info.value.not_found
