"""Delegation: reads of metrics we do not serve go to another external-metrics server (here a
KEDA-like aiohttp app) and its answer comes back unchanged."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from conftest import HPA_GROUPS, HPA_USER, Pki, running_adapter, serve

from adapter.delegate import Delegate, DelegateSettings

NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default"
KEDA_BODY = (
    b'{"kind":"ExternalMetricValueList","apiVersion":"external.metrics.k8s.io/v1beta1","metadata":{},'
    b'"items":[{"metricName":"s0-rabbitmq-queue","metricLabels":null,"timestamp":"2026-09-21T14:13:20Z",'
    b'"value":"7"}]}'
)


@dataclass
class KedaLike:
    url: str = ""
    seen: list[tuple[str, str, list[tuple[str, str]]]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append(
            (request.rel_url.raw_path, request.rel_url.raw_query_string, list(request.headers.items()))
        )
        if request.match_info["metric"] == "s0-rabbitmq-queue":
            # Retry-After would make client-go sleep inside the HPA worker: it must not come through
            return web.Response(
                body=KEDA_BODY, headers={"Content-Type": "application/json", "Retry-After": "5"}
            )
        return web.Response(
            status=404,
            body=b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,'
            b'"message":"keda: no such scaledobject"}',
            headers={"Content-Type": "application/json"},
        )


@pytest.fixture
async def keda() -> AsyncIterator[KedaLike]:
    fake = KedaLike()
    app = web.Application()
    app.add_routes([web.get("/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}", fake.handle)])
    async with serve(app) as url:
        fake.url = url
        yield fake


def header_values(headers: list[tuple[str, str]], name: str) -> list[str]:
    return [v for k, v in headers if k.lower() == name.lower()]


async def test_unknown_metric_is_forwarded_and_returned_unchanged(
    pki: Pki, kube_client: Any, keda: KedaLike, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("delegate-token\n")
    settings = DelegateSettings(url=keda.url, token_file=token)
    query = "labelSelector=scaledobject.keda.sh%2Fname%3Dmy-so"
    async with (
        Delegate(settings) as delegate,
        running_adapter(pki, kube_client, delegate=delegate) as adapter,
        adapter.proxied() as client,
    ):
        response = await client.get(f"{NS}/s0-rabbitmq-queue?{query}")
    assert response.status_code == 200
    assert response.content == KEDA_BODY
    assert response.headers["Content-Type"] == "application/json"
    assert "Retry-After" not in response.headers
    ((path, raw_query, headers),) = keda.seen
    assert path == f"{NS}/s0-rabbitmq-queue" and raw_query == query
    assert header_values(headers, "Authorization") == ["Bearer delegate-token"]
    assert header_values(headers, "X-Remote-User") == []  # a token, not a front proxy
    assert adapter.backend.reads[-1][1] == "s0-rabbitmq-queue"  # we asked our backend first


async def test_forwarding_as_a_front_proxy_carries_the_callers_identity(
    pki: Pki, kube_client: Any, keda: KedaLike
) -> None:
    settings = DelegateSettings(url=keda.url, cert_file=pki.front_proxy.cert, key_file=pki.front_proxy.key)
    headers = [("X-Remote-User", HPA_USER), *(("X-Remote-Group", g) for g in HPA_GROUPS)]
    headers.append(("X-Remote-Extra-Authentication.kubernetes.io%2Fcredential-id", "JTI=1"))
    async with (
        Delegate(settings) as delegate,
        running_adapter(pki, kube_client, delegate=delegate) as adapter,
        adapter.client(pki.front_proxy) as client,
    ):
        await client.get(f"{NS}/s0-rabbitmq-queue", headers=headers)
    ((_, _, seen),) = keda.seen
    assert header_values(seen, "X-Remote-User") == [HPA_USER]
    assert header_values(seen, "X-Remote-Group") == list(HPA_GROUPS)
    assert header_values(seen, "X-Remote-Extra-authentication.kubernetes.io%2Fcredential-id") == ["JTI=1"]
    assert header_values(seen, "Authorization") == []


async def test_delegate_errors_pass_through_unchanged(pki: Pki, kube_client: Any, keda: KedaLike) -> None:
    async with (
        Delegate(DelegateSettings(url=keda.url)) as delegate,
        running_adapter(pki, kube_client, delegate=delegate) as adapter,
        adapter.proxied() as client,
    ):
        response = await client.get(f"{NS}/other")
    assert response.status_code == 404
    assert response.json()["message"] == "keda: no such scaledobject"


async def test_known_metrics_never_reach_the_delegate(pki: Pki, kube_client: Any, keda: KedaLike) -> None:
    async with (
        Delegate(DelegateSettings(url=keda.url)) as delegate,
        running_adapter(pki, kube_client, delegate=delegate) as adapter,
        adapter.proxied() as client,
    ):
        assert (await client.get(f"{NS}/infscale_queue_size")).status_code == 200
    assert keda.seen == []


async def test_unreachable_delegate_is_503(pki: Pki, kube_client: Any, keda: KedaLike) -> None:
    closed = DelegateSettings(url="http://127.0.0.1:9", timeout_s=2)  # discard port: nothing listens
    async with (
        Delegate(closed) as delegate,
        running_adapter(pki, kube_client, delegate=delegate) as adapter,
        adapter.proxied() as client,
    ):
        response = await client.get(f"{NS}/s0-rabbitmq-queue")
    assert response.status_code == 503
    body = response.json()
    assert body["reason"] == "ServiceUnavailable" and "delegate" in body["message"]
    assert "Retry-After" not in response.headers


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        pytest.param({"url": "ftp://x"}, "must be http:// or https://", id="scheme"),
        pytest.param({"url": "http://x", "timeout_s": 0}, "greater than 0", id="timeout"),
        pytest.param(
            {"url": "http://x", "surprise": 1}, "Extra inputs are not permitted", id="unknown field"
        ),
    ],
)
def test_settings_errors(fields: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        DelegateSettings(**fields)
