"""Informer-style caches: a resource listed once (in pages), then kept current by a watch.

Pipeline position: kube-apiserver -> `Informer` -> handlers (the adapter's scrape targets, the
controller's work queue) and the cached objects the readers look up. One implementation for the
adapter and the controller. What it does is client-go's Reflector (k8s.io/client-go/tools/cache) on
the real API's semantics (../shared/kubernetes_api_gotchas.md):

- the list comes in pages of `page_size` (`limit`/`continue`); a continue token that expired (410)
  falls back to one full list without `limit`, as client-go's pager (FullListIfExpired);
- the watch starts at the list's resourceVersion with `allowWatchBookmarks`; a BOOKMARK only moves
  the resourceVersion; a watch that ends (its `timeoutSeconds`, a dropped connection) resumes from
  the last resourceVersion seen, without a list;
- a 410 (an ERROR event holding an Expired Status, or an HTTP 410) means that version is gone from
  the watch cache: list again at once; any other failure backs off exponentially (0.8 s doubling
  to 30 s, as the Reflector) before listing again; an unexpected error (a handler's bug) is logged
  with its traceback and treated the same, never the end of the cache;
- handlers run right after the store changed, with (old, new) (None for an add or a delete); a
  re-list reports only what differs from the store it replaces.

resourceVersions are opaque strings (API conventions): compared for equality, never ordered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from common.status import parse_status

log = logging.getLogger(__name__)

Object = dict[str, Any]
Handler = Callable[[Object | None, Object | None], None]
Transform = Callable[[Object], Object]
IndexFunc = Callable[[Object], Iterable[Hashable]]

MAX_EVENT_BYTES = 16 * 1024 * 1024  # etcd holds objects up to 1.5 MiB; an event line beyond this is broken


class Expired(Exception):
    """The resourceVersion (or continue token) is older than the server keeps: list again."""


class WatchFailed(Exception):
    """A watch that ended with an error other than Expired."""


@dataclass
class InformerStats:
    """Counters for telemetry, tests and the benchmark."""

    lists: int = 0  # complete lists (each may take several pages)
    pages: int = 0
    watches: int = 0  # watch requests started
    expired: int = 0  # 410s: re-lists forced by an expired resourceVersion or continue token
    errors: int = 0  # failures that backed off
    events: int = 0  # ADDED/MODIFIED/DELETED applied
    bookmarks: int = 0


def object_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name`, or `name` for a cluster-scoped object (client-go's MetaNamespaceKeyFunc)."""
    meta = obj.get("metadata") or {}
    namespace, name = meta.get("namespace") or "", str(meta.get("name") or "")
    return f"{namespace}/{name}" if namespace else name


