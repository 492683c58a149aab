"""The direct path: the infscale adapter scrapes every engine pod itself (adapter/sources/scrape.py).

What a policy sees, and how late:
- one round over every pod every `scrape_interval_s`; a pod's values are those of its last round,
  so at a sync they are up to one interval old (plus `delay_s`), half an interval on average;
- the pods are those the adapter's discovery keeps: Running and not terminating, so a draining pod
  drops out at once (adapter/sources/discovery.py); a pod scraped longer ago than `max_age_s` is
  left out, and with no pod left the read fails ("no fresh data"), never 0;
- a counter's rate is the increase between a pod's last two rounds over their time apart, a drop
  read as a restart (adapter/presets.py counter_rate): a pod has no rate until its second round;
- the gateway (its arrivals counter, its pending requests) is one more target of the same rounds.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import numpy.typing as npt

from autoscaler.policy.observation import MetricReading
from replay.metrics.signals import (
    ARRIVALS,
    COLUMNS,
    Aggregation,
    ClusterScrape,
    Kind,
    metric,
    reading,
)
from replay.metrics.spec import DirectPath, mid_phase

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


class _Round:
    """One round: what it scraped, and each pod's previous round (for the rates)."""

    __slots__ = ("_rates", "gateway", "pods", "prev_arrivals", "prev_rows", "prev_t", "rows", "t")

    def __init__(
        self,
        t: float,
        pods: I64,  # the pods scraped
        rows: F64,  # gauges and counters, per pod scraped
        prev_rows: F64,  # each pod's row in its previous round
        prev_t: F64 | float,  # and that round's time (NaN: the pod's first round, no rate yet); a
        # float: every pod's, in the round before (most rounds: the same pods)
        gateway: tuple[float, float],  # arrivals, pending
        prev_arrivals: tuple[float, float] | None,  # the gateway's previous (time, arrivals)
    ) -> None:
        self.t, self.pods, self.rows, self.prev_rows, self.prev_t = t, pods, rows, prev_rows, prev_t
        self.gateway, self.prev_arrivals = gateway, prev_arrivals
        self._rates: F64 | None = None

    def rates(self) -> F64:
        """Every column's rate, one row per column, over the pods seen in an earlier round too:
        worked out once for all the rate metrics a decision reads."""
        if self._rates is None:
            prev_t = self.prev_t
            if isinstance(prev_t, float):
                rates = counter_rates(self.prev_rows.T, prev_t, self.rows.T, self.t)
            else:
                seen = ~np.isnan(prev_t)
                rates = counter_rates(self.prev_rows[seen].T, prev_t[seen], self.rows[seen].T, self.t)
            self._rates = np.ascontiguousarray(rates)
        return self._rates


def counter_rates(prev: F64, prev_t: F64 | float, cur: F64, cur_t: float) -> F64:
    """adapter/presets.py counter_rate, elementwise: after a drop (restart) the new value is all
    increase, as Prometheus reads a reset."""
    increase = np.where(cur >= prev, cur - prev, cur)
    out: F64 = increase / (cur_t - prev_t)
    return out


class DirectPipeline:
    def __init__(self, spec: DirectPath, sync_period_s: float) -> None:
        self.spec = spec
        offset = spec.scrape_offset_s
        self._next = mid_phase(spec.scrape_interval_s, sync_period_s) if offset is None else offset
        self._rounds: deque[_Round] = deque()  # the newest visible one first, then any still in flight
        # per pod id, its last round's row and time (NaN: never scraped): a rate needs two rounds;
        # written when the pods change (until then the last round holds them)
        self._prev = np.zeros((0, COLUMNS))
        self._prev_t = np.zeros(0)
        self._last: _Round | None = None
        self._arrivals: tuple[float, float] | None = None  # the gateway's last (time, counter)

    @property
    def next_scrape_s(self) -> float:
        return self._next

    def scrape(self, cluster: ClusterScrape) -> None:
        """Keep the round; rates are worked out only when read (reads are rarer than rounds)."""
        t, pods = cluster.t, cluster.ready
        rows = cluster.rows[: len(pods)]
        last = self._last
        prev_t: F64 | float
        if last is not None and (
            pods is last.pods or (len(pods) == len(last.pods) and bool((pods == last.pods).all()))
        ):  # the same pods as the last round (most rounds): their previous rows are its rows
            prev_rows, prev_t = last.rows, float(last.t)
        else:
            self._grow(int(pods.max(initial=-1)) + 1)
            if last is not None:
                self._prev[last.pods] = last.rows
                self._prev_t[last.pods] = last.t
            prev_rows, prev_t = self._prev[pods], self._prev_t[pods]
        self._last = _Round(t, pods, rows, prev_rows, prev_t, cluster.gateway, self._arrivals)
        self._rounds.append(self._last)
        self._arrivals = (t, cluster.gateway[ARRIVALS])
        self._drop_hidden(t)
        self._next = t + self.spec.scrape_interval_s

    def scrapes_before(self, end: float) -> list[float]:
        times, t = [], self._next
        while t < end:
            times.append(t)
            t = t + self.spec.scrape_interval_s  # as scrape() sets _next from its round's time
        return times

    def _grow(self, n_ids: int) -> None:
        extra = n_ids - len(self._prev_t)
        if extra > 0:
            self._prev = np.concatenate((self._prev, np.zeros((extra, self._prev.shape[1]))))
            self._prev_t = np.concatenate((self._prev_t, np.full(extra, np.nan)))

    def _drop_hidden(self, now: float) -> None:
        """Forget rounds that a newer visible one hides from every read from `now` on (reads come
        in time order)."""
        visible, rounds = now - self.spec.delay_s, self._rounds
        while len(rounds) > 1 and rounds[1].t <= visible:
            rounds.popleft()

    def read(self, name: str, now: float, aggregation: Aggregation = None) -> MetricReading:
        m = metric(name, aggregation)
        self._drop_hidden(now)
        rounds = self._rounds
        if not rounds or rounds[0].t > now - self.spec.delay_s:
            return MetricReading.failed("no scrape has reached the metrics API yet")
        r = rounds[0]
        age = now - r.t
        if age > self.spec.max_age_s:
            return MetricReading.failed(f"no fresh data for {name}: the last scrape is {age:.0f} s old")
        if m.gateway and m.kind is Kind.GAUGE:
            values: F64 = np.array([r.gateway[m.column]])
        elif m.gateway:
            prev, arrived = r.prev_arrivals, np.array([r.gateway[ARRIVALS]])
            values = (
                np.zeros(0) if prev is None else counter_rates(np.array([prev[1]]), prev[0], arrived, r.t)
            )
        elif m.kind is Kind.RATE:
            values = r.rates()[m.columns]  # a bucketed metric's: one row per bucket
        else:
            values = r.rows[:, m.columns].T
        # a rate is the increase between a pod's last two rounds: over one scrape interval
        return reading(values, m, aggregation, age, self.spec.scrape_interval_s)
