"""Hostile values: engine pods that expose negative, infinite or out-of-range values, or
expositions Prometheus would refuse, beside healthy pods.

`python -m bench attack values`

Group `shared` (one model label): two healthy pods (queue 5 and 2, KV usage 0.5 and 0.3) and every
bad pod below. Each bad pod is also alone in a group of its own. The adapter serves every group
through the External Metrics API and the KEDA endpoint; printed: what the shared group got (it
must be the healthy pods' 7 and 0.4: one bad pod never poisons its group), how many reads of a
bad-only group served a value (must be 0), and how many answers were 5xx (0).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

from bench.attack.harness import API, adapter, dev_adapter_args, engines, get, load_average

Q, KV = "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"

# name -> exposition lines for one pod, with {model} for its model label
BAD: dict[str, str] = {
    "queue -1000": f'{Q}{{model_name="{{model}}"}} -1000\n',
    "queue +Inf": f'{Q}{{model_name="{{model}}"}} +Inf\n',
    "queue -Inf": f'{Q}{{model_name="{{model}}"}} -Inf\n',
    "queue NaN": f'{Q}{{model_name="{{model}}"}} NaN\n',
    "queue 1e30": f'{Q}{{model_name="{{model}}"}} 1e30\n',
    "queue 1e400": f'{Q}{{model_name="{{model}}"}} 1e400\n',
    "KV -12.5": f'{KV}{{model_name="{{model}}"}} -12.5\n',
    "KV 1.5": f'{KV}{{model_name="{{model}}"}} 1.5\n',
    "KV +Inf": f'{KV}{{model_name="{{model}}"}} +Inf\n',
    "extra tokens": f'{Q}{{model_name="{{model}}"}} 1 2 3 4\n',
    "1_000": f'{Q}{{model_name="{{model}}"}} 1_000\n',
    "fullwidth digits": f'{Q}{{model_name="{{model}}"}} １２\n',
    "hex": f'{Q}{{model_name="{{model}}"}} 0x10\n',
    "duplicate label": f'{Q}{{model_name="{{model}}",model_name="x"}} 3\n',
    "invalid UTF-8": f'{Q}{{model_name="{{model}}",a="\udcff"}} 3\n',
    "unterminated label value": f'{Q}{{model_name="{{model}}}} 3\n',
    "malformed unread line": f'{Q}{{model_name="{{model}}"}} 3\nvllm:other_total{{le=0.1}} 1\n',
    "leading whitespace": f' {Q}{{model_name="{{model}}"}} 3\n',
    "CRLF": f'{Q}{{model_name="{{model}}"}} 3\r\n',
}


def _body(text: str, model: str) -> bytes:
    return text.replace("{model}", model).encode("utf-8", errors="surrogateescape")


def _healthy(waiting: float, kv: float) -> str:
    return f'{Q}{{model_name="shared"}} {waiting}\n{KV}{{model_name="shared"}} {kv}\n'


async def _read(port: int, metric: str, model: str, keda: bool = False) -> tuple[int, list[float]]:
    root = "/keda/v1" if keda else API
    answer = await get(port, f"{root}/namespaces/default/{metric}?labelSelector={quote(f'model={model}')}")
    if answer.status != 200:
        return answer.status, []
    doc = json.loads(answer.body)
    if keda:
        return 200, [float(doc["value"])]
    return 200, [quantity(item["value"]) for item in doc["items"]]


_SUFFIXES = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


def quantity(text: str) -> float:
    """A Kubernetes DecimalSI Quantity string (`400m`, `7`, `2k`) as a number."""
    if text and text[-1] in _SUFFIXES:
        return float(text[:-1]) * _SUFFIXES[text[-1]]
    return float(text)


async def _run() -> dict[str, Any]:
    bodies: dict[str, bytes] = {
        "/healthy-0/metrics": _healthy(5, 0.5).encode(),
        "/healthy-1/metrics": _healthy(2, 0.3).encode(),
    }
    for i, text in enumerate(BAD.values()):
        bodies[f"/shared-bad-{i}/metrics"] = _body(text, "shared")
        bodies[f"/alone-{i}/metrics"] = _body(text, f"alone-{i}")
    with engines(bodies) as urls, adapter(*dev_adapter_args(urls)) as running:
        await asyncio.sleep(7)  # a scrape round, and a second one for the rates
        shared = {}
        server_errors = 0
        for metric in ("infscale_queue_size", "infscale_kv_cache_usage"):
            for keda in (False, True):
                status, values = await _read(running.port, metric, "shared", keda)
                server_errors += status >= 500
                shared[(metric, keda)] = (status, values)
        served_bad = []
        for i, name in enumerate(BAD):
            for metric in ("infscale_queue_size", "infscale_kv_cache_usage"):
                for keda in (False, True):
                    status, values = await _read(running.port, metric, f"alone-{i}", keda)
                    server_errors += status >= 500
                    if values:
                        served_bad.append((name, metric, keda, values))
        metrics = (await get(running.port, "/metrics")).body.decode()
    excluded = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("infscale_adapter_invalid_pods_excluded_total{")
    )
    parse_errors = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("infscale_adapter_scrape_errors_total{") and 'reason="parse"' in line
    )
    return {"shared": shared, "served_bad": served_bad, "5xx": server_errors, "excluded": excluded,
            "parse_errors": parse_errors}  # fmt: skip


def main(argv: list[str]) -> int:
    print(f"load average {load_average()}")
    r = asyncio.run(_run())
    shared = r["shared"]
    assert isinstance(shared, dict)
    expected = {"infscale_queue_size": [7.0], "infscale_kv_cache_usage": [0.4]}
    wrong = {k: v for k, v in shared.items() if v != (200, expected[k[0]])}
    served_bad = r["served_bad"]
    assert isinstance(served_bad, list)
    print(
        f"values: 2 healthy pods and {len(BAD)} bad ones in one group, each bad one also alone\n"
        f"  shared group: queue {shared[('infscale_queue_size', False)]}, "
        f"KV {shared[('infscale_kv_cache_usage', False)]} (KEDA: {shared[('infscale_queue_size', True)]}, "
        f"{shared[('infscale_kv_cache_usage', True)]}); expected 7 and 0.4\n"
        f"  reads of a bad-only group that served a value: {len(served_bad)} {served_bad[:3]}\n"
        f"  5xx answers: {r['5xx']}; pods left out as invalid (per read): {r['excluded']:.0f}; "
        f"scrapes failed as malformed: {r['parse_errors']:.0f}"
    )
    ok = not wrong and not served_bad and r["5xx"] == 0
    print("goals (0 made-up or negative values served, 0 5xx):", "met" if ok else f"NOT met {wrong}")
    return 0 if ok else 1
