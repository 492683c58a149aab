"""Build deploy/release/infscale.yaml, the one-file install, from the kustomize bases.

    make manifests        # = python deploy/build_release.py (needs kubectl, for kubectl kustomize)

The file is the adapter with cert-manager TLS (deploy/overlays/cert-manager) and the controller
(deploy/controller: CRD, RBAC, Deployment), rendered by `kubectl kustomize` and concatenated; an
object both render identically (the shared Namespace) is kept once, and two different objects
with one name are an error. Kustomize itself cannot merge the two: each base declares the
namespace, so one kustomization over both fails with "already registered id". The result is
checked in and tests/test_release.py fails when it differs from a fresh build.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parent
RELEASE = DEPLOY / "release" / "infscale.yaml"
SOURCES = ("overlays/cert-manager", "controller")
HEADER = """\
# infscale: the one-file install (adapter + controller), built by `make manifests` from deploy/
# ({sources}). Do not edit: change the kustomize bases and rebuild.
# Needs cert-manager (the adapter's serving certificate and the APIService's CA bundle).
#   kubectl apply -f deploy/release/infscale.yaml
"""


def render(source: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        ["kubectl", "kustomize", str(DEPLOY / source)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"kubectl kustomize deploy/{source} failed:\n{done.stderr}")
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"]


def build() -> str:
    objects: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for source in SOURCES:
        for obj in render(source):
            key = _key(obj)
            if key in objects and objects[key] != obj:
                raise SystemExit(f"deploy/{source}: {'/'.join(key)} differs from another base's object")
            objects.setdefault(key, obj)
    body = "---\n".join(yaml.safe_dump(o, sort_keys=False) for o in objects.values())
    return HEADER.format(sources=", ".join(f"deploy/{s}" for s in SOURCES)) + "---\n" + body


def main() -> int:
    RELEASE.parent.mkdir(exist_ok=True)
    RELEASE.write_text(build(), encoding="utf-8")
    print(f"wrote {RELEASE.relative_to(DEPLOY.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
