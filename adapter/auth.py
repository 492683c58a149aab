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

The front proxy's certificates and headers are adapter/frontproxy.py; users, request attributes and
the errors are adapter/identity.py.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from cryptography import x509
from multidict import MultiMapping

from adapter.frontproxy import CertVerdict, RequestHeaderConfig, headers_user, verify_peer_cert
from adapter.identity import (
    ANONYMOUS,
    AUTHENTICATED_GROUP,
    MASTERS_GROUP,
    Forbidden,
    RateLimited,
    RequestAttributes,
    ReviewFailed,
    Unauthenticated,
    UserInfo,
    with_authenticated_group,
)

log = logging.getLogger(__name__)

MAX_CACHE_TTL_S = 10.0


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
                    return with_authenticated_group(user)
            elif verdict is not None:
                cert_user = verdict.user
        if cert_user is not None and cert_user.name:
            return with_authenticated_group(cert_user)
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
        return with_authenticated_group(result.user)

    async def authorize(self, user: UserInfo, attributes: RequestAttributes) -> Decision:
        key = (user, attributes)
        decision = self._decisions.get(key)
        if decision is None:
            if self._reviewer is None:
                raise ReviewFailed("no kube-apiserver configured for SubjectAccessReview")
            decision = await self._reviewer.review_access(user, attributes)
            self._decisions.put(key, decision)
        return decision
