"""The direct scraper's parser against a real Prometheus (Debian's `prometheus`): for every
exposition below, Prometheus ingests the scrape exactly when adapter/exposition.py accepts it, and
with the same series and values. Skipped when the binary is absent."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from adapter.exposition import ExpositionError, ExpositionParser
from tests.prometheus_server import prometheus as real_prometheus

pytestmark = pytest.mark.integration

M = "vllm:num_requests_waiting"

# id -> exposition body. Each case is its own target; the bytes are served as they are written, but
# for {ts}: the time of the scrape in milliseconds (an old timestamp would be out of Prometheus' bounds).
CASES: dict[str, bytes] = {
    "plain": f"{M} 4\n".encode(),
    "labels": f'{M}{{engine="0",model_name="m"}} 4.5\n'.encode(),
    "trailing comma": f'{M}{{engine="0",}} 4\n'.encode(),
    "space instead of comma": f'{M}{{engine="0" model_name="m"}} 4\n'.encode(),
    "empty braces": f"{M}{{}} 4\n".encode(),
    "tabs": f'{M}\t4\n{M}{{a="b"}}\t5\t{{ts}}\n'.encode(),
    "spaces everywhere": f' {M} {{ a = "b" , c="d" }}  4  {{ts}} \n'.encode(),
    "leading space": f" {M} 4\n".encode(),
    "comment after spaces": f"  # a comment\n{M} 4\n".encode(),
    "HELP after a tab": f"\t# HELP {M} x\n{M} 4\n".encode(),
    "space before the brace": f'{M} {{a="b"}} 4\n'.encode(),
    "spaces inside the braces": f'{M}{{ a = "b" , c="d" }} 4\n'.encode(),
    "two spaces before the value": f"{M}  4\n".encode(),
    "space after the value": f"{M} 4 \n".encode(),
    "space after the timestamp": f"{M} 4 {{ts}} \n".encode(),
    "two spaces before the timestamp": f"{M} 4  {{ts}}\n".encode(),
    "no space after brace": f'{M}{{a="b"}}4\n'.encode(),
    "timestamp": f"{M} 4 {{ts}}\n".encode(),
    "extra tokens": f"{M} 1 2 3 4\n".encode(),
    "negative timestamp": f"{M} 1 -5\n".encode(),
    "fractional timestamp": f"{M} 1 1.5\n".encode(),
    "timestamp past int64": f"{M} 1 99999999999999999999\n".encode(),
    "escaped quote, backslash, newline": f'{M}{{a="x\\"y\\\\z\\nw"}} 4\n'.encode(),
    "braces and spaces inside a label value": f'{M}{{a="}} {{ 4 }}"}} 5\n'.encode(),
    "an exemplar (OpenMetrics only)": f'{M} 4 # {{trace_id="x"}} 1\n'.encode(),
    "unknown escape kept": f'{M}{{a="x\\qy"}} 4\n'.encode(),
    "unterminated label value": f'{M}{{a="x}} 4\n'.encode(),
    "unquoted label value": f"{M}{{a=x}} 4\n".encode(),
    "label name with a digit first": f'{M}{{0a="x"}} 4\n'.encode(),
    "duplicate label name": f'{M}{{a="x",a="y"}} 4\n'.encode(),
    "__name__ label beside the name": f'{M}{{__name__="other"}} 4\n'.encode(),
    "empty label value": f'{M}{{a="",b="c"}} 4\n'.encode(),
    "invalid UTF-8 in a label value": f'{M}{{a="'.encode() + b"\xff" + b'"} 4\n',
    "invalid UTF-8 in a comment": b"# caf\xff\n" + f"{M} 4\n".encode(),
    "invalid UTF-8 in HELP": f"# HELP {M} caf".encode() + b"\xff\n" + f"{M} 4\n".encode(),
    "UTF-8 label value": f'{M}{{a="café ☕"}} 4\n'.encode(),
    "bad metric name": f"{M.replace(':', '-')} 4\n".encode(),
    "quoted metric name": f'{{"{M}"}} 4\n'.encode(),
    "no value": f"{M}\n".encode(),
    "value 1_000": f"{M} 1_000\n".encode(),
    "value fullwidth digits": f"{M} １２\n".encode(),
    "value hex float": f"{M} 0x1p3\n".encode(),
    "value hex": f"{M} 0x10\n".encode(),
    "value 1e400": f"{M} 1e400\n".encode(),
    "value .5": f"{M} .5\n".encode(),
    "value 5.": f"{M} 5.\n".encode(),
    "value +5e-3": f"{M} +5e-3\n".encode(),
    "value +Inf": f"{M} +Inf\n".encode(),
    "value -inf": f"{M} -inf\n".encode(),
    "value Infinity": f"{M} Infinity\n".encode(),
    "value NaN": f"{M} NaN\n".encode(),
    "value -NaN": f"{M} -NaN\n".encode(),
    "value with a letter": f"{M} 4x\n".encode(),
    "CRLF line ends": f"{M} 4\r\n".encode(),
    "TYPE gauge": f"# TYPE {M} gauge\n{M} 4\n".encode(),
    "TYPE unknown": f"# TYPE {M} gauges\n{M} 4\n".encode(),
    "TYPE trailing space": f"# TYPE {M} gauge \n{M} 4\n".encode(),
    "HELP with text": f"# HELP {M} Requests waiting.\n{M} 4\n".encode(),
    "HELP without name": f"# HELP \n{M} 4\n".encode(),
    "bare # HELP": f"# HELP\n{M} 4\n".encode(),
    "#HELP without space": f"#HELP {M} x\n{M} 4\n".encode(),
    "comment": f"# anything at all {{ }} 1 2 3\n{M} 4\n".encode(),
    "blank lines": f"\n   \n\t\n{M} 4\n\n".encode(),
    "no final newline": f"{M} 4".encode(),
    "same series twice": f'{M}{{a="b"}} 4\n{M}{{a="b"}} 5\n'.encode(),
    "same series, labels reordered": f'{M}{{a="b",c="d"}} 4\n{M}{{c="d",a="b"}} 5\n'.encode(),
    "malformed line among good ones": f"{M} 4\nother_metric 1 2 3 4\n".encode(),
}


@pytest.fixture
async def served() -> AsyncIterator[dict[str, str]]:
    bodies = list(CASES.values())

    async def handler(request: web.Request) -> web.Response:
        body = bodies[int(request.match_info["i"])].replace(b"{ts}", str(int(time.time() * 1000)).encode())
        return web.Response(body=body, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/case-{i}/metrics", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield {name: f"http://127.0.0.1:{site.port}/case-{i}/metrics" for i, name in enumerate(CASES)}
    finally:
        await runner.cleanup()


@pytest.fixture
def prometheus(tmp_path: Path, served: dict[str, str]) -> Iterator[str]:
    targets = [(url, {"case": str(i)}) for i, url in enumerate(served.values())]
    with real_prometheus(tmp_path, targets, interval_s=0.5) as url:
        yield url


def direct(body: bytes) -> set[tuple[str, frozenset[tuple[str, str]], str]] | None:
    try:
        index = ExpositionParser(None).parse(body.replace(b"{ts}", str(int(time.time() * 1000)).encode()))
    except ExpositionError:
        return None
    return {(name, frozenset(s.labels.items()), _value(s.value)) for name, ss in index.items() for s in ss}


def _value(v: float) -> str:
    return "NaN" if math.isnan(v) else repr(v)


async def ingested(
    client: httpx.AsyncClient, url: str
) -> dict[str, set[tuple[str, frozenset[tuple[str, str]], str]] | None]:
    """Per case: the series Prometheus holds from its target, or None when its scrapes fail (up 0)."""
    deadline = time.monotonic() + 20
    while True:
        up = (await client.get(f"{url}/api/v1/query", params={"query": "up"})).json()["data"]["result"]
        if len(up) == len(CASES) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.25)
    series = (
        await client.get(f"{url}/api/v1/query", params={"query": '{case=~".+", __name__!~"up|scrape_.*"}'})
    ).json()["data"]["result"]
    by_case: dict[str, set[tuple[str, frozenset[tuple[str, str]], str]] | None] = {}
    names = list(CASES)
    for item in up:
        case = names[int(item["metric"]["case"])]
        by_case[case] = set() if item["value"][1] == "1" else None
    for item in series:
        labels = dict(item["metric"])
        case = names[int(labels.pop("case"))]
        name = labels.pop("__name__")
        labels.pop("job"), labels.pop("instance")
        value = item["value"][1]
        held = by_case.get(case)
        if held is not None:
            held.add((name, frozenset(labels.items()), "NaN" if value == "NaN" else repr(float(value))))
    return by_case


async def test_the_parser_accepts_and_refuses_what_prometheus_does(prometheus: str) -> None:
    await asyncio.sleep(1.5)  # a few scrapes of every target
    async with httpx.AsyncClient(timeout=5) as client:
        theirs = await ingested(client, prometheus)
    assert set(theirs) == set(CASES), f"targets never scraped: {set(CASES) - set(theirs)}"
    disagreements = {
        case: {"prometheus": theirs[case], "adapter": direct(body)}
        for case, body in CASES.items()
        if theirs[case] != direct(body)
    }
    assert not disagreements, "\n".join(f"{k}: {v}" for k, v in disagreements.items())
    # the corpus is worth something only if it holds both outcomes
    assert sum(v is None for v in theirs.values()) >= 15
    assert sum(v is not None for v in theirs.values()) >= 15
