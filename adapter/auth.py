"""Who is asking, and may they: authentication and authorization as a delegated apiserver does it.

Pipeline position: the server's auth middleware calls `Access.check` before any route runs.

Authentication mirrors kube apiserver `authenticatorfactory/delegating.go`, in this order:
1. front proxy: the TLS peer certificate was issued by the request-header CA (and its CN is allowed)
   -> the user, groups and extras come from `X-Remote-*` headers. Headers are read only then:
   pods and nodes can reach the Service directly and could send any header;
2. `Authorization: Bearer` -> a TokenReview at the kube-apiserver;
3. otherwise anonymous, which the server refuses on every path except the health checks.

Authorization is a SubjectAccessReview with the attributes Go's RequestInfoFactory computes (the
RBAC resource of a metric read is the metric name, verb `list`). `system:masters` skips the review,
as in Go. Both reviews go through kubernetes-asyncio and are cached (≤ 10 s, Go's default TTLs).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import unquote

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from multidict import MultiMapping

log = logging.getLogger(__name__)

ANONYMOUS_USER = "system:anonymous"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
AUTHENTICATED_GROUP = "system:authenticated"
MASTERS_GROUP = "system:masters"
CONFIGMAP_NAMESPACE = "kube-system"
CONFIGMAP_NAME = "extension-apiserver-authentication"
MAX_CACHE_TTL_S = 10.0


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # sorted (key, values): hashable for caches

    @property
    def anonymous(self) -> bool:
        return self.name == ANONYMOUS_USER

    def extra_dict(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in self.extra}


ANONYMOUS = UserInfo(ANONYMOUS_USER, groups=(UNAUTHENTICATED_GROUP,))


def _authenticated(user: UserInfo) -> UserInfo:
    """Go's AuthenticatedGroupAdder: every non-anonymous user is in system:authenticated."""
    if AUTHENTICATED_GROUP in user.groups:
        return user
    return UserInfo(user.name, user.uid, (*user.groups, AUTHENTICATED_GROUP), user.extra)


@dataclass(frozen=True, slots=True)
class RequestAttributes:
    """What a SubjectAccessReview asks about: a resource request or a non-resource path."""

    verb: str
    path: str
    resource_request: bool = False
    namespace: str = ""
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""

    def describe(self) -> str:
        """The resource phrase of Go's Forbidden message."""
        if not self.resource_request:
            return f'{self.verb} path "{self.path}"'
        where = f' in the namespace "{self.namespace}"' if self.namespace else ""
        return f'{self.verb} resource "{self.resource}" in API group "{self.group}"{where}'


