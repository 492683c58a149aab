"""The prometheus_client side of the emulator's renderers for the engines that export through it
(vLLM, SGLang, JetStream: replay/emulate/metrics.py, jetstreammetrics.py): one family per metric,
written by prometheus_client's own text writer, so floats read `1.0`, counters gain `_total` and
bucket bounds are spelled as it spells them (`le="1.0"`, `le="2e+06"`, `le="+Inf"`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from replay.emulate.stats import Histogram


def exposition(families: Iterable[Metric]) -> str:
    """The families as prometheus_client's /metrics writes them, in the order given."""
    listed = list(families)

    class _Collector:
        def collect(self) -> Iterable[Metric]:
            return listed

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    return generate_latest(registry).decode()


def go_float(value: float) -> str:
    """How prometheus_client writes a bucket bound (le="1.0", le="+Inf")."""
    out: str = floatToGoString(value)  # type: ignore[no-untyped-call]
    return out


def histogram(name: str, doc: str, labels: Mapping[str, str], h: Histogram) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=list(labels))
    buckets = [(go_float(le), float(c)) for le, c in h.cumulative()]
    family.add_metric(list(labels.values()), buckets, h.total)
    return family


def gauge(name: str, doc: str, labels: Mapping[str, str], value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=list(labels))
    family.add_metric(list(labels.values()), float(value))
    return family


def counter(name: str, doc: str, labels: Mapping[str, str], value: float) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=list(labels))
    family.add_metric(list(labels.values()), float(value))
    return family
