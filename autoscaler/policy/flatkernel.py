"""burstsize.size by a flatsize kernel (flatsize.py: the arithmetic in flat floats): its tables
kept per profile and SLO, its result as a Sizing. burstsize.use installs one; the replay's
compiled copy is replay/policies/sizekernel.py, and tests run this module's own, uncompiled."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple

from autoscaler.policy import memo
from autoscaler.policy.capacity import Demand, Sizing
from autoscaler.policy.flatsize import BINDINGS, UNCOVERED, size
from autoscaler.policy.flattables import KEYS, TABLE_FLOATS, consts


class Kernel(NamedTuple):
    """A copy of `size` and how it takes its arguments (replay/policies/sizekernel.py installs the
    compiled one in burstsize; tests use this module's own, uncompiled)."""

    size: Callable[..., Any]
    floats: Callable[[list[float]], Any]  # the consts and the tables' values, as the copy takes them
    ints: Callable[[list[int]], Any]  # the tables' keys (and the TTFT searches' counts)


PYTHON = Kernel(size, list, list)
# what sizing() reads each call, as C statics in a compiled build (an imported name is a
# module-dict lookup at each use)
_BINDINGS: Final = BINDINGS
_UNCOVERED: Final = UNCOVERED
# a kernel's tables for a profile and SLO, by their identities (memo.py); the last one used first
_packed: Final[dict[tuple[int, int, int], tuple[Any, Any, Any, Any, Any]]] = {}
_last: tuple[Any, Any, Any, Any, Any] = (None, None, None, None, None)


def sizing(
    kernel: Kernel,
    profile: Any,
    slo: Any,
    need: Demand,
    speed: Any,
    limit: Any,
    spread: Any,
    service_cv2: Any,
    hold: Any,
    lasting: Any,
) -> Sizing | None:
    """burstsize.size by `kernel` (`lasting`: its lifetime hold, at most `hold`; None where it is
    not covered: burstsize sizes it itself). The numbers go to the kernel as they come, which
    converts or refuses them (None) whether this module is compiled or not: a compiled float
    argument would raise TypeError at the call instead (a complex speed)."""
    global _last
    got = _last
    if got[0] is not kernel or got[1] is not profile or got[2] is not slo:
        key = (id(kernel), id(profile), id(slo))
        got = _packed.get(key, got)
        if got[0] is not kernel or got[1] is not profile or got[2] is not slo:
            floats = kernel.floats(consts(profile, slo) + [0.0] * TABLE_FLOATS)
            got = memo.remember(_packed, key, (kernel, profile, slo, floats, kernel.ints([0] * KEYS)), 256)
        _last = got
    r, prompt, output = need.requests, need.prompt_tokens, need.output_tokens
    size = kernel.size  # a NamedTuple's field read by index, compiled; called as a method, looked up by name
    try:
        out: tuple[Any, ...] = size(
            got[3], got[4], r, prompt, output, speed, limit, spread, service_cv2, hold, lasting
        )
    except (ArithmeticError, ValueError, TypeError):  # the Python path raises it again, or sizes
        return None  # arguments the compiled copy was not compiled for
    if out[0] == _UNCOVERED:
        return None
    return Sizing(out[0], _BINDINGS[out[1]], out[2], out[3], out[4], out[5])
