"""The server over real HTTPS on loopback: discovery, values, selectors, every error path,
traversal attempts, oversized requests and content negotiation. Callers are the aggregator
(front-proxy certificate + X-Remote-* headers) unless a test says otherwise."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from conftest import HPA_USER, T0, Adapter, Pki, ScriptedBackend, client_context, running_adapter

from adapter.backend import BackendError, MetricSample, NoData, SourceUnavailable
from adapter.server import ServerConfig
from common.selector import Selector

ROOT = "/apis/external.metrics.k8s.io/v1beta1"
NS = f"{ROOT}/namespaces/default"
V2_ACCEPT = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


async def get(adapter: Adapter, path: str, **kwargs: Any) -> httpx.Response:
    async with adapter.proxied() as client:
        return await client.get(path, **kwargs)


def assert_status(response: httpx.Response, code: int, reason: str, message: str = "") -> dict[str, Any]:
    """One helper for every error answer: a metav1.Status, JSON, code = HTTP status, no Retry-After."""
    assert response.status_code == code, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    assert "Retry-After" not in response.headers
    body: dict[str, Any] = response.json()
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["code"] == code and body["reason"] == reason
    assert message in body["message"]
    return body


# --- discovery --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [pytest.param(ROOT, id="no slash"), pytest.param(ROOT + "/", id="slash")])
async def test_resource_list_names_the_metrics(adapter: Adapter, path: str) -> None:
    response = await get(adapter, path)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert body["kind"] == "APIResourceList" and body["groupVersion"] == "external.metrics.k8s.io/v1beta1"
    assert [r["name"] for r in body["resources"]] == [
        "infscale_kv_cache_usage",
        "infscale_queue_size",
        "infscale_request_rate",
    ]
    assert body["resources"][0] == {
        "name": "infscale_kv_cache_usage",
        "singularName": "",
        "namespaced": True,
        "kind": "ExternalMetricValueList",
        "verbs": ["get"],
    }


@pytest.mark.parametrize(
    ("names", "listed"),
    [
        pytest.param([], ["externalmetrics"], id="none configured: placeholder, never empty"),
        pytest.param([f"m{i:03}" for i in range(201)], ["externalmetrics"], id="over 200: placeholder"),
        pytest.param([f"m{i:03}" for i in range(200)], [f"m{i:03}" for i in range(200)], id="200 listed"),
    ],
)
async def test_resource_list_placeholder(
    pki: Pki, kube_client: Any, names: list[str], listed: list[str]
) -> None:
    backend = ScriptedBackend({n: [] for n in names})
    async with running_adapter(pki, kube_client, backend=backend) as adapter:
        body = (await get(adapter, ROOT)).json()
    assert [r["name"] for r in body["resources"]] == listed


async def test_discovery_does_not_touch_the_backend(pki: Pki, kube_client: Any) -> None:
    backend = ScriptedBackend({"infscale_queue_size": SourceUnavailable("down")})
    async with running_adapter(pki, kube_client, backend=backend) as adapter:
        assert (await get(adapter, ROOT)).status_code == 200
    assert backend.reads == []


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("/apis/external.metrics.k8s.io", id="group"),
        pytest.param("/apis/external.metrics.k8s.io/", id="group slash"),
    ],
)
async def test_api_group(adapter: Adapter, path: str) -> None:
    body = (await get(adapter, path)).json()
    ref = {"groupVersion": "external.metrics.k8s.io/v1beta1", "version": "v1beta1"}
    assert body == {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": "external.metrics.k8s.io",
        "versions": [ref],
        "preferredVersion": ref,
    }


async def test_apis_legacy_group_list(adapter: Adapter) -> None:
    response = await get(adapter, "/apis", headers={"Accept": "application/json"})
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert body["kind"] == "APIGroupList"
    assert [g["name"] for g in body["groups"]] == ["external.metrics.k8s.io"]


@pytest.mark.parametrize("version", [pytest.param("v2", id="v2"), pytest.param("v2beta1", id="v2beta1")])
async def test_apis_aggregated_discovery(adapter: Adapter, version: str) -> None:
    accept = f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
    response = await get(adapter, "/apis", headers={"Accept": accept})
    assert response.status_code == 200
    assert response.headers["Content-Type"] == accept
    body = response.json()
    assert body["apiVersion"] == f"apidiscovery.k8s.io/{version}" and body["kind"] == "APIGroupDiscoveryList"
    (item,) = body["items"]
    assert item["metadata"] == {"name": "external.metrics.k8s.io"}
    (ver,) = item["versions"]
    assert ver["version"] == "v1beta1" and ver["freshness"] == "Current"
    assert ver["resources"][1] == {
        "resource": "infscale_queue_size",
        "responseKind": {"group": "", "version": "", "kind": "ExternalMetricValueList"},
        "scope": "Namespaced",
        "singularResource": "",
        "verbs": ["get"],
    }


@pytest.mark.parametrize(
    "path", ["/openapi/v2", "/openapi/v3", "/openapi/v3/apis/external.metrics.k8s.io/v1beta1"]
)
async def test_openapi_is_a_clean_404(adapter: Adapter, path: str) -> None:
    # the aggregator treats 404 as "no spec" and does not retry; a 5xx would be retried forever
    assert_status(await get(adapter, path, headers={"Accept": "application/json"}), 404, "NotFound")


async def test_version(adapter: Adapter) -> None:
    body = (await get(adapter, "/version")).json()
    assert body["gitVersion"] == "v0.1.0" and body["major"] == "0" and body["minor"] == "1"


# --- metric values ----------------------------------------------------------------------------


async def test_read_all_series(adapter: Adapter) -> None:
    response = await get(adapter, f"{NS}/infscale_queue_size")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == {
        "kind": "ExternalMetricValueList",
        "apiVersion": "external.metrics.k8s.io/v1beta1",
        "metadata": {},
        "items": [
            {
                "metricName": "infscale_queue_size",
                "metricLabels": {"namespace": "default", "deployment": "llama", "model": "llama-3"},
                "timestamp": "2026-09-21T14:13:20Z",
                "value": "12",
            },
            {
                "metricName": "infscale_queue_size",
                "metricLabels": {"namespace": "default", "deployment": "mistral", "model": "mistral-7b"},
                "timestamp": "2026-09-21T14:13:21Z",
                "value": "1500m",
            },
        ],
    }
    assert adapter.backend.reads == [("default", "infscale_queue_size", "")]


@pytest.mark.parametrize(
    ("metric", "value", "window"),
    [
        pytest.param("infscale_kv_cache_usage", "300m", None, id="float noise rounds half-even, not up"),
        pytest.param("infscale_request_rate", "2k", 60, id="rate carries an integer window"),
    ],
)
async def test_quantity_and_window(adapter: Adapter, metric: str, value: str, window: int | None) -> None:
    (item,) = (await get(adapter, f"{NS}/{metric}")).json()["items"]
    assert item["value"] == value
    assert item.get("window") == window


@pytest.mark.parametrize(
    ("query", "deployments", "seen"),
    [
        pytest.param("labelSelector=deployment%3Dllama", ["llama"], "deployment=llama", id="equality"),
        pytest.param(
            "labelSelector=deployment+in+%28llama%2Cmistral%29%2C%21canary",
            ["llama", "mistral"],
            "!canary,deployment in (llama,mistral)",
            id="set-based, Go's escaping with +",
        ),
        pytest.param("labelSelector=model%21%3Dllama-3", ["mistral"], "model!=llama-3", id="inequality"),
        pytest.param("labelSelector=deployment%3Dnone", [], "deployment=none", id="no match: empty list"),
        pytest.param("labelSelector=", ["llama", "mistral"], "", id="empty selector"),
        pytest.param(
            "limit=1&resourceVersion=0&pretty=true", ["llama", "mistral"], "", id="other params ignored"
        ),
    ],
)
async def test_label_selector(adapter: Adapter, query: str, deployments: list[str], seen: str) -> None:
    response = await get(adapter, f"{NS}/infscale_queue_size?{query}")
    assert response.status_code == 200
    assert [i["metricLabels"]["deployment"] for i in response.json()["items"]] == deployments
    assert adapter.backend.reads[-1][2] == seen


async def test_metric_name_is_decoded_once(adapter: Adapter) -> None:
    # Stackdriver-style names: Go escapes `|` as %7C; we decode once and pass the name on
    assert_status(await get(adapter, f"{NS}/svc%7Cqueue%3Adepth"), 404, "NotFound", "svc|queue:depth")
    assert adapter.backend.reads[-1][1] == "svc|queue:depth"


# --- error paths ------------------------------------------------------------------------------


class _Hang:
    """A backend whose reads never finish, to exercise the read timeout."""

    def metric_names(self) -> Sequence[str]:
        return ["slow"]

    async def read(self, namespace: str, metric: str, selector: Selector) -> Sequence[MetricSample]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


@pytest.mark.parametrize(
    ("path", "code", "reason", "message"),
    [
        pytest.param(
            f"{NS}/no_such_metric",
            404,
            "NotFound",
            "could not find the metric no_such_metric for namespace default",
            id="unknown metric",
        ),
        pytest.param(
            f"{NS}/nodata",
            404,
            "NotFound",
            "no fresh data for metric nodata",
            id="no data is an error, not 0",
        ),
        pytest.param(f"{NS}/down", 503, "ServiceUnavailable", "prometheus unreachable", id="source down"),
        pytest.param(
            f"{NS}/broken", 500, "InternalError", "unable to fetch metrics", id="backend error hides details"
        ),
        pytest.param(f"{NS}/nan", 404, "NotFound", "has no usable value", id="NaN is no data"),
        pytest.param(f"{NS}/huge", 404, "NotFound", "exceeds the HPA's range", id="beyond int64 milli"),
        pytest.param(
            f"{NS}/infscale_queue_size?labelSelector=a%3Db%2F",
            400,
            "BadRequest",
            'invalid label value "b/"',
            id="bad selector",
        ),
        pytest.param(
            f"{NS}/infscale_queue_size?labelSelector=a%252Cb",
            400,
            "BadRequest",
            "%2Cb",
            id="no double decoding",
        ),
        pytest.param(
            f"{NS}/infscale_queue_size?labelSelector=a+in+%28b",
            400,
            "BadRequest",
            "expected: ',' or ')'",
            id="unclosed set",
        ),
        pytest.param(
            f"{NS}/infscale_queue_size?watch=true",
            405,
            "MethodNotAllowed",
            "watch is not supported",
            id="watch",
        ),
        pytest.param(
            f"{NS}/infscale_queue_size?watch=1",
            405,
            "MethodNotAllowed",
            "watch is not supported",
            id="watch=1",
        ),
        pytest.param(
            f"{ROOT}/infscale_queue_size",
            404,
            "NotFound",
            "could not find the requested resource",
            id="cluster-scoped path",
        ),
        pytest.param(
            f"{ROOT}/namespaces/default",
            404,
            "NotFound",
            "could not find the requested resource",
            id="namespace listing",
        ),
        pytest.param(
            f"{ROOT}/namespaces", 404, "NotFound", "could not find the requested resource", id="namespaces"
        ),
        pytest.param(
            f"{NS}/infscale_queue_size/extra",
            404,
            "NotFound",
            "could not find the requested resource",
            id="deeper path",
        ),
        pytest.param(
            "/apis/external.metrics.k8s.io/v1/namespaces/default/infscale_queue_size",
            404,
            "NotFound",
            "",
            id="other version",
        ),
        pytest.param(
            f"{NS}/*", 404, "NotFound", "could not find the metric *", id="wildcard is just unknown"
        ),
        pytest.param(
            f"{ROOT}/namespaces/Default/infscale_queue_size",
            404,
            "NotFound",
            "not a valid namespace",
            id="upper-case namespace",
        ),
        pytest.param(
            f"{ROOT}/namespaces/{'a' * 64}/infscale_queue_size",
            404,
            "NotFound",
            "not a valid namespace",
            id="64-char namespace",
        ),
        pytest.param(
            f"{ROOT}/namespaces/a_b/infscale_queue_size",
            404,
            "NotFound",
            "not a valid namespace",
            id="underscore namespace",
        ),
        pytest.param(
            "/nowhere", 404, "NotFound", "could not find the requested resource", id="unknown route"
        ),
        pytest.param(
            f"{NS}/infscale_queue_size?labelSelector=%FF%FE",
            400,
            "BadRequest",
            "invalid label key",
            id="invalid UTF-8",
        ),
        pytest.param(f"{NS}/%FF%FE", 404, "NotFound", "may not contain", id="undecodable metric name"),
        pytest.param(
            f"{ROOT}/namespaces/%00/infscale_queue_size", 404, "NotFound", "not a valid namespace", id="NUL"
        ),
    ],
)
async def test_error_paths(
    pki: Pki, kube_client: Any, path: str, code: int, reason: str, message: str
) -> None:
    script: dict[str, Sequence[MetricSample] | BackendError] = {
        "infscale_queue_size": [MetricSample({"deployment": "llama"}, 1.0, T0)],
        "nodata": NoData("no fresh data for metric nodata in namespace default: no engine pods found"),
        "down": SourceUnavailable("prometheus unreachable"),
        "broken": BackendError("secret internals: password=hunter2"),
        "nan": [MetricSample({}, float("nan"), T0)],
        "huge": [MetricSample({}, 1e17, T0)],
    }
    async with running_adapter(pki, kube_client, backend=ScriptedBackend(script)) as adapter:
        body = assert_status(await get(adapter, path), code, reason, message)
    assert "hunter2" not in body["message"]


async def test_backend_timeout_is_503(pki: Pki, kube_client: Any) -> None:
    config = ServerConfig(backend_timeout_s=0.01)
    async with running_adapter(pki, kube_client, backend=_Hang(), config=config) as adapter:  # type: ignore[arg-type]
        assert_status(await get(adapter, f"{NS}/slow"), 503, "ServiceUnavailable", "timed out")


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
@pytest.mark.parametrize(
    "path", [pytest.param(f"{NS}/infscale_queue_size", id="metric"), pytest.param("/nowhere", id="unknown")]
)
async def test_other_methods_are_405(adapter: Adapter, method: str, path: str) -> None:
    async with adapter.proxied() as client:
        response = await client.request(method, path, content=b"{}")
    assert_status(response, 405, "MethodNotAllowed", "does not allow this method")


async def test_head_is_get_without_body(adapter: Adapter) -> None:
    async with adapter.proxied() as client:
        response = await client.head(f"{NS}/infscale_queue_size")
    assert response.status_code == 200 and response.content == b""


# --- path traversal ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "segment",
    [
        pytest.param("%2e%2e", id="encoded dot-dot"),
        pytest.param("%2E", id="encoded dot"),
        pytest.param("..%2F..%2Fetc%2Fpasswd", id="encoded traversal"),
        pytest.param("a%2Fb", id="encoded slash"),
        pytest.param("%252e%252e", id="double-encoded dot-dot"),
        pytest.param("%25", id="encoded percent"),
    ],
)
async def test_traversal_in_metric_name(adapter: Adapter, segment: str) -> None:
    assert_status(await get(adapter, f"{NS}/{segment}"), 404, "NotFound")
    assert adapter.backend.reads == []  # refused before the backend saw it


@pytest.mark.parametrize(
    "namespace",
    [
        pytest.param("%2e%2e", id="dot-dot"),
        pytest.param("a%2Fb", id="slash"),
        pytest.param("..%2Fkube-system", id="traversal"),
    ],
)
async def test_traversal_in_namespace(adapter: Adapter, namespace: str) -> None:
    assert_status(await get(adapter, f"{ROOT}/namespaces/{namespace}/infscale_queue_size"), 404, "NotFound")
    assert adapter.backend.reads == []


async def raw_request(adapter: Adapter, head: bytes, identity: Any = None) -> tuple[int, bytes]:
    """Send bytes as they are (no client-side normalization); returns the status and the body."""
    host, port = adapter.url.removeprefix("https://").split(":")
    reader, writer = await asyncio.open_connection(
        host,
        int(port),
        ssl=client_context(adapter.pki, identity or adapter.pki.front_proxy),
        server_hostname="localhost",
    )
    writer.write(head)
    await writer.drain()
    data = await reader.read(-1)
    writer.close()
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


_PROXY_HEADERS = f"X-Remote-User: {HPA_USER}\r\nX-Remote-Group: system:authenticated\r\n"


@pytest.mark.parametrize(
    "target",
    [
        pytest.param(f"{NS}/../../v1beta1", id="literal dot-dot"),
        pytest.param(f"{NS}/./infscale_queue_size/..", id="literal dot segments"),
        pytest.param(f"{ROOT}/namespaces/default/../../../../../etc/passwd", id="escape the root"),
    ],
)
async def test_literal_dot_segments_never_reach_a_metric(adapter: Adapter, target: str) -> None:
    head = f"GET {target} HTTP/1.1\r\nHost: localhost\r\n{_PROXY_HEADERS}Connection: close\r\n\r\n".encode()
    status, body = await raw_request(adapter, head)
    assert status in (200, 404), body  # normalized to some other route, or not found; never a crash
    assert b"ExternalMetricValueList" not in body
    assert all(read[1] not in ("..", ".") for read in adapter.backend.reads)


# --- oversized requests -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "head",
    [
        pytest.param(
            f"GET {NS}/infscale_queue_size?labelSelector={'a' * 9000} HTTP/1.1\r\nHost: x\r\n\r\n",
            id="request line over 8190",
        ),
        pytest.param(
            f"GET {NS}/infscale_queue_size HTTP/1.1\r\nHost: x\r\nX-Big: {'b' * 9000}\r\n\r\n",
            id="header over 8190",
        ),
        pytest.param(
            f"GET {NS}/infscale_queue_size HTTP/1.1\r\nHost: x\r\n"
            + "".join(f"X-H{i}: v\r\n" for i in range(200))
            + "\r\n",
            id="200 headers",
        ),
    ],
)
async def test_oversized_requests_are_refused(
    adapter: Adapter, head: str, caplog: pytest.LogCaptureFixture
) -> None:
    """aiohttp's parser refuses them before any handler, with a plain-text 400 (Go's net/http answers
    a plain-text 431 there too, not a Status); the log gets one line, not a traceback per request."""
    with caplog.at_level(logging.DEBUG, logger="aiohttp.server"):
        status, _ = await raw_request(adapter, head.encode())
    assert 400 <= status < 500
    assert (await get(adapter, ROOT)).status_code == 200  # and the server keeps serving
    (record,) = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert (record.levelno, record.exc_info) == (logging.INFO, None)
    assert "refused a malformed request" in record.getMessage()


async def test_large_body_is_refused(adapter: Adapter) -> None:
    async with adapter.proxied() as client:
        response = await client.post(f"{NS}/infscale_queue_size", content=b"x" * 200_000)
    assert 400 <= response.status_code < 500
    assert (await get(adapter, ROOT)).status_code == 200


# --- content negotiation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "ok"),
    [
        pytest.param(None, True, id="absent"),
        pytest.param("application/vnd.kubernetes.protobuf, */*", True, id="the HPA's header"),
        pytest.param("application/json, */*", True, id="kubectl's header"),
        pytest.param("application/json;charset=utf-8", True, id="json with charset"),
        pytest.param("application/*", True, id="application wildcard"),
        pytest.param("text/html, application/json;q=0.5", True, id="json at lower weight"),
        pytest.param("text/html", False, id="html only"),
        pytest.param("application/vnd.kubernetes.protobuf", False, id="protobuf only"),
        pytest.param("application/yaml", False, id="yaml only"),
        pytest.param("application/json;as=Table;v=v1;g=meta.k8s.io", False, id="table transform"),
        pytest.param("application/json;q=0", False, id="json refused by weight"),
        pytest.param("application/json;q=nonsense", False, id="malformed weight"),
    ],
)
@pytest.mark.parametrize(
    "path", [pytest.param(f"{NS}/infscale_queue_size", id="read"), pytest.param(ROOT, id="discovery")]
)
async def test_content_negotiation(adapter: Adapter, path: str, accept: str | None, ok: bool) -> None:
    async with adapter.proxied() as client:
        headers = {"Accept": accept} if accept is not None else {}
        if accept is None:
            client.headers.pop("Accept", None)
        response = await client.get(path, headers=headers)
    if ok:
        assert response.status_code == 200
        assert response.headers["Content-Type"] == "application/json"
    else:
        assert_status(
            response, 406, "NotAcceptable", "only the following media types are accepted: application/json"
        )


# --- health, version, /metrics ----------------------------------------------------------------


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz"])
async def test_health_needs_no_credentials_and_ignores_the_backend(
    pki: Pki, kube_client: Any, path: str
) -> None:
    backend = ScriptedBackend({"infscale_queue_size": SourceUnavailable("down")})
    async with running_adapter(pki, kube_client, backend=backend) as adapter, adapter.client() as anonymous:
        response = await anonymous.get(path)
    assert response.status_code == 200 and response.text == "ok"
    assert response.headers["Content-Type"].startswith("text/plain")


async def test_metrics_endpoint_counts_requests(adapter: Adapter) -> None:
    await get(adapter, f"{NS}/infscale_queue_size")
    await get(adapter, f"{NS}/no_such_metric")
    response = await get(adapter, "/metrics")
    assert response.status_code == 200
    text = response.text
    route = "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}"
    assert f'infscale_adapter_requests_total{{code="200",route="{route}"}} 1.0' in text
    assert f'infscale_adapter_requests_total{{code="404",route="{route}"}} 1.0' in text
    assert "infscale_adapter_request_duration_seconds_bucket" in text


async def test_metrics_endpoint_needs_credentials(adapter: Adapter) -> None:
    async with adapter.client() as anonymous:
        assert_status(await anonymous.get("/metrics"), 401, "Unauthorized")


# --- KEDA metrics-api endpoint ----------------------------------------------------------------

KEDA = "/keda/v1/namespaces/default"


@pytest.mark.parametrize(
    ("query", "value", "quantity", "items"),
    [
        pytest.param("", 13.5, "13500m", 2, id="sum like the HPA"),
        pytest.param("?labelSelector=deployment%3Dllama", 12.0, "12", 1, id="narrowed"),
    ],
)
async def test_keda_value(adapter: Adapter, query: str, value: float, quantity: str, items: int) -> None:
    body = (await get(adapter, f"{KEDA}/infscale_queue_size{query}")).json()
    assert body["value"] == value and body["quantity"] == quantity and body["items"] == items
    assert body["metricName"] == "infscale_queue_size" and body["timestamp"] == "2026-09-21T14:13:20Z"


@pytest.mark.parametrize(
    ("path", "code", "reason", "message"),
    [
        pytest.param(
            f"{KEDA}/infscale_queue_size?labelSelector=deployment%3Dnone",
            404,
            "NotFound",
            "matches labelSelector",
            id="no match is an error",
        ),
        pytest.param(f"{KEDA}/unknown", 404, "NotFound", "could not find the metric unknown", id="unknown"),
        pytest.param(
            f"{KEDA}/infscale_queue_size?labelSelector=%21%21", 400, "BadRequest", "", id="bad selector"
        ),
        pytest.param(f"{KEDA}/%2e%2e", 404, "NotFound", "may not be", id="traversal"),
    ],
)
async def test_keda_errors(adapter: Adapter, path: str, code: int, reason: str, message: str) -> None:
    assert_status(await get(adapter, path), code, reason, message)


async def test_keda_endpoint_can_be_disabled(pki: Pki, kube_client: Any) -> None:
    async with running_adapter(pki, kube_client, config=ServerConfig(keda_endpoint=False)) as adapter:
        assert_status(await get(adapter, f"{KEDA}/infscale_queue_size"), 404, "NotFound")


# --- TLS --------------------------------------------------------------------------------------


async def test_tls_offers_http11_only(adapter: Adapter) -> None:
    ctx = client_context(adapter.pki, adapter.pki.front_proxy)
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    host, port = adapter.url.removeprefix("https://").split(":")
    _, writer = await asyncio.open_connection(host, int(port), ssl=ctx, server_hostname="localhost")
    ssl_object = writer.get_extra_info("ssl_object")
    assert isinstance(ssl_object, ssl.SSLObject)
    assert ssl_object.selected_alpn_protocol() == "http/1.1"
    assert ssl_object.version() in ("TLSv1.2", "TLSv1.3")
    writer.close()
