"""Who is asking and what they ask: the user a request authenticated as (or anonymous), the
request's RBAC attributes as Go's RequestInfoFactory computes them, and the errors the auth
middleware maps to 401, 403, 429 and 500 (adapter/auth.py decides; this is its vocabulary)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from urllib.parse import unquote

ANONYMOUS_USER = "system:anonymous"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
AUTHENTICATED_GROUP = "system:authenticated"
MASTERS_GROUP = "system:masters"


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


def with_authenticated_group(user: UserInfo) -> UserInfo:
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
