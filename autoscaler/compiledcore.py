"""The policy core compiled by mypyc: an opt-in build for speed (docs/policy.md, "Performance").

`make compiled` (`python -m autoscaler.compiledcore build`) compiles autoscaler/policy's modules to
C extensions in build/mypyc/, outside the source tree. `INFSCALE_COMPILED_CORE=true` (or
`infscale --compiled-core COMMAND`) loads them instead of the sources: infscale/cli.py calls
activate() before anything imports the core, as do the tests' conftest and `python -m bench
--mypyc`. Explicitly asked for, a build that is missing, older than the sources or made for
another Python is an error naming the fix, never a silent fall back to the sources.

Left as Python (PYTHON_ONLY): the modules numba compiles from their source (it reads their
functions' bytecode: the sizing's kernel and its callees, the demand's tick; flatahead's and
flatband's are compiled, replay/policies/tickkernel.py reading their files), and those whose
compiled form behaves differently: the specs' dataclasses (compiled, they check their fields'
types when built, before check_spec can name the bad field, and a frozen one cannot be
deep-copied), startup.py (Startups clones itself by `__new__`, which a compiled class answers with
its `__init__`) and coldstart.py (compiled typed arguments raise TypeError before check_spec names
the field).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import sysconfig
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

ROOT = Path(__file__).resolve().parent.parent  # the folder holding the autoscaler package
CORE = ROOT / "autoscaler" / "policy"
BUILD = ROOT / "build" / "mypyc"
ENV = "INFSCALE_COMPILED_CORE"  # the switch; ENV + "_DIR": where the build is
REBUILD = "make compiled` (or `python -m autoscaler.compiledcore build --dir DIR`)"
PYTHON_ONLY = frozenset(
    {
        "__init__",
        # numba's sources
        "flatdemand",
        "flathold",
        "flatsize",
        "flattables",
        "tailsearch",
        "tpottail",
        # compiled, these behave differently (above)
        "startup",
        "coldstart",
        "spec",
        "capacityspec",
    }
)


class CompiledCoreError(ValueError):
    """The compiled core was asked for and cannot be loaded: what is wrong and how to fix it (a
    usage error, as the commands report a ValueError: one line, exit 2)."""


class CoreSettings(BaseSettings):
    """Which policy core a process runs, for every `infscale` command (INFSCALE_COMPILED_CORE*)."""

    model_config = SettingsConfigDict(
        env_prefix="INFSCALE_", extra="ignore", frozen=True, env_ignore_empty=True
    )

    compiled_core: bool = False  # load the mypyc build instead of the sources
    compiled_core_dir: Path = Field(default=BUILD)  # where `make compiled` put it


def sources() -> dict[str, str]:
    """Each core module's sha256: a compiled module relies on the others' types (a NamedTuple's
    fields by index), so a change to any makes the build stale."""
    return {p.stem: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(CORE.glob("*.py"))}


def _abi() -> str:
    return str(sysconfig.get_config_var("EXT_SUFFIX"))


def stale(build: Path = BUILD) -> str | None:
    """Why the build in `build` cannot be used (None: it can)."""
    manifest = build / "sources.json"
    if not manifest.exists():
        return f"no compiled policy core in {build}: run `{REBUILD}"
    made = json.loads(manifest.read_text())
    if made.get("abi") != _abi():
        return (
            f"the compiled policy core in {build} was made for another Python ({made.get('abi')}, this is "
            f"{_abi()}): run `{REBUILD} with this one"
        )
    now = sources()
    was = made["sources"]
    changed = sorted(name for name in was.keys() | now.keys() if was.get(name) != now.get(name))
    if changed:
        return (
            f"the compiled policy core in {build} is older than autoscaler/policy's sources in {CORE} "
            f"({', '.join(changed[:5])}{', …' if len(changed) > 5 else ''} changed): run `{REBUILD}"
        )
    return None


def activate(build: Path = BUILD) -> None:
    """The core's compiled modules loaded instead of their sources from now on, in this process."""
    build = build.resolve()
    imported = sorted(m for m in sys.modules if m.startswith("autoscaler.policy."))
    if imported and active() == build:
        return  # loaded already (a command started in-process by a test under the setting)
    if imported:
        first = imported[0]
        raise CompiledCoreError(f"the policy core was imported before its compiled build loaded ({first})")
    why = stale(build)
    if why is not None:
        raise CompiledCoreError(why)
    import autoscaler.policy

    # after the package is imported: build/ holds an autoscaler/ folder, a namespace package to Python
    sys.path.append(str(build))  # mypyc's shared library for the modules, imported by top-level name
    autoscaler.policy.__path__.insert(0, str(build / "autoscaler" / "policy"))
    from autoscaler.policy import decide

    if not str(decide.__file__).endswith(".so"):  # an extension that would not load falls back to its .py
        raise CompiledCoreError(f"the compiled policy core in {build} did not load: run `{REBUILD}")


