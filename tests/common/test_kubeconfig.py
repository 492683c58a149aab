"""Starting without a cluster, or with a broken kubeconfig: one line that names the file and the
problem, never the client library's traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.kubeconfig import KubeconfigError, load_configuration

GOOD = """apiVersion: v1
kind: Config
current-context: dev
clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443"}}]
contexts: [{name: dev, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: abc}}]
"""


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


async def test_a_good_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(GOOD)
    configuration = await load_configuration(path)
    assert configuration.host == "https://10.0.0.1:6443"


async def test_kubeconfig_env_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "config"
    path.write_text(GOOD)
    monkeypatch.setenv("KUBECONFIG", str(path))
    assert (await load_configuration()).host == "https://10.0.0.1:6443"


async def test_no_cluster_at_all_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError) as caught:
        await load_configuration()
    message = str(caught.value)
    assert "\n" not in message
    assert "KUBERNETES_SERVICE_HOST is unset" in message
    assert str(tmp_path / "home" / ".kube" / "config") in message
    assert "--kubeconfig" in message


@pytest.mark.parametrize(
    ("text", "error"),
    [
        pytest.param(None, "no such file", id="missing"),
        pytest.param("", "not a kubeconfig", id="empty"),
        pytest.param("::: [", "not YAML", id="not YAML"),
        pytest.param(
            GOOD.replace("current-context: dev\n", ""), "no current-context is set", id="no context"
        ),
        pytest.param(
            GOOD.replace("current-context: dev", "current-context: prod"),
            "context 'prod'",
            id="unknown context",
        ),
        pytest.param(
            GOOD.replace('server: "https://10.0.0.1:6443"', "insecure-skip-tls-verify: true"),
            "has no server",
            id="no server",
        ),
    ],
)
async def test_a_broken_file_is_named(tmp_path: Path, text: str | None, error: str) -> None:
    path = tmp_path / "config"
    if text is not None:
        path.write_text(text)
    with pytest.raises(KubeconfigError, match=f"kubeconfig {path}: .*{error}"):
        await load_configuration(path)


async def test_in_cluster_without_a_service_account(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(KubeconfigError, match="in-cluster configuration"):
        await load_configuration()


@pytest.mark.parametrize(
    ("env", "proxy"),
    [
        ({}, None),
        ({"HTTPS_PROXY": "http://proxy.corp:3128"}, "http://proxy.corp:3128"),
        ({"HTTPS_PROXY": "http://proxy.corp:3128", "NO_PROXY": "10.0.0.1"}, None),
    ],
)
async def test_the_client_resolves_the_proxy_once_and_not_per_request(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], proxy: str | None
) -> None:
    from kubernetes_asyncio import client

    from common.kubeconfig import api_client

    for name in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    async with api_client(client.Configuration(host="https://10.0.0.1:6443")) as api:
        assert api.configuration.proxy == proxy
        assert api.rest_client.pool_manager.trust_env is False  # no netrc or proxy lookup a request