def _resource_version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class Informer:
    """One collection (`path`, e.g. `/api/v1/pods` or `/apis/apps/v1/namespaces/x/deployments`),
    optionally narrowed by label and field selectors, cached by key. `synced` is set after the
    first complete list."""

    def __init__(
        self,
        api: ApiClient,
        path: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        transform: Transform | None = None,
        page_size: int = 500,
        watch_timeout_s: tuple[float, float] = (300.0, 600.0),
        request_timeout_s: float = 60.0,
        backoff_initial_s: float = 0.8,
        backoff_max_s: float = 30.0,
        on_restart: Callable[[str], None] | None = None,
        name: str = "",
    ) -> None:
        self.api = api
        self.path = path
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.transform = transform
        self.page_size = page_size
        self.watch_timeout_s = watch_timeout_s  # the server ends each watch after a random time in it
        self.request_timeout_s = request_timeout_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.on_restart = on_restart
        self.name = name or path
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.stats = InformerStats()
        self.last_error: str = ""  # the latest failure, "" after a successful list
        self.last_error_code = 0  # its HTTP status (404: the resource is not served, e.g. no CRD)
        self._store: dict[str, Object] = {}
        self._handlers: list[Handler] = []
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[Hashable, set[str]]] = {}
        self._indexed: dict[str, dict[str, tuple[Hashable, ...]]] = {}  # index -> key -> its values
        self._changed = asyncio.Condition()

    # --- reading the cache --------------------------------------------------------------------------

    def get(self, key: str) -> Object | None:
        return self._store.get(key)

    def items(self) -> list[Object]:
        return list(self._store.values())

    def __len__(self) -> int:
        return len(self._store)

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def add_index(self, name: str, func: IndexFunc) -> None:
        """Objects by the values `func` gives (e.g. namespace, a label pair); set up before `run`."""
        self._indexers[name] = func
        self._indices[name] = {}
        self._indexed[name] = {}
        for key, obj in self._store.items():
            self._index(name, key, obj)

    def by_index(self, name: str, value: Hashable) -> list[Object]:
        keys = self._indices[name].get(value, ())
        return [self._store[k] for k in keys]

    def keys_by_index(self, name: str, value: Hashable) -> frozenset[str]:
        return frozenset(self._indices[name].get(value, ()))

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        """Until `condition()` holds; it is checked after every change, bookmark and list."""
        async with self._changed:
            await self._changed.wait_for(condition)

    # --- the store ----------------------------------------------------------------------------------

    def _index(self, name: str, key: str, obj: Object | None) -> None:
        index, indexed = self._indices[name], self._indexed[name]
        for value in indexed.pop(key, ()):
            keys = index.get(value)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del index[value]
        if obj is not None:
            values = tuple(dict.fromkeys(self._indexers[name](obj)))
            indexed[key] = values
            for value in values:
                index.setdefault(value, set()).add(key)

    def _set(self, key: str, obj: Object | None) -> None:
        old = self._store.get(key)
        if obj is None:
            self._store.pop(key, None)
        else:
            self._store[key] = obj
        for name in self._indexers:
            self._index(name, key, obj)
        for handler in self._handlers:
            handler(old, obj)

    def _apply(self, kind: str, raw: Object) -> None:
        obj = self.transform(raw) if self.transform else raw
        key = object_key(raw)
        if kind == "DELETED":
            if key in self._store:
                self._set(key, None)
        else:
            self._set(key, obj)
        self.stats.events += 1

    def _replace(self, objects: list[Object]) -> None:
        """A fresh list: report adds, changes (by resourceVersion) and deletes against the store."""
        fresh = {object_key(o): (self.transform(o) if self.transform else o) for o in objects}
        for key in [k for k in self._store if k not in fresh]:
            self._set(key, None)
        for key, obj in fresh.items():
            old = self._store.get(key)
            if old is None or _resource_version(old) != _resource_version(obj):
                self._set(key, obj)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # --- list and watch -----------------------------------------------------------------------------

    def _query(self, **extra: str) -> list[tuple[str, str]]:
        selectors = (("labelSelector", self.label_selector), ("fieldSelector", self.field_selector))
        return [(k, v) for k, v in selectors if v] + list(extra.items())

    async def _list_once(self, limit: int) -> tuple[list[Object], str]:
        items: list[Object] = []
        cont = ""
        version = ""
        while True:
            extra = {"limit": str(limit)} if limit else {}
            if cont:
                extra["continue"] = cont
            try:
                page = await self.api.call_api(
                    self.path,
                    "GET",
                    query_params=self._query(**extra),
                    header_params={"Accept": "application/json"},
                    response_types_map={200: "object"},
                    auth_settings=["BearerToken"],
                    _return_http_data_only=True,
                    _preload_content=True,
                    _request_timeout=self.request_timeout_s,
                )
            except ApiException as exc:
                if exc.status == 410:
                    raise Expired(f"list {self.name}: {_message(exc)}") from None
                raise
            self.stats.pages += 1
            meta = page.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")  # the first page's snapshot
            items.extend(page.get("items") or ())
            cont = str(meta.get("continue") or "")
            if not cont:
                return items, version

    async def list(self) -> None:
        """List everything (in pages), replace the store, remember the list's resourceVersion."""
        try:
            items, version = await self._list_once(self.page_size)
        except Expired:  # the continue token outlived the server's window: one consistent full list
            self.stats.expired += 1
            self._restarted("expired")
            items, version = await self._list_once(0)
        self.stats.lists += 1
        self.last_error, self.last_error_code = "", 0
        self._replace(items)
        self.resource_version = version
        self.synced.set()
        await self._notify()

    async def watch(self) -> None:
        """Follow one watch from `resource_version` until the server ends it (return) or it fails
        (Expired, WatchFailed, a transport error)."""
        low, high = self.watch_timeout_s
        timeout_s = random.uniform(low, high) if high > low else low
        query = self._query(
            watch="true",
            resourceVersion=self.resource_version,
            allowWatchBookmarks="true",
            timeoutSeconds=str(max(1, round(timeout_s))),
        )
        self.stats.watches += 1
        response = await self.api.call_api(
            self.path,
            "GET",
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            # the server closes the watch after timeoutSeconds; this only catches a dead connection
            _request_timeout=aiohttp.ClientTimeout(total=timeout_s + self.request_timeout_s),
        )
        try:
            if response.status != 200:
                body = await response.read()
                status = parse_status(body)
                message = status.message if status else body[:200].decode("utf-8", "replace")
                if response.status == 410:
                    raise Expired(f"watch {self.name}: {message}")
                raise WatchFailed(f"watch {self.name}: {response.status} {message}")
            async for line in _lines(response.content):
                await self._event(line)
        finally:
            response.release()

    async def _event(self, line: bytes) -> None:
        try:
            event = json.loads(line)
            kind, obj = event["type"], event["object"]
        except (ValueError, KeyError, TypeError) as exc:
            raise WatchFailed(f"watch {self.name}: not a watch event: {line[:200]!r}") from exc
        if kind == "ERROR":
            status = parse_status(obj)
            if status is not None and status.code == 410:
                raise Expired(f"watch {self.name}: {status.message}")
            raise WatchFailed(f"watch {self.name}: {status.message if status else obj!r}")
        if kind == "BOOKMARK":
            self.stats.bookmarks += 1
        elif kind in ("ADDED", "MODIFIED", "DELETED"):
            self._apply(kind, obj)
        else:
            raise WatchFailed(f"watch {self.name}: unknown event type {kind!r}")
        self.resource_version = _resource_version(obj) or self.resource_version
        await self._notify()

    def _restarted(self, reason: str) -> None:
        if self.on_restart is not None:
            self.on_restart(reason)

    async def run(self) -> None:
        """List and watch until cancelled."""
        backoff = self.backoff_initial_s
        while True:
            try:
                await self.list()
                backoff = self.backoff_initial_s
                while True:
                    await self.watch()  # ended by the server: resume from resource_version
            except Expired as exc:
                self.stats.expired += 1
                self._restarted("expired")
                log.info("%s; listing again", exc)
                continue
            except asyncio.CancelledError:
                raise
            except (ApiException, WatchFailed, aiohttp.ClientError, TimeoutError, ValueError) as exc:
                self.last_error = _message(exc)
                self.last_error_code = int(exc.status or 0) if isinstance(exc, ApiException) else 0
                log.warning("informer %s: %s; retrying in %.1f s", self.name, self.last_error, backoff)
            except Exception as exc:  # a bug (a handler's, a transform's) must not freeze the cache
                self.last_error, self.last_error_code = _message(exc), 0
                log.exception("informer %s failed unexpectedly; retrying in %.1f s", self.name, backoff)
            self.stats.errors += 1
            self._restarted("error")
            await asyncio.sleep(backoff * random.uniform(1.0, 1.5))
            backoff = min(self.backoff_max_s, backoff * 2)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Informer]:
        """Run in a task for the duration of the block."""
        task = asyncio.create_task(self.run(), name=f"informer {self.name}")
        try:
            yield self
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _lines(stream: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """Newline-delimited JSON, without aiohttp's 64 KiB readline limit (objects reach 1.5 MiB)."""
    buffer = b""
    async for chunk in stream.iter_any():
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            line, buffer = buffer[:end], buffer[end + 1 :]
            if line.strip():
                yield line
        if len(buffer) > MAX_EVENT_BYTES:
            raise WatchFailed(f"a watch event longer than {MAX_EVENT_BYTES} bytes")
    if buffer.strip():
        yield buffer


def _message(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        status = parse_status(exc.body)
        return f"{exc.status} {status.message if status else exc.reason}"
    return f"{type(exc).__name__}: {exc}"
