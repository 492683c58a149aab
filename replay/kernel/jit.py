"""How the kernel is compiled: numba's options, its on-disk cache, and the one arithmetic helper
every module inlines.

numba checks a cached function against its own file only (its docs, "Cache invalidation"), while
the kernel's functions inline each other across modules and freeze layout.py's constants: a change
to one module must invalidate them all, so the cache's stamp here is the whole package's source,
and that of replay/metrics/signals.py, whose constants the kernel freezes too (a scrape row's
columns, the histograms' bounds).
The policy core's numba twins (replay/policies/*kernel.py compile autoscaler/policy's flat*
functions with the others as callees, and freeze constants such as kvceiling's) are stamped the
same way, by the whole core's source: a stale caller would otherwise keep an old callee's code.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numba as nb
from numba.core import caching

import autoscaler.policy

PACKAGE = Path(__file__).resolve().parent
POLICY_CORE = Path(autoscaler.policy.__file__).resolve().parent  # the compiled core's .py stay here too
# modules outside the package whose constants the kernel's functions freeze
KERNEL_ALSO = (PACKAGE.parent / "metrics" / "signals.py",)


def package_stamp(folder: Path = PACKAGE, also: tuple[Path, ...] = ()) -> str:
    """A digest of every module of the package, in name order, then of the modules `also`."""
    digest = hashlib.sha256()
    for path in [*sorted(folder.glob("*.py")), *also]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


_STAMPS = {PACKAGE: package_stamp(PACKAGE, KERNEL_ALSO), POLICY_CORE: package_stamp(POLICY_CORE)}
# InTreeCacheLocator lost its underscore in numba 0.61
_InTree: Any = vars(caching).get("InTreeCacheLocator") or vars(caching)["_InTreeCacheLocator"]


class PackageCacheLocator(_InTree):  # type: ignore[misc]
    """numba's cache for this package's functions and the policy core's: in __pycache__ beside them
    (or under NUMBA_CACHE_DIR, as numba's own locator), fresh while no module of their package
    changed."""

    def __init__(self, py_func: Any, py_file: str) -> None:
        super().__init__(py_func, py_file)
        self._stamp = _STAMPS[Path(py_file).resolve().parent]
        cache_dir = os.environ.get("NUMBA_CACHE_DIR", "")  # as numba.config reads it
        if cache_dir:
            self._cache_path = os.path.join(cache_dir, self.get_suitable_cache_subpath(py_file))

    def get_source_stamp(self) -> str:
        return self._stamp

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> Any:
        if Path(py_file).resolve().parent not in _STAMPS:
            return None  # neither the kernel's nor the core's: numba's own locators
        return super().from_function(py_func, py_file)


_LOCATORS = caching.FunctionCache._impl_class._locator_classes  # the ones numba tries, in order
if PackageCacheLocator not in _LOCATORS:
    _LOCATORS.insert(0, PackageCacheLocator)

# No NRT (numba's reference counting; `_nrt` is numba's own switch, used by its tests): with it,
# every call of a helper increments and decrements each array argument's count atomically, which
# took over half the kernel's time (24-hour day: 20.4 s with it, 9.0 s without). Nothing here
# allocates, which is all that NRT off forbids.
# The helpers on every event's path are inlined into advance() (numba's IR inlining): a call of a
# separately compiled helper passes each array as its data pointer, shape and strides, and LLVM
# cannot inline across them (24-hour day: kernel 9.0 -> about 6 s; compiling it the first time
# on a machine takes about 35 s of CPU instead of 20). Rare paths (preemption, the prefix cache, the
# KV limit's search) stay calls, which keeps the compile shorter.
_OPTIONS: dict[str, Any] = {"cache": True, "_nrt": False}
jit = nb.njit(**_OPTIONS)
inline_jit = nb.njit(inline="always", **_OPTIONS)


@inline_jit
def cdiv(a, b):
    return -((-a) // b)
