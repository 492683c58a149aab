"""The policy core compiled by mypyc, an optional build for speed (docs/policy.md, "Performance").

`make compiled` (`python -m bench.mypyc_core build`) compiles autoscaler/policy's modules to C
extensions in build/mypyc/, outside the source tree: the editable install, the tests and CI keep
running the Python sources. `--mypyc` on `python -m bench policy` and on
`python -m bench.policy_instructions` loads the compiled modules instead: bench/__init__.py calls
activate() before the core is first imported, and it refuses a build older than the sources.
`python -m bench.mypyc_core decisions [--mypyc]` prints the bench's six digests, the predictive
row's decisions hashed tick by tick, which core modules are compiled and how often each numba kernel
ran (tests/test_mypyc_core.py compares a compiled run with the Python one).

Left as Python: the modules numba compiles from their source (it reads their functions' bytecode:
replay/policies/sizekernel.py, tickkernel.py, tailkernel.py), and two that do not work compiled
(PYTHON_ONLY). The compiled dataclasses (the specs) check their fields' types when built, where the
sources take anything and coldstart.check_spec or the scenario's reader names the bad field: with
--mypyc, a spec of the wrong types fails at its construction, and copy.deepcopy of a frozen one
(the replay's clairvoyant) fails: the build is for the policy benches, tests/ run the sources.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "autoscaler" / "policy"
BUILD = ROOT / "build" / "mypyc"
MANIFEST = BUILD / "sources.json"
PYTHON_ONLY = frozenset(
    {
        "__init__",
        # numba's sources
        "flatahead",
        "flatband",
        "flatdemand",
        "flatsize",
        "flattables",
        "tailsearch",
        "tpottail",
        # the replay's start-up machine clones itself by Startups.__new__, which a compiled class
        # answers with its __init__; coldstart.check_spec names a field of the wrong type, where a
        # compiled function's typed arguments would raise TypeError first
        "startup",
        "coldstart",
    }
)


def sources() -> dict[str, str]:
    """Each core module's sha256: a compiled module relies on the others' types (a NamedTuple's
    fields by index), so a change to any makes the build stale."""
    return {p.stem: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(CORE.glob("*.py"))}


def build() -> None:
    """The compiled modules into BUILD (a minute or two), and the sources they were built from."""
    from mypyc.build import mypycify
    from setuptools import Distribution

    hashes = sources()
    shutil.rmtree(BUILD, ignore_errors=True)  # a module left as Python since the last build loses its copy
    paths = [str((CORE / f"{name}.py").relative_to(ROOT)) for name in hashes if name not in PYTHON_ONLY]
    temp = ROOT / "build" / "mypyc-temp"
    modules = mypycify(paths, opt_level="3", target_dir=str(temp / "c"))
    # setuptools' own Distribution, not setup(), which would read pyproject.toml as the package's
    dist = Distribution({"name": "infscale-mypyc", "ext_modules": modules})
    dist.script_args = ["build_ext", "--build-lib", str(BUILD), "--build-temp", str(temp), "-j", "2"]
    dist.parse_command_line()
    dist.run_commands()
    MANIFEST.write_text(json.dumps(hashes, indent=1) + "\n")
    print(f"{len(paths)} of autoscaler/policy's {len(hashes)} modules compiled into {BUILD}")


def stale() -> str | None:
    """Why the build cannot be used (None: it can)."""
    if not MANIFEST.exists():
        return f"no mypyc build in {BUILD}: run `make compiled`"
    if json.loads(MANIFEST.read_text()) != sources():
        return f"the mypyc build in {BUILD} is older than autoscaler/policy's sources: run `make compiled`"
    return None


def activate() -> None:
    """The core's compiled modules loaded instead of their sources from now on, in this process."""
    imported = sorted(m for m in sys.modules if m.startswith("autoscaler.policy."))
    if imported:
        raise SystemExit(f"--mypyc: the core was imported before the build was activated ({imported[0]})")
    why = stale()
    if why is not None:
        raise SystemExit(f"--mypyc: {why}")
    import autoscaler.policy

    # after the package is imported: BUILD holds an autoscaler/ folder, a namespace package to Python
    sys.path.append(str(BUILD))  # mypyc's shared library for the modules, imported by top-level name
    autoscaler.policy.__path__.insert(0, str(BUILD / "autoscaler" / "policy"))


def compiled() -> list[str]:
    """The core's modules loaded from a compiled extension in this process."""
    return sorted(
        name.rsplit(".", 1)[1]
        for name, module in list(sys.modules.items())
        if name.startswith("autoscaler.policy.") and str(getattr(module, "__file__", "")).endswith(".so")
    )


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
        assert flat is not None and flatahead.kernels is not None
        burstsize.use(flat._replace(size=_counted(calls, "sizing", flat.size)))
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
        build()
    elif args[:1] == ["decisions"]:
        print(json.dumps(decisions(600, "--python" not in args), indent=1))
    else:
        raise SystemExit("usage: python -m bench.mypyc_core build | decisions [--mypyc] [--python]")


if __name__ == "__main__":
    main()
