"""`infscale loadgate`: take one of N load slots before the engine starts (autoscaler/loadgate.py).

Flags override INFSCALE_LOADGATE_* environment variables, which override the defaults below; the
pod's name and namespace come from POD_NAME / POD_NAMESPACE (the downward API) when not given.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from autoscaler import loadgate
from autoscaler.controller import crd
from common.kubeconfig import KubeconfigError, api_client, load_configuration
from common.listen import ListenAddress, bind_host, parse_listen
from common.settings_errors import configure_logging, report
from common.signals import stop_on_signals

# a Lease name is a DNS subdomain; the storage name is one label of it
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")


class LoadGateSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INFSCALE_LOADGATE_", extra="forbid", frozen=True)

    kubeconfig: Path | None = None  # None: in-cluster service account, else ~/.kube/config
    namespace: str = Field(default_factory=lambda: os.environ.get("POD_NAMESPACE", ""))
    identity: str = Field(default_factory=lambda: os.environ.get("POD_NAME", ""))  # the pod's name
    storage: str = "shared"  # one set of slots per storage the weights are read from
    slots: int | None = Field(default=None, ge=1, le=1000)
    autoscaler: str | None = None  # read N from its spec.coldStart.maxConcurrentLoads instead
    engine_ready_url: str = "http://127.0.0.1:8000/health"  # vLLM's; 2xx means ready
    timeout_s: float = Field(default=loadgate.DEFAULT_TIMEOUT_S, gt=0)
    retry_s: float = Field(default=loadgate.DEFAULT_RETRY_S, gt=0, le=60)
    lease_duration_s: float = Field(default=loadgate.DEFAULT_LEASE_DURATION_S, gt=0)
    # /acquired (the startup probe, which the kubelet sends to the pod IP), /healthz
    listen: ListenAddress = ":8090"
    log_level: str = "INFO"

    @field_validator("storage")
    @classmethod
    def _storage_is_a_label(cls, value: str) -> str:
        if not _LABEL.match(value):
            raise ValueError(f"{value!r} must be a DNS label of at most 40 characters (a-z, 0-9, -)")
        return value

    @model_validator(mode="after")
    def _one_source_of_n(self) -> Self:
        if self.autoscaler == "":  # the downward API gives "" for a label the pod does not have
            raise ValueError("the autoscaler's name is empty: set the pod label infscale.io/autoscaler")
        if (self.slots is None) == (self.autoscaler is None):
            raise ValueError("give exactly one of --slots N or --autoscaler NAME (its maxConcurrentLoads)")
        if not self.namespace or not self.identity:
            raise ValueError("the pod's namespace and name are needed: POD_NAMESPACE and POD_NAME, or flags")
        return self


_FLAGS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("--kubeconfig", "kubeconfig", {"help": "kubeconfig file (default: in-cluster, else ~/.kube/config)"}),
    ("--namespace", "namespace", {"help": "the pod's namespace, where the slot Leases live (POD_NAMESPACE)"}),
    ("--identity", "identity", {"help": "the pod's name, the Leases' holder (POD_NAME)"}),
    ("--storage", "storage", {"help": "the storage the weights come from: one set of slots each"}),
    ("--slots", "slots", {"type": int, "help": "N: replicas loading at once"}),
    ("--autoscaler", "autoscaler", {"help": "read N from this InferenceAutoscaler's coldStart"}),
    ("--engine-ready-url", "engine_ready_url", {"help": "the engine's readiness URL (2xx: ready)"}),
    ("--timeout-seconds", "timeout_s", {"type": float, "help": "give the slot back after this long"}),
    ("--listen", "listen", {"help": "host:port of /acquired and /healthz (default :8090)"}),
    ("--log-level", "log_level", {"help": "DEBUG, INFO, WARNING, ERROR"}),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for flag, dest, kwargs in _FLAGS:
        parser.add_argument(flag, dest=dest, default=None, **kwargs)


class GateError(Exception):
    """A problem the gate cannot start with, named in one line."""


async def slots_of(kube: Any, namespace: str, name: str) -> int:
    """spec.coldStart.maxConcurrentLoads of the InferenceAutoscaler."""
    from autoscaler.controller.kube import KubeError

    path = f"/apis/{crd.GROUP}/{crd.VERSION}/namespaces/{quote(namespace)}/{crd.PLURAL}/{quote(name)}"
    try:
        obj = await kube.request("GET", path, what=f"get {crd.KIND} {namespace}/{name}")
    except KubeError as exc:
        raise GateError(str(exc)) from exc
    n = ((obj.get("spec") or {}).get("coldStart") or {}).get("maxConcurrentLoads")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise GateError(f"{crd.KIND} {namespace}/{name} sets no spec.coldStart.maxConcurrentLoads")
    return n


async def _serve(settings: LoadGateSettings) -> int:
    import aiohttp
    from aiohttp import web

    from autoscaler.controller.kube import KubeClient

    configuration = await load_configuration(settings.kubeconfig)
    api = api_client(configuration)
    kube = KubeClient(api)
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2.0))
    runner: web.AppRunner | None = None
    try:
        slots = settings.slots or await slots_of(kube, settings.namespace, settings.autoscaler or "")
        gate = loadgate.LoadGate(
            kube,
            namespace=settings.namespace,
            storage=settings.storage,
            slots=slots,
            identity=settings.identity,
            lease_duration_s=settings.lease_duration_s,
            renew_deadline_s=settings.lease_duration_s * 2 / 3,
        )

        async def acquired(_: web.Request) -> web.Response:
            if gate.status.acquired:
                return web.Response(text=f"ok ({gate.status.released_because or 'holding'})\n")
            return web.Response(status=503, text=f"waiting for one of {slots} slot(s)\n")

        async def healthz(_: web.Request) -> web.Response:
            return web.Response(text="ok\n")

        async def engine_ready() -> bool:
            try:
                async with session.get(settings.engine_ready_url) as response:
                    return 200 <= response.status < 300
            except (aiohttp.ClientError, TimeoutError):
                return False

        app = web.Application()
        app.add_routes([web.get("/acquired", acquired), web.get("/healthz", healthz)])
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        host, port = parse_listen(settings.listen)
        await web.TCPSite(runner, bind_host(host), port).start()
        stop = stop_on_signals()
        logging.getLogger(__name__).info(
            "load gate %s: %d slot(s) for storage %s in %s",
            settings.identity,
            slots,
            settings.storage,
            settings.namespace,
        )
        await loadgate.hold(
            gate,
            engine_ready,
            clock=time.time,
            sleep=asyncio.sleep,
            stop=stop,
            retry_s=settings.retry_s,
            timeout_s=settings.timeout_s,
        )
        await stop.wait()  # a native sidecar that exits is restarted: stay until the pod goes
        return 0
    finally:
        if runner is not None:
            await runner.cleanup()
        await session.close()
        await api.close()


def run(args: argparse.Namespace) -> int:
    overrides = {dest: getattr(args, dest) for _, dest, _ in _FLAGS if getattr(args, dest, None) is not None}
    try:
        settings = LoadGateSettings(**overrides)
    except ValidationError as exc:
        return report("infscale loadgate", exc, {dest: flag for flag, dest, _ in _FLAGS})
    configure_logging(settings.log_level)
    try:
        return asyncio.run(_serve(settings))
    except (KubeconfigError, GateError) as exc:
        print(f"infscale loadgate: {exc}", file=sys.stderr)
        return 1
