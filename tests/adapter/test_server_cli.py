"""`infscale adapter`: settings precedence and validation, and the quick start end to end as a
subprocess against local vLLM-style /metrics endpoints."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import ssl
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from conftest import (
    ADAPTER_SA_TOKEN,
    HPA_GROUPS,
    HPA_USER,
    KubeApiMock,
    Pki,
    client_context,
    serve,
)

from adapter import cli
from adapter.catalogconfig import CatalogError
from adapter.settings import AdapterSettings, SettingsFileError

REPO = Path(__file__).resolve().parents[2]
QUICK = {"insecure_dev": True, "endpoints": "http://127.0.0.1:1/metrics"}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("INFSCALE_ADAPTER_"):
            monkeypatch.delenv(key)


# --- settings ---------------------------------------------------------------------------------


def test_precedence_flags_over_env_over_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "adapter.yaml"
    config.write_text(
        "listen: 0.0.0.0:1111\nbackend_timeout_s: 3\nauth_cache_ttl_s: 5\ninsecure_dev: true\n"
        "endpoints: [http://10.0.0.1:8000/metrics, http://10.0.0.2:8000/metrics]\n"
    )
    monkeypatch.setenv("INFSCALE_ADAPTER_LISTEN", "0.0.0.0:2222")
    monkeypatch.setenv("INFSCALE_ADAPTER_BACKEND_TIMEOUT_S", "4")
    settings = AdapterSettings(config_file=config, listen="127.0.0.1:3333")
    assert settings.listen == "127.0.0.1:3333"  # flag
    assert settings.backend_timeout_s == 4  # environment
    assert settings.auth_cache_ttl_s == 5  # file
    assert settings.keda_endpoint is True  # default
    assert settings.endpoints == ("http://10.0.0.1:8000/metrics", "http://10.0.0.2:8000/metrics")


def test_config_file_from_the_environment_and_comma_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "adapter.json"
    config.write_text('{"insecure_dev": true, "delegate": {"url": "https://keda.keda.svc:443"}}')
    monkeypatch.setenv("INFSCALE_ADAPTER_CONFIG_FILE", str(config))
    monkeypatch.setenv("INFSCALE_ADAPTER_ENDPOINTS", "http://a:8000/metrics, http://b:8000/metrics")
    monkeypatch.setenv("INFSCALE_ADAPTER_REQUESTHEADER_ALLOWED_NAMES", "front-proxy-client,aggregator")
    settings = AdapterSettings()
    assert settings.endpoints == ("http://a:8000/metrics", "http://b:8000/metrics")
    assert settings.requestheader_allowed_names == ("front-proxy-client", "aggregator")
    assert settings.delegate is not None and settings.delegate.url == "https://keda.keda.svc:443"
    catalog = settings.catalog_settings()
    assert [e.url for e in catalog.endpoints] == list(settings.endpoints)
    assert catalog.engine == "vllm"


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        pytest.param({"endpoints": "http://x/metrics"}, "TLS is required", id="TLS required"),
        pytest.param({**QUICK, "tls_cert_file": "a.crt"}, "go together", id="cert without key"),
        pytest.param(
            {**QUICK, "self_signed_dev": True, "tls_cert_file": "a", "tls_private_key_file": "b"},
            "drop tls_cert_file",
            id="self-signed plus files",
        ),
        pytest.param({"insecure_dev": True}, "no metrics source", id="no source"),
        pytest.param({**QUICK, "catalog_file": "c.yaml"}, "catalog_file and endpoints", id="two sources"),
        pytest.param(
            {"insecure_dev": True, "catalog_file": "c.yaml", "engine": "tgi"},
            "engine 'tgi' goes with endpoints",
            id="engine beside a catalog file",
        ),
        pytest.param(
            {**QUICK, "listen": "6443"}, "listen address '6443' must be host:port", id="listen without host"
        ),
        pytest.param({**QUICK, "listen": "h:70000"}, "port 70000 is outside", id="port range"),
        pytest.param({**QUICK, "listen": "[nope]:1"}, "not an IPv6 address", id="bad v6"),
        pytest.param({**QUICK, "auth_cache_ttl_s": 30}, "less than or equal to 10", id="cache over 10 s"),
        pytest.param({**QUICK, "auth_cache_size": 0}, "auth_cache_size", id="empty auth cache"),
        pytest.param({**QUICK, "log_level": "loud"}, "log_level 'loud'", id="log level"),
        pytest.param({**QUICK, "surprise": 1}, "surprise", id="unknown setting"),
    ],
)
def test_settings_errors_name_the_field(fields: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        AdapterSettings(**fields)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        pytest.param({**QUICK, "endpoints": "ftp://x"}, "endpoint url 'ftp://x'", id="bad URL"),
        pytest.param({**QUICK, "engine": "nosuch"}, "nosuch", id="unknown engine"),
    ],
)
def test_quick_start_errors_name_the_value(fields: dict[str, Any], error: str) -> None:
    with pytest.raises(CatalogError, match=error):
        AdapterSettings(**fields).catalog_settings()


def test_unreadable_config_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n")
    with pytest.raises(SettingsFileError, match=f"config file {bad}: must be a mapping"):
        AdapterSettings(config_file=bad)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("0.0.0.0:6443", ("0.0.0.0", 6443), id="v4"),
        pytest.param("[::]:6443", ("::", 6443), id="v6"),
        pytest.param(":6443", ("", 6443), id="every interface, as the controller and Go take it"),
    ],
)
def test_listen_address(value: str, expected: tuple[str, int]) -> None:
    assert AdapterSettings(**QUICK, listen=value).listen_address() == expected


def test_flags_become_overrides() -> None:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    args = parser.parse_args(
        [
            "--insecure-dev",
            "--endpoints",
            "http://a/metrics",
            "--delegate-url",
            "https://k:443",
            "--no-keda-endpoint",
        ]
    )
    assert cli.overrides(args) == {
        "insecure_dev": True,
        "endpoints": "http://a/metrics",
        "keda_endpoint": False,
        "delegate": {"url": "https://k:443"},
    }


def test_invalid_settings_exit_2_with_the_field(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    assert (
        cli.run(parser.parse_args(["--insecure-dev", "--endpoints", "http://a/metrics", "--listen", "x"]))
        == 2
    )
    assert "infscale adapter: --listen: listen address 'x' must be host:port" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "catalog", "error"),
    [
        pytest.param(
            [],
            "scrape: {tls_ca_file: /nonexistent/engines-ca.pem}\n",
            "scrape tls_ca_file /nonexistent/engines-ca.pem",
            id="engines' CA file missing",
        ),
        pytest.param(
            ["--delegate-url", "https://k:443", "--delegate-ca-file", "/nonexistent/keda-ca.pem"],
            "",
            "delegate ca_file /nonexistent/keda-ca.pem",
            id="delegate's CA file missing",
        ),
        pytest.param(
            ["--delegate-url", "https://k:443", "--delegate-cert-file", "/nonexistent/proxy.crt"],
            "",
            "delegate cert_file needs key_file",
            id="delegate certificate without key",
        ),
    ],
)
def test_unusable_files_exit_1_naming_them(
    tmp_path: Path, flags: list[str], catalog: str, error: str, caplog: pytest.LogCaptureFixture
) -> None:
    catalog_file = tmp_path / "catalog.yaml"
    catalog_file.write_text("endpoints: [http://127.0.0.1:1/metrics]\n" + catalog)
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    args = ["--insecure-dev", "--listen", "127.0.0.1:0", "--catalog", str(catalog_file), *flags]
    assert cli.run(parser.parse_args(args)) == 1
    assert any(error in r.getMessage() and r.exc_info is None for r in caplog.records)


# --- end to end -------------------------------------------------------------------------------


def _engine_text(waiting: float, running: float, kv: float) -> str:
    return (
        "# TYPE vllm:num_requests_waiting gauge\n"
        f'vllm:num_requests_waiting{{engine="0",model_name="llama"}} {waiting}\n'
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{engine="0",model_name="llama"}} {running}\n'
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        f'vllm:kv_cache_usage_perc{{engine="0",model_name="llama"}} {kv}\n'
    )


@pytest.fixture
async def engines() -> AsyncIterator[list[str]]:
    """Two vLLM-style /metrics endpoints on loopback."""
    texts = [_engine_text(4, 3, 0.5), _engine_text(6, 5, 0.7)]
    apps = []
    for text in texts:
        app = web.Application()

        async def metrics(request: web.Request, body: str = text) -> web.Response:
            return web.Response(text=body, content_type="text/plain")

        app.add_routes([web.get("/metrics", metrics)])
        apps.append(app)
    async with serve(apps[0]) as a, serve(apps[1]) as b:
        yield [f"{a}/metrics", f"{b}/metrics"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def _start(*flags: str) -> tuple[asyncio.subprocess.Process, str]:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "infscale",
        "adapter",
        "--listen",
        f"127.0.0.1:{port}",
        *flags,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    return proc, f"127.0.0.1:{port}"


async def _wait_for(client: httpx.AsyncClient, url: str, proc: asyncio.subprocess.Process) -> httpx.Response:
    """Poll until the first scrape has landed (200), failing fast if the process died."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        if proc.returncode is not None:
            raise AssertionError(f"adapter exited with {proc.returncode}")
        try:
            response = await client.get(url)
            if response.status_code == 200:
                return response
        except httpx.TransportError:
            pass
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{url} never answered 200")
        await asyncio.sleep(0.1)


