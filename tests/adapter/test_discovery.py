"""Pod discovery through the real kubernetes-asyncio client against an in-process fake kube-apiserver.

The fake (aiohttp on loopback) serves the pods list and watch the way the real API does
(../shared/kubernetes_api_gotchas.md): list items without kind, a resourceVersion on the list, watch
events as JSON lines, a label change out of the selector as DELETED, and a watch from a compacted
resourceVersion as 200 with one ERROR event holding a 410 Expired Status.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from engine_fixtures import vllm_text
from kubernetes_asyncio import client

from adapter.backend import NoData, SourceUnavailable
from adapter.catalog import build_catalog
from adapter.catalogconfig import CatalogSettings, KubernetesDiscovery
from adapter.sources import discovery
from adapter.sources.discovery import KubernetesPods, target_of
from adapter.telemetry import Telemetry
from common.selector import EVERYTHING, parse_selector

SELECTOR = "app.kubernetes.io/component=engine"


def pod(
    name: str,
    *,
    namespace: str = "serving",
    ip: str | None = "10.0.0.1",
    phase: str = "Running",
    labels: dict[str, str] | None = None,
    owner: tuple[str, str] | None = ("ReplicaSet", "llama-7d9f8c6b5"),
    ports: dict[str, int] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {
            "app.kubernetes.io/component": "engine",
            "pod-template-hash": "7d9f8c6b5",
            **(labels or {}),
        },
    }
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True, "uid": "u"}]
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T10:00:00Z"
    container = {
        "name": "engine",
        "ports": [{"name": n, "containerPort": p} for n, p in (ports or {}).items()],
    }
    status: dict[str, Any] = {"phase": phase}
    if ip:
        status["podIP"] = ip
    return {"metadata": meta, "spec": {"containers": [container]}, "status": status}


@pytest.mark.parametrize(
    ("obj", "settings", "expected"),
    [
        pytest.param(
            pod("llama-7d9f8c6b5-abcde"),
            {},
            (
                "http://10.0.0.1:8000/metrics",
                {"namespace": "serving", "pod": "llama-7d9f8c6b5-abcde", "deployment": "llama"},
            ),
            id="deployment pod: name from its ReplicaSet minus the template hash",
        ),
        pytest.param(
            pod("p", ports={"metrics": 9400}),
            {"port": "metrics", "path": "/stats", "scheme": "https"},
            ("https://10.0.0.1:9400/stats", {"namespace": "serving", "pod": "p", "deployment": "llama"}),
            id="named port, path and scheme",
        ),
        pytest.param(
            pod("p", ip="fd00::5"),
            {},
            ("http://[fd00::5]:8000/metrics", {"namespace": "serving", "pod": "p", "deployment": "llama"}),
            id="IPv6 pod IP in brackets",
        ),
        pytest.param(
            pod("web-0", owner=("StatefulSet", "web")),
            {},
            ("http://10.0.0.1:8000/metrics", {"namespace": "serving", "pod": "web-0", "deployment": "web"}),
            id="statefulset pod: the owner's name",
        ),
        pytest.param(
            pod("p", labels={"app": "chat"}),
            {"deployment_label": "app"},
            ("http://10.0.0.1:8000/metrics", {"namespace": "serving", "pod": "p", "deployment": "chat"}),
            id="configured pod label as deployment",
        ),
        pytest.param(
            pod("p", owner=None),
            {},
            ("http://10.0.0.1:8000/metrics", {"namespace": "serving", "pod": "p"}),
            id="bare pod: no deployment label",
        ),
        pytest.param(pod("p", phase="Pending"), {}, None, id="pending pod"),
        pytest.param(pod("p", ip=None), {}, None, id="no IP yet"),
        pytest.param(pod("p", deleting=True), {}, None, id="terminating pod"),
        pytest.param(pod("p"), {"port": "metrics"}, None, id="named port missing"),
    ],
)
def test_target_of(
    obj: dict[str, Any], settings: dict[str, Any], expected: tuple[str, dict[str, str]] | None
) -> None:
    target = target_of(obj, KubernetesDiscovery(label_selector=SELECTOR, **settings))
    assert (None if target is None else (target.url, dict(target.labels))) == expected


class FakeApiServer:
    """Pods list + watch over HTTP, with resourceVersions, compaction and selector-aware events."""

    def __init__(self) -> None:
        self.rv = 100
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.history: list[tuple[int, str, dict[str, Any] | None, dict[str, Any]]] = []  # rv, type, old, new
        self.oldest_rv = 0  # watches from before this get 410 Expired
        self.changed = asyncio.Condition()
        self.generation = 0  # bumped to end every open watch stream
        self.watch_versions: list[str] = []
        self.lists = 0

    async def _commit(self, kind: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        self.rv += 1
        new["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append((self.rv, kind, old, copy.deepcopy(new)))
        async with self.changed:
            self.changed.notify_all()

    async def put(self, obj: dict[str, Any]) -> None:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        old = self.pods.get(key)
        self.pods[key] = copy.deepcopy(obj)
        await self._commit("MODIFIED" if old else "ADDED", old, self.pods[key])

    async def delete(self, namespace: str, name: str) -> None:
        old = self.pods.pop((namespace, name))
        await self._commit("DELETED", old, copy.deepcopy(old))

    async def compact_and_drop_watches(self) -> None:
        self.oldest_rv = self.rv + 1
        self.generation += 1
        async with self.changed:
            self.changed.notify_all()

    @staticmethod
    def _visible(obj: dict[str, Any] | None, namespace: str | None, selector: str) -> bool:
        if obj is None or (namespace is not None and obj["metadata"]["namespace"] != namespace):
            return False
        return parse_selector(selector).matches(obj["metadata"].get("labels") or {})

    async def handle(self, request: web.Request) -> web.StreamResponse:
        namespace = request.match_info.get("namespace")
        selector = request.query.get("labelSelector", "")
        if request.query.get("watch", "").lower() in ("true", "1"):  # Go ParseBool: True too
            return await self._watch(request, namespace, selector)
        self.lists += 1
        items = [p for p in self.pods.values() if self._visible(p, namespace, selector)]
        return web.json_response(
            {
                "kind": "PodList",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self.rv)},
                "items": items,
            }
        )

    async def _watch(self, request: web.Request, namespace: str | None, selector: str) -> web.StreamResponse:
        since = int(request.query.get("resourceVersion") or self.rv)
        self.watch_versions.append(str(since))
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        if since < self.oldest_rv:
            status = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: {since} ({self.oldest_rv})",
                "reason": "Expired",
                "code": 410,
            }
            await response.write(json.dumps({"type": "ERROR", "object": status}).encode() + b"\n")
            return response
        generation, sent = self.generation, since
        while generation == self.generation:
            for rv, kind, old, new in [h for h in self.history if h[0] > sent]:
                sent = rv
                was, now = self._visible(old, namespace, selector), self._visible(new, namespace, selector)
                if kind == "DELETED":
                    kind = "DELETED" if was else ""
                elif now:
                    kind = "MODIFIED" if was else "ADDED"
                else:
                    kind = "DELETED" if was else ""  # a label change out of the selector
                if kind:
                    await response.write(json.dumps({"type": kind, "object": new}).encode() + b"\n")
            async with self.changed:
                await self.changed.wait()
        return response


@pytest.fixture
async def apiserver() -> AsyncIterator[tuple[FakeApiServer, client.ApiClient]]:
    fake = FakeApiServer()
    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{namespace}/pods", fake.handle)
    app.router.add_get("/api/v1/pods", fake.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    api = client.ApiClient(configuration=client.Configuration(host=f"http://127.0.0.1:{port}"))
    try:
        yield fake, api
    finally:
        await api.close()
        async with fake.changed:
            fake.generation += 1
            fake.changed.notify_all()
        await runner.cleanup()


async def eventually(condition: Callable[[], bool], what: str) -> None:
    """Wait for a condition the event loop will make true (not a timing assumption: 5 s is a hang guard)."""
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def names(pods: KubernetesPods) -> set[str]:
    return {t.labels["pod"] for t in pods.targets()}


async def test_list_then_watch_follows_adds_changes_and_deletes(
    apiserver: tuple[FakeApiServer, client.ApiClient],
) -> None:
    fake, api = apiserver
    await fake.put(pod("a", ip="10.0.0.1"))
    await fake.put(pod("b", ip="10.0.0.2"))
    await fake.put(pod("pending", phase="Pending", ip=None))
    await fake.put(pod("other", labels={"app.kubernetes.io/component": "router"}))
    await fake.put(pod("elsewhere", namespace="batch"))
    pods = KubernetesPods(api, KubernetesDiscovery(namespace="serving", label_selector=SELECTOR), Telemetry())
    task = asyncio.create_task(pods.run())
    try:
        await asyncio.wait_for(pods.ready.wait(), 5)
        assert names(pods) == {"a", "b"}
        await eventually(lambda: len(fake.watch_versions) == 1, "the watch to start")
        await fake.put(pod("c", ip="10.0.0.3"))
        await eventually(lambda: names(pods) == {"a", "b", "c"}, "ADDED c")
        await fake.put(pod("pending", ip="10.0.0.4"))  # became Running with an IP
        await eventually(lambda: "pending" in names(pods), "pending pod running")
        await fake.put(pod("a", ip="10.0.0.1", labels={"app.kubernetes.io/component": "router"}))
        await eventually(lambda: "a" not in names(pods), "relabelled pod gone")
        await fake.put(pod("b", ip="10.0.0.2", deleting=True))
        await eventually(lambda: "b" not in names(pods), "terminating pod gone")
        await fake.delete("serving", "c")
        await eventually(lambda: names(pods) == {"pending"}, "DELETED c")
        assert fake.lists == 1  # everything after the first list came from the watch
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_expired_watch_relists(apiserver: tuple[FakeApiServer, client.ApiClient]) -> None:
    fake, api = apiserver
    await fake.put(pod("a", ip="10.0.0.1"))
    telemetry = Telemetry()
    pods = KubernetesPods(api, KubernetesDiscovery(label_selector=SELECTOR), telemetry)  # all namespaces
    task = asyncio.create_task(pods.run())
    try:
        await asyncio.wait_for(pods.ready.wait(), 5)
        await eventually(lambda: len(fake.watch_versions) == 1, "the watch to start")
        # while the watch is down, history is compacted and a pod changes: only a re-list can see it
        await fake.compact_and_drop_watches()
        await fake.put(pod("z", namespace="batch", ip="10.0.9.9"))
        await fake.compact_and_drop_watches()
        await eventually(lambda: names(pods) == {"a", "z"}, "re-list after 410")
        assert fake.lists >= 2
        assert telemetry.registry.get_sample_value(
            "infscale_adapter_discovery_restarts_total", {"reason": "expired"}
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_an_unexpected_error_is_logged_and_discovery_goes_on(
    apiserver: tuple[FakeApiServer, client.ApiClient],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The loop is the only thing that keeps the targets current: an error it did not foresee (here
    a port entry without containerPort) is logged and retried, never the end of discovery."""
    monkeypatch.setattr(discovery, "_RETRY_AFTER_ERROR_S", 0.01)
    fake, api = apiserver
    broken = pod("a", ports={"http": 8000})
    del broken["spec"]["containers"][0]["ports"][0]["containerPort"]
    await fake.put(broken)
    telemetry = Telemetry()
    settings = KubernetesDiscovery(namespace="serving", label_selector=SELECTOR, port="http")
    pods = KubernetesPods(api, settings, telemetry)
    task = asyncio.create_task(pods.run())
    try:
        await eventually(
            lambda: bool(
                telemetry.registry.get_sample_value(
                    "infscale_adapter_discovery_restarts_total", {"reason": "error"}
                )
            ),
            "the failed list to be counted",
        )
        await fake.put(pod("a", ports={"http": 8000}))
        await eventually(lambda: names(pods) == {"a"}, "the re-list after the error")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert any(r.exc_info and isinstance(r.exc_info[1], KeyError) for r in caplog.records)


