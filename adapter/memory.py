"""Memory the adapter has freed goes back to the kernel (glibc), so RSS falls after a burst.

Why it did not: 600 slow TLS connections took the adapter from 64 to 229 MB, and closing them
gave back nothing. Two glibc behaviours kept it:
- the *dynamic mmap threshold*: an allocation over 128 KiB is mmap'd and returned on free, but
  each such free raises the threshold to its size (up to 32 MiB), so every later 256 KiB TLS read
  buffer (asyncio's SSLProtocol) or 15 MB scrape body came from the heap instead and stayed there.
  `tune_allocator` fixes the threshold at 128 KiB (setting it turns the adjustment off);
- *heap fragmentation*: freed small chunks between live ones are kept for reuse; glibc returns
  only a free top of the heap on its own. `malloc_trim(0)` hands every free page back
  (`madvise(MADV_DONTNEED)`), in every arena; a `Trimmer` calls it shortly after a burst ends.

With the 16 KiB TLS buffer of adapter/connections.py, 600 connections cost ~70 KB of RSS each, and
RSS returns to within 10 % of idle after they close (`python -m bench attack slowloris`).
Elsewhere than glibc (musl, macOS) both are no-ops.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable
from typing import Final

log = logging.getLogger(__name__)

_M_MMAP_THRESHOLD: Final = -3  # glibc's mallopt parameter number
MMAP_THRESHOLD_BYTES: Final = 128 * 1024  # glibc's own default, made fixed


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt  # noqa: B018  (glibc only)
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError, TypeError):
        return None
    return libc


_LIBC = _libc()


def tune_allocator() -> bool:
    """Fix glibc's mmap threshold at 128 KiB (see the module docstring); False without glibc."""
    if _LIBC is None:
        return False
    return bool(_LIBC.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def malloc_trim() -> bool:
    """Return free heap pages to the kernel now; False without glibc (or nothing to return)."""
    if _LIBC is None:
        return False
    return bool(_LIBC.malloc_trim(0))


class Trimmer:
    """`request()` asks for one `malloc_trim` `delay_s` later; requests meanwhile join it (a burst
    of closing connections costs one trim, a few milliseconds, not one per connection)."""

    def __init__(self, trim: Callable[[], bool] = malloc_trim, delay_s: float = 1.0) -> None:
        self._trim = trim
        self._delay_s = delay_s
        self._pending: asyncio.TimerHandle | None = None
        self.trims = 0

    def request(self) -> None:
        if self._pending is None:
            self._pending = asyncio.get_running_loop().call_later(self._delay_s, self._run)

    def _run(self) -> None:
        self._pending = None
        self.trims += 1
        self._trim()
