"""The architecture, enforced: the policy core is pure; the three parts depend on it, not on each other;
the neutral shared package (common/) depends on none of them, and all of them may use it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("autoscaler", "adapter", "replay", "infscale", "common")
# stdlib modules that do I/O or talk to the outside world: never in the pure core
IO_STDLIB = {
    "asyncio",
    "socket",
    "ssl",
    "http",
    "urllib",
    "subprocess",
    "threading",
    "multiprocessing",
    "os",
    "io",
    "pathlib",
    "shutil",
    "tempfile",
    "logging",
    "select",
    "selectors",
    "signal",
    "time",
    "random",
}
POLICY_ALLOWED_THIRD_PARTY = {"numpy"}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def modules_under(package: str) -> list[Path]:
    return sorted((ROOT / package.replace(".", "/")).rglob("*.py"))


def test_policy_core_is_pure() -> None:
    offenders = []
    for path in modules_under("autoscaler.policy"):
        for name in imports_of(path):
            top = name.split(".")[0]
            if name.startswith("autoscaler.policy") or top == "__future__":
                continue
            if top in PROJECT:
                offenders.append(f"{path.relative_to(ROOT)} imports project module {name}")
            elif top in sys.stdlib_module_names:
                if top in IO_STDLIB:
                    offenders.append(f"{path.relative_to(ROOT)} imports I/O module {name}")
            elif top not in POLICY_ALLOWED_THIRD_PARTY:
                offenders.append(f"{path.relative_to(ROOT)} imports third-party {name}")
    assert not offenders, "\n".join(offenders)


# part -> project packages it must not import
FORBIDDEN = {
    "adapter": ("replay", "autoscaler.controller", "infscale"),
    "replay": ("adapter", "autoscaler.controller", "infscale"),
    "autoscaler": ("adapter", "replay", "infscale"),
    "common": ("adapter", "autoscaler", "replay", "infscale"),
}


@pytest.mark.parametrize("part", sorted(FORBIDDEN))
def test_parts_do_not_depend_on_each_other(part: str) -> None:
    offenders = []
    for path in modules_under(part):
        for name in imports_of(path):
            if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN[part]):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, "\n".join(offenders)


def test_rule_detects_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import httpx\nfrom replay.trace import Trace\n")
    assert imports_of(bad) == {"httpx", "replay.trace"}