async def test_catalog_serves_discovered_pods_end_to_end(
    apiserver: tuple[FakeApiServer, client.ApiClient],
) -> None:
    """Discovery → scrape over real HTTP → aggregation per deployment, namespaces kept apart."""
    fake, api = apiserver
    runners = []
    try:
        for name, namespace, text in (
            ("a", "serving", vllm_text(3, 1, 0.2)),
            ("b", "serving", vllm_text(5, 2, 0.4)),
            ("c", "batch", vllm_text(7, 3, 0.9)),
        ):
            app = web.Application()

            async def metrics(request: web.Request, text: str = text) -> web.Response:
                return web.Response(text=text)

            app.router.add_get("/metrics", metrics)
            runner = web.AppRunner(app)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            runners.append(runner)
            # one loopback IP for all pods: each pod's named port points at its own engine
            await fake.put(
                pod(name, namespace=namespace, ip="127.0.0.1", ports={"metrics": runner.addresses[0][1]})
            )
        settings = CatalogSettings(
            kubernetes=KubernetesDiscovery(label_selector=SELECTOR, port="metrics"),
            scrape={"interval_s": 0.05},
        )
        async with build_catalog(settings, Telemetry(), kube_client=api) as catalog:
            answers: dict[str, list[tuple[dict[str, str], float]]] = {}

            async def read_all() -> bool:
                try:
                    for namespace in ("serving", "batch"):
                        samples = await catalog.read(namespace, "infscale_queue_size", EVERYTHING)
                        answers[namespace] = [(dict(s.labels), s.value) for s in samples]
                except (NoData, SourceUnavailable):  # before the first round over all three pods ends
                    return False
                return len(answers) == 2

            for _ in range(500):  # hang guard; a round on loopback takes milliseconds
                if await read_all():
                    break
                await asyncio.sleep(0.01)
            assert answers == {
                "serving": [({"namespace": "serving", "deployment": "llama", "model": "m"}, 8.0)],
                "batch": [({"namespace": "batch", "deployment": "llama", "model": "m"}, 7.0)],
            }
            narrowed = await catalog.read(
                "serving", "infscale_queue_size", parse_selector("deployment=other")
            )
            assert narrowed == []
    finally:
        for runner in runners:
            await runner.cleanup()
