"""External metric reads: the ExternalMetricValueList the HPA would read, as the policy's MetricReading.

Two readers behind one protocol: through the kube-apiserver's aggregated path (what the HPA does,
with the controller's service account) or straight from the adapter's URL with httpx. Parsing is
separate from fetching. A failed read is a value (`MetricReading.failed`), never an exception: the
policy then holds and never scales down (upstream's rule).
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from autoscaler import quantity
from autoscaler.controller.kube import KubeClient, KubeError
from autoscaler.controller.kubetime import parse_time
from autoscaler.policy.observation import MetricReading
from autoscaler.policy.spec import MetricSpec

API_PREFIX = "/apis/external.metrics.k8s.io/v1beta1"
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


class MetricsReader(Protocol):
    async def read(self, namespace: str, metric: MetricSpec, now: float) -> MetricReading: ...

    async def close(self) -> None: ...


def metric_path(namespace: str, name: str) -> str:
    return f"{API_PREFIX}/namespaces/{quote(namespace, safe='')}/{quote(name, safe='')}"


def reading_from_list(data: Any, now: float) -> MetricReading:
    """Items in milli-units (rounded up, as Quantity.MilliValue) and the newest sample's age."""
    if not isinstance(data, Mapping) or not isinstance(data.get("items", []), list):
        return MetricReading.failed("the answer is not an ExternalMetricValueList")
    values: list[int] = []
    newest: float | None = None
    for i, item in enumerate(data.get("items") or []):
        try:
            values.append(quantity.to_milli(item["value"]))
            if item.get("timestamp"):
                stamp = parse_time(str(item["timestamp"]))
                newest = stamp if newest is None else max(newest, stamp)
        except (KeyError, TypeError, ValueError) as exc:
            return MetricReading.failed(f"items[{i}]: {exc}")
    age = 0.0 if newest is None else max(0.0, now - newest)
    return MetricReading(tuple(values), age_s=age)


class ApiMetricsReader:
    """Through the kube-apiserver: /apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube

    async def read(self, namespace: str, metric: MetricSpec, now: float) -> MetricReading:
        query = [("labelSelector", metric.selector)] if metric.selector else []
        try:
            data = await self.kube.request(
                "GET", metric_path(namespace, metric.name), query=query, what=f"read {metric.name}"
            )
        except KubeError as exc:
            return MetricReading.failed(str(exc))
        return reading_from_list(data, now)

    async def close(self) -> None:
        return None


class AdapterMetricsReader:
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
        self.client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), timeout=timeout_s, verify=verify, transport=transport
        )

    def _headers(self) -> dict[str, str]:
        # re-read per request: projected tokens rotate
        if self.token_file is not None and self.token_file.exists():
            return {"Authorization": f"Bearer {self.token_file.read_text(encoding='utf-8').strip()}"}
        return {}

    async def read(self, namespace: str, metric: MetricSpec, now: float) -> MetricReading:
        params = {"labelSelector": metric.selector} if metric.selector else {}
        try:
            response = await self.client.get(
                metric_path(namespace, metric.name), params=params, headers=self._headers()
            )
        except httpx.HTTPError as exc:
            return MetricReading.failed(f"read {metric.name} from the adapter: {type(exc).__name__}: {exc}")
        if response.status_code != 200:
            message = response.text[:300]
            with contextlib.suppress(ValueError):
                answer = response.json()
                if isinstance(answer, Mapping):  # a Status; anything else is quoted as it came
                    message = str(answer.get("message") or message)
            return MetricReading.failed(
                f"read {metric.name} from the adapter: {response.status_code} {message}"
            )
        try:
            data = response.json()
        except ValueError:
            return MetricReading.failed(f"read {metric.name} from the adapter: the answer is not JSON")
        return reading_from_list(data, now)

    async def close(self) -> None:
        await self.client.aclose()
