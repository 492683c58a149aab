"""The engine model: every replica's continuous-batching engine, advanced one tick at a time with NumPy.

Sits under replay/simulate.py: the run loop routes arrivals to replicas (`submit`), then calls
`advance(t, dt)` once per tick. All per-request state lives in arrays over the whole trace, so a
tick costs a few dozen NumPy calls whatever the number of replicas and requests in flight — a
per-request Python event loop would be about 100x slower.

The model of one replica (EngineProfile):

  admission  FCFS from the replica's queue while a running slot is free and the request's
             input + output tokens fit in the KV budget (reserved up front). A request that could
             never fit is dropped (like an engine refusing a prompt longer than its context).
  prefill    one FIFO server at prefill_tokens_per_s; completion times are exact inside a tick
             (Lindley recursion, done_j = max(done_j-1, admitted_j) + input_j / rate, as a cummax).
  decode     a step emits one token per decoding request and takes step(n) = base + per x n, n the
             requests running on the replica (prefilling or decoding), averaged over the tick.
             Prefill has priority and the GPU does one thing at a time: a replica's decode clock
             stops while it prefills (the "prefill work in the step"). The first token comes one
             step after the prefill completes, so a request alone has TTFT = input/rate + step(1)
             and e2e = TTFT + (output-1) x step(1), whatever the tick.

What the tick resolves (the run loop's ticks are 0.1 s in reference-70b, 5 s while no replica is
busy): arrivals, prefill completions, first tokens and finishes are exact inside a tick (busy
intervals are mapped back to time). Held for a tick: the batch size n in the step time (its time
average over the tick's admissions; finishes inside the tick are not subtracted), the outstanding
counts the router balances, and the slots: a request waiting for a slot is admitted at the first
tick boundary after one frees. All three err on the slow side; tests/replay/test_engine.py measures
the error against an exact event-driven simulation of the same model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from replay.profiles import EngineProfile
from replay.trace import Trace

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

_EMPTY_I = np.zeros(0, dtype=np.int64)
_EMPTY_F = np.zeros(0, dtype=np.float64)
_EPS_TOKENS = 1e-9  # float residue of "exactly the tokens left"


@dataclass(frozen=True, slots=True)
class RequestResults:
    """Per request of the trace, in trace order; NaN where the event never happened."""

    replica: I64  # -1: never routed
    admitted_s: F64
    first_token_s: F64
    finished_s: F64
    dropped: npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class EngineScrape:
    """What every replica's /metrics shows at one moment, indexed by replica id (copies).

    Counters are cumulative since the replica started, as vLLM's; a scrape pipeline turns them into
    rates. Names: vllm:request_success_total, vllm:prompt_tokens_total (counted when a request's
    prefill ends), vllm:generation_tokens_total, vllm:num_requests_waiting, vllm:num_requests_running,
    vllm:kv_cache_usage_perc (a fraction, 0..1).
    """

    requests_finished: I64
    prompt_tokens: I64
    generation_tokens: I64
    waiting: I64
    running: I64
    kv_usage: F64


def _group_starts(groups: I64) -> tuple[I64, I64]:
    """For a sorted group column: each element's group number and each group's first index."""
    is_start = np.empty(len(groups), dtype=bool)
    is_start[:1] = True
    np.not_equal(groups[1:], groups[:-1], out=is_start[1:])
    starts = np.flatnonzero(is_start)
    return np.cumsum(is_start) - 1, starts


def _grouped_cumsum(x: F64, gid: I64, starts: I64) -> F64:
    """Inclusive cumulative sum restarting at each group."""
    total = np.cumsum(x)
    before = total[starts] - x[starts]  # cumulative sum just before each group
    out: F64 = total - before[gid]
    return out


def _grouped_cummax(x: F64, gid: I64) -> F64:
    """Cumulative max restarting at each group: lift each group above every earlier one."""
    if not len(x):
        return x
    lift = gid * (float(np.max(x) - np.min(x)) + 1.0)
    out: F64 = np.maximum.accumulate(x + lift) - lift
    return out


class Engine:
    """All replicas' engines over one trace. Replica ids are small ints handed out by the fleet."""

    def __init__(self, profile: EngineProfile, trace: Trace) -> None:
        self.profile = profile
        n = len(trace)
        self._arrival = trace.arrival_s
        self._input = trace.input_tokens.astype(np.float64)
        self._output = trace.output_tokens.astype(np.float64)
        self._need = self._input + self._output  # KV tokens reserved at admission
        self._replica = np.full(n, -1, dtype=np.int64)
        self._admitted = np.full(n, np.nan)
        self._first = np.full(n, np.nan)
        self._finished = np.full(n, np.nan)
        self._dropped = np.zeros(n, dtype=bool)
        self.finished_count = 0
        self.dropped_count = 0
        self._n = max(n, 1)  # key = replica * n + id: one sorted array orders queues by (replica, FCFS)
        self._wait_key = _EMPTY_I  # waiting requests, sorted by key
        self._fresh = _EMPTY_I  # submitted since the last advance, not yet queued
        self._pre = _EMPTY_I
        self._pre_left = _EMPTY_F  # prompt tokens still to prefill
        # decoding requests: all requests of a replica advance one token per step, so a replica
        # keeps one counter of steps run (`_steps`) and a request the count it finishes at
        self._dec = _EMPTY_I
        self._dec_rep = _EMPTY_I
        self._dec_until = _EMPTY_F  # the replica's step count at which the request is done
        self._no_first = _EMPTY_I  # decoding requests whose first token is still to come
        self._until = np.zeros(n)  # per request, a copy of _dec_until (looked up by id)
        # per replica id, kept up to date so a tick never recounts the queues
        self._waiting = _EMPTY_I
        self._running = _EMPTY_I
        self._kv_used = _EMPTY_F
        self._steps = _EMPTY_F  # decode steps each replica has run (fractional inside a step)
        self._last_finish = _EMPTY_F  # when each replica's latest request finished
        self._finished_n = _EMPTY_I  # cumulative counters per replica (a scrape's counters)
        self._prompt_tok = _EMPTY_I
        self._gen_tok = _EMPTY_I

    def _grow(self, n_replicas: int) -> None:
        extra = n_replicas - len(self._waiting)
        if extra > 0:
            self._waiting = np.concatenate((self._waiting, np.zeros(extra, dtype=np.int64)))
            self._running = np.concatenate((self._running, np.zeros(extra, dtype=np.int64)))
            self._kv_used = np.concatenate((self._kv_used, np.zeros(extra)))
            self._steps = np.concatenate((self._steps, np.zeros(extra)))
            self._last_finish = np.concatenate((self._last_finish, np.zeros(extra)))
            zeros = np.zeros(extra, dtype=np.int64)
            self._finished_n = np.concatenate((self._finished_n, zeros))
            self._prompt_tok = np.concatenate((self._prompt_tok, zeros))
            self._gen_tok = np.concatenate((self._gen_tok, zeros))

    # --- inputs ----------------------------------------------------------------------------------

    def submit(self, ids: I64, replicas: I64) -> None:
        """Requests routed to replicas; they join the replicas' queues."""
        if not len(ids):
            return
        self._grow(int(replicas.max()) + 1)
        too_big = self._need[ids] > self.profile.kv_budget_tokens
        if too_big.any():  # could never be admitted: the engine refuses it at once
            bad = ids[too_big]
            self._dropped[bad] = True
            self._replica[bad] = replicas[too_big]
            self.dropped_count += len(bad)
            ids, replicas = ids[~too_big], replicas[~too_big]
        self._replica[ids] = replicas
        self._fresh = np.concatenate((self._fresh, ids))  # queued (or admitted) by the next advance

    # --- observation -----------------------------------------------------------------------------

    def outstanding(self, n_replicas: int) -> I64:
        """Waiting + running requests per replica id: what the router balances and what a scrape
        reads (vllm:num_requests_waiting + vllm:num_requests_running)."""
        self._grow(n_replicas)
        out: I64 = (self._waiting + self._running)[:n_replicas]
        return out

    def last_finish_s(self, replica: int) -> float:
        """When the replica's latest request finished (0 if none did)."""
        return float(self._last_finish[replica]) if replica < len(self._last_finish) else 0.0

    def quiet(self, n_replicas: int) -> bool:
        """No queue anywhere and every replica at most half full (slots and KV)."""
        self._grow(n_replicas)
        p = self.profile
        return (
            not len(self._wait_key)
            and not len(self._fresh)
            and int(self._running.max(initial=0)) * 2 <= p.max_running
            and float(self._kv_used.max(initial=0.0)) * 2 <= p.kv_budget_tokens
        )

    def fits(self, ids: I64, replicas: I64) -> bool:
        """Would these arrivals all find a free slot and KV on their replicas even if nothing
        finished first? Then none of them waits for a slot, however long the tick."""
        if not len(ids):
            return True
        p = self.profile
        self._grow(int(replicas.max()) + 1)
        size = len(self._running)
        slots = self._running + self._waiting + np.bincount(replicas, minlength=size)
        kv = self._kv_used + np.bincount(replicas, weights=self._need[ids], minlength=size)
        return bool(slots.max() <= p.max_running and kv.max() <= p.kv_budget_tokens)

    def scrape(self, n_replicas: int) -> EngineScrape:
        """Every replica's counters and gauges now (this engine counts a request's generated tokens
        when it finishes, its first token when it comes)."""
        self._grow(n_replicas)
        return EngineScrape(
            requests_finished=self._finished_n[:n_replicas].copy(),
            prompt_tokens=self._prompt_tok[:n_replicas].copy(),
            generation_tokens=self._gen_tok[:n_replicas].copy(),
            waiting=self._waiting[:n_replicas].copy(),
            running=self._running[:n_replicas].copy(),
            kv_usage=self._kv_used[:n_replicas] / self.profile.kv_budget_tokens,
        )

    @property
    def in_flight(self) -> int:
        return len(self._wait_key) + len(self._fresh) + len(self._pre) + len(self._dec)

    def results(self) -> RequestResults:
        """The per-request columns themselves, not copies (five columns of the trace's length: a
        copy costs more than a busy hour of ticks on a 5 M-request trace): read them once the run
        is over; advancing further changes them."""
        return RequestResults(
            replica=self._replica,
            admitted_s=self._admitted,
            first_token_s=self._first,
            finished_s=self._finished,
            dropped=self._dropped,
        )

    # --- one tick --------------------------------------------------------------------------------

    def advance(self, t: float, dt: float, n_replicas: int) -> None:
        """Run every replica's engine from t to t + dt."""
        p = self.profile
        end = t + dt
        self._grow(n_replicas)
        before, known = self._running[:n_replicas].astype(np.float64), len(self._pre)
        self._admit(t)
        # the batch size held for the tick: its time average over the admissions (a request
        # admitted halfway counts one half), so a long tick does not charge early steps for late
        # arrivals; finishes inside the tick are not subtracted (they are not known yet)
        new = self._pre[known:]
        running = before + np.bincount(
            self._replica[new], weights=(end - self._admitted[new]) / dt, minlength=n_replicas
        )
        if not len(self._pre) and not len(self._dec):
            return

        # prefill: one FIFO server per replica, exact inside the tick
        busy: F64 = np.zeros(n_replicas)  # prefill seconds inside the tick
        new_dec, new_clock = _EMPTY_I, _EMPTY_F
        idle_keys, busy_end, busy_rep = _EMPTY_F, _EMPTY_F, _EMPTY_I
        lift = dt + 1.0  # > any decode-clock value in the tick: keeps replicas apart in one sorted key
        if len(self._pre):
            order = np.argsort(self._replica[self._pre], kind="stable")
            pre, left = self._pre[order], self._pre_left[order]
            g = self._replica[pre]
            gid, starts = _group_starts(g)
            work = left / p.prefill_tokens_per_s  # seconds of prefill server time
            ready = np.maximum(self._admitted[pre], t)
            cum = _grouped_cumsum(work, gid, starts)  # C_j, inclusive
            done = cum + _grouped_cummax(ready - (cum - work), gid)
            begin = done - work  # >= t up to rounding: nothing is admitted before its tick
            stop = np.minimum(done, end)
            inside = np.maximum(stop - begin, 0.0)
            busy = np.bincount(g, weights=inside, minlength=n_replicas).astype(np.float64, copy=False)
            # the busy intervals inside the tick with the idle time before each: the map from a
            # replica's decode clock to time
            cum_in = _grouped_cumsum(inside, gid, starts)
            ran = inside > 0
            busy_end, busy_rep = stop[ran], g[ran]
            idle_keys = ((begin - t) - (cum_in - inside))[ran] + busy_rep * lift  # sorted
            fin = done <= end
            new_dec = pre[fin]
            # decode clock at prefill completion: idle time in the tick so far
            new_clock = (done[fin] - t) - cum_in[fin]
            keep = ~fin
            self._pre = pre[keep]
            # tokens left: the work after `end` (> 0 here), all of it if the prefill has not begun
            self._pre_left = np.minimum(done - end, work)[keep] * p.prefill_tokens_per_s

        def clock_to_time(y: F64, rep: I64) -> F64:
            """When replica `rep`'s decode clock reads y: skip every busy interval that starts
            before it (prefill has priority: a decode step waits for the prefill ahead)."""
            if not len(idle_keys):
                return t + y
            base = rep * lift
            j = np.searchsorted(idle_keys, y + base, side="left") - 1  # the last interval before y ...
            idle_before = idle_keys[j] - base
            mine = (j >= 0) & (busy_rep[j] >= rep)  # ... if it is this replica's (keys sort by replica)
            out: F64 = np.where(mine, busy_end[j] + (y - idle_before), t + y)
            return out

        # decode. On replica r the decode clock y (idle seconds since t) maps to steps run as
        # steps(y) = steps_at_t + y / step(n); a request whose prefill ended at clock c joins at
        # steps(c) and is done at steps(c) + output tokens.
        if not len(new_dec) and not len(self._dec):
            return
        step = p.decode_base_s + p.decode_per_running_s * np.maximum(running, 1)
        decode_time = dt - busy
        steps0 = self._steps[:n_replicas].copy()
        steps_end = steps0 + decode_time / step
        if len(new_dec):
            r = self._replica[new_dec]
            joined = steps0[r] + new_clock / step[r]
            self._dec = np.concatenate((self._dec, new_dec))
            self._dec_rep = np.concatenate((self._dec_rep, r))
            until = joined + self._output[new_dec]
            self._until[new_dec] = until
            self._dec_until = np.concatenate((self._dec_until, until))
            self._no_first = np.concatenate((self._no_first, new_dec))

        def time_at(steps: F64, rep: I64) -> F64:
            return clock_to_time((steps - steps0[rep]) * step[rep], rep)

        # first tokens (only requests still waiting for theirs) and finishes, mapped to time in one go
        first_ids, first_at, first_rep = _EMPTY_I, _EMPTY_F, _EMPTY_I
        if len(self._no_first):
            nf = self._no_first
            r = self._replica[nf]
            at_steps = self._until[nf] - self._output[nf] + 1.0
            now = at_steps <= steps_end[r] + _EPS_TOKENS
            if now.any():
                first_ids, first_at, first_rep = nf[now], at_steps[now], r[now]
                self._no_first = nf[~now]
        self._steps[:n_replicas] = steps_end
        fin = self._dec_until <= steps_end[self._dec_rep] + _EPS_TOKENS
        gone, gone_rep = self._dec[fin], self._dec_rep[fin]
        if not len(gone) and not len(first_ids):
            return
        k = len(first_ids)
        times = np.minimum(
            time_at(np.concatenate((first_at, self._dec_until[fin])), np.concatenate((first_rep, gone_rep))),
            end,
        )
        self._first[first_ids] = times[:k]
        if len(first_ids):
            size = len(self._running)
            self._prompt_tok += np.bincount(first_rep, weights=self._input[first_ids], minlength=size).astype(
                np.int64
            )
            self._gen_tok += np.bincount(first_rep, minlength=size)
        if len(gone):
            gone_at = times[k:]
            keep = ~fin
            self._dec, self._dec_rep, self._dec_until = (
                self._dec[keep],
                self._dec_rep[keep],
                self._dec_until[keep],
            )
            self._finished[gone] = gone_at
            np.maximum.at(self._last_finish, gone_rep, gone_at)
            self.finished_count += len(gone)
            size = len(self._running)
            self._finished_n += np.bincount(gone_rep, minlength=size)
            self._gen_tok += np.bincount(gone_rep, weights=self._output[gone] - 1, minlength=size).astype(
                np.int64
            )
            self._running -= np.bincount(gone_rep, minlength=size)
            self._kv_used -= np.bincount(gone_rep, weights=self._need[gone], minlength=size)

    def _admit(self, t: float) -> None:
        """FCFS admission at t into free slots: the queues first, then the fresh arrivals."""
        if len(self._wait_key):
            free = self.profile.max_running - self._running
            reps = np.flatnonzero((self._waiting > 0) & (free > 0))
            if len(reps):
                self._admit_heads(reps, np.minimum(free[reps], self._waiting[reps]), t)
        if len(self._fresh):
            self._admit_fresh(t)

    def _admit_fresh(self, t: float) -> None:
        """Fresh arrivals go straight in where nobody waits and there is room; the rest queue.

        The common case (no queue anywhere, and every replica's arrivals fit its free slots and KV)
        admits them all in arrival order without grouping them by replica: advance() groups the
        prefill queue anyway, keeping each replica's order.
        """
        p = self.profile
        ids, self._fresh = self._fresh, _EMPTY_I
        if not len(self._wait_key):
            g = self._replica[ids]
            size = len(self._running)
            running = self._running + np.bincount(g, minlength=size)
            kv_used = self._kv_used + np.bincount(g, weights=self._need[ids], minlength=size)
            if running.max() <= p.max_running and kv_used.max() <= p.kv_budget_tokens:
                self._running, self._kv_used = running, kv_used
                self._queue_prefill(ids, np.maximum(self._arrival[ids], t))
                return
        order = np.argsort(self._replica[ids], kind="stable")
        ids = ids[order]
        g = self._replica[ids]
        gid, starts = _group_starts(g)
        rank = np.arange(len(ids)) - starts[gid]
        need = _grouped_cumsum(self._need[ids], gid, starts)
        # all three conditions hold for a prefix of each replica's arrivals (FCFS)
        ok = (
            (self._waiting[g] == 0)
            & (rank < p.max_running - self._running[g])
            & (need <= p.kv_budget_tokens - self._kv_used[g])
        )
        if not ok.all():
            queued, gq = ids[~ok], g[~ok]
            keys = gq * self._n + queued  # sorted already: by replica, then id
            self._wait_key = np.insert(self._wait_key, np.searchsorted(self._wait_key, keys), keys)
            self._waiting += np.bincount(gq, minlength=len(self._waiting))
        if ok.any():
            admitted = ids[ok]
            self._start(admitted, g[ok], np.maximum(self._arrival[admitted], t))

    def _start(self, admitted: I64, g: I64, at: F64) -> None:
        """Admitted requests take their slot and KV, and join their replica's prefill queue."""
        size = len(self._running)
        self._running += np.bincount(g, minlength=size)
        self._kv_used += np.bincount(g, weights=self._need[admitted], minlength=size)
        self._queue_prefill(admitted, at)

    def _queue_prefill(self, admitted: I64, at: F64) -> None:
        self._admitted[admitted] = at
        self._pre = np.concatenate((self._pre, admitted))
        self._pre_left = np.concatenate((self._pre_left, self._input[admitted]))

    def _admit_heads(self, reps: I64, take: I64, t: float) -> None:
        """Admit up to take[i] requests from the head of replica reps[i]'s queue, FCFS, while the KV
        budget allows, at max(arrival, t)."""
        p = self.profile
        before = np.cumsum(take) - take
        rank = np.arange(int(take.sum())) - np.repeat(before, take)  # place in its replica's queue
        idx = np.repeat(np.searchsorted(self._wait_key, reps * self._n), take) + rank
        keys = self._wait_key[idx]
        ids = keys % self._n
        g = keys // self._n
        gid, gstarts = _group_starts(g)
        need = _grouped_cumsum(self._need[ids], gid, gstarts)
        # the KV condition grows along the queue, so `ok` is a prefix of each replica's queue (FCFS)
        ok = need <= p.kv_budget_tokens - self._kv_used[g]
        if not ok.any():
            return
        admitted, g = ids[ok], g[ok]
        self._wait_key = np.delete(self._wait_key, idx[ok])
        self._waiting -= np.bincount(g, minlength=len(self._waiting))
        self._start(admitted, g, np.maximum(self._arrival[admitted], t))
