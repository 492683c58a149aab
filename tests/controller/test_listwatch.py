"""The shared informer (common/listwatch.py) against the fake kube-apiserver's watch machinery, over
real HTTP with the real kubernetes-asyncio client: pages, resourceVersions, bookmarks, 410s, selectors.

Waits are on conditions the event loop makes true (`Informer.wait_for`, the fake's counters); the
hang guard is a timeout, never a timing assumption.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from fake_apiserver import FakeKube, serve

from autoscaler.controller.kube import KubeClient, KubeError
from common.listwatch import Informer, object_key

NS = "serving"
CREATED = "2026-11-29T10:00:00Z"


def add(
    fake: FakeKube, name: str, *, namespace: str = NS, app: str = "llama", node: str | None = "n1"
) -> None:
    fake.add_pod(namespace, name, labels={"app": app}, created=CREATED, node=node)


async def until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(1000):  # hang guard: 10 s
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
async def env() -> AsyncIterator[tuple[FakeKube, KubeClient]]:
    fake = FakeKube()
    async with serve(fake) as kube:
        yield fake, kube


def informer(kube: KubeClient, path: str = f"/api/v1/namespaces/{NS}/pods", **kwargs: Any) -> Informer:
    return Informer(kube.api, path, backoff_initial_s=0.01, backoff_max_s=0.05, **kwargs)


async def caught_up(fake: FakeKube, inf: Informer) -> None:
    """A bookmark at the fake's current revision has reached the informer: it has seen everything.
    Asked again until it has (a watch opened after a bookmark round waits for the next one)."""
    for _ in range(100):  # hang guard: 10 s
        fake.bookmark()
        try:
            await asyncio.wait_for(inf.wait_for(lambda: inf.resource_version == str(fake.rv)), 0.1)
            return
        except TimeoutError:
            continue
    raise AssertionError(f"informer {inf.name} never caught up with revision {fake.rv}")


def churn_and_compact(fake: FakeKube) -> None:
    """Writes move the revision on, then etcd compacts: what was read before is gone."""
    fake.add_node(f"churn-{fake.rv}", gpus=0)
    fake.compact()


def names(inf: Informer) -> set[str]:
    return {str(o["metadata"]["name"]) for o in inf.items()}


async def test_list_then_watch_follows_every_change_in_order(env: tuple[FakeKube, KubeClient]) -> None:
    fake, kube = env
    add(fake, "a")
    add(fake, "b")
    add(fake, "other", app="router")
    add(fake, "elsewhere", namespace="batch")
    inf = informer(kube, label_selector="app=llama")
    seen: list[tuple[str | None, str | None]] = []
    inf.add_handler(lambda old, new: seen.append((old and object_key(old), new and object_key(new))))
    async with inf.running():
        await asyncio.wait_for(inf.synced.wait(), 10)
        assert names(inf) == {"a", "b"}
        add(fake, "c")
        fake.update_pod(
            NS, "a", lambda p: p["metadata"]["labels"].update(app="router")
        )  # leaves the selector
        fake.update_pod(NS, "other", lambda p: p["metadata"]["labels"].update(app="llama"))  # enters it
        fake.delete_pod(NS, "b")
        await caught_up(fake, inf)
        assert names(inf) == {"c", "other"}
        assert inf.stats.lists == 1 and inf.stats.watches == 1  # all of it came from the one watch
    assert seen[2:] == [
        (None, f"{NS}/c"),
        (f"{NS}/a", None),  # a label change out of the selector arrives as DELETED
        (None, f"{NS}/other"),  # ... and into it as ADDED
        (f"{NS}/b", None),
    ]


async def test_lists_come_in_pages_of_one_consistent_snapshot(env: tuple[FakeKube, KubeClient]) -> None:
    fake, kube = env
    for i in range(7):
        add(fake, f"p{i}")
    first = await kube.request("GET", f"/api/v1/namespaces/{NS}/pods", query=[("limit", "3")])
    assert [p["metadata"]["name"] for p in first["items"]] == ["p0", "p1", "p2"]
    assert first["metadata"]["remainingItemCount"] == 4
    add(fake, "p7")  # after the first page: not in this list, which reads the first page's revision
    second = await kube.request(
        "GET",
        f"/api/v1/namespaces/{NS}/pods",
        query=[("limit", "10"), ("continue", first["metadata"]["continue"])],
    )
    assert [p["metadata"]["name"] for p in second["items"]] == ["p3", "p4", "p5", "p6"]
    assert "continue" not in second["metadata"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]

    inf = informer(kube, page_size=3)
    async with inf.running():
        await asyncio.wait_for(inf.synced.wait(), 10)
    assert len(inf) == 8 and inf.stats.pages == 3 and inf.stats.lists == 1


async def test_an_expired_continue_token_falls_back_to_one_full_list(
    env: tuple[FakeKube, KubeClient],
) -> None:
    fake, kube = env
    for i in range(5):
        add(fake, f"p{i}")
    first = await kube.request("GET", f"/api/v1/namespaces/{NS}/pods", query=[("limit", "2")])
    churn_and_compact(fake)
    with pytest.raises(KubeError) as info:
        await kube.request(
            "GET", f"/api/v1/namespaces/{NS}/pods", query=[("continue", first["metadata"]["continue"])]
        )
    assert (info.value.code, info.value.reason) == (410, "Expired")

    fake.machinery.on_page = lambda: churn_and_compact(fake)  # the token expires between its pages
    inf = informer(kube, page_size=2)
    async with inf.running():
        await asyncio.wait_for(inf.synced.wait(), 10)
        fake.machinery.on_page = None
    assert len(inf) == 5 and inf.stats.expired == 1  # one 410, then the whole list without limit


async def test_a_watch_from_a_compacted_version_relists(env: tuple[FakeKube, KubeClient]) -> None:
    fake, kube = env
    add(fake, "a")
    restarts: list[str] = []
    inf = informer(kube, on_restart=restarts.append)
    async with inf.running():
        await asyncio.wait_for(inf.synced.wait(), 10)
        await until(lambda: fake.machinery.open_watches == 1, "the watch to open")
        # while no watch is open, history is compacted and a pod changes: only a list can see it
        fake.machinery.on_page = None
        fake.drop_watches()
        add(fake, "z")
        fake.compact()
        await until(lambda: "z" in names(inf), "the re-list after 410")
        await caught_up(fake, inf)
    assert "expired" in restarts and inf.stats.lists >= 2


async def test_an_http_410_on_the_watch_relists_too(env: tuple[FakeKube, KubeClient]) -> None:
    fake, kube = env
    add(fake, "a")
    fake.fail("WATCH", "/pods$", 410)
    inf = informer(kube)
    async with inf.running():
        await until(lambda: inf.stats.lists == 2, "the re-list")
        await caught_up(fake, inf)
    assert inf.stats.expired == 1 and inf.stats.lists == 2


async def test_a_watch_that_ends_resumes_without_a_list(env: tuple[FakeKube, KubeClient]) -> None:
    fake, kube = env
    add(fake, "a")
    inf = informer(kube, watch_timeout_s=(1.0, 1.0))  # the server ends each watch after 1 s
    async with inf.running():
        await asyncio.wait_for(inf.synced.wait(), 10)
        await until(lambda: inf.stats.watches >= 2, "the second watch")
        add(fake, "b")
        await caught_up(fake, inf)
    assert names(inf) == {"a", "b"} and inf.stats.lists == 1
    versions = [q["resourceVersion"] for _, q in fake.machinery.watch_log]
    assert all(versions) and versions == sorted(versions, key=int)  # each from the last version seen


async def test_bookmarks_move_the_version_only(env: tuple[FakeKube, KubeClient]) -> None:
    fake, kube = env
    add(fake, "a")
    inf = informer(kube)
    async with inf.running():
        await asyncio.wait_for(inf.synced.wait(), 10)
        fake.add_node("n2", gpus=8)  # another resource moves the revision, not this watch
        await caught_up(fake, inf)
    assert inf.stats.bookmarks >= 1 and inf.stats.events == 0 and names(inf) == {"a"}
    assert all(q["allowWatchBookmarks"] == "true" for _, q in fake.machinery.watch_log)


async def test_field_selectors_as_the_apiserver_applies_them(env: tuple[FakeKube, KubeClient]) -> None:
    fake, kube = env
    add(fake, "bound", node="n1")
    add(fake, "pending", node=None)
    inf = informer(kube, path="/api/v1/pods", field_selector="spec.nodeName!=")
    async with inf.running():
        await asyncio.wait_for(inf.synced.wait(), 10)
        assert names(inf) == {"bound"}
        fake.update_pod(NS, "pending", lambda p: p["spec"].update(nodeName="n2"))  # bound: enters
        await caught_up(fake, inf)
    assert names(inf) == {"bound", "pending"}
    for query, error in (
        (("fieldSelector", "spec.gpu=1"), "field label not supported: spec.gpu"),
        (("fieldSelector", "spec.nodeName"), "can't understand"),
        (("labelSelector", "app in (a"), "unable to parse requirement"),
    ):
        with pytest.raises(KubeError) as info:
            await kube.request("GET", "/api/v1/pods", query=[query])
        assert info.value.code == 400 and error in info.value.message


async def test_transform_and_index(env: tuple[FakeKube, KubeClient]) -> None:
    fake, kube = env
    add(fake, "a", app="x")
    add(fake, "b", app="y")
    inf = informer(kube, transform=lambda p: {"metadata": p["metadata"]})
    inf.add_index("app", lambda p: [p["metadata"]["labels"]["app"]])
    async with inf.running():
        await asyncio.wait_for(inf.synced.wait(), 10)
        fake.update_pod(NS, "b", lambda p: p["metadata"]["labels"].update(app="x"))
        await caught_up(fake, inf)
    assert {o["metadata"]["name"] for o in inf.by_index("app", "x")} == {"a", "b"}
    assert inf.by_index("app", "y") == [] and set(inf.get(f"{NS}/a") or {}) == {"metadata"}


async def test_errors_back_off_and_a_handler_bug_does_not_stop_the_cache(
    env: tuple[FakeKube, KubeClient], caplog: pytest.LogCaptureFixture
) -> None:
    fake, kube = env
    add(fake, "a")
    fake.fail("GET", "/pods$", 500, times=2)
    inf = informer(kube)
    broken = {"on": True}

    def handler(old: Any, new: Any) -> None:
        if broken["on"] and new is not None and new["metadata"]["name"] == "boom":
            broken["on"] = False
            raise KeyError("a handler's bug")

    inf.add_handler(handler)
    with caplog.at_level(logging.WARNING):
        async with inf.running():
            await asyncio.wait_for(inf.synced.wait(), 10)
            add(fake, "boom")
            await until(lambda: "boom" in names(inf) and inf.stats.lists >= 2, "the re-list after the bug")
            await caught_up(fake, inf)
    assert inf.stats.errors == 3  # two 500s on the list, one handler bug
    assert any(r.exc_info and isinstance(r.exc_info[1], KeyError) for r in caplog.records)


async def test_two_paginated_lists_at_one_revision_keep_their_own_items(
    env: tuple[FakeKube, KubeClient],
) -> None:
    fake, kube = env
    for i in range(3):
        add(fake, f"p{i}")
        fake.add_node(f"n{i}", gpus=8)
    pods = await kube.request("GET", f"/api/v1/namespaces/{NS}/pods", query=[("limit", "1")])
    nodes = await kube.request("GET", "/api/v1/nodes", query=[("limit", "1")])
    assert pods["metadata"]["resourceVersion"] == nodes["metadata"]["resourceVersion"]  # the same revision
    rest = await kube.request(
        "GET", f"/api/v1/namespaces/{NS}/pods", query=[("continue", pods["metadata"]["continue"])]
    )
    assert [p["metadata"]["name"] for p in rest["items"]] == ["p1", "p2"]
