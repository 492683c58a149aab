"""An adapter with authentication on: the test suite's mock kube-apiserver (TokenReview,
SubjectAccessReview, tests/adapter/conftest.py) and PKI, and raw TLS clients of each identity.

Needs the repository checkout (tests/adapter), as bench_controller needs tests/controller.
"""

from __future__ import annotations

import contextlib
import ssl
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.attack.harness import ROOT, AdapterProcess, adapter

sys.path.insert(0, str(ROOT / "tests" / "adapter"))

from conftest import ADAPTER_SA_TOKEN, KubeApiMock, Pki, make_pki, serve  # type: ignore[import-not-found]


@dataclass
class AuthAdapter:
    running: AdapterProcess
    kube: KubeApiMock
    pki: Pki

    def context(self, identity: Any = None) -> ssl.SSLContext:
        """A client context trusting the adapter's CA, presenting `identity`'s certificate."""
        ctx = ssl.create_default_context(cafile=str(self.pki.server_ca))
        if identity is not None:
            ctx.load_cert_chain(identity.cert, identity.key)
        return ctx


@contextlib.asynccontextmanager
async def auth_adapter(endpoints: Sequence[str], *extra: str) -> AsyncIterator[AuthAdapter]:
    """`infscale adapter` with TLS, front-proxy and x509 client CAs, TokenReview and SAR at the mock."""
    with tempfile.TemporaryDirectory(prefix="infscale-attack-") as tmp:
        pki = make_pki(Path(tmp))
        mock = KubeApiMock()
        async with serve(mock.app()) as url:
            mock.url = url
            kubeconfig = Path(tmp) / "kubeconfig"
            kubeconfig.write_text(
                yaml.safe_dump(
                    {
                        "apiVersion": "v1",
                        "kind": "Config",
                        "clusters": [{"name": "mock", "cluster": {"server": url}}],
                        "users": [{"name": "adapter", "user": {"token": ADAPTER_SA_TOKEN}}],
                        "contexts": [{"name": "mock", "context": {"cluster": "mock", "user": "adapter"}}],
                        "current-context": "mock",
                    }
                )
            )
            args = [
                "--tls-cert-file", str(pki.server.cert), "--tls-private-key-file", str(pki.server.key),
                "--kubeconfig", str(kubeconfig),
                "--requestheader-client-ca-file", str(pki.front_proxy_ca),
                "--requestheader-allowed-names", "front-proxy-client",
                "--client-ca-file", str(pki.client_ca),
                "--endpoints", ",".join(endpoints), *extra,
            ]  # fmt: skip
            with adapter(*args) as running:
                yield AuthAdapter(running, mock, pki)
