"""The API machinery of the fake kube-apiserver: objects with resourceVersions, lists with pages,
watches with bookmarks and expiry, label and field selectors, as the real API applies them.

One global resourceVersion counter (etcd's revision): every write bumps it and records the change in
its resource's history, which is the watch cache. What a client sees (../../../shared/
kubernetes_api_gotchas.md, and apiserver's storage/cacher and etcd3 store):

- list: items in key order (namespace/name), `metadata.resourceVersion` the revision read; with
  `limit`, pages and a `continue` token that reads the same snapshot; a token older than the
  compacted revision is 410 Expired;
- watch from resourceVersion R: every change after R in order; unset or "0": synthetic ADDED for
  what exists now, then changes; R older than the compacted revision: HTTP 200 with one ERROR event
  holding a 410 Expired Status; BOOKMARK (only with allowWatchBookmarks) carries just a
  resourceVersion; an object whose labels or fields leave the selector arrives as DELETED, one that
  enters as ADDED; the server ends a watch after `timeoutSeconds`;
- selectors: `labelSelector` by apimachinery's grammar, `fieldSelector` with `=`, `==`, `!=` on the
  fields each resource supports (others: 400 "field label not supported").
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import contextlib
import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from common.selector import Selector, SelectorError, parse_selector
from common.status import status_body

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); "" namespace for cluster-scoped resources
FieldGetter = Callable[[Mapping[str, Any]], str]


class ApiStatus(Exception):
    """Raised by handlers; becomes a metav1.Status response."""

    def __init__(
        self, code: int, reason: str, message: str, causes: list[dict[str, str]] | None = None
    ) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.causes = code, reason, message, causes or []

    def response(self) -> web.Response:
        details = {"causes": self.causes} if self.causes else None
        return web.json_response(status_body(self.code, self.reason, self.message, details), status=self.code)


def _path(obj: Mapping[str, Any], dotted: str) -> Any:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def field_getter(dotted: str, default: str = "") -> FieldGetter:
    def get(obj: Mapping[str, Any]) -> str:
        value = _path(obj, dotted)
        if isinstance(value, bool):
            return "true" if value else "false"
        return default if value is None else str(value)

    return get


COMMON_FIELDS: dict[str, FieldGetter] = {
    "metadata.name": field_getter("metadata.name"),
    "metadata.namespace": field_getter("metadata.namespace"),
}
POD_FIELDS: dict[str, FieldGetter] = {  # pkg/registry/core/pod: PodToSelectableFields
    **COMMON_FIELDS,
    "spec.nodeName": field_getter("spec.nodeName"),
    "spec.restartPolicy": field_getter("spec.restartPolicy"),
    "spec.schedulerName": field_getter("spec.schedulerName"),
    "spec.serviceAccountName": field_getter("spec.serviceAccountName"),
    "spec.hostNetwork": field_getter("spec.hostNetwork", "false"),
    "status.phase": field_getter("status.phase"),
    "status.podIP": field_getter("status.podIP"),
    "status.nominatedNodeName": field_getter("status.nominatedNodeName"),
}
NODE_FIELDS: dict[str, FieldGetter] = {
    **COMMON_FIELDS,
    "spec.unschedulable": field_getter("spec.unschedulable", "false"),
}


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str


def parse_field_selector(text: str, fields: Mapping[str, FieldGetter]) -> tuple[FieldRequirement, ...]:
    """`a=b,c!=d` (fields.ParseSelector); an unknown field is 400, as the apiserver answers."""
    out = []
    for part in (p for p in _split_unescaped(text) if p.strip()):
        for op, equal in (("!=", False), ("==", True), ("=", True)):
            name, sep, value = part.partition(op)
            if sep:
                name = name.strip()
                if name not in fields:
                    raise ApiStatus(400, "BadRequest", f"field label not supported: {name}")
                out.append(FieldRequirement(name, equal, value.replace("\\,", ",").replace("\\=", "=")))
                break
        else:
            raise ApiStatus(400, "BadRequest", f"invalid selector: '{text}'; can't understand '{part}'")
    return tuple(out)


def _split_unescaped(text: str) -> list[str]:
    parts, current, escaped = [], "", False
    for ch in text:
        if ch == "," and not escaped:
            parts.append(current)
            current = ""
            continue
        escaped = ch == "\\" and not escaped
        current += ch
    parts.append(current)
    return parts


@dataclass(frozen=True, slots=True)
class Filter:
    """What one list or watch asked for."""

    namespace: str | None
    labels: Selector
    fields: tuple[FieldRequirement, ...]
    getters: Mapping[str, FieldGetter]

    def matches(self, obj: Mapping[str, Any] | None) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if not self.labels.matches(meta.get("labels") or {}):
            return False
        return all((self.getters[f.field](obj) == f.value) == f.equal for f in self.fields)


@dataclass
class Change:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    old: Obj | None
    new: Obj  # for DELETED: the object as it was, at the deletion's resourceVersion


@dataclass
class Resource:
    """One resource's objects, its change history (the watch cache) and what it lists as."""

    plural: str
    kind: str
    api_version: str
    namespaced: bool = True
    builtin: bool = True  # list items of built-in kinds carry no kind/apiVersion
    fields: Mapping[str, FieldGetter] = field(default_factory=lambda: COMMON_FIELDS)
    objects: dict[Key, Obj] = field(default_factory=dict)
    history: list[Change] = field(default_factory=list)  # in resourceVersion order
    history_rvs: list[int] = field(default_factory=list)  # the same, for bisect
    generation: int = 0  # bumped by every change of this resource

    def view(self, obj: Obj) -> Obj:
        """An object as a list or watch returns it."""
        out = copy.deepcopy(obj)
        out.setdefault("apiVersion", self.api_version)
        out.setdefault("kind", self.kind)
        return out


