"""INFSCALE_COMPILED_CORE / `infscale --compiled-core`: the policy core's mypyc build loaded before
anything imports the core, or a clear error (what is wrong, the command that fixes it) when it was
asked for and cannot be; without them, the sources."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autoscaler import compiledcore

# a process that reports which core it runs once infscale's start-up has loaded it
PROBE = (
    "import sys; from infscale.cli import _load_core; problem = _load_core(sys.argv[1:]); "
    "from autoscaler.policy import decide; from autoscaler.compiledcore import compiled; "
    "print(problem or ' '.join(compiled()) or 'sources')"
)


def _probe(*args: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(compiledcore.ENV)}
    command = [sys.executable, "-c", PROBE, *args]
    cwd = compiledcore.ROOT
    run = subprocess.run(command, capture_output=True, text=True, check=True, env=clean | env, cwd=cwd)
    return run.stdout.strip()


def _fake_build(tmp_path: Path, **changes: object) -> Path:
    build = tmp_path / "mypyc"
    build.mkdir()
    manifest: dict[str, object] = {"abi": compiledcore._abi(), "sources": compiledcore.sources()}
    manifest.update(changes)
    (build / "sources.json").write_text(json.dumps(manifest))
    return build


def test_a_missing_build_names_the_command_that_makes_it(tmp_path: Path) -> None:
    why = compiledcore.stale(tmp_path / "none")
    assert why is not None and str(tmp_path / "none") in why and "make compiled" in why


def test_a_build_older_than_the_sources_names_the_changed_modules(tmp_path: Path) -> None:
    hashes = compiledcore.sources()
    hashes["decide"] = "0" * 64
    del hashes["band"]
    why = compiledcore.stale(_fake_build(tmp_path, sources=hashes))
    assert why is not None and "older than autoscaler/policy's sources" in why
    assert "band, decide changed" in why and "make compiled" in why


def test_a_build_for_another_python_is_refused(tmp_path: Path) -> None:
    why = compiledcore.stale(_fake_build(tmp_path, abi=".cpython-39-x86_64-linux-gnu.so"))
    assert why is not None and "another Python" in why and compiledcore._abi() in why


def test_a_current_manifest_is_accepted(tmp_path: Path) -> None:
    assert compiledcore.stale(_fake_build(tmp_path)) is None


def test_the_build_must_come_before_the_core(tmp_path: Path) -> None:
    import autoscaler.policy.decide  # noqa: F401  (as every test of the core has)

    with pytest.raises(compiledcore.CompiledCoreError, match="imported before"):
        compiledcore.activate(_fake_build(tmp_path))


def test_without_the_setting_the_sources_run() -> None:
    assert _probe("replay") == "sources"
    assert _probe("replay", INFSCALE_COMPILED_CORE="false") == "sources"
    assert _probe("replay", "--compiled-core") == "sources"  # after the command: the command's argument


def test_asked_for_a_missing_or_stale_build_is_an_error_not_the_sources(tmp_path: Path) -> None:
    missing = _probe("--compiled-core", "replay", INFSCALE_COMPILED_CORE_DIR=str(tmp_path))
    assert missing.startswith(f"no compiled policy core in {tmp_path}") and "make compiled" in missing
    hashes = compiledcore.sources() | {"hpa": "0" * 64}
    build = _fake_build(tmp_path, sources=hashes)
    stale = _probe("replay", INFSCALE_COMPILED_CORE="1", INFSCALE_COMPILED_CORE_DIR=str(build))
    assert "older than autoscaler/policy's sources" in stale and "hpa changed" in stale
    assert _probe("replay", INFSCALE_COMPILED_CORE="maybe").startswith("INFSCALE_COMPILED_CORE: ")


def test_a_build_that_does_not_load_is_an_error(tmp_path: Path) -> None:
    # a current manifest without the extensions: the core's .py files would load in their place
    why = _probe("--compiled-core", "replay", INFSCALE_COMPILED_CORE_DIR=str(_fake_build(tmp_path)))
    assert why.startswith("the compiled policy core in") and "did not load" in why


@pytest.mark.skipif(compiledcore.stale() is not None, reason=str(compiledcore.stale()))
@pytest.mark.parametrize("how", ["flag", "environment"])
def test_the_setting_loads_the_build(how: str, tmp_path: Path) -> None:
    build = tmp_path / "copy"  # INFSCALE_COMPILED_CORE_DIR: a build anywhere, as in the image
    shutil.copytree(compiledcore.BUILD, build)
    args, env = (["--compiled-core"], {}) if how == "flag" else ([], {"INFSCALE_COMPILED_CORE": "true"})
    loaded = _probe(*args, "controller", INFSCALE_COMPILED_CORE_DIR=str(build), **env).split()
    assert {"decide", "planner", "demand", "band", "hpa"} <= set(loaded)
    assert not set(loaded) & compiledcore.PYTHON_ONLY