_VERBS = {
    "GET": "get",
    "HEAD": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@functools.lru_cache(maxsize=4096)  # the same few paths, over and over
def request_attributes(method: str, path: str, *, watch: bool = False) -> RequestAttributes:
    """The attributes Go's `RequestInfoFactory.NewRequestInfo` computes for `path` (decoded, with
    %2F inside a segment kept in that segment).

    `/apis/<g>/<v>/namespaces/<ns>/<resource>` is a resource request; a GET without a name is
    `list` (`watch` with watch=true). Paths with fewer than three parts after `/apis` are discovery
    (non-resource), like everything outside `/apis`.
    """
    verb = _VERBS.get(method.upper(), method.lower())
    raw_parts = [p for p in path.strip("/").split("/")]
    if len(raw_parts) < 4 or raw_parts[0] != "apis":
        return RequestAttributes(verb=verb, path=path)
    parts = [unquote(p) for p in raw_parts[1:]]
    group, version, rest = parts[0], parts[1], parts[2:]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if method.upper() in ("GET", "HEAD") and not name:
        verb = "watch" if watch else "list"
    elif watch:
        verb = "watch"
    return RequestAttributes(
        verb=verb,
        path=path,
        resource_request=True,
        namespace=namespace,
        group=group,
        version=version,
        resource=resource,
        subresource=subresource,
        name=name,
    )


class AuthError(Exception):
    """Base of the refusals `Access.check` raises; the server maps each to a Status."""


class Unauthenticated(AuthError):  # -> 401
    pass


class Forbidden(AuthError):  # -> 403
    def __init__(self, user: UserInfo, message: str) -> None:
        super().__init__(message)
        self.user = user


class ReviewFailed(AuthError):  # the TokenReview/SAR call itself failed -> 500, never an allow
    pass


class RateLimited(AuthError):  # too many failed bearer tokens from one client -> 429
    pass


# --- caches -------------------------------------------------------------------------------------

K = TypeVar("K")
V = TypeVar("V")


class TTLCache(Generic[K, V]):
    """A bounded map whose entries expire `ttl_s` after they were put; time comes from `clock`."""

    def __init__(self, ttl_s: float, clock: Callable[[], float], max_entries: int = 4096) -> None:
        self._ttl_s = ttl_s
        self._clock = clock
        self._max = max_entries
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if self._clock() >= expires:
            del self._entries[key]
            return None
        return value

    def put(self, key: K, value: V, ttl_s: float | None = None) -> None:
        self._entries[key] = (self._clock() + (self._ttl_s if ttl_s is None else ttl_s), value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)  # oldest insertion first

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


class FailureBudget:
    """Failed TokenReviews allowed per client: a token bucket of `burst`, refilled at `rate_per_s`.

    Every bearer token not in the cache costs one TokenReview at the kube-apiserver; a client
    sending random tokens (~1,280/s from one client) would make the adapter a TokenReview
    amplifier. Only failures spend the budget, so a client with valid tokens is never slowed; an
    empty budget refuses that client's unknown tokens without a review until it refills. Clients
    are kept in an LRU of `max_clients`.
    """

    def __init__(
        self, burst: float, rate_per_s: float, clock: Callable[[], float], max_clients: int = 4096
    ) -> None:
        self._burst = burst
        self._rate = rate_per_s
        self._clock = clock
        self._max = max_clients
        self._clients: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client -> (tokens, at)

    def _tokens(self, client: str) -> float:
        tokens, at = self._clients.get(client, (self._burst, self._clock()))
        return min(self._burst, tokens + (self._clock() - at) * self._rate)

    def allows(self, client: str) -> bool:
        return self._tokens(client) >= 1

    def spend(self, client: str) -> None:
        self._clients[client] = (self._tokens(client) - 1, self._clock())
        self._clients.move_to_end(client)
        while len(self._clients) > self._max:
            self._clients.popitem(last=False)

    def __len__(self) -> int:
        return len(self._clients)


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


# --- delegated reviews --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TokenReviewResult:
    authenticated: bool
    user: UserInfo | None = None
    error: str = ""


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""


class Reviewer(Protocol):
    """The kube-apiserver's TokenReview and SubjectAccessReview; raises ReviewFailed on transport errors."""

    async def review_token(self, token: str) -> TokenReviewResult: ...

    async def review_access(self, user: UserInfo, attributes: RequestAttributes) -> Decision: ...


class KubeReviewer:
    """`Reviewer` through kubernetes-asyncio, as the adapter's own service account."""

    def __init__(self, api_client: Any, timeout_s: float = 10.0) -> None:
        from kubernetes_asyncio import client

        self._authn = client.AuthenticationV1Api(api_client)
        self._authz = client.AuthorizationV1Api(api_client)
        self._timeout_s = timeout_s

    async def review_token(self, token: str) -> TokenReviewResult:
        from kubernetes_asyncio import client

        body = client.V1TokenReview(
            api_version="authentication.k8s.io/v1",
            kind="TokenReview",
            spec=client.V1TokenReviewSpec(token=token),
        )
        reply = await self._call(self._authn.create_token_review(body, _request_timeout=self._timeout_s))
        status = reply.status
        if status is None or not status.authenticated or status.user is None:
            return TokenReviewResult(False, error=(status.error if status is not None else "") or "")
        u = status.user
        extra = tuple(sorted((k, tuple(v or ())) for k, v in (u.extra or {}).items()))
        return TokenReviewResult(True, UserInfo(u.username or "", u.uid or "", tuple(u.groups or ()), extra))

    async def review_access(self, user: UserInfo, attributes: RequestAttributes) -> Decision:
        from kubernetes_asyncio import client

        a = attributes
        spec = client.V1SubjectAccessReviewSpec(
            user=user.name,
            groups=list(user.groups),
            uid=user.uid or None,
            extra=user.extra_dict() or None,
        )
        if a.resource_request:
            spec.resource_attributes = client.V1ResourceAttributes(
                namespace=a.namespace or None,
                verb=a.verb,
                group=a.group or None,
                version=a.version or None,
                resource=a.resource or None,
                subresource=a.subresource or None,
                name=a.name or None,
            )
        else:
            spec.non_resource_attributes = client.V1NonResourceAttributes(path=a.path, verb=a.verb)
        body = client.V1SubjectAccessReview(
            api_version="authorization.k8s.io/v1", kind="SubjectAccessReview", spec=spec
        )
        reply = await self._call(
            self._authz.create_subject_access_review(body, _request_timeout=self._timeout_s)
        )
        status = reply.status
        if status is None:
            return Decision(False, "SubjectAccessReview returned no status")
        reason = status.reason or status.evaluation_error or ""
        return Decision(bool(status.allowed) and not status.denied, reason)

    @staticmethod
    async def _call(pending: Awaitable[Any]) -> Any:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            return await pending
        except ApiException as exc:
            raise ReviewFailed(f"kube-apiserver answered {exc.status} {exc.reason}") from exc
        except (OSError, TimeoutError) as exc:
            raise ReviewFailed(f"kube-apiserver unreachable: {exc!r}") from exc
        except Exception as exc:  # aiohttp client errors and model validation errors
            raise ReviewFailed(f"review failed: {exc!r}") from exc


# --- the access check ---------------------------------------------------------------------------


class Access(Protocol):
    """What the server asks on every non-health request."""

    @property
    def insecure(self) -> bool: ...

    async def check(
        self,
        peer_cert_der: bytes | None,
        headers: MultiMapping[str],
        attributes: RequestAttributes,
        client: str = "",
    ) -> UserInfo:
        """The authenticated, authorized user; raises Unauthenticated, Forbidden, ReviewFailed or
        RateLimited. `client` (the peer address) keys the failed-token budget."""
        ...


class InsecureDevAccess:
    """No authentication, everything allowed: `--insecure-dev` only. Says so loudly at start-up."""

    insecure = True
    USER = UserInfo("insecure-dev", groups=(AUTHENTICATED_GROUP,))

    def __init__(self) -> None:
        log.warning(
            "INSECURE DEV MODE: no authentication and no authorization; anyone who can reach this "
            "port reads every metric. Never run this on a cluster."
        )

    async def check(
        self,
        peer_cert_der: bytes | None,
        headers: MultiMapping[str],
        attributes: RequestAttributes,
        client: str = "",
    ) -> UserInfo:
        return self.USER


class DelegatedAccess:
    """Front-proxy certificates and TokenReview for authentication, SubjectAccessReview for authorization."""

    insecure = False

    def __init__(
        self,
        reviewer: Reviewer | None,
        request_header: RequestHeaderConfig | None,
        *,
        cache_ttl_s: float = MAX_CACHE_TTL_S,
        client_cas: Sequence[x509.Certificate] = (),
        failed_token_burst: float = 10.0,
        failed_tokens_per_s: float = 1.0,
        cache_size: int = 4096,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if not 0 <= cache_ttl_s <= MAX_CACHE_TTL_S:
            raise ValueError(f"auth cache_ttl_s={cache_ttl_s} must be within 0..{MAX_CACHE_TTL_S:g} s")
        self._reviewer = reviewer
        self._request_header = request_header
        self._wall_clock = wall_clock
        if cache_size < 1:
            raise ValueError(f"auth cache_size={cache_size} must be at least 1")
        # each bounded by cache_size entries, so a flood of tokens, identities or clients cannot grow them
        self._tokens: TTLCache[str, TokenReviewResult] = TTLCache(cache_ttl_s, clock, cache_size)
        self._decisions: TTLCache[tuple[UserInfo, RequestAttributes], Decision] = TTLCache(
            cache_ttl_s, clock, cache_size
        )
        self._certs: TTLCache[bytes, CertVerdict | Unauthenticated | None] = TTLCache(
            cache_ttl_s, clock, cache_size
        )
        self._client_cas = tuple(client_cas)
        self._failures = FailureBudget(failed_token_burst, failed_tokens_per_s, clock, cache_size)
        self._limited: TTLCache[str, bool] = TTLCache(
            60.0, clock, cache_size
        )  # clients told about, for the log

    @property
    def request_header(self) -> RequestHeaderConfig | None:
        return self._request_header

    def set_request_header(self, config: RequestHeaderConfig | None) -> None:
        """New front-proxy settings (the ConfigMap changed); cached certificate verdicts are dropped."""
        if config != self._request_header:
            self._request_header = config
            self._certs.clear()

    async def check(
        self,
        peer_cert_der: bytes | None,
        headers: MultiMapping[str],
        attributes: RequestAttributes,
        client: str = "",
    ) -> UserInfo:
        user = await self.authenticate(peer_cert_der, headers, client)
        if user.anonymous:
            # Go would send system:anonymous to the SAR; refusing here keeps unauthenticated
            # traffic from reaching the kube-apiserver at all.
            raise Unauthenticated("anonymous requests are not allowed")
        if MASTERS_GROUP not in user.groups:
            decision = await self.authorize(user, attributes)
            if not decision.allowed:
                raise Forbidden(user, f'User "{user.name}" cannot {attributes.describe()}: {decision.reason}')
        return user

    async def authenticate(
        self, peer_cert_der: bytes | None, headers: MultiMapping[str], client: str = ""
    ) -> UserInfo:
        config = self._request_header
        cert_user: UserInfo | None = None
        if peer_cert_der is not None:
            verdict = self._certs.get(peer_cert_der)
            if verdict is None:
                try:
                    verdict = verify_peer_cert(peer_cert_der, config, self._client_cas, self._wall_clock())
                except Unauthenticated as exc:
                    verdict = exc
                self._certs.put(peer_cert_der, verdict)
            if isinstance(verdict, Unauthenticated):
                raise Unauthenticated(str(verdict))  # a fresh exception: the cached one keeps no traceback
            if verdict is not None and verdict.front_proxy and config is not None:
                user = headers_user(config, headers)
                if user is not None:
                    return _authenticated(user)
            elif verdict is not None:
                cert_user = verdict.user
        if cert_user is not None and cert_user.name:
            return _authenticated(cert_user)
        authorization = headers.get("Authorization", "")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return await self._token_user(token.strip(), client)
        return ANONYMOUS

    async def _token_user(self, token: str, client: str) -> UserInfo:
        if self._reviewer is None:
            raise Unauthenticated("bearer tokens are not accepted: no kube-apiserver to review them")
        key = hashlib.sha256(token.encode()).hexdigest()  # never keep the token itself
        result = self._tokens.get(key)  # a failed review is cached too, for cache_ttl_s
        if result is None:
            if not self._failures.allows(client):
                if self._limited.get(client) is None:  # once a minute per client, not per request
                    self._limited.put(client, True)
                    log.warning("client %s sends too many invalid bearer tokens; refusing for now", client)
                raise RateLimited("too many invalid bearer tokens from this client; slow down")
            result = await self._reviewer.review_token(token)  # ReviewFailed is not cached
            self._tokens.put(key, result)
            if not result.authenticated:
                self._failures.spend(client)
        if not result.authenticated or result.user is None:
            raise Unauthenticated(f"invalid bearer token{': ' + result.error if result.error else ''}")
        return _authenticated(result.user)

    async def authorize(self, user: UserInfo, attributes: RequestAttributes) -> Decision:
        key = (user, attributes)
        decision = self._decisions.get(key)
        if decision is None:
            if self._reviewer is None:
                raise ReviewFailed("no kube-apiserver configured for SubjectAccessReview")
            decision = await self._reviewer.review_access(user, attributes)
            self._decisions.put(key, decision)
        return decision


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