@dataclass
class Snapshot:
    """The items of a paginated list, as of its first page."""

    rv: int
    items: list[Obj]
    id: int = 0


class Machinery:
    """The store behind the fake's handlers. `compacted` is the oldest resourceVersion still served:
    a watch or continue token from before it is 410 Expired."""

    def __init__(self) -> None:
        self.rv = 1000
        self.compacted = 0
        self.resources: dict[str, Resource] = {}
        self.snapshots: dict[int, Snapshot] = {}  # by id: two lists can read the same revision
        self._snapshot_ids = 0
        self.changed = asyncio.Condition()
        self.generation = 0  # bumped by every write, bookmark() and drop_watches(): watches wait on it
        self.bookmark_round = 0  # bumped by bookmark(): every open bookmark watch sends one
        self.drop_round = 0  # bumped by drop_watches(): every open watch ends
        self.open_watches = 0
        self.watch_log: list[tuple[str, dict[str, str]]] = []  # (path, query) of every watch
        self.on_page: Callable[[], None] | None = None  # called after a page with a continue token

    def resource(self, plural: str) -> Resource:
        return self.resources[plural]

    # --- writes -----------------------------------------------------------------------------------------

    def commit(self, plural: str, obj: Obj, *, delete: bool = False) -> Obj:
        """Store (or delete) `obj` at a new resourceVersion and record the change for watches."""
        res = self.resources[plural]
        meta = obj.setdefault("metadata", {})
        key = (str(meta.get("namespace") or ""), str(meta["name"]))
        old = res.objects.get(key)
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        if delete:
            res.objects.pop(key, None)
            kind = "DELETED"
        else:
            res.objects[key] = obj
            kind = "MODIFIED" if old is not None else "ADDED"
        res.history.append(Change(self.rv, kind, copy.deepcopy(old), copy.deepcopy(obj)))
        res.history_rvs.append(self.rv)
        res.generation += 1
        self._wake()
        return obj

    def _wake(self) -> None:
        self.generation += 1

        async def notify() -> None:
            async with self.changed:
                self.changed.notify_all()

        with contextlib.suppress(RuntimeError):  # no running loop: nothing is watching
            asyncio.get_running_loop().create_task(notify())

    def compact(self) -> None:
        """etcd compaction: history up to now is gone; older watches and continue tokens expire."""
        self.compacted = self.rv
        for res in self.resources.values():
            res.history = [c for c in res.history if c.rv > self.compacted]
            res.history_rvs = [c.rv for c in res.history]
        self.snapshots = {k: s for k, s in self.snapshots.items() if s.rv >= self.compacted}

    def bookmark(self) -> None:
        """Every open watch that allowed bookmarks sends one at the current resourceVersion."""
        self.bookmark_round += 1
        self._wake()

    def drop_watches(self) -> None:
        """End every open watch (an apiserver restart, a load balancer closing idle connections)."""
        self.drop_round += 1
        self._wake()

    # --- reads ------------------------------------------------------------------------------------------

    def filter(self, res: Resource, request: web.Request, namespace: str | None) -> Filter:
        try:
            labels = parse_selector(request.query.get("labelSelector", ""))
        except SelectorError as exc:
            raise ApiStatus(400, "BadRequest", f"unable to parse requirement: {exc}") from None
        fields = parse_field_selector(request.query.get("fieldSelector", ""), res.fields)
        return Filter(namespace, labels, fields, res.fields)

    async def list(
        self, plural: str, request: web.Request, namespace: str | None = None
    ) -> web.StreamResponse:
        res = self.resources[plural]
        if request.query.get("watch", "").lower() in ("true", "1"):  # Go's ParseBool
            return await self._watch(res, self.filter(res, request, namespace), request)
        flt = self.filter(res, request, namespace)
        try:
            limit = int(request.query.get("limit") or 0)
        except ValueError:
            raise ApiStatus(400, "BadRequest", f"limit: invalid value {request.query['limit']!r}") from None
        token = request.query.get("continue", "")
        if token:
            snapshot, start = self._continue(token)
        else:
            items = [res.view(o) for k, o in sorted(res.objects.items()) if flt.matches(o)]
            self._snapshot_ids += 1
            snapshot, start = Snapshot(self.rv, items, self._snapshot_ids), 0
        page = snapshot.items[start : start + limit] if limit > 0 else snapshot.items[start:]
        meta: dict[str, Any] = {"resourceVersion": str(snapshot.rv)}
        end = start + len(page)
        if end < len(snapshot.items):
            self.snapshots[snapshot.id] = snapshot
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"rv": snapshot.rv, "id": snapshot.id, "start": end}).encode()
            ).decode()
            if not flt.labels.requirements and not flt.fields:  # as etcd3: only when it can count
                meta["remainingItemCount"] = len(snapshot.items) - end
            if self.on_page is not None:
                self.on_page()
        items = page
        if res.builtin:
            items = [{k: v for k, v in i.items() if k not in ("kind", "apiVersion")} for i in page]
        return web.json_response(
            {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta, "items": items}
        )

    def _continue(self, token: str) -> tuple[Snapshot, int]:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
            rv, snapshot_id, start = int(decoded["rv"]), int(decoded["id"]), int(decoded["start"])
        except (ValueError, KeyError, TypeError):
            raise ApiStatus(
                400, "BadRequest", "continue key is not valid: incorrect encoded start resourceVersion"
            ) from None
        snapshot = self.snapshots.get(snapshot_id)
        if rv < self.compacted or snapshot is None or snapshot.rv != rv:
            raise ApiStatus(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list result. You"
                " can start a new list without the continue parameter.",
            )
        return snapshot, start

    async def _watch(self, res: Resource, flt: Filter, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        self.watch_log.append((request.path, query))
        bookmarks = query.get("allowWatchBookmarks", "").lower() in ("true", "1")
        timeout_s = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
        since_text = query.get("resourceVersion", "")
        sent = self.rv
        if since_text not in ("", "0"):
            try:
                sent = int(since_text)
            except ValueError:
                raise ApiStatus(400, "BadRequest", f"resourceVersion: invalid value {since_text!r}") from None
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)

        async def send(kind: str, obj: Mapping[str, Any]) -> None:
            await response.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")

        if since_text in ("", "0"):  # start at the current state: synthetic ADDED for what exists
            for _, obj in sorted(res.objects.items()):
                if flt.matches(obj):
                    await send("ADDED", res.view(obj))
        elif sent < self.compacted:
            await send(
                "ERROR", status_body(410, "Expired", f"too old resource version: {sent} ({self.compacted})")
            )
            return response
        loop = asyncio.get_running_loop()
        drop_round, bookmark_round = self.drop_round, self.bookmark_round
        deadline = None if timeout_s is None else loop.time() + timeout_s
        self.open_watches += 1
        try:
            while self.drop_round == drop_round:
                seen_here, upto = res.generation, self.rv
                start, end = (
                    bisect.bisect_right(res.history_rvs, sent),
                    bisect.bisect_right(res.history_rvs, upto),
                )
                for change in res.history[start:end]:
                    sent = change.rv
                    was, now = flt.matches(change.old), flt.matches(change.new)
                    if change.type == "DELETED":
                        kind = "DELETED" if was else ""
                    elif now:
                        kind = "MODIFIED" if was else "ADDED"
                    else:
                        kind = "DELETED" if was else ""  # left the selector
                    if kind:
                        await send(kind, res.view(change.new))
                if self.bookmark_round != bookmark_round:
                    bookmark_round = self.bookmark_round
                    if bookmarks:  # only to watches that asked (allowWatchBookmarks)
                        sent = max(sent, upto)  # every change up to `upto` was sent above
                        meta = {"resourceVersion": str(sent)}
                        await send(
                            "BOOKMARK", {"kind": res.kind, "apiVersion": res.api_version, "metadata": meta}
                        )
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    break
                async with self.changed:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(
                            self.changed.wait_for(
                                lambda here=seen_here, booked=bookmark_round: (
                                    res.generation != here
                                    or self.bookmark_round != booked
                                    or self.drop_round != drop_round
                                )
                            ),
                            timeout=remaining,
                        )
        except (ConnectionResetError, RuntimeError):  # the client went away
            pass
        finally:
            self.open_watches -= 1
        return response
