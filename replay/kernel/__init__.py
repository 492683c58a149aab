"""The fast engine's compiled core: every replica's vLLM-V1 scheduler (replay/scheduler.py's model),
event by event, with runs of identical steps in closed form.

Why it is fast. A replica's steps change composition only at events: a request arrives (and can be
admitted), a prefill completes, a decoding request finishes, the KV blocks run out. Between two
events every step runs the same decoding requests and the same prompt chunk; only the context they
read grows, by a constant per step, so step k of a run takes D0 + k x G and a run of K steps ends at
T0 + K D0 + G K (K - 1) / 2 (an arithmetic series). All decoding requests of a replica advance one
token per step, so a replica keeps one decode clock DS and each decoding request an offset
(generated = DS + dec_base); the requests' KV blocks grow on a 16-step cycle that one histogram of
(prompt + dec_base) mod block_size describes. An event costs O(log n) (the finish heap), not O(n).
The step that admits a request (a head step) is planned together with the run of identical steps
after it when its end changes nothing a router reads: one event per admission instead of two.

Events of all replicas and the arrivals are processed in time order (replica events first on a
tie): a request is routed when it arrives, to the ready replica with the fewest waiting + running
requests at that instant. A run that could take the arrival in is cut at the first step that
starts after it; requests arriving at the same instant are routed together before an idle replica
starts.

State lives in NumPy arrays owned by replay/engine.py: a slot (`qi` row, and in `qr` its routing
time) per request in flight, taken when it is routed and freed when it finishes (so the rows the
events touch stay few and close together); per request of the trace only its results (`qf` times,
`qo` preemptions and prefix hits, `rep` its replica); per replica `ri`/`rf` rows (columns in
layout.py), a histogram, a finish heap per replica, the replica event heap and the prefix cache (an
LRU list and a hash table per replica). Everything here is compiled once per machine and cached on
disk (jit.py).

The modules: layout.py (the arrays' columns), jit.py (compile options, cache), heaps.py (the
replica event heap, the finish heaps), queues.py (a replica's running list, waiting queue, decoding
aggregates, preemption), prefix.py (the prefix cache), step.py (plan a replica's run, end it),
events.py (advance: the event loop and the router), scrape.py (counters and scrape rows at any t).
"""

from replay.kernel.events import advance
from replay.kernel.scrape import observe, pod_rows

__all__ = ["advance", "observe", "pod_rows"]
