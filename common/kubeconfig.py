"""The Kubernetes client configuration, from one place for every infscale component.

Where the API server is, in this order (as kubectl and client-go's in-cluster fallback read it):
an explicit kubeconfig file (`--kubeconfig`); the pod's service account when running in a cluster
(`KUBERNETES_SERVICE_HOST` set); else `$KUBECONFIG` or `~/.kube/config`. Every problem is one
`KubeconfigError` line naming the file and what is wrong with it (kubernetes-asyncio alone says
"Expected key current-context in kube-config" for a file that does not exist).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from kubernetes_asyncio import client

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeconfigError(Exception):
    """No usable Kubernetes configuration; the message says where it looked and what was wrong."""


def default_paths() -> list[Path]:
    env = os.environ.get("KUBECONFIG", "")
    paths = [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    return paths or [Path("~/.kube/config").expanduser()]


def _named(entries: Any, name: str, what: str, path: Path) -> Mapping[str, Any]:
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, Mapping) and entry.get("name") == name:
            return entry
    raise KubeconfigError(f"kubeconfig {path}: {what} {name!r} is not in its {what}s list")


def check_file(path: Path, context: str | None = None) -> None:
    """What kubernetes-asyncio would trip over, said plainly."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KubeconfigError(f"kubeconfig {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KubeconfigError(f"kubeconfig {path}: cannot read it: {exc}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"kubeconfig {path}: not YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, Mapping):
        raise KubeconfigError(f"kubeconfig {path}: not a kubeconfig (expected a mapping with contexts)")
    name = context or doc.get("current-context")
    if not name:
        raise KubeconfigError(
            f"kubeconfig {path}: no current-context is set (kubectl config use-context NAME)"
        )
    ctx = (_named(doc.get("contexts"), str(name), "context", path).get("context")) or {}
    cluster = _named(doc.get("clusters"), str(ctx.get("cluster", "")), "cluster", path).get("cluster") or {}
    if not cluster.get("server"):
        raise KubeconfigError(f"kubeconfig {path}: cluster {ctx.get('cluster')!r} has no server")


async def load_configuration(kubeconfig: Path | None = None) -> client.Configuration:
    """A fresh Configuration (the library's global default is left alone); KubeconfigError if none."""
    from kubernetes_asyncio import client, config  # loaded on use: the CLIs start without it

    configuration = client.Configuration()
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException as exc:
            raise KubeconfigError(f"in-cluster configuration ({SERVICE_ACCOUNT_DIR}): {exc}") from None
        return configuration
    if kubeconfig is not None:
        paths = [kubeconfig]
    else:
        paths = [p for p in default_paths() if p.exists()]
        if not paths:
            looked = ", ".join(str(p) for p in default_paths())
            raise KubeconfigError(
                f"no Kubernetes cluster configured: not running in a cluster (KUBERNETES_SERVICE_HOST"
                f" is unset) and no kubeconfig at {looked}; pass --kubeconfig FILE or set KUBECONFIG"
            )
    if len(paths) == 1:
        check_file(paths[0])
    try:
        await config.load_kube_config(
            config_file=os.pathsep.join(str(p) for p in paths), client_configuration=configuration
        )
    except KubeconfigError:
        raise
    except Exception as exc:  # the library's own errors (bad credentials, unreadable certificate data)
        where = ", ".join(str(p) for p in paths)
        raise KubeconfigError(f"kubeconfig {where}: {exc}") from None
    return configuration


def api_client(configuration: client.Configuration) -> client.ApiClient:
    """An ApiClient that does not look up ~/.netrc and the proxy environment on every request.

    kubernetes-asyncio opens its aiohttp session with trust_env=True: each request then reads the
    netrc file in a thread and the *_PROXY variables in another (two thread hops a request; at a
    controller's rates, most of its CPU in a steady state). The proxy the environment names for
    the API server (HTTPS_PROXY, NO_PROXY, as client-go honours them) is resolved here once."""
    from aiohttp.helpers import get_env_proxy_for_url
    from kubernetes_asyncio import client
    from yarl import URL

    if configuration.proxy is None:
        try:
            proxy, _ = get_env_proxy_for_url(URL(str(configuration.host)))
        except LookupError:  # no proxy for this host
            proxy = None
        if proxy is not None:
            configuration.proxy = str(proxy)
    api = client.ApiClient(configuration=configuration)
    api.rest_client.pool_manager._trust_env = False  # the lookups above, once
    return api
