"""The mix: tokens per request, the ratio of the tokens counted to the requests counted as
exponentially weighted sums (demand.py reads it each tick and multiplies the arrivals by it), and
the prompt lengths' spread the TTFT tail needs (lengths.py), over a longer window of its own.

Pure: arithmetic on floats. docs/policy.md ("Defaults and why": the mix window, the lengths'
spread window) has the windows' reasons.
"""

from __future__ import annotations

import math
from typing import Final, final

from autoscaler.policy.record import Record

# The mix weighs a request exp(-requests counted since / MIX_REQUESTS): ~2 x 400 requests' worth,
# a standard error of 5 % on lengths of cs^2 2 (docs/policy.md, "Defaults and why")
MIX_REQUESTS: Final = 400.0
# The lengths' spread weighs a request exp(-requests counted since / SPREAD_REQUESTS): its mean
# square's standard error is the mix's mean's (5 % at cs² 2) over (m4/m2² - 1) / cs² = 5.3 times the
# requests (a gamma's moments), so one long prompt does not swing the TTFT tail (docs/policy.md)
SPREAD_REQUESTS: Final = 2_000.0


@final
class Mix(Record):
    """Tokens per request: weighted sums of the tokens counted over the requests counted. A
    Record (record.py), not a NamedTuple: a tick builds one."""

    FIELDS = (
        "requests",
        "prompt",
        "output",
        "prompt_sq",
        "spread_requests",
        "spread_prompt",
        "output_sq",
        "spread_output",
    )

    requests: float  # the requests counted, weighted (about MIX_REQUESTS once that many were)
    prompt: float  # prompt tokens per request
    output: float  # generated tokens per request
    # prompt tokens squared per request (an engine's prompt-length histogram; 0: none read yet):
    # with `spread_prompt`, the lengths' spread the TTFT tail needs (lengths.py)
    prompt_sq: float
    # ... the requests it weighs (about SPREAD_REQUESTS) and their prompt tokens per request: the
    # spread is read over more requests than the mix, about its own mean prompt
    spread_requests: float
    spread_prompt: float
    # generated tokens squared per request and generated tokens per request, both from an engine's
    # output-length histogram (its buckets and its _sum: counted when a request finishes; 0: none
    # read yet) over the spread's window: the outputs' spread, which sets the context a running
    # request holds (capacity.py's context share). Never the generation counter, which counts
    # tokens as they are decoded: over a window, the two count different requests
    output_sq: float
    spread_output: float

    def __init__(
        self,
        requests: float,
        prompt: float,
        output: float,
        prompt_sq: float = 0.0,
        spread_requests: float = 0.0,
        spread_prompt: float = 0.0,
        output_sq: float = 0.0,
        spread_output: float = 0.0,
    ) -> None:
        self.requests = requests
        self.prompt = prompt
        self.output = output
        self.prompt_sq = prompt_sq
        self.spread_requests = spread_requests
        self.spread_prompt = spread_prompt
        self.output_sq = output_sq
        self.spread_output = spread_output

    def lengths_cv2(self) -> float | None:
        return lengths_cv2_of(self)

    def outputs_cv2(self) -> float | None:
        return outputs_cv2_of(self)


# the methods' bodies as functions, which a compiled caller calls natively
def lengths_cv2_of(mix: Mix) -> float | None:
    """The prompt lengths' squared coefficient of variation about the mix's mean prompt, None
    without a histogram: the spread's E[x²] / E[x] (the residual's scale, over its own longer
    window) is p·(1 + cv²), so the tail's waits keep the spread's scale as the mix moves."""
    p, sq = mix.prompt, mix.prompt_sq
    square = mix.spread_prompt * p
    if sq <= 0.0 or square <= 0.0:  # a subnormal prompt squares to 0
        return None
    return sq / square - 1.0


def outputs_cv2_of(mix: Mix) -> float | None:
    """The output lengths' squared coefficient of variation, None without a histogram: E[o²] /
    E[o]² - 1 from the one histogram over the spread's window (both moments counted at the
    requests' finish, the same requests), a ratio of scale, which the sizing applies to the
    mix's mean output."""
    so, sq = mix.spread_output, mix.output_sq
    square = so * so
    if sq <= 0.0 or square <= 0.0:
        return None
    return sq / square - 1.0


def add_counts(
    mix: Mix,
    decay: float,
    requests: float,
    prompt: float,
    output: float,
    prompt_sq: float | None,
    spread_window: float = SPREAD_REQUESTS,
    output_sq: float | None = None,
    output_sum: float | None = None,
) -> Mix:
    """The mix after `requests` more counted with `prompt` and `output` tokens (and `prompt_sq`
    squared prompt tokens; `output_sq` squared generated tokens and `output_sum` generated tokens
    of the requests finished, both from the output-length histogram: read as a pair, None either:
    not read, kept as they were), the weight of those counted before
    multiplied by `decay`: the ratio of the weighted sums, kept as the weight and the ratios. The
    lengths' spread forgets over `spread_window` requests (an argument, not only the constant, so a
    test can compare windows on the compiled core too, where constants are compiled in)."""
    if requests < 0.0:
        requests = 0.0
    counted = mix.requests * decay + requests
    if counted <= 0.0:  # no request counted yet: tokens alone give no mix
        return mix
    p = mix.prompt + (prompt - requests * mix.prompt) / counted
    o = mix.output + (output - requests * mix.output) / counted
    # the lengths' spread: the prompts' mean and mean square over SPREAD_REQUESTS (or the mix's
    # window where longer), the same weights, so the cv² is of one window's prompts
    slow = math.exp(-requests / spread_window)
    if slow < decay:
        slow = decay
    weighed = mix.spread_requests * slow + requests
    sp, sq = mix.spread_prompt, mix.prompt_sq
    so, osq = mix.spread_output, mix.output_sq
    if weighed > 0.0:
        sp = sp + (prompt - requests * sp) / weighed
        if prompt_sq is not None and requests > 0.0:
            # the first reading sets it (0 before: no histogram was read), later ones weigh in
            sq = prompt_sq / requests if sq <= 0.0 else sq + (prompt_sq - requests * sq) / weighed
            if sq < 0.0:
                sq = 0.0
        # the outputs' spread, the same way over the same weights, both moments from the histogram
        if output_sq is not None and output_sum is not None and requests > 0.0:
            if osq <= 0.0:
                osq, so = output_sq / requests, output_sum / requests
            else:
                osq = osq + (output_sq - requests * osq) / weighed
                so = so + (output_sum - requests * so) / weighed
            if osq < 0.0:
                osq = 0.0
    return Mix(
        counted,
        0.0 if p < 0.0 else p,
        0.0 if o < 0.0 else o,
        sq,
        weighed,
        0.0 if sp < 0.0 else sp,
        osq,
        0.0 if so < 0.0 else so,
    )
