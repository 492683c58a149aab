"""The fast engine: every replica's vLLM-V1 engine over one trace, event-driven and compiled.

Sits under replay/simulate.py, which calls `run(until, ids, ready)` once per interval (with the
scrapes inside it as `stops`, whose rows it hands back): the interval's arrivals are routed at
their arrival times, each to the ready replica with the fewest waiting + running requests at that
instant, and every replica runs its steps up to `until`.
The model is replay/scheduler.py's (the exact, per-step reference); replay/kernel/ computes the
same steps with runs of identical steps in closed form. tests/replay/test_engine.py checks that
both give every request's first token and finish within one step of each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from replay import kernel
from replay.kernel import layout
from replay.metrics.signals import COLUMNS
from replay.profiles import EngineProfile
from replay.scheduler import PREFIX_BLOCK_TOKENS
from replay.trace import Trace

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
_NO_TARGET = np.zeros(0, dtype=np.int64)
_NO_STOPS = np.zeros(0)
_NO_ROWS = np.zeros((0, COLUMNS))


@dataclass(frozen=True, slots=True)
class RequestResults:
    """Per request of the trace, in trace order; NaN where the event never happened."""

    replica: I64  # -1: never routed
    admitted_s: F64  # first scheduled
    first_token_s: F64
    finished_s: F64
    dropped: npt.NDArray[np.bool_]
    preemptions: I64
    prefix_hit_tokens: I64


@dataclass(frozen=True, slots=True)
class EngineScrape:
    """What every replica's /metrics shows at one moment, indexed by replica id (copies).

    Counters are cumulative since the replica started, as vLLM's; a scrape pipeline turns them into
    rates. Names: vllm:request_success_total, vllm:prompt_tokens_total (counted at a request's first
    token), vllm:generation_tokens_total, vllm:num_requests_waiting, vllm:num_requests_running,
    vllm:kv_cache_usage_perc (a fraction, 0..1).
    """

    requests_finished: I64
    prompt_tokens: I64
    generation_tokens: I64
    waiting: I64
    running: I64
    kv_usage: F64


def load_kernel() -> None:
    """Load the compiled kernel now (from numba's on-disk cache, or compile it): about 1.5 s of CPU
    on first use in a process. A parent that forks workers calls it once so that they inherit it."""
    trace = Trace("warm-up", np.zeros(1), np.ones(1, dtype=np.int64), np.ones(1, dtype=np.int64))
    engine = Engine(EngineProfile(), trace)
    engine.run(1.0, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))
    engine.scrape(1)
    engine.pod_rows(1, np.zeros(1, dtype=np.int64), _NO_TARGET)


class Engine:
    """All replicas' engines over one trace. Replica ids are small ints handed out by the fleet."""

    def __init__(self, profile: EngineProfile, trace: Trace) -> None:
        self.profile = profile
        n = len(trace)
        self._arrival = trace.arrival_s
        self._tin = np.ascontiguousarray(trace.input_tokens, dtype=np.int64)
        self._tout = np.ascontiguousarray(trace.output_tokens, dtype=np.int64)
        self.now = 0.0
        # longer than the engine accepts (scheduler.context_limit): refused at once
        dropped = trace.input_tokens + trace.output_tokens > profile.kv_blocks * profile.block_size
        self._dropped = dropped
        self.dropped_count = int(dropped.sum())
        # Per request, in trace order: its replica, its times (written from its routing on: the
        # pages of a row are touched only then) and its preemptions and prefix hits (touched only
        # if it has some). A request's scheduling state lives in a slot of `_qi` while in flight.
        self._rep = np.full(n, -1, dtype=np.int64)
        self._qf = np.zeros((n, layout.QF_COLUMNS))
        self._qo = np.zeros((n, layout.QO_COLUMNS), dtype=np.int64)
        prefix = trace.prefix
        if profile.prefix_caching and prefix is not None:
            self._poff, self._pids, block_tokens = prefix.offsets, prefix.ids, prefix.block_tokens
        else:
            self._poff, self._pids = np.zeros(n + 1, dtype=np.int64), np.zeros(1, dtype=np.int64)
            block_tokens = PREFIX_BLOCK_TOKENS
        caching = profile.prefix_caching and prefix is not None
        lru_cap = max(1, profile.kv_budget_tokens // block_tokens)
        table = 1 << (2 * lru_cap - 1).bit_length()  # hash slots per replica: at most half full
        self._pi = np.array(
            [
                profile.max_num_batched_tokens,
                profile.max_num_seqs,
                profile.kv_blocks,
                profile.block_size,
                1 if profile.mixed_batches else 0,
                1 if caching else 0,
                block_tokens,
                lru_cap,
                table,
                1 if profile.prefix_caching else 0,
            ],
            dtype=np.int64,
        )
        self._pf = np.array(
            [
                profile.step_base_s,
                profile.prefill_token_s,
                profile.prefill_attention_s,
                profile.decode_request_s,
                profile.decode_context_s,
            ]
        )
        self._g = np.zeros(layout.G_COLUMNS, dtype=np.int64)
        self._g[layout.G_FREE] = -1
        self._qi = np.zeros((0, layout.QI_COLUMNS), dtype=np.int64)
        self._qr = np.zeros(0)  # per slot: when its request was routed (layout.py)
        self._grow_slots(1024)
        self._size = 0
        self._ri = np.zeros((0, layout.RI_COLUMNS), dtype=np.int64)
        self._rf = np.zeros((0, layout.RF_COLUMNS))
        self._hist = np.zeros((0, profile.block_size), dtype=np.int64)
        self._hk = np.zeros((0, profile.max_num_seqs), dtype=np.int64)
        self._hr = np.zeros((0, profile.max_num_seqs), dtype=np.int64)
        self._ev = np.zeros(0, dtype=np.int64)
        self._evk = np.zeros(0)
        self._evpos = np.zeros(0, dtype=np.int64)
        self._pending = np.zeros(0, dtype=np.int64)
        self._lkey = np.zeros(1, dtype=np.int64)
        self._lprev = np.zeros(1, dtype=np.int64)
        self._lnext = np.zeros(1, dtype=np.int64)
        self._hslot = np.zeros(1, dtype=np.int64)
        self._out = np.zeros((6, 0), dtype=np.int64)
        self._route_any = np.zeros(0, dtype=np.int64)
        self._lr = np.zeros(0, dtype=np.int64)  # the ready replicas' loads during a kernel call
        self._grow(8)

    def _grow_slots(self, n_slots: int) -> None:
        """At least `n_slots` slots for requests in flight; the new ones go on the free list."""
        old = len(self._qi)
        if n_slots <= old:
            return
        size = max(n_slots, 2 * old)
        qi = np.zeros((size, layout.QI_COLUMNS), dtype=np.int64)
        qi[:old] = self._qi
        qi[old:, layout.Q_NEXT] = np.arange(old + 1, size + 1)
        qi[size - 1, layout.Q_NEXT] = self._g[layout.G_FREE]
        self._g[layout.G_FREE] = old
        self._qi = qi
        qr = np.zeros(size)
        qr[:old] = self._qr
        self._qr = qr

    def _grow(self, n_replicas: int) -> None:
        if n_replicas <= self._size:
            return
        old, size = self._size, max(n_replicas, 2 * self._size)

        def extend(a: Any, fill: float) -> Any:
            out = np.full((size, *a.shape[1:]), fill, dtype=a.dtype)
            out[:old] = a
            return out

        ri = extend(self._ri, 0)
        for col in (
            layout.R_RHEAD,
            layout.R_RTAIL,
            layout.R_WHEAD,
            layout.R_WTAIL,
            layout.R_PART,
            layout.R_HFIRST,
            layout.R_LRU_HEAD,
            layout.R_LRU_TAIL,
            layout.R_RPOS,
        ):
            ri[old:, col] = -1
        ri[old:, layout.R_FREE] = self.profile.kv_blocks
        self._ri = ri
        self._rf = extend(self._rf, 0.0)
        self._hist = extend(self._hist, 0)
        self._hk = extend(self._hk, 0)
        self._hr = extend(self._hr, 0)
        self._ev = extend(self._ev, 0)
        self._evk = extend(self._evk, 0.0)
        self._evpos = extend(self._evpos, -1)
        self._pending = extend(self._pending, 0)
        self._out = np.zeros((6, size), dtype=np.int64)
        if self._pi[layout.P_PREFIX] == 1:
            cells = size * int(self._pi[layout.P_LRU_CAP])
            for name in ("_lkey", "_lprev", "_lnext"):
                a = getattr(self, name)
                grown = np.full(cells, -1, dtype=np.int64)
                grown[: len(a) if old else 0] = a[: len(a) if old else 0]
                setattr(self, name, grown)
            slots = np.full(size * int(self._pi[layout.P_HT]), -1, dtype=np.int64)
            slots[: len(self._hslot) if old else 0] = self._hslot[: len(self._hslot) if old else 0]
            self._hslot = slots
        self._size = size

    # --- running ---------------------------------------------------------------------------------

    def run(
        self,
        until: float,
        ids: I64,
        ready: I64 | None = None,
        targets: I64 | None = None,
        stops: F64 | None = None,
    ) -> F64 | None:
        """Route `ids` (in arrival order; at their arrival, or now if they waited at the gateway)
        to `targets`, or each to the least-loaded replica of `ready` (oldest first on a tie), and
        run every replica up to `until`. Requests the engine refuses (too long) are skipped.
        With `stops` (ascending times before `until`): the ready pods' rows at each (len(stops) x
        len(ready) x COLUMNS, pod_rows' with no draining pod), as if the run had ended there; the
        scrapes of an interval in one call."""
        if len(ids):
            self._grow_slots(int(self._g[layout.G_INFLIGHT]) + len(ids))
            if targets is None:
                if ready is None or not len(ready):
                    if not self.dropped_count or not self._dropped[ids].all():
                        raise ValueError("requests to route but no ready replica")
                    ready = _NO_TARGET
                if len(self._route_any) < len(ids):  # -1: to the least-loaded ready replica
                    self._route_any = np.full(2 * len(ids), -1, dtype=np.int64)
                targets = self._route_any[: len(ids)]
            else:
                self._grow(int(targets.max()) + 1)
        else:
            targets = _NO_TARGET
        ready_ids = ready if ready is not None else _NO_TARGET
        if len(self._lr) < len(ready_ids):
            self._lr = np.zeros(2 * len(ready_ids), dtype=np.int64)
        if stops is None or not len(stops):
            stops, rows = _NO_STOPS, _NO_ROWS
        else:  # a new array each time: a metric pipeline keeps the rows it is given
            rows = np.empty((len(stops) * len(ready_ids), COLUMNS))
        # the kernel checks the ready ids against the replica arrays (-1: grow them, then run)
        while self._advance(until, ids, targets, ready_ids, stops, rows) < 0:
            self._grow(int(ready_ids.max()) + 1)
        self.now = max(self.now, until)
        return rows.reshape(len(stops), len(ready_ids), COLUMNS) if len(stops) else None

    def _advance(self, until: float, ids: I64, targets: I64, ready: I64, stops: F64, rows: F64) -> int:
        code: int = kernel.advance(
            until,
            self.now,
            ids.astype(np.int64, copy=False),
            self._arrival,
            self._tin,
            self._tout,
            self._dropped,
            targets.astype(np.int64, copy=False),
            ready.astype(np.int64, copy=False),
            self._qi,
            self._qr,
            self._qf,
            self._qo,
            self._rep,
            self._ri,
            self._rf,
            self._hist,
            self._hk,
            self._hr,
            self._pi,
            self._pf,
            self._poff,
            self._pids,
            self._hslot,
            self._lkey,
            self._lprev,
            self._lnext,
            self._ev,
            self._evk,
            self._evpos,
            self._pending,
            self._g,
            self._lr,
            stops.astype(np.float64, copy=False),
            rows,
        )
        return code

    # --- observation -----------------------------------------------------------------------------

    def outstanding(self, n_replicas: int) -> I64:
        """Waiting + running requests per replica id (vllm:num_requests_waiting + _running)."""
        self._grow(n_replicas)
        out: I64 = self._ri[:n_replicas, layout.R_NWAIT] + self._ri[:n_replicas, layout.R_NRUN]
        return out

    def last_finish_s(self, replica: int) -> float:
        """When the replica's latest request finished (0 if none did)."""
        return float(self._rf[replica, layout.RF_LASTFIN]) if replica < self._size else 0.0

    def pod_rows(self, n_replicas: int, ready: I64, draining: I64) -> F64:
        """A scrape's rows at `now` for the ready pods, then the draining ones (the columns of
        replay/metrics/signals.py), in one compiled pass."""
        self._grow(n_replicas)
        rows = np.empty((len(ready) + len(draining), COLUMNS))
        kernel.pod_rows(self.now, ready, draining, self._qi, self._ri, self._rf, self._hist, self._pi, rows)
        return rows

    def scrape(self, n_replicas: int) -> EngineScrape:
        """Every replica's counters and gauges at `now` (the end of the last run)."""
        self._grow(n_replicas)
        out = self._out
        kernel.observe(self.now, n_replicas, self._qi, self._ri, self._rf, self._hist, self._pi, out)
        return EngineScrape(
            requests_finished=out[0, :n_replicas].copy(),
            prompt_tokens=out[1, :n_replicas].copy(),
            generation_tokens=out[2, :n_replicas].copy(),
            waiting=out[3, :n_replicas].copy(),
            running=out[4, :n_replicas].copy(),
            kv_usage=out[5, :n_replicas] / self.profile.kv_blocks,
        )

    @property
    def in_flight(self) -> int:
        return int(self._g[layout.G_INFLIGHT])

    @property
    def finished_count(self) -> int:
        return int(self._g[layout.G_FINISHED])

    def preemptions(self, n_replicas: int) -> I64:
        """Preemptions per replica so far."""
        self._grow(n_replicas)
        out: I64 = self._ri[:n_replicas, layout.R_NPRE].copy()
        return out

    def prefix_cache(self) -> tuple[int, int]:
        """Prompt tokens looked up in the prefix cache and found there, over all replicas."""
        return int(self._ri[:, layout.R_PQ].sum()), int(self._ri[:, layout.R_PH].sum())

    def results(self) -> RequestResults:
        """Per-request columns (views of the engine's state: read them once the run is over)."""
        qf = self._qf
        qf[self._rep < 0] = np.nan  # never routed (the kernel writes NaN when it routes one)
        return RequestResults(
            replica=self._rep,
            admitted_s=qf[:, layout.QF_ADMIT],
            first_token_s=qf[:, layout.QF_FIRST],
            finished_s=qf[:, layout.QF_FINISH],
            dropped=self._dropped,
            preemptions=self._qo[:, layout.O_PREEMPT],
            prefix_hit_tokens=self._qo[:, layout.O_HIT],
        )
