"""Hypothesis against the real server over HTTPS: arbitrary paths, metric names, namespaces and
selectors never produce a 5xx, a crash, or a non-Status error body."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from conftest import Pki, ScriptedBackend, client_context, default_script, make_pki, request_header_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapter.auth import Decision, DelegatedAccess, TokenReviewResult
from adapter.identity import RequestAttributes, UserInfo
from adapter.server import create_app
from adapter.telemetry import Telemetry
from adapter.tls import ServingTLS

ROOT = "/apis/external.metrics.k8s.io/v1beta1"


class AllowAll:
    """A hand-written Reviewer that allows everything, so fuzzed requests reach the routes."""

    async def review_token(self, token: str) -> TokenReviewResult:
        return TokenReviewResult(True, UserInfo("fuzzer"))

    async def review_access(self, user: UserInfo, attributes: RequestAttributes) -> Decision:
        return Decision(True)


class ThreadedServer:
    """The adapter on its own event loop in a thread, so sync hypothesis tests can call it."""

    def __init__(self, pki: Pki) -> None:
        self.pki = pki
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        from conftest import serve

        self._stop = asyncio.Event()
        access = DelegatedAccess(AllowAll(), request_header_config(self.pki))
        app = create_app(ScriptedBackend(default_script()), access, Telemetry())
        tls = ServingTLS(self.pki.server.cert, self.pki.server.key, self.pki.front_proxy_ca.read_bytes())
        async with serve(app, tls.context) as url:
            self.url = url
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> ThreadedServer:
        self._thread.start()
        assert self._ready.wait(30), "server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    pki = make_pki(Path(tmp_path_factory.mktemp("fuzz-pki")))
    with ThreadedServer(pki) as server:
        headers = [("X-Remote-User", "fuzzer"), ("X-Remote-Group", "system:authenticated")]
        with httpx.Client(
            base_url=server.url, verify=client_context(pki, pki.front_proxy), headers=headers
        ) as c:
            yield c


def check(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.request.url, response.text)
    is_json = response.headers.get("Content-Type", "").startswith("application/json")
    if response.status_code >= 400 and is_json and response.request.method != "HEAD":
        body = response.json()
        assert body["kind"] == "Status" and body["code"] == response.status_code
    assert "Retry-After" not in response.headers


_SEGMENT_CHARS = st.sampled_from(
    [*"abcXYZ019-_.:|~!*'()@ é\x00\t", "%", "/", "..", "%2F", "%2e", "%25", "%00", "%ZZ"]
)
segments = st.lists(_SEGMENT_CHARS, min_size=1, max_size=12).map("".join)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(namespace=segments, metric=segments, selector=st.text(max_size=60))
def test_metric_reads_never_fail_the_server(
    client: httpx.Client, namespace: str, metric: str, selector: str
) -> None:
    # segments are sent as typed (quote keeps existing %XX), so encoded traversal gets through
    path = f"{ROOT}/namespaces/{quote(namespace, safe='%')}/{quote(metric, safe='%')}"
    check(client.get(path, params={"labelSelector": selector}))


@FUZZ
@given(
    parts=st.lists(segments, min_size=0, max_size=8), prefix=st.sampled_from(["", "/apis", ROOT, "/keda/v1"])
)
def test_arbitrary_paths_never_fail_the_server(
    client: httpx.Client, parts: Sequence[str], prefix: str
) -> None:
    path = prefix + "/" + "/".join(quote(p, safe="%/") for p in parts)
    # absolute: httpx refuses a relative URL starting with "//", the server must not
    check(client.get(str(client.base_url).rstrip("/") + path))


@FUZZ
@given(
    accept=st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80),
    method=st.sampled_from(["GET", "HEAD", "POST", "DELETE"]),
)
def test_arbitrary_accept_headers_and_methods(client: httpx.Client, accept: str, method: str) -> None:
    # printable ASCII only: anything else is not a sendable header value
    check(client.get(f"{ROOT}/namespaces/default/infscale_queue_size", headers={"Accept": accept.strip()}))
