"""Delegation: metrics this adapter does not serve are read from another external-metrics server.

A cluster has one owner of `v1beta1.external.metrics.k8s.io`. When infscale owns it and KEDA (or
prometheus-adapter) must keep serving its own metrics, the server forwards every read of an
unknown metric here; the other server's answer (status, Content-Type, body) goes back unchanged.
Only `Retry-After` is dropped: client-go sleeps and retries inside the HPA worker when it sees one.

The other server is an aggregated apiserver too, so it authenticates us either by
- a front-proxy client certificate it trusts (`cert_file`/`key_file`), in which case the caller's
  identity travels in `X-Remote-*` headers as the kube-apiserver would send it; or
- a bearer token (`token_file`, e.g. our projected service-account token), in which case it
  authorizes *our* service account (grant it `list` on `external.metrics.k8s.io`).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator

from adapter.catalogconfig import check_http_url
from adapter.identity import UserInfo
from adapter.wire import GROUP_VERSION


class DelegateSettings(BaseModel):
    """Where unknown metrics go. Defaults: 5 s timeout, system CAs, no client identity."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    url: str  # e.g. https://keda-operator-metrics-apiserver.keda.svc:443
    ca_file: Path | None = None  # CA of the other server's serving certificate
    cert_file: Path | None = None  # a front-proxy client certificate the other server trusts
    key_file: Path | None = None
    token_file: Path | None = None  # bearer token, re-read on every request (tokens rotate)
    timeout_s: float = Field(default=5.0, gt=0)
    insecure_skip_tls_verify: bool = False  # dev only

    _url = field_validator("url")(classmethod(lambda cls, v: check_http_url(v, "delegate url").rstrip("/")))


class DelegateUnavailable(Exception):
    """The other server could not be reached or did not answer in time."""


@dataclass(frozen=True, slots=True)
class DelegateResponse:
    status: int
    content_type: str
    body: bytes


def _ssl_context(settings: DelegateSettings) -> ssl.SSLContext:
    """ValueError naming the file when one cannot be used (ssl's own errors do not name it)."""
    if settings.insecure_skip_tls_verify:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        try:
            ctx = ssl.create_default_context(cafile=str(settings.ca_file) if settings.ca_file else None)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"delegate ca_file {settings.ca_file}: {exc}") from exc
    if settings.cert_file is not None:
        if settings.key_file is None:
            raise ValueError("delegate cert_file needs key_file")
        try:
            ctx.load_cert_chain(settings.cert_file, settings.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(
                f"delegate cert_file {settings.cert_file} with key_file {settings.key_file}: {exc}"
            ) from exc
    return ctx


class Delegate:
    """Forwards one metric read; owns an httpx client (enter it with `async with`)."""

    def __init__(self, settings: DelegateSettings, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.settings = settings
        self._client = httpx.AsyncClient(
            base_url=settings.url,
            verify=_ssl_context(settings),
            timeout=settings.timeout_s,
            transport=transport,
            follow_redirects=False,  # the aggregator rejects redirects; so do we
        )

    async def __aenter__(self) -> Delegate:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    async def forward(
        self, namespace: str, metric: str, raw_query: str, user: UserInfo, accept: str | None
    ) -> DelegateResponse:
        path = f"/apis/{GROUP_VERSION}/namespaces/{quote(namespace, safe='')}/{quote(metric, safe='')}"
        # the query string goes on byte for byte: the selector was already checked and must not be
        # re-encoded differently
        url = f"{path}?{raw_query}" if raw_query else path
        headers: list[tuple[str, str]] = [("Accept", accept or "application/json")]
        if self.settings.cert_file is not None:
            headers.append(("X-Remote-User", user.name))
            if user.uid:
                headers.append(("X-Remote-Uid", user.uid))
            # one header line per group, as the kube-apiserver sends them
            headers.extend(("X-Remote-Group", group) for group in user.groups)
            for key, values in user.extra:
                headers.extend((f"X-Remote-Extra-{quote(key, safe='')}", value) for value in values)
        if self.settings.token_file is not None:
            try:
                token = self.settings.token_file.read_text().strip()
            except OSError as exc:
                raise DelegateUnavailable(
                    f"cannot read delegate token file {self.settings.token_file}: {exc}"
                ) from exc
            headers.append(("Authorization", f"Bearer {token}"))
        request = self._client.build_request("GET", url, headers=headers)
        try:
            response = await self._client.send(request)
        except httpx.HTTPError as exc:
            raise DelegateUnavailable(f"delegate {self.settings.url} failed: {exc!r}") from exc
        return DelegateResponse(
            status=response.status_code,
            content_type=response.headers.get("Content-Type", ""),
            body=response.content,
        )
