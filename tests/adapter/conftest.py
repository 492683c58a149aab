"""Shared fixtures for the adapter server tests: a test PKI, a mock kube-apiserver, a scripted
backend, and the real server on loopback over HTTPS.

The mock kube-apiserver is a small aiohttp app answering TokenReview, SubjectAccessReview and the
`kube-system/extension-apiserver-authentication` ConfigMap the way the real one does (it insists
on the adapter's own bearer token, echoes `spec`, puts the verdict in `status`). The adapter talks
to it through kubernetes-asyncio, so the whole delegated-auth path runs for real.
"""

from __future__ import annotations

import datetime as dt
import ssl
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from adapter.auth import DelegatedAccess, KubeReviewer
from adapter.backend import BackendError, MetricSample
from adapter.connections import GUARD, start_site
from adapter.frontproxy import RequestHeaderConfig, load_ca_bundle
from adapter.server import ServerConfig, create_app
from adapter.telemetry import Telemetry
from adapter.tls import ServingTLS
from common.selector import Selector

HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
HPA_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
ADAPTER_SA_TOKEN = "adapter-sa-token"
METRIC_READERS = frozenset({HPA_USER, "alice", "token-reader"})
FORBIDDEN_NAMESPACE = "locked"


# --- PKI --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    server_ca: Path  # signs the serving certificate
    server: Issued  # SAN localhost, 127.0.0.1
    front_proxy_ca: Path
    front_proxy: Issued  # CN front-proxy-client, clientAuth: the aggregator
    intruder: Issued  # same CA, CN not in the allowed names
    no_client_auth: Issued  # same CA, CN allowed, but serverAuth only
    foreign_ca: Path
    foreign: Issued  # CN front-proxy-client from an unrelated CA
    client_ca: Path  # the cluster client CA (x509 user authentication)
    alice: Issued  # CN alice, O devs


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())  # EC: key generation in microseconds, not RSA's 100 ms


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey | None = None) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        path.with_suffix(".key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )


def make_ca(directory: Path, name: str) -> tuple[Path, x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    path = directory / f"{name}.crt"
    _write(path, cert)
    return path, cert, key


def issue(
    directory: Path,
    name: str,
    ca: tuple[Path, x509.Certificate, ec.EllipticCurvePrivateKey],
    *,
    cn: str,
    usages: Sequence[x509.ObjectIdentifier],
    orgs: Sequence[str] = (),
    hosts: Sequence[str] = (),
    not_after: dt.datetime | None = None,
) -> Issued:
    _, ca_cert, ca_key = ca
    key = _key()
    now = dt.datetime.now(dt.UTC)
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attrs))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(not_after or now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if hosts:
        import ipaddress

        sans: list[x509.GeneralName] = []
        for h in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                sans.append(x509.DNSName(h))
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    path = directory / f"{name}.crt"
    _write(path, cert, key)
    return Issued(path, path.with_suffix(".key"))


def make_pki(directory: Path) -> Pki:
    client, server = [ExtendedKeyUsageOID.CLIENT_AUTH], [ExtendedKeyUsageOID.SERVER_AUTH]
    server_ca = make_ca(directory, "server-ca")
    fp_ca = make_ca(directory, "front-proxy-ca")
    foreign_ca = make_ca(directory, "foreign-ca")
    client_ca = make_ca(directory, "client-ca")
    return Pki(
        server_ca=server_ca[0],
        server=issue(
            directory, "server", server_ca, cn="adapter", usages=server, hosts=("localhost", "127.0.0.1")
        ),
        front_proxy_ca=fp_ca[0],
        front_proxy=issue(directory, "front-proxy", fp_ca, cn="front-proxy-client", usages=client),
        intruder=issue(directory, "intruder", fp_ca, cn="intruder", usages=client),
        no_client_auth=issue(directory, "no-client-auth", fp_ca, cn="front-proxy-client", usages=server),
        foreign_ca=foreign_ca[0],
        foreign=issue(directory, "foreign", foreign_ca, cn="front-proxy-client", usages=client),
        client_ca=client_ca[0],
        alice=issue(directory, "alice", client_ca, cn="alice", orgs=("devs",), usages=client),
    )


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def client_context(pki: Pki, identity: Issued | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.server_ca))
    if identity is not None:
        ctx.load_cert_chain(identity.cert, identity.key)
    return ctx


