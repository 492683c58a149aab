"""External metric reads: the ExternalMetricValueList the HPA would read, as the policy's MetricReading.

Two readers behind one protocol: through the kube-apiserver's aggregated path (what the HPA does,
with the controller's service account) or straight from the adapter's URL with httpx. Parsing is
separate from fetching. A failed read is a value (`MetricReading.failed`), never an exception: the
policy then holds and never scales down (upstream's rule).
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from autoscaler import quantity
from autoscaler.controller.kube import KubeClient, KubeError
from autoscaler.controller.kubetime import parse_time
from autoscaler.policy import memo
from autoscaler.policy.observation import MetricReading
from autoscaler.policy.spec import MetricSpec
from common.status import parse_status

API_PREFIX = "/apis/external.metrics.k8s.io/v1beta1"
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
_MAX_LAST = 4096  # parses kept for reuse: one per (namespace, metric, selector) read


@dataclass(frozen=True, slots=True)
class MetricItem:
    labels: Mapping[str, str]
    value_milli: int  # rounded up, as Quantity.MilliValue
    timestamp: float | None  # Unix seconds of the sample; None when the answer gives none
    window_s: int | None = None  # a rate's `window`, the seconds it was measured over; None: not given


@dataclass(frozen=True, slots=True)
class MetricList:
    """An ExternalMetricValueList, parsed; `items=None` when the read failed (`error` says why)."""

    items: tuple[MetricItem, ...] | None
    error: str = ""
    read_at: float = 0.0  # when it was read: the age of an answer without timestamps


class MetricsReader(Protocol):
    async def read_items(self, namespace: str, name: str, selector: str, now: float) -> MetricList: ...

    async def close(self) -> None: ...

    async def read(self, namespace: str, metric: MetricSpec, now: float) -> MetricReading: ...


def metric_path(namespace: str, name: str) -> str:
    return f"{API_PREFIX}/namespaces/{quote(namespace, safe='')}/{quote(name, safe='')}"


# an answer repeats its timestamps (one per scrape round) and often its values: parse each string once
_stamp = lru_cache(maxsize=4096)(parse_time)
_milli = lru_cache(maxsize=16384)(quantity.to_milli)


def parse_items(data: Any, now: float) -> MetricList:
    if not isinstance(data, Mapping) or not isinstance(data.get("items", []), list):
        return MetricList(None, "the answer is not an ExternalMetricValueList", now)
    items: list[MetricItem] = []
    for i, item in enumerate(data.get("items") or []):
        try:
            labels = item.get("metricLabels") or {}  # JSON: strings already
            stamp = _stamp(str(item["timestamp"])) if item.get("timestamp") else None
            window = item.get("window")  # a rate's; anything but a positive integer is not said
            if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
                window = None
            items.append(MetricItem(labels, _milli(item["value"]), stamp, window))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            return MetricList(None, f"items[{i}]: {exc}", now)
    return MetricList(tuple(items), read_at=now)


def reading_of(answer: MetricList, now: float) -> MetricReading:
    """The policy's reading: values in milli-units, the newest sample's age (the answer's own
    age when it carries no timestamps), the longest rate window an item gives (None: none does)
    and each item's labels."""
    if answer.items is None:
        return MetricReading.failed(answer.error)
    stamps = [i.timestamp for i in answer.items if i.timestamp is not None]
    newest = max(stamps) if stamps else answer.read_at
    windows = [i.window_s for i in answer.items if i.window_s is not None]
    return MetricReading(
        tuple(i.value_milli for i in answer.items),
        age_s=max(0.0, now - newest),
        window_s=float(max(windows)) if windows else None,
        labels=tuple(i.labels for i in answer.items),
    )


def reading_from_list(data: Any, now: float) -> MetricReading:
    return reading_of(parse_items(data, now), now)


class _Reads:
    """`read` in terms of `read_items`; and the last parse of each read, reused while its answer's
    bytes stay the same (an adapter's answer changes once per scrape round, read many times between)."""

    _last: dict[tuple[str, str, str], tuple[bytes, MetricList]]

    def _parsed(
        self, read: tuple[str, str, str], body: bytes, now: float, parse: Callable[[bytes], MetricList]
    ) -> MetricList:
        last = self._last.get(read)
        if last is not None and last[0] == body:
            return MetricList(last[1].items, last[1].error, now)
        answer = parse(body)
        memo.remember(self._last, read, (body, answer), _MAX_LAST)  # full: reads of autoscalers long gone
        return answer

    async def read_items(self, namespace: str, name: str, selector: str, now: float) -> MetricList:
        raise NotImplementedError

    async def read(self, namespace: str, metric: MetricSpec, now: float) -> MetricReading:
        return reading_of(await self.read_items(namespace, metric.name, metric.selector, now), now)


class ApiMetricsReader(_Reads):
    """Through the kube-apiserver: /apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self._last = {}

    async def read_items(self, namespace: str, name: str, selector: str, now: float) -> MetricList:
        query = [("labelSelector", selector)] if selector else []
        try:
            body = await self.kube.request_body(
                metric_path(namespace, name), query=query, what=f"read {name}"
            )
        except KubeError as exc:
            return MetricList(None, str(exc), now)

        def parse(body: bytes) -> MetricList:
            try:
                data: Any = json.loads(body)
            except ValueError:  # as the kubernetes client gives it: the text, not an ExternalMetricValueList
                data = body.decode("utf-8", "replace")
            return parse_items(data, now)

        return self._parsed((namespace, name, selector), body, now, parse)

    async def close(self) -> None:
        return None


class AdapterMetricsReader(_Reads):
    """Straight from the adapter: same path and answer, authenticated with the service-account token."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float,
        ca_file: Path | None = None,
        insecure_skip_verify: bool = False,
        token_file: Path | None = SERVICE_ACCOUNT_TOKEN,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        verify: ssl.SSLContext | bool = True
        if insecure_skip_verify:
            verify = False
        elif ca_file is not None:
            verify = ssl.create_default_context(cafile=str(ca_file))
        self.token_file = token_file
        self._last = {}
        self.client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), timeout=timeout_s, verify=verify, transport=transport
        )

    def _headers(self) -> dict[str, str]:
        # re-read per request: projected tokens rotate
        if self.token_file is not None and self.token_file.exists():
            return {"Authorization": f"Bearer {self.token_file.read_text(encoding='utf-8').strip()}"}
        return {}

    async def read_items(self, namespace: str, name: str, selector: str, now: float) -> MetricList:
        params = {"labelSelector": selector} if selector else {}
        where = f"read {name} from the adapter"
        try:
            response = await self.client.get(
                metric_path(namespace, name), params=params, headers=self._headers()
            )
        except httpx.HTTPError as exc:
            return MetricList(None, f"{where}: {type(exc).__name__}: {exc}", now)
        if response.status_code != 200:
            status = parse_status(response.content)  # a Status; anything else is quoted as it came
            message = status.message if status and status.message else response.text[:300]
            return MetricList(None, f"{where}: {response.status_code} {message}", now)

        def parse(body: bytes) -> MetricList:
            try:
                data = json.loads(body)
            except ValueError:
                return MetricList(None, f"{where}: the answer is not JSON", now)
            return parse_items(data, now)

        return self._parsed((namespace, name, selector), response.content, now, parse)

    async def close(self) -> None:
        await self.client.aclose()
