"""The arrivals over the requests' time in the system, which is what the requests in flight are
(Little's law): read from the demand's own counts (demand.observe), for the bursts' hold of the
batch and KV ceilings (burstsize.py, "lifetime"; docs/policy.md, "Defaults and why": burst hold).

The time in the system is in flight / finished per second (as demand.mix_window_s reads it);
the rate over it an average of the arrivals weighing each tick exp(-age / that time) (the share of
memoryless lifetimes still running: for those, the requests in flight over the time in the system
to the bit); its spread the squared deviation of that rate from the typical arrivals/s, less what
Poisson counts would show, averaged as the typical demand. Pure arithmetic on floats.
"""

from __future__ import annotations

import math
from typing import final

from autoscaler.policy.record import Record

LONGEST_S = 600.0  # a time in the system kept at most the typical demand's half-life (also while
# nothing finishes): the rate's average forgets no slower than the typical one it is read against


@final
class Lasting(Record):
    """The arrivals as the requests in flight see them; all 0 before the first reading. A Record
    (record.py), not a NamedTuple: a tick builds one."""

    FIELDS = ("time_s", "rate", "excess")

    time_s: float  # in flight / finished per second, averaged as `typical`
    rate: float  # arrivals/s averaged over the last time_s (exponential weights)
    excess: float  # (rate - typical)² less a Poisson count's, averaged as `typical`

    def __init__(self, time_s: float = 0.0, rate: float = 0.0, excess: float = 0.0) -> None:
        self.time_s = time_s
        self.rate = rate
        self.excess = excess


def time_in_system_s(finished: float, inflight: float) -> float:
    """Little's law: in flight / finished per second, at most LONGEST_S (also while nothing
    finishes); 0 with nothing in flight."""
    if not inflight > 0.0:
        return 0.0
    t = inflight / finished if finished > 0.0 else LONGEST_S
    return t if t < LONGEST_S else LONGEST_S


def after_tick(
    old: Lasting,
    arrivals: float,
    finished: float,
    inflight: float,
    dt: float,
    typical_rate: float,
    typical_w: float,
) -> Lasting:
    """`old` after a tick of dt seconds with `arrivals` requests/s, `finished`/s and `inflight`;
    `typical_rate` the typical arrivals/s after it, `typical_w` the typical average's weight."""
    t = time_in_system_s(finished, inflight)
    if old.time_s <= 0.0:  # the first reading: its own rate, no spread read yet
        return Lasting(t, arrivals, 0.0)
    time_s = old.time_s + typical_w * (t - old.time_s)
    u = -math.expm1(-dt / time_s) if time_s > 0.0 else 1.0
    rate = old.rate + u * (arrivals - old.rate)
    # a Poisson count's rate over the tick has variance typical / dt, the average u / (2 - u) of it
    poisson = u / (2.0 - u) * typical_rate / dt
    deviation = rate - typical_rate
    excess = old.excess + typical_w * (deviation * deviation - poisson - old.excess)
    return Lasting(time_s, rate, excess)


def index(lasting: Lasting, rate: float) -> float:
    """The arrivals' index of dispersion over the time in the system about `rate` (burstsize's
    hold_rate reads it over lasting.time_s): 1 + excess × time / rate, 1 where none was read."""
    if not (lasting.excess > 0.0 and rate > 0.0 and lasting.time_s > 0.0):
        return 1.0
    return 1.0 + lasting.excess * lasting.time_s / rate