def request_header_config(pki: Pki) -> RequestHeaderConfig:
    return RequestHeaderConfig(ca_pem=pki.front_proxy_ca.read_bytes(), allowed_names=("front-proxy-client",))


# --- mock kube-apiserver ----------------------------------------------------------------------


def default_policy(spec: Mapping[str, Any]) -> bool:
    """RBAC as a typical cluster has it: the HPA and a few readers may get/list/watch external
    metrics (the reader ClusterRole of external_metrics_api.md 5.4) except in one locked namespace;
    every authenticated user may read discovery paths (system:discovery)."""
    resource = spec.get("resourceAttributes")
    if resource is not None:
        return (
            spec.get("user") in METRIC_READERS
            and resource.get("group") == "external.metrics.k8s.io"
            and resource.get("verb") in ("get", "list", "watch")
            and resource.get("namespace") != FORBIDDEN_NAMESPACE
        )
    non_resource = spec.get("nonResourceAttributes") or {}
    return "system:authenticated" in spec.get("groups", ()) and non_resource.get("verb") == "get"


@dataclass
class KubeApiMock:
    url: str = ""
    tokens: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {
            "reader-token": {"username": "token-reader", "uid": "u-1", "groups": ["readers"]},
            "nobody-token": {"username": "nobody", "groups": ["system:authenticated"]},
        }
    )
    policy: Callable[[Mapping[str, Any]], bool] = default_policy
    configmap: dict[str, str] | None = None
    broken: bool = False  # every call answers 500
    token_reviews: list[dict[str, Any]] = field(default_factory=list)
    access_reviews: list[dict[str, Any]] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._auth])
        app.add_routes(
            [
                web.post("/apis/authentication.k8s.io/v1/tokenreviews", self._token_review),
                web.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", self._access_review),
                web.get(
                    "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication",
                    self._configmap,
                ),
            ]
        )
        return app

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.broken:
            return web.json_response(_status(500, "InternalError", "etcd is on fire"), status=500)
        if request.headers.get("Authorization") != f"Bearer {ADAPTER_SA_TOKEN}":
            return web.json_response(_status(401, "Unauthorized", "Unauthorized"), status=401)
        response: web.StreamResponse = await handler(request)
        return response

    async def _token_review(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.token_reviews.append(body)
        user = self.tokens.get(body["spec"]["token"])
        status: dict[str, Any] = (
            {"authenticated": True, "user": user}
            if user
            else {"authenticated": False, "error": "token not found"}
        )
        return web.json_response({**body, "status": status}, status=201)

    async def _access_review(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.access_reviews.append(body)
        allowed = self.policy(body["spec"])
        status = {"allowed": allowed} if allowed else {"allowed": False, "reason": "no RBAC rule matched"}
        return web.json_response({**body, "status": status}, status=201)

    async def _configmap(self, request: web.Request) -> web.Response:
        if self.configmap is None:
            return web.json_response(_status(404, "NotFound", "configmaps not found"), status=404)
        return web.json_response(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
                "data": self.configmap,
            }
        )


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


@asynccontextmanager
async def serve(app: web.Application, ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    """Run `app` on an ephemeral loopback port; yields its base URL."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    guarded = None
    if GUARD in app:  # the adapter's app: served as cli.serve does, with the connection guard
        guarded = await start_site(runner, "127.0.0.1", 0, ssl_context=ssl_context)
        port = guarded.port
    else:
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
        await site.start()
        port = site.port
    try:
        yield f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"
    finally:
        if guarded is not None:
            guarded.close()
        await runner.cleanup()


@pytest.fixture
async def kube_api() -> AsyncIterator[KubeApiMock]:
    mock = KubeApiMock()
    async with serve(mock.app()) as url:
        mock.url = url
        yield mock


@pytest.fixture
async def kube_client(kube_api: KubeApiMock) -> AsyncIterator[Any]:
    from kubernetes_asyncio.client import ApiClient, Configuration

    config = Configuration(host=kube_api.url)
    config.api_key = {"BearerToken": ADAPTER_SA_TOKEN}
    config.api_key_prefix = {"BearerToken": "Bearer"}
    async with ApiClient(config) as client:
        yield client


# --- scripted backend -------------------------------------------------------------------------


@dataclass
class ScriptedBackend:
    """A `MetricsBackend` that answers from a script: metric -> samples, or an error to raise."""

    script: dict[str, Sequence[MetricSample] | BackendError] = field(default_factory=dict)
    reads: list[tuple[str, str, str]] = field(default_factory=list)

    def metric_names(self) -> Sequence[str]:
        return list(self.script)

    async def read(self, namespace: str, metric: str, selector: Selector) -> Sequence[MetricSample]:
        from adapter.backend import UnknownMetric

        self.reads.append((namespace, metric, str(selector)))
        answer = self.script.get(metric)
        if answer is None:
            raise UnknownMetric(f"the server could not find the metric {metric} for namespace {namespace}")
        if isinstance(answer, BackendError):
            raise answer
        return [s for s in answer if selector.matches(s.labels)]


T0 = 1_790_000_000.0  # 2026-09-21T14:13:20Z


def default_script() -> dict[str, Sequence[MetricSample] | BackendError]:
    return {
        "infscale_queue_size": [
            MetricSample({"namespace": "default", "deployment": "llama", "model": "llama-3"}, 12.0, T0),
            MetricSample(
                {"namespace": "default", "deployment": "mistral", "model": "mistral-7b"}, 1.5, T0 + 1
            ),
        ],
        "infscale_kv_cache_usage": [MetricSample({"deployment": "llama"}, 0.30000000000000004, T0)],
        "infscale_request_rate": [MetricSample({"deployment": "llama"}, 2000.0, T0, window_s=60)],
    }


# --- the adapter under test -------------------------------------------------------------------


@dataclass
class Adapter:
    url: str
    backend: ScriptedBackend
    access: DelegatedAccess
    telemetry: Telemetry
    pki: Pki

    def client(self, identity: Issued | None = None, **kwargs: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, verify=client_context(self.pki, identity), **kwargs)

    def proxied(self, user: str = HPA_USER, groups: Sequence[str] = HPA_GROUPS) -> httpx.AsyncClient:
        """A client that is the aggregator: front-proxy certificate plus X-Remote-* headers."""
        headers = [("X-Remote-User", user), *(("X-Remote-Group", g) for g in groups)]
        return self.client(self.pki.front_proxy, headers=headers)


@asynccontextmanager
async def running_adapter(
    pki: Pki,
    kube_client: Any,
    *,
    backend: ScriptedBackend | None = None,
    access: DelegatedAccess | None = None,
    config: ServerConfig | None = None,
    **app_kwargs: Any,
) -> AsyncIterator[Adapter]:
    backend = backend or ScriptedBackend(default_script())
    if access is None:
        access = DelegatedAccess(
            KubeReviewer(kube_client),
            request_header_config(pki),
            client_cas=load_ca_bundle(pki.client_ca.read_bytes(), "client CA"),
        )
    telemetry = Telemetry()
    tls = ServingTLS(
        pki.server.cert, pki.server.key, pki.front_proxy_ca.read_bytes() + pki.client_ca.read_bytes()
    )
    app = create_app(backend, access, telemetry, config=config, **app_kwargs)
    async with serve(app, tls.context) as url:
        yield Adapter(url, backend, access, telemetry, pki)


@pytest.fixture
async def adapter(pki: Pki, kube_client: Any) -> AsyncIterator[Adapter]:
    async with running_adapter(pki, kube_client) as running:
        yield running


def vector(*items: tuple[dict[str, str], str], t: float = 1700000000.5) -> dict[str, Any]:
    """A Prometheus instant query's answer: one sample (labels, value) an item, at time t."""
    return {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": m, "value": [t, v]} for m, v in items]},
    }
