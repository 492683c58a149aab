"""`kubectl get --raw` against the adapter through a generated kubeconfig: the Go client decodes our
JSON and our Status errors exactly as the HPA's client-go does. Skipped when kubectl is absent."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from conftest import Adapter, KubeApiMock, Pki

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

ROOT = "/apis/external.metrics.k8s.io/v1beta1"


def kubeconfig(path: Path, adapter: Adapter, pki: Pki, user: dict[str, str]) -> Path:
    # JSON is YAML: no YAML writer needed
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "test",
                        "cluster": {"server": adapter.url, "certificate-authority": str(pki.server_ca)},
                    }
                ],
                "users": [{"name": "test", "user": user}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
                "current-context": "test",
            }
        )
    )
    return path


async def kubectl(config: Path, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        str(config),
        "--request-timeout=20s",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture
def alice(tmp_path: Path, adapter: Adapter, pki: Pki) -> Path:
    """A kubeconfig with a client certificate from the cluster client CA (user alice)."""
    return kubeconfig(
        tmp_path / "alice.kubeconfig",
        adapter,
        pki,
        {"client-certificate": str(pki.alice.cert), "client-key": str(pki.alice.key)},
    )


async def test_kubectl_reads_a_metric_with_a_client_certificate(alice: Path, kube_api: KubeApiMock) -> None:
    code, out, err = await kubectl(alice, "get", "--raw", f"{ROOT}/namespaces/default/infscale_queue_size")
    assert code == 0, err
    body = json.loads(out)
    assert body["kind"] == "ExternalMetricValueList"
    assert [i["value"] for i in body["items"]] == ["12", "1500m"]
    assert kube_api.access_reviews[-1]["spec"]["user"] == "alice"


async def test_kubectl_selector_and_discovery(alice: Path) -> None:
    selector = "labelSelector=deployment%20in%20(mistral)"
    code, out, err = await kubectl(
        alice, "get", "--raw", f"{ROOT}/namespaces/default/infscale_queue_size?{selector}"
    )
    assert code == 0, err
    assert [i["metricLabels"]["deployment"] for i in json.loads(out)["items"]] == ["mistral"]
    code, out, err = await kubectl(alice, "get", "--raw", ROOT)
    assert code == 0, err
    assert json.loads(out)["kind"] == "APIResourceList"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param(
            f"{ROOT}/namespaces/default/no_such_metric",
            "Error from server (NotFound): the server could not find the metric no_such_metric "
            "for namespace default",
            id="unknown metric",
        ),
        pytest.param(
            f"{ROOT}/namespaces/default/infscale_queue_size?labelSelector=a%3D%2F",
            "Error from server (BadRequest): unable to parse requirement",
            id="bad selector",
        ),
        pytest.param(
            f"{ROOT}/namespaces/locked/infscale_queue_size",
            "Error from server (Forbidden): infscale_queue_size.external.metrics.k8s.io is forbidden: "
            'User "alice"',
            id="forbidden",
        ),
    ],
)
async def test_kubectl_shows_our_status_messages(alice: Path, path: str, message: str) -> None:
    code, _, err = await kubectl(alice, "get", "--raw", path)
    assert code != 0
    assert message in err


@pytest.mark.parametrize(
    ("token", "ok"),
    [
        pytest.param("reader-token", True, id="token of a reader"),
        pytest.param("bogus", False, id="unknown token"),
    ],
)
async def test_kubectl_with_a_bearer_token(
    tmp_path: Path, adapter: Adapter, pki: Pki, token: str, ok: bool
) -> None:
    config = kubeconfig(tmp_path / "token.kubeconfig", adapter, pki, {"token": token})
    code, out, err = await kubectl(config, "get", "--raw", f"{ROOT}/namespaces/default/infscale_queue_size")
    if ok:
        assert code == 0, err
        assert json.loads(out)["items"]
    else:
        assert code != 0 and "Unauthorized" in err