def active() -> Path | None:
    """The compiled build this process's core loads from, if any (None: the sources)."""
    policy = sys.modules.get("autoscaler.policy")
    first = next(iter(getattr(policy, "__path__", [])), None)
    if first is None or Path(first).resolve() == CORE:
        return None
    return Path(first).parent.parent


def worker_env() -> dict[str, str]:
    """The environment that makes a worker process (a Ray worker, which imports the core afresh)
    load the core this process runs: empty for the sources."""
    build = active()
    return {} if build is None else {ENV: "true", ENV + "_DIR": str(build)}


def activate_from_settings(flag: bool = False) -> CoreSettings:
    """activate() if `flag` (--compiled-core) or INFSCALE_COMPILED_CORE asks for it."""
    settings = CoreSettings(compiled_core=True) if flag else CoreSettings()
    if settings.compiled_core:
        activate(settings.compiled_core_dir)
    return settings


def requested() -> bool:
    """Whether the environment mentions the compiled core at all (cheap: no pydantic import)."""
    return any(name.startswith(ENV) for name in os.environ)


def compiled() -> list[str]:
    """The core's modules loaded from a compiled extension in this process."""
    return sorted(
        name.rsplit(".", 1)[1]
        for name, module in list(sys.modules.items())
        if name.startswith("autoscaler.policy.") and str(getattr(module, "__file__", "")).endswith(".so")
    )


def build(out: Path = BUILD) -> None:
    """The compiled modules into `out` (a minute or two), and the sources they were built from."""
    from mypyc.build import mypycify
    from setuptools import Distribution

    hashes = sources()
    shutil.rmtree(out, ignore_errors=True)  # a module left as Python since the last build loses its copy
    temp = out.parent / (out.name + "-temp")
    paths = [str((CORE / f"{name}.py").relative_to(ROOT)) for name in hashes if name not in PYTHON_ONLY]
    cwd = Path.cwd()
    os.chdir(ROOT)  # mypyc names a module by its path from here
    try:
        modules = mypycify(paths, opt_level="3", target_dir=str(temp / "c"))
        # setuptools' own Distribution, not setup(), which would read pyproject.toml as the package's
        dist = Distribution({"name": "infscale-mypyc", "ext_modules": modules})
        dist.script_args = ["build_ext", "--build-lib", str(out), "--build-temp", str(temp), "-j", "2"]
        dist.parse_command_line()
        dist.run_commands()
    finally:
        os.chdir(cwd)
    manifest = {"abi": _abi(), "sources": hashes}
    (out / "sources.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(paths)} of autoscaler/policy's {len(hashes)} modules compiled into {out}")


def main(argv: list[str]) -> int:
    out = Path(argv[argv.index("--dir") + 1]).resolve() if "--dir" in argv else BUILD
    if argv[:1] == ["build"]:
        build(out)
    elif argv[:1] == ["check"]:
        why = stale(out)
        print(why or f"the compiled policy core in {out} matches the sources")
        return 1 if why else 0
    else:
        print("usage: python -m autoscaler.compiledcore build|check [--dir DIR]", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