async def _first_round_done(client: httpx.AsyncClient, proc: asyncio.subprocess.Process) -> None:
    """Poll the adapter's own /metrics until one scrape round over every endpoint has ended."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        if proc.returncode is not None:
            raise AssertionError(f"adapter exited with {proc.returncode}")
        try:
            text = (await client.get("/metrics")).text
            if re.search(r"^infscale_adapter_scrape_round_duration_seconds_count [1-9]", text, re.M):
                return
        except httpx.TransportError:
            pass
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("no scrape round ended within 30 s")
        await asyncio.sleep(0.1)


async def _stop(proc: asyncio.subprocess.Process) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    _, stderr = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, stderr.decode()


@pytest.mark.integration
async def test_quick_start_serves_aggregated_signals(engines: list[str]) -> None:
    proc, address = await _start("--insecure-dev", "--endpoints", ",".join(engines), "--engine", "vllm")
    try:
        async with httpx.AsyncClient(base_url=f"http://{address}") as client:
            ns = "/apis/external.metrics.k8s.io/v1beta1/namespaces/anywhere"
            await _first_round_done(client, proc)  # during the first round only the pods scraped so far count
            values = {}
            for metric in (
                "infscale_queue_size",
                "infscale_batch_size",
                "infscale_inflight",
                "infscale_kv_cache_usage",
            ):
                (item,) = (await _wait_for(client, f"{ns}/{metric}", proc)).json()["items"]
                values[metric] = item["value"]
                assert item["metricLabels"]["namespace"] == "anywhere"
            discovery = (await client.get("/apis/external.metrics.k8s.io/v1beta1")).json()
            unknown = await client.get(f"{ns}/nope")
    finally:
        code, stderr = await _stop(proc)
    # queues and batches add up over the endpoints; the KV-cache fraction is their mean
    assert values == {
        "infscale_queue_size": "10",
        "infscale_batch_size": "8",
        "infscale_inflight": "18",
        "infscale_kv_cache_usage": "600m",
    }
    assert [r["name"] for r in discovery["resources"]] == [
        "infscale_batch_size",
        "infscale_inflight",
        "infscale_kv_cache_usage",
        "infscale_queue_size",
    ]
    assert unknown.status_code == 404
    assert code == 0
    assert "INSECURE DEV MODE" in stderr


@pytest.mark.integration
async def test_dead_endpoints_are_an_error_never_zero(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{_free_port()}/metrics"
    proc, address = await _start("--insecure-dev", "--endpoints", dead, "--self-signed-dev")
    try:
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # a dev certificate: nothing can verify it
        async with httpx.AsyncClient(base_url=f"https://{address}", verify=ctx) as client:
            await _wait_for(client, "/readyz", proc)
            response = await client.get(
                "/apis/external.metrics.k8s.io/v1beta1/namespaces/x/infscale_queue_size"
            )
    finally:
        code, stderr = await _stop(proc)
    assert response.status_code in (404, 503)
    assert response.json()["kind"] == "Status"
    assert code == 0 and "SELF-SIGNED DEV CERTIFICATE" in stderr


@pytest.mark.integration
async def test_secure_mode_without_cluster_access_fails_clearly(tmp_path: Path) -> None:
    proc, _ = await _start(
        "--self-signed-dev",
        "--endpoints",
        "http://127.0.0.1:1/metrics",
        "--kubeconfig",
        str(tmp_path / "missing"),
    )
    _, stderr = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    assert "no Kubernetes API access" in stderr.decode()


def _kubeconfig(tmp_path: Path, kube_api: KubeApiMock) -> Path:
    """A kubeconfig for the mock kube-apiserver, as the adapter's service account."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "mock", "cluster": {"server": kube_api.url}}],
                "users": [{"name": "adapter", "user": {"token": ADAPTER_SA_TOKEN}}],
                "contexts": [{"name": "mock", "context": {"cluster": "mock", "user": "adapter"}}],
                "current-context": "mock",
            }
        )
    )
    return kubeconfig


