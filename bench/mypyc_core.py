"""The bench's side of the policy core's compiled build (autoscaler/compiledcore.py, `make compiled`).

`--mypyc` on `python -m bench policy` and on `python -m bench.policy_instructions` loads the
compiled modules instead of the sources: bench/__init__.py calls activate() before the core is
first imported, and it refuses a build older than the sources. `python -m bench.mypyc_core
decisions [--mypyc]` prints the bench's six digests, the predictive row's decisions hashed tick by
tick, which core modules are compiled and how often each numba kernel ran (tests/test_mypyc_core.py
compares a compiled run with the Python one).
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any

from autoscaler import compiledcore
from autoscaler.compiledcore import BUILD, PYTHON_ONLY, ROOT, compiled, stale

__all__ = ["BUILD", "PYTHON_ONLY", "ROOT", "activate", "compiled", "decisions", "stale"]


def activate() -> None:
    """The core's compiled modules loaded from now on, in this process (--mypyc), from
    INFSCALE_COMPILED_CORE_DIR if set (another build, to compare), else build/mypyc."""
    try:
        compiledcore.activate(compiledcore.CoreSettings().compiled_core_dir)
    except compiledcore.CompiledCoreError as exc:
        raise SystemExit(f"--mypyc: {exc}") from None


def _counted(calls: dict[str, int], name: str, function: Any) -> Any:
    calls[name] = 0

    def call(*args: Any) -> Any:
        calls[name] += 1
        return function(*args)

    return call


def decisions(ticks: int, kernels: bool) -> dict[str, Any]:
    """The bench's six digests, the predictive row's first `ticks` decisions and states hashed,
    and, with the numba kernels installed (`kernels`), how often each ran."""
    from autoscaler.policy import burstsize, flatahead, flatband, flatdemand
    from autoscaler.policy.decide import decide, record_rescale
    from autoscaler.policy.state import PolicyState
    from bench import bench_policy as b

    calls: dict[str, int] = {}
    if kernels:
        b.install_sizing([])
        flat = burstsize._flat
        assert flat is not None
        burstsize.use(flat._replace(size=_counted(calls, "sizing", flat.size)))
        if flatahead.kernels is not None:  # the per-tick copies: on the Python core alone (tickkernel.py)
            flatdemand.install(_counted(calls, "demand tick", flatdemand._kernel))
            flatband.use(_counted(calls, "panic test", flatband.kernel))
            start, forecast = flatahead.kernels
            flatahead.use((_counted(calls, "lookahead start", start), _counted(calls, "forecast", forecast)))
    loads = b.observations(b.DIGEST_TICKS)
    digests = {}
    for name, spec in b.SCENARIOS.items():
        _, counts = b._run_building(spec, loads)
        observed = [b.observation(q, batch, n) for (q, batch), n in zip(loads, counts, strict=False)]
        digests[name] = b.digest(spec, observed)
    spec = b.SCENARIOS[b.PREDICTIVE]
    h = hashlib.sha256()
    state = PolicyState()
    replicas = 4
    for i, (queue, batch) in enumerate(loads[:ticks]):
        now = b.START + i * 15.0
        decision, state = decide(spec, state, b.observation(queue, batch, replicas), now)
        # stages by their messages (bench_policy.digest): a stage's repr holds its template's address
        stages = [s.to_dict() for s in decision.stages]
        h.update(repr((decision._replace(stages=()), stages, state)).encode())
        if decision.desired_replicas != replicas:
            state = record_rescale(spec, state, now, replicas, decision.desired_replicas)
            replicas = decision.desired_replicas
    return {"compiled": compiled(), "digests": digests, "ticks": h.hexdigest(), "calls": calls}


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["build"]:
        compiledcore.build(BUILD)
    elif args[:1] == ["decisions"]:
        print(json.dumps(decisions(600, "--python" not in args), indent=1))
    else:
        raise SystemExit("usage: python -m bench.mypyc_core build | decisions [--mypyc] [--python]")


if __name__ == "__main__":
    main()
