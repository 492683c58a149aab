"""The front proxy: the kube-apiserver's aggregation layer forwards requests with the user in
`X-Remote-*` headers, trusted only when the TLS peer certificate was issued by the request-header
CA (and its CN is allowed); x509 users from the client CA; and the kube-system ConfigMap
(`extension-apiserver-authentication`) those settings come from, re-read as the CA rotates."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from multidict import MultiMapping

from adapter.identity import ReviewFailed, Unauthenticated, UserInfo

log = logging.getLogger(__name__)

CONFIGMAP_NAMESPACE = "kube-system"
CONFIGMAP_NAME = "extension-apiserver-authentication"

# --- front proxy --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestHeaderConfig:
    """The `--requestheader-*` settings: flags, or the kube-system ConfigMap the kube-apiserver writes."""

    ca_pem: bytes
    allowed_names: tuple[str, ...] = ()  # empty: any CN the CA signed
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)
    uid_headers: tuple[str, ...] = ()
    ca_certs: tuple[x509.Certificate, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.ca_certs:
            object.__setattr__(self, "ca_certs", load_ca_bundle(self.ca_pem, "request-header CA"))
        if not self.username_headers:
            raise ValueError("request-header username headers must not be empty")

    def header_slots(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """Lower-cased username, group and uid header names, in configured order."""
        return _header_slots(self.username_headers, self.group_headers, self.uid_headers)

    def extra_prefixes_lower(self) -> tuple[str, ...]:
        return _lowered(self.extra_prefixes)

    @classmethod
    def from_configmap(cls, data: Mapping[str, str]) -> RequestHeaderConfig | None:
        """From `kube-system/extension-apiserver-authentication`; None when the aggregation layer is
        not configured (no `requestheader-client-ca-file`)."""
        ca = data.get("requestheader-client-ca-file", "")
        if not ca.strip():
            return None

        def strings(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
            raw = data.get(key)
            if raw is None or not raw.strip():
                return default
            try:
                value = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ValueError(f"ConfigMap key {key}: not a JSON array of strings: {raw!r}") from exc
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"ConfigMap key {key}: not a JSON array of strings: {raw!r}")
            return tuple(value) or default

        return cls(
            ca_pem=ca.encode(),
            allowed_names=strings("requestheader-allowed-names", ()),
            username_headers=strings("requestheader-username-headers", ("X-Remote-User",)),
            group_headers=strings("requestheader-group-headers", ("X-Remote-Group",)),
            extra_prefixes=strings("requestheader-extra-headers-prefix", ("X-Remote-Extra-",)),
            uid_headers=strings("requestheader-uid-headers", ()),
        )


@functools.lru_cache(maxsize=16)
def _header_slots(
    users: tuple[str, ...], groups: tuple[str, ...], uids: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    return _lowered(users), _lowered(groups), _lowered(uids)


@functools.lru_cache(maxsize=16)
def _lowered(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n.lower() for n in names)


def load_ca_bundle(pem: bytes, what: str) -> tuple[x509.Certificate, ...]:
    try:
        certs = tuple(x509.load_pem_x509_certificates(pem))
    except ValueError as exc:
        raise ValueError(f"{what} is not a PEM certificate bundle: {exc}") from exc
    return certs


def _verified_client_cert(
    cert: x509.Certificate, cas: Sequence[x509.Certificate], now: float, what: str
) -> x509.Certificate | None:
    """`cert` if one of `cas` issued it and it is a valid client certificate; None if none of
    `cas` issued it; Unauthenticated if issued but unusable (expired, no clientAuth)."""
    if not any(_issued_by(cert, ca) for ca in cas):
        return None
    subject = cert.subject.rfc4514_string()
    moment = datetime.fromtimestamp(now, tz=UTC)
    if not cert.not_valid_before_utc <= moment <= cert.not_valid_after_utc:
        raise Unauthenticated(f"{what} certificate {subject} is expired or not yet valid")
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        usages = None
    if usages is not None and ExtendedKeyUsageOID.CLIENT_AUTH not in usages:
        raise Unauthenticated(f"{what} certificate {subject} lacks the clientAuth usage")
    return cert


def _common_name(cert: x509.Certificate) -> str:
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""


@dataclass(frozen=True, slots=True)
class CertVerdict:
    """What a verified peer certificate proves: a front proxy (read the headers) or a user."""

    front_proxy: bool
    user: UserInfo | None = None


def verify_peer_cert(
    der: bytes,
    request_header: RequestHeaderConfig | None,
    client_cas: Sequence[x509.Certificate],
    now: float,
) -> CertVerdict | None:
    """Classify the TLS peer certificate (Go's chain order: request-header CA, then client CA).

    The handshake already verified the chain against the SSLContext's trust store, but that store
    holds both CAs and can only grow at runtime, so which *current* CA issued it is checked here;
    otherwise any cluster certificate could set `X-Remote-User`. None: neither CA issued it.
    """
    try:
        cert = x509.load_der_x509_certificate(der)
    except ValueError as exc:
        raise Unauthenticated(f"unreadable client certificate: {exc}") from exc
    if request_header is not None and _verified_client_cert(
        cert, request_header.ca_certs, now, "front-proxy"
    ):
        cn = _common_name(cert)
        if request_header.allowed_names and cn not in request_header.allowed_names:
            raise Unauthenticated(f"client certificate CN {cn!r} is not an allowed request-header name")
        return CertVerdict(front_proxy=True)
    if client_cas and _verified_client_cert(cert, client_cas, now, "client"):
        # x509 user: CN is the name, each O a group (Go's CommonNameUserConversion)
        orgs = tuple(str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
        return CertVerdict(front_proxy=False, user=UserInfo(_common_name(cert), groups=orgs))
    return None


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    if cert.issuer != ca.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca)
    except Exception:  # InvalidSignature, or a key type that cannot sign this way
        return False
    return True


def headers_user(config: RequestHeaderConfig, headers: MultiMapping[str]) -> UserInfo | None:
    """User, groups, uid and extras from the request headers of a trusted front-proxy request.

    Username and uid: the first non-empty value, headers in configured order. Groups: every value
    of every group header, one group per line (Go does not split on commas). Extra keys: the
    header name after the prefix, lower-cased then percent-decoded. One pass over the headers:
    this runs on every proxied request.
    """
    users, groups, uids = config.header_slots()
    seen: dict[str, list[str]] = {}
    extra: dict[str, list[str]] = {}
    prefixes = config.extra_prefixes_lower()
    for header, value in headers.items():
        lower = header.lower()
        if lower in users or lower in groups or lower in uids:
            seen.setdefault(lower, []).append(value)
            continue
        for prefix in prefixes:
            if lower.startswith(prefix) and len(lower) > len(prefix):
                extra.setdefault(unquote(lower[len(prefix) :]), []).append(value)
                break
    name = next((v for h in users for v in seen.get(h, ()) if v), "")
    if not name:
        return None
    uid = next((v for h in uids for v in seen.get(h, ()) if v), "")
    group_values = tuple(v for h in groups for v in seen.get(h, ()))
    return UserInfo(name, uid, group_values, tuple(sorted((k, tuple(v)) for k, v in extra.items())))


# --- the request-header ConfigMap ---------------------------------------------------------------


async def read_request_header_configmap(
    api_client: Any, timeout_s: float = 10.0
) -> RequestHeaderConfig | None:
    """The front-proxy settings of `kube-system/extension-apiserver-authentication`; None when it is
    missing or has no request-header CA."""
    data = await _read_authentication_configmap(api_client, timeout_s)
    if data is None:
        log.warning(
            "ConfigMap %s/%s not found: the aggregation layer is not configured, front-proxy "
            "authentication is off",
            CONFIGMAP_NAMESPACE,
            CONFIGMAP_NAME,
        )
        return None
    return RequestHeaderConfig.from_configmap(data)


async def read_client_ca_configmap(api_client: Any, timeout_s: float = 10.0) -> bytes | None:
    """The kube-apiserver's client CA (PEM) from the same ConfigMap: without --client-ca-file, Go's
    delegated authentication accepts x509 users it issued. None when the ConfigMap or key is missing."""
    data = await _read_authentication_configmap(api_client, timeout_s)
    ca = (data or {}).get("client-ca-file", "")
    return ca.encode() if ca.strip() else None


async def _read_authentication_configmap(api_client: Any, timeout_s: float) -> Mapping[str, str] | None:
    """The ConfigMap's data; None when it does not exist."""
    from kubernetes_asyncio import client
    from kubernetes_asyncio.client.exceptions import ApiException

    try:
        cm = await client.CoreV1Api(api_client).read_namespaced_config_map(
            CONFIGMAP_NAME, CONFIGMAP_NAMESPACE, _request_timeout=timeout_s
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        hint = (
            " (bind Role extension-apiserver-authentication-reader in kube-system to the adapter's "
            "service account)"
            if exc.status == 403
            else ""
        )
        raise ReviewFailed(
            f"cannot read ConfigMap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}: {exc.status} {exc.reason}{hint}"
        ) from exc
    data: Mapping[str, str] = cm.data or {}
    return data


async def refresh_request_header(
    load: Callable[[], Awaitable[RequestHeaderConfig | None]],
    apply: Sequence[Callable[[RequestHeaderConfig | None], None]],
    interval_s: float,
    initial: RequestHeaderConfig | None,
) -> None:
    """Re-read the front-proxy settings every `interval_s` (the kube-apiserver may rotate its CA)
    and hand changes to `apply`; a failed read keeps the previous settings."""
    previous = initial
    while True:
        await asyncio.sleep(interval_s)
        try:
            config = await load()
        except (ReviewFailed, ValueError) as exc:
            log.warning("keeping the previous front-proxy settings: %s", exc)
            continue
        if config != previous:
            log.info("front-proxy settings changed; applying them")
            for fn in apply:
                fn(config)
            previous = config
