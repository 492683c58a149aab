"""replay/kernel/'s own data structures, against Python's (the engine as a whole is checked
against the exact scheduler in test_engine.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
from numba.core.dispatcher import Dispatcher

from replay.kernel import events, heaps, jit, prefix, queues, scrape, step
from replay.kernel.jit import KERNEL_ALSO, PACKAGE, POLICY_CORE, PackageCacheLocator, package_stamp
from replay.kernel.layout import P_HT


def test_prefix_hash_table_finds_inserts_and_deletes_as_a_dict_does() -> None:
    rng = np.random.default_rng(3)
    slots, replicas, cap = 64, 2, 24  # at most cap entries a replica: the table stays under half full
    pi = np.zeros(10, dtype=np.int64)
    pi[P_HT] = slots
    hslot = np.full(replicas * slots, -1, dtype=np.int64)
    lkey = np.full(replicas * cap, -1, dtype=np.int64)
    model: list[dict[int, int]] = [{} for _ in range(replicas)]
    free = [list(range(r * cap, (r + 1) * cap)) for r in range(replicas)]
    for _ in range(5_000):
        r = int(rng.integers(0, replicas))
        block = int(rng.integers(0, 60)) * 1_000_003  # collide often in 64 slots
        e = int(prefix.ht_find(hslot, lkey, pi, r, block))
        assert e == model[r].get(block, -1)
        if e >= 0 and rng.random() < 0.5:
            prefix.ht_delete(hslot, lkey, pi, r, block)
            del model[r][block]
            free[r].append(e)
        elif e < 0 and free[r]:
            e = free[r].pop()
            lkey[e] = block
            prefix.ht_insert(hslot, lkey, pi, r, e)
            model[r][block] = e
    for r in range(replicas):
        held = sorted(int(e) for e in hslot[r * slots : (r + 1) * slots] if e >= 0)
        assert held == sorted(model[r].values())


def test_every_kernel_function_is_cached_under_the_whole_packages_stamp(tmp_path: Path) -> None:
    """numba checks a cached function against its own file only; the kernel's modules inline each
    other's functions and freeze layout.py's constants (and replay/metrics/signals.py's), so a
    change to any of those modules must make every cached function stale (replay/kernel/jit.py)."""
    dispatchers = [
        obj
        for module in (events, heaps, jit, prefix, queues, scrape, step)
        for obj in vars(module).values()
        if isinstance(obj, Dispatcher) and obj.py_func.__module__ == module.__name__
    ]
    assert len(dispatchers) >= 30
    for dispatcher in dispatchers:
        locator = dispatcher._cache._impl.locator
        assert isinstance(locator, PackageCacheLocator)
        assert locator.get_source_stamp() == package_stamp(PACKAGE, KERNEL_ALSO)
    for source in [*PACKAGE.glob("*.py"), *KERNEL_ALSO]:
        (tmp_path / source.parent.name).mkdir(exist_ok=True)
        shutil.copy(source, tmp_path / source.parent.name / source.name)
    package = tmp_path / PACKAGE.name
    also = tuple(tmp_path / p.parent.name / p.name for p in KERNEL_ALSO)
    before = package_stamp(package, also)
    assert before == package_stamp(PACKAGE, KERNEL_ALSO) != package_stamp(PACKAGE)
    assert [p.name for p in also] == ["signals.py"]
    for edited in (package / "layout.py", package / "heaps.py", *also):
        original = edited.read_text()
        edited.write_text(original + "# edited\n")
        assert package_stamp(package, also) != before
        edited.write_text(original)


def test_the_policy_cores_numba_twins_are_cached_under_the_whole_cores_stamp() -> None:
    """The replay compiles the core's flat* functions with each other as callees and freezes the
    core's constants (kvceiling's in flatsize): a cached caller must go stale with any module of
    the core, not only its own file (a stale burst_test once kept an old callee's bits)."""
    from replay.policies import tailkernel, tickkernel

    twins = [tailkernel.compiled_rate(), *tickkernel._band_callees().values()]
    for twin in twins:
        locator = twin._cache._impl.locator
        assert isinstance(locator, PackageCacheLocator)
        assert locator.get_source_stamp() == package_stamp(POLICY_CORE)
    assert package_stamp(POLICY_CORE) != package_stamp(PACKAGE)