@pytest.mark.integration
async def test_an_unreadable_client_ca_file_fails_clearly(
    pki: Pki, kube_api: KubeApiMock, tmp_path: Path
) -> None:
    missing = tmp_path / "missing-ca.crt"
    proc, _ = await _start(
        "--tls-cert-file",
        str(pki.server.cert),
        "--tls-private-key-file",
        str(pki.server.key),
        "--kubeconfig",
        str(_kubeconfig(tmp_path, kube_api)),
        "--client-ca-file",
        str(missing),
        "--endpoints",
        "http://127.0.0.1:1/metrics",
    )
    _, stderr = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    assert f"client_ca_file {missing}" in stderr.decode() and "Traceback" not in stderr.decode()


@pytest.mark.integration
async def test_secure_mode_end_to_end(
    engines: list[str], pki: Pki, kube_api: KubeApiMock, tmp_path: Path
) -> None:
    """TLS, front-proxy settings from the kube-system ConfigMap and SubjectAccessReview, all through
    the CLI against the mock kube-apiserver."""
    kube_api.configmap = {
        "client-ca-file": pki.client_ca.read_text(),  # x509 users, without --client-ca-file
        "requestheader-client-ca-file": pki.front_proxy_ca.read_text(),
        "requestheader-allowed-names": '["front-proxy-client"]',
        "requestheader-username-headers": '["X-Remote-User"]',
        "requestheader-group-headers": '["X-Remote-Group"]',
        "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
    }
    kubeconfig = _kubeconfig(tmp_path, kube_api)
    proc, address = await _start(
        "--tls-cert-file",
        str(pki.server.cert),
        "--tls-private-key-file",
        str(pki.server.key),
        "--kubeconfig",
        str(kubeconfig),
        "--endpoints",
        engines[0],
    )
    path = "/apis/external.metrics.k8s.io/v1beta1/namespaces/llm/infscale_queue_size"
    hpa = [("X-Remote-User", HPA_USER), *(("X-Remote-Group", g) for g in HPA_GROUPS)]
    try:
        async with (
            httpx.AsyncClient(base_url=f"https://{address}", verify=client_context(pki)) as anonymous,
            httpx.AsyncClient(
                base_url=f"https://{address}", verify=client_context(pki, pki.front_proxy), headers=hpa
            ) as aggregator,
        ):
            await _wait_for(anonymous, "/readyz", proc)  # probes need no credentials
            response = await _wait_for(aggregator, path, proc)
            refused = await anonymous.get(path)
            async with httpx.AsyncClient(
                base_url=f"https://{address}", verify=client_context(pki, pki.alice)
            ) as alice:
                discovery = await alice.get("/apis/external.metrics.k8s.io/v1beta1")
    finally:
        code, stderr = await _stop(proc)
    assert [i["value"] for i in response.json()["items"]] == ["4"]
    assert refused.status_code == 401
    assert discovery.status_code == 200  # alice's certificate, issued by the ConfigMap's client CA
    assert any(r["spec"]["user"] == HPA_USER for r in kube_api.access_reviews)
    assert any(r["spec"]["user"] == "alice" for r in kube_api.access_reviews)
    assert code == 0 and "INSECURE" not in stderr
