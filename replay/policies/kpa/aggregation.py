"""Knative's metric windows, transcribed from knative/serving pkg/autoscaler/aggregation:
`TimedFloat64Buckets` (the linear window average the KPA uses by default), `WeightedFloat64Buckets`
(the `weightedExponential` aggregation algorithm) and `max.TimeWindow` (the scale-down delay).

Times are seconds on the caller's clock; buckets are indexed by floor(t / granularity), as
upstream's `timeToIndex` (Unix seconds / granularity seconds), so granularities are whole seconds.
Upstream's "zero time" (nothing written yet) is None here.
"""

from __future__ import annotations

import math

MIN_EXPONENT = 0.2  # minExponent: the smallest decay multiplier of the weighted average
WEIGHT_PRECISION = 0.9999  # weightPrecision: the weights sum to at least this
PRECISION = 6  # digits the linear average is rounded to


def go_round(x: float) -> float:
    """Go's math.Round: half away from zero (Python's round() is half to even)."""
    t = math.trunc(x)
    if abs(x - t) >= 0.5:
        t += int(math.copysign(1, x))
    return float(t)


def round_to_n_digits(n: int, f: float) -> float:
    p = math.pow(10, n)
    return go_round(f * p) / p


def smoothing_coeff(buckets: float) -> float:
    """computeSmoothingCoeff: the decay giving the newest `buckets` buckets WEIGHT_PRECISION of the weight."""
    return max(1 - math.pow(1 - WEIGHT_PRECISION, 1 / buckets), MIN_EXPONENT)


class TimedBuckets:
    """A ring of per-granularity sums over `window_s`; window_average is the mean of the valid buckets."""

    __slots__ = ("buckets", "first_write", "granularity_s", "last_write", "window_s", "window_total")

    def __init__(self, window_s: float, granularity_s: int = 1) -> None:
        if granularity_s < 1 or int(granularity_s) != granularity_s:
            raise ValueError(f"granularity must be a whole number of seconds >= 1, got {granularity_s}")
        self.granularity_s = int(granularity_s)
        self.window_s = float(window_s)
        self.buckets = [0.0] * math.ceil(window_s / granularity_s)
        self.first_write: int | None = None  # bucket index of the first write (of this data run)
        self.last_write: int | None = None
        self.window_total = 0.0  # sum of every bucket, valid or not

    def _index(self, t: float) -> int:
        return math.floor(t) // self.granularity_s

    def is_empty(self, now: float) -> bool:
        """No data recorded for more than the window."""
        return (
            self.last_write is None
            or (self._index(now) - self.last_write) * self.granularity_s > self.window_s
        )

    def record(self, now: float, value: float) -> None:
        """Add `value` to the bucket of `now`; buckets skipped since the last write become 0, and a
        window without writes starts a new data run. Values older than the window are ignored."""
        bucket = self._index(now)
        n = len(self.buckets)
        g = self.granularity_s
        if self.last_write != bucket:
            if self.last_write is not None and not bucket * g + self.window_s > self.last_write * g:
                return  # a window older than the last write
            if self.first_write is None or self.first_write > bucket:
                self.first_write = bucket
            if self.last_write is None or bucket > self.last_write:
                if self.last_write is None or (bucket - self.last_write) * g >= self.window_s:
                    self.first_write = bucket
                    self.buckets = [0.0] * n
                    self.window_total = 0.0
                else:
                    for i in range(self.last_write + 1, bucket + 1):
                        self.window_total -= self.buckets[i % n]
                        self.buckets[i % n] = 0.0
                self.last_write = bucket
        self.buckets[bucket % n] += value
        self.window_total += value

    def window_average(self, now: float) -> float:
        """The mean over the valid buckets: from the first write of this run (a partial window at
        first) to `now`, buckets after the last write dropped; 0 after a window without data."""
        if self.last_write is None or self.first_write is None:
            return 0.0
        now_b = self._index(now)
        n = len(self.buckets)
        d = (now_b - self.last_write) * self.granularity_s
        valid = self.last_write - self.first_write + 1  # +1: the times are inclusive
        if d <= 0:
            return round_to_n_digits(PRECISION, self.window_total / min(valid, n))
        if d < self.window_s:
            total = self.window_total
            for i in range(self.last_write + 1, now_b + 1):
                total -= self.buckets[i % n]
            return round_to_n_digits(PRECISION, total / min(valid, n - (now_b - self.last_write)))
        return 0.0


class WeightedBuckets(TimedBuckets):
    """The weightedExponential algorithm: newer buckets weigh more, by smoothing_coeff(buckets)."""

    __slots__ = ("coeff",)

    def __init__(self, window_s: float, granularity_s: int = 1) -> None:
        super().__init__(window_s, granularity_s)
        self.coeff = smoothing_coeff(math.ceil(window_s / granularity_s))

    def window_average(self, now: float) -> float:
        if self.is_empty(now) or self.last_write is None:
            return 0.0
        n = len(self.buckets)
        count = n
        multiplier = self.coeff
        now_b = self._index(now)
        if now_b > self.last_write:  # zeros since the last write: skip to their multiplier
            zeros = now_b - self.last_write
            multiplier *= math.pow(1 - self.coeff, zeros)
            count -= zeros
        start = self.last_write + n
        total = 0.0
        for i in range(count):
            total += self.buckets[(start - i) % n] * multiplier
            multiplier *= 1 - self.coeff
        return total


class MaxTimeWindow:
    """max.TimeWindow: the largest value recorded in the last `duration_s` (granularity buckets),
    kept as a descending-maxima deque as upstream does."""

    __slots__ = ("granularity_s", "maxima", "size")

    def __init__(self, duration_s: float, granularity_s: int) -> None:
        self.size = math.ceil(duration_s / granularity_s)
        self.granularity_s = int(granularity_s)
        self.maxima: list[tuple[int, int]] = []  # (index, value), values strictly descending

    def record(self, now: float, value: int) -> None:
        index = math.floor(now) // self.granularity_s
        m = self.maxima
        while m and not value < m[-1][1]:  # lower and older can never be the maximum again
            m.pop()
        while m and index - m[0][0] >= self.size:  # out of the window
            m.pop(0)
        if m and m[-1][0] == index:  # defensive: the same index twice keeps the larger
            value = max(value, m[-1][1])
            m.pop()
        m.append((index, value))

    def copy(self) -> MaxTimeWindow:
        twin = MaxTimeWindow.__new__(MaxTimeWindow)
        twin.size, twin.granularity_s, twin.maxima = self.size, self.granularity_s, list(self.maxima)
        return twin

    def current(self) -> int:
        return self.maxima[0][1]
