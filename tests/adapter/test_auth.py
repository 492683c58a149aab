"""Authentication and authorization: pure pieces in tables, then the real server over HTTPS with a
test CA and the mock kube-apiserver's TokenReview/SubjectAccessReview behind kubernetes-asyncio."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from conftest import (
    FORBIDDEN_NAMESPACE,
    HPA_GROUPS,
    HPA_USER,
    Adapter,
    KubeApiMock,
    Pki,
    request_header_config,
    running_adapter,
)
from multidict import CIMultiDict

from adapter.auth import Decision, DelegatedAccess, KubeReviewer, TokenReviewResult, TTLCache
from adapter.frontproxy import (
    RequestHeaderConfig,
    headers_user,
    read_client_ca_configmap,
    read_request_header_configmap,
    refresh_request_header,
)
from adapter.identity import (
    ANONYMOUS,
    RateLimited,
    RequestAttributes,
    ReviewFailed,
    Unauthenticated,
    UserInfo,
    request_attributes,
)
from common.clock import ManualClock

NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default"
READ = f"{NS}/infscale_queue_size"


# --- request attributes (Go RequestInfoFactory) -----------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "watch", "expected"),
    [
        pytest.param(
            "GET",
            READ,
            False,
            RequestAttributes(
                "list", READ, True, "default", "external.metrics.k8s.io", "v1beta1", "infscale_queue_size"
            ),
            id="metric read is list on the metric name",
        ),
        pytest.param(
            "GET",
            READ,
            True,
            RequestAttributes(
                "watch", READ, True, "default", "external.metrics.k8s.io", "v1beta1", "infscale_queue_size"
            ),
            id="watch=true",
        ),
        pytest.param(
            "GET",
            f"{READ}/x",
            False,
            RequestAttributes(
                "get",
                f"{READ}/x",
                True,
                "default",
                "external.metrics.k8s.io",
                "v1beta1",
                "infscale_queue_size",
                "",
                "x",
            ),
            id="a name makes it get",
        ),
        pytest.param(
            "GET",
            "/apis/external.metrics.k8s.io/v1beta1",
            False,
            RequestAttributes("get", "/apis/external.metrics.k8s.io/v1beta1"),
            id="group version is non-resource",
        ),
        pytest.param("GET", "/apis", False, RequestAttributes("get", "/apis"), id="apis"),
        pytest.param("GET", "/metrics", False, RequestAttributes("get", "/metrics"), id="metrics"),
        pytest.param(
            "POST",
            READ,
            False,
            RequestAttributes(
                "create", READ, True, "default", "external.metrics.k8s.io", "v1beta1", "infscale_queue_size"
            ),
            id="post is create",
        ),
        pytest.param(
            "GET",
            f"{NS}/a%2Fb",
            False,
            RequestAttributes(
                "list", f"{NS}/a%2Fb", True, "default", "external.metrics.k8s.io", "v1beta1", "a/b"
            ),
            id="encoded slash stays in its segment",
        ),
    ],
)
def test_request_attributes(method: str, path: str, watch: bool, expected: RequestAttributes) -> None:
    assert request_attributes(method, path, watch=watch) == expected


# --- request headers --------------------------------------------------------------------------


def test_headers_user_reads_every_group_line_and_decodes_extras(pki: Pki) -> None:
    headers = CIMultiDict(
        [
            ("x-remote-user", "jane"),
            ("X-Remote-Group", "a,b"),  # one group: Go never splits on commas
            ("X-Remote-Group", "c"),
            ("X-Remote-Extra-Authentication.Kubernetes.IO%2FCredential-Id", "JTI=1"),
            ("X-Remote-Extra-Scopes", "s1"),
            ("X-Remote-Extra-Scopes", "s2"),
            ("X-Other", "ignored"),
        ]
    )
    user = headers_user(request_header_config(pki), headers)
    assert user == UserInfo(
        "jane",
        groups=("a,b", "c"),
        extra=(("authentication.kubernetes.io/credential-id", ("JTI=1",)), ("scopes", ("s1", "s2"))),
    )


def test_headers_user_without_username_does_not_apply(pki: Pki) -> None:
    assert headers_user(request_header_config(pki), CIMultiDict([("X-Remote-Group", "g")])) is None


@pytest.mark.parametrize(
    ("data", "error"),
    [
        pytest.param(
            {"requestheader-allowed-names": "front-proxy-client"}, "not a JSON array", id="not JSON"
        ),
        pytest.param({"requestheader-group-headers": '{"a": 1}'}, "not a JSON array", id="not an array"),
        pytest.param(
            {"requestheader-username-headers": "[1]"}, "not a JSON array of strings", id="not strings"
        ),
    ],
)
def test_configmap_errors_name_the_key(pki: Pki, data: dict[str, str], error: str) -> None:
    full = {"requestheader-client-ca-file": pki.front_proxy_ca.read_text(), **data}
    with pytest.raises(ValueError, match=error) as info:
        RequestHeaderConfig.from_configmap(full)
    assert next(iter(data)) in str(info.value)


def test_configmap_defaults_and_absence(pki: Pki) -> None:
    assert RequestHeaderConfig.from_configmap({}) is None  # aggregation layer not configured
    config = RequestHeaderConfig.from_configmap(
        {"requestheader-client-ca-file": pki.front_proxy_ca.read_text(), "requestheader-allowed-names": "[]"}
    )
    assert config is not None
    assert config.allowed_names == () and config.username_headers == ("X-Remote-User",)
    assert config.extra_prefixes == ("X-Remote-Extra-",) and config.uid_headers == ()


def test_ttl_cache_expires_and_stays_bounded() -> None:
    clock = ManualClock()
    cache: TTLCache[str, int] = TTLCache(10.0, clock, max_entries=2)
    cache.put("a", 1)
    clock.set(9.9)
    assert cache.get("a") == 1
    clock.set(10.0)
    assert cache.get("a") is None
    cache.put("b", 2)
    cache.put("c", 3)
    cache.put("d", 4)
    assert len(cache) == 2 and cache.get("b") is None and cache.get("d") == 4


def test_cache_ttl_is_capped_at_ten_seconds() -> None:
    with pytest.raises(ValueError, match="cache_ttl_s=11"):
        DelegatedAccess(None, None, cache_ttl_s=11)


# --- over HTTPS -------------------------------------------------------------------------------


async def test_front_proxy_request_is_authorized_as_the_original_caller(
    adapter: Adapter, kube_api: KubeApiMock
) -> None:
    async with adapter.client(adapter.pki.front_proxy) as client:
        headers = [("X-Remote-User", HPA_USER), *(("X-Remote-Group", g) for g in HPA_GROUPS)]
        headers.append(("X-Remote-Extra-Authentication.kubernetes.io%2Fcredential-id", "JTI=abc"))
        response = await client.get(READ, headers=headers)
    assert response.status_code == 200
    (review,) = kube_api.access_reviews
    assert review["spec"] == {
        "user": HPA_USER,
        "groups": list(HPA_GROUPS),
        "extra": {"authentication.kubernetes.io/credential-id": ["JTI=abc"]},
        "resourceAttributes": {
            "namespace": "default",
            "verb": "list",
            "group": "external.metrics.k8s.io",
            "version": "v1beta1",
            "resource": "infscale_queue_size",
        },
    }
    assert kube_api.token_reviews == []


async def test_discovery_is_a_non_resource_review(adapter: Adapter, kube_api: KubeApiMock) -> None:
    async with adapter.proxied(user="system:aggregator", groups=()) as client:
        assert (await client.get("/apis/external.metrics.k8s.io/v1beta1")).status_code == 200
    (review,) = kube_api.access_reviews
    # system:authenticated is added as Go's AuthenticatedGroupAdder does
    assert review["spec"]["groups"] == ["system:authenticated"]
    assert review["spec"]["nonResourceAttributes"] == {
        "path": "/apis/external.metrics.k8s.io/v1beta1",
        "verb": "get",
    }


async def test_system_masters_skip_the_review(adapter: Adapter, kube_api: KubeApiMock) -> None:
    async with adapter.proxied(user="system:kube-aggregator", groups=("system:masters",)) as client:
        assert (await client.get("/apis/external.metrics.k8s.io/v1beta1")).status_code == 200
    assert kube_api.access_reviews == []


async def test_denied_read_is_a_403_status(adapter: Adapter) -> None:
    async with adapter.proxied() as client:
        response = await client.get(
            f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{FORBIDDEN_NAMESPACE}/q"
        )
    assert response.status_code == 403
    body = response.json()
    assert body["reason"] == "Forbidden" and body["code"] == 403
    assert body["message"] == (
        f'q.external.metrics.k8s.io is forbidden: User "{HPA_USER}" cannot list resource "q" in API group '
        f'"external.metrics.k8s.io" in the namespace "{FORBIDDEN_NAMESPACE}"'
    )
    assert body["details"] == {"group": "external.metrics.k8s.io", "kind": "q"}
    assert adapter.backend.reads == []


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        pytest.param({}, "anonymous requests are not allowed", id="no credentials"),
        pytest.param(
            {"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"},
            "anonymous requests are not allowed",
            id="spoofed headers without a certificate",
        ),
        pytest.param(
            {"Authorization": "Bearer wrong"}, "invalid bearer token: token not found", id="bad token"
        ),
        pytest.param(
            {"Authorization": "Basic dXNlcjpwYXNz"}, "anonymous", id="basic auth is not a credential"
        ),
    ],
)
async def test_unauthenticated_requests_are_refused(
    adapter: Adapter, kube_api: KubeApiMock, headers: dict[str, str], message: str
) -> None:
    async with adapter.client() as client:
        response = await client.get(READ, headers=headers)
    assert response.status_code == 401
    body = response.json()
    assert body["reason"] == "Unauthorized" and message in body["message"]
    assert kube_api.access_reviews == []  # refused before any SubjectAccessReview
    assert adapter.backend.reads == []


async def test_spoofed_headers_with_a_token_count_as_the_token_user(
    adapter: Adapter, kube_api: KubeApiMock
) -> None:
    async with adapter.client() as client:
        response = await client.get(
            READ,
            headers={
                "Authorization": "Bearer nobody-token",
                "X-Remote-User": HPA_USER,
                "X-Remote-Group": "system:masters",
            },
        )
    assert response.status_code == 403
    (review,) = kube_api.access_reviews
    assert review["spec"]["user"] == "nobody" and "system:masters" not in review["spec"]["groups"]


async def test_front_proxy_certificate_without_a_user_header_is_anonymous(adapter: Adapter) -> None:
    async with adapter.client(adapter.pki.front_proxy) as client:
        response = await client.get(READ)
    assert response.status_code == 401


async def test_front_proxy_certificate_with_a_disallowed_cn(adapter: Adapter, kube_api: KubeApiMock) -> None:
    async with adapter.client(adapter.pki.intruder) as client:
        response = await client.get(
            READ, headers={"X-Remote-User": HPA_USER, "X-Remote-Group": "system:masters"}
        )
    assert response.status_code == 401
    assert "CN 'intruder' is not an allowed request-header name" in response.json()["message"]
    assert kube_api.access_reviews == []


@pytest.mark.parametrize(
    "identity",
    [
        pytest.param("foreign", id="certificate from a foreign CA"),
        pytest.param("no_client_auth", id="no clientAuth usage"),
    ],
)
async def test_untrusted_certificates_never_authenticate(
    adapter: Adapter, kube_api: KubeApiMock, identity: str
) -> None:
    """Python refuses these during the handshake (Go would answer 401); either way, no data."""
    try:
        async with adapter.client(getattr(adapter.pki, identity)) as client:
            response = await client.get(
                READ, headers={"X-Remote-User": HPA_USER, "X-Remote-Group": "system:masters"}
            )
    except httpx.TransportError:
        pass  # handshake refused
    else:
        assert response.status_code == 401
    assert kube_api.access_reviews == [] and adapter.backend.reads == []


async def test_x509_client_certificate_user(adapter: Adapter, kube_api: KubeApiMock) -> None:
    async with adapter.client(adapter.pki.alice) as client:
        # a cluster-CA certificate is a user, never a front proxy: its X-Remote-* headers are ignored
        response = await client.get(
            READ, headers={"X-Remote-User": "mallory", "X-Remote-Group": "system:masters"}
        )
    assert response.status_code == 200
    (review,) = kube_api.access_reviews
    assert review["spec"]["user"] == "alice" and review["spec"]["groups"] == ["devs", "system:authenticated"]


async def test_bearer_token_is_reviewed_once_then_cached(
    pki: Pki, kube_client: Any, kube_api: KubeApiMock
) -> None:
    clock = ManualClock()
    access = DelegatedAccess(KubeReviewer(kube_client), request_header_config(pki), clock=clock)
    async with running_adapter(pki, kube_client, access=access) as adapter, adapter.client() as client:
        headers = {"Authorization": "Bearer reader-token"}
        for _ in range(3):
            assert (await client.get(READ, headers=headers)).status_code == 200
        assert len(kube_api.token_reviews) == 1 and len(kube_api.access_reviews) == 1
        assert kube_api.token_reviews[0]["spec"] == {"token": "reader-token"}
        review = kube_api.access_reviews[0]["spec"]
        assert review["user"] == "token-reader" and review["uid"] == "u-1"
        assert review["groups"] == ["readers", "system:authenticated"]
        clock.set(10.0)  # the TTL: both reviews are asked again
        assert (await client.get(READ, headers=headers)).status_code == 200
        assert len(kube_api.token_reviews) == 2 and len(kube_api.access_reviews) == 2


async def test_denials_are_cached_too(pki: Pki, kube_client: Any, kube_api: KubeApiMock) -> None:
    async with running_adapter(pki, kube_client) as adapter, adapter.client() as client:
        for _ in range(2):
            assert (
                await client.get(READ, headers={"Authorization": "Bearer nobody-token"})
            ).status_code == 403
    assert len(kube_api.access_reviews) == 1


class CountingReviewer:
    """A hand-written Reviewer: every token is invalid; counts the TokenReviews it is asked for."""

    def __init__(self) -> None:
        self.reviews = 0

    async def review_token(self, token: str) -> TokenReviewResult:
        self.reviews += 1
        return TokenReviewResult(False, error="token not found")

    async def review_access(self, user: UserInfo, attributes: RequestAttributes) -> Decision:
        return Decision(True)


async def test_random_tokens_from_one_client_cost_at_most_the_failure_budget(pki: Pki) -> None:
    clock = ManualClock(0.0)
    reviewer = CountingReviewer()
    access = DelegatedAccess(
        reviewer, request_header_config(pki), failed_token_burst=5, failed_tokens_per_s=1, clock=clock
    )

    async def try_token(token: str, client: str = "10.0.0.9") -> type[Exception]:
        with pytest.raises((Unauthenticated, RateLimited)) as caught:
            await access.authenticate(None, CIMultiDict({"Authorization": f"Bearer {token}"}), client)
        return caught.type

    outcomes = [await try_token(f"random-{i}") for i in range(100)]  # the attack: 1,280/s of these
    assert reviewer.reviews == 5  # the burst, then no more reviews
    assert outcomes[:5] == [Unauthenticated] * 5 and set(outcomes[5:]) == {RateLimited}
    assert await try_token("random-0") is Unauthenticated  # a cached failure costs nothing and says why
    assert await try_token("other", client="10.0.0.10") is Unauthenticated  # other clients are not slowed
    clock.advance(2.0)  # the budget refills at 1 a second
    await try_token("random-200")
    await try_token("random-201")
    assert await try_token("random-202") is RateLimited
    assert reviewer.reviews == 8


async def test_auth_caches_hold_at_most_cache_size_entries(pki: Pki) -> None:
    # a flood of distinct tokens from distinct clients: the caches keep the newest cache_size only
    reviewer = CountingReviewer()
    access = DelegatedAccess(reviewer, request_header_config(pki), cache_size=3, clock=ManualClock(0.0))

    async def try_token(token: str, client: str) -> None:
        with pytest.raises(Unauthenticated):
            await access.authenticate(None, CIMultiDict({"Authorization": f"Bearer {token}"}), client)

    for i in range(1000):
        await try_token(f"random-{i}", f"10.0.{i // 250}.{i % 250}")
    assert reviewer.reviews == 1000
    await try_token("random-999", "10.9.9.9")  # among the newest three: answered from the cache
    assert reviewer.reviews == 1000
    await try_token("random-0", "10.9.9.9")  # long evicted: reviewed again
    assert reviewer.reviews == 1001
    assert len(access._tokens) == 3 and len(access._failures) == 3


def test_auth_cache_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="cache_size=0"):
        DelegatedAccess(None, None, cache_size=0)


async def test_valid_tokens_never_spend_the_failure_budget(pki: Pki, kube_client: Any) -> None:
    access = DelegatedAccess(
        KubeReviewer(kube_client), request_header_config(pki), cache_ttl_s=0, failed_token_burst=1
    )
    for _ in range(20):  # no cache: a review every time, all of them good
        user = await access.authenticate(None, CIMultiDict({"Authorization": "Bearer reader-token"}), "c")
        assert user.name == "token-reader"


async def test_a_rate_limited_client_gets_a_429_status(pki: Pki) -> None:
    access = DelegatedAccess(CountingReviewer(), request_header_config(pki), failed_token_burst=1)
    async with running_adapter(pki, None, access=access) as adapter, adapter.client() as client:
        codes = [
            (await client.get(READ, headers={"Authorization": f"Bearer t{i}"})).status_code for i in range(3)
        ]
        last = (await client.get(READ, headers={"Authorization": "Bearer t9"})).json()
    assert codes == [401, 429, 429]
    assert (last["code"], last["reason"]) == (429, "TooManyRequests")


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        pytest.param({"Authorization": "Bearer reader-token"}, 500, id="token review fails: 500"),
        pytest.param({"X-Remote-User": HPA_USER}, 500, id="access review fails: 500, never an allow"),
    ],
)
async def test_kube_apiserver_failures_never_allow(
    adapter: Adapter, kube_api: KubeApiMock, headers: dict[str, str], code: int
) -> None:
    kube_api.broken = True
    identity = adapter.pki.front_proxy if "X-Remote-User" in headers else None
    async with adapter.client(identity) as client:
        response = await client.get(READ, headers=headers)
    assert response.status_code == code
    assert "etcd" not in response.text  # the kube-apiserver's message stays in our log
    assert adapter.backend.reads == []


async def test_review_failure_is_not_cached(pki: Pki, kube_client: Any, kube_api: KubeApiMock) -> None:
    async with running_adapter(pki, kube_client) as adapter, adapter.proxied() as client:
        kube_api.broken = True
        assert (await client.get(READ)).status_code == 500
        kube_api.broken = False
        assert (await client.get(READ)).status_code == 200


async def test_tokens_need_a_reviewer(pki: Pki) -> None:
    access = DelegatedAccess(None, request_header_config(pki))
    with pytest.raises(Unauthenticated, match="no kube-apiserver"):
        await access.authenticate(None, CIMultiDict({"Authorization": "Bearer x"}))
    assert await access.authenticate(None, CIMultiDict()) == ANONYMOUS


# --- the extension-apiserver-authentication ConfigMap ------------------------------------------


async def test_configmap_read_through_kubernetes_asyncio(
    pki: Pki, kube_client: Any, kube_api: KubeApiMock
) -> None:
    kube_api.configmap = {
        "client-ca-file": pki.client_ca.read_text(),
        "requestheader-client-ca-file": pki.front_proxy_ca.read_text(),
        "requestheader-allowed-names": '["front-proxy-client"]',
        "requestheader-username-headers": '["X-Remote-User"]',
        "requestheader-group-headers": '["X-Remote-Group"]',
        "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
    }
    config = await read_request_header_configmap(kube_client)
    assert config == request_header_config(pki)


async def test_missing_configmap_means_no_front_proxy(kube_client: Any) -> None:
    assert await read_request_header_configmap(kube_client) is None
    assert await read_client_ca_configmap(kube_client) is None


async def test_client_ca_from_the_configmap(pki: Pki, kube_client: Any, kube_api: KubeApiMock) -> None:
    """As Go's delegated authentication: without --client-ca-file, the kube-apiserver's own."""
    kube_api.configmap = {"requestheader-client-ca-file": pki.front_proxy_ca.read_text()}
    assert await read_client_ca_configmap(kube_client) is None  # key absent: no x509 users
    kube_api.configmap["client-ca-file"] = pki.client_ca.read_text()
    assert await read_client_ca_configmap(kube_client) == pki.client_ca.read_bytes()


async def test_configmap_read_failure_names_the_configmap(kube_client: Any, kube_api: KubeApiMock) -> None:
    kube_api.broken = True
    with pytest.raises(ReviewFailed, match="kube-system/extension-apiserver-authentication: 500"):
        await read_request_header_configmap(kube_client)


async def test_request_header_refresh_applies_changes_only(pki: Pki) -> None:
    first = request_header_config(pki)
    changed = RequestHeaderConfig(ca_pem=first.ca_pem, allowed_names=("other",))
    answers: list[RequestHeaderConfig | Exception | None] = [first, ReviewFailed("flaky"), changed, changed]
    applied: list[RequestHeaderConfig | None] = []
    done = asyncio.Event()

    async def load() -> RequestHeaderConfig | None:
        if not answers:
            done.set()
            await asyncio.Event().wait()
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    task = asyncio.create_task(refresh_request_header(load, [applied.append], 0, initial=first))
    await done.wait()
    task.cancel()
    assert applied == [changed]


async def test_front_proxy_settings_follow_a_configmap_change(pki: Pki, kube_client: Any) -> None:
    access = DelegatedAccess(KubeReviewer(kube_client), request_header_config(pki))
    async with running_adapter(pki, kube_client, access=access) as adapter:
        async with adapter.proxied() as client:
            assert (await client.get(READ)).status_code == 200
        access.set_request_header(
            RequestHeaderConfig(ca_pem=pki.front_proxy_ca.read_bytes(), allowed_names=("aggregator",))
        )
        async with adapter.proxied() as client:
            assert (await client.get(READ)).status_code == 401
        access.set_request_header(None)  # front proxy switched off: headers are never read
        async with adapter.proxied() as client:
            assert (await client.get(READ)).status_code == 401
