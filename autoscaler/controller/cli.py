"""`infscale controller`: run the predictive controller (leader election, loop, /metrics and probes).

Flags override INFSCALE_CONTROLLER_* environment variables, which override the defaults in
autoscaler/controller/settings.py. SIGTERM releases the lease, so the standby takes over at once.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from pydantic import ValidationError

from autoscaler.controller.settings import ControllerSettings, MetricsSource
from common.kubeconfig import KubeconfigError, api_client, load_configuration
from common.listen import bind_host
from common.settings_errors import configure_logging, report
from common.signals import stop_on_signals

_FLAGS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("--kubeconfig", "kubeconfig", {"help": "kubeconfig file (default: in-cluster, else ~/.kube/config)"}),
    (
        "--namespace",
        "namespace",
        {"help": "watch InferenceAutoscalers in this namespace only (default: all)"},
    ),
    (
        "--tick-seconds",
        "tick_s",
        {
            "type": float,
            "help": "each object is reconciled on its changes and at least this often (default 15)",
        },
    ),
    (
        "--metrics-source",
        "metrics_source",
        {
            "choices": [m.value for m in MetricsSource],
            "help": "External Metrics API (api) or the adapter URL",
        },
    ),
    ("--adapter-url", "adapter_url", {"help": "the adapter's base URL, with --metrics-source adapter"}),
    ("--listen", "listen", {"help": "host:port of /metrics and the probes (default 0.0.0.0:8080)"}),
    ("--lease-namespace", "lease_namespace", {"help": "namespace of the leader-election Lease"}),
    ("--lease-name", "lease_name", {"help": "name of the leader-election Lease"}),
    (
        "--identity",
        "identity",
        {"help": "this replica's leader-election identity (default: hostname_random)"},
    ),
    ("--log-level", "log_level", {"help": "DEBUG, INFO, WARNING, ERROR"}),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for flag, dest, kwargs in _FLAGS:
        parser.add_argument(flag, dest=dest, default=None, **kwargs)
    parser.add_argument(
        "--no-leader-elect",
        dest="leader_elect",
        action="store_false",
        default=None,
        help="act without a Lease (one replica only)",
    )


def settings_from(args: argparse.Namespace) -> ControllerSettings:
    overrides = {dest: getattr(args, dest) for _, dest, _ in _FLAGS if getattr(args, dest, None) is not None}
    if getattr(args, "leader_elect", None) is not None:
        overrides["leader_elect"] = args.leader_elect
    return ControllerSettings(**overrides)


async def _serve(settings: ControllerSettings) -> int:
    import time

    from aiohttp import web

    from autoscaler.controller import publish
    from autoscaler.controller.driver import run
    from autoscaler.controller.kube import KubeClient
    from autoscaler.controller.leader import LeaderElector
    from autoscaler.controller.loop import Controller
    from autoscaler.controller.metrics import AdapterMetricsReader, ApiMetricsReader, MetricsReader
    from autoscaler.controller.telemetry import Telemetry, make_app

    configuration = await load_configuration(settings.kubeconfig)
    api = api_client(configuration)
    kube = KubeClient(api, timeout_s=settings.request_timeout_s)
    reader: MetricsReader
    if settings.metrics_source is MetricsSource.ADAPTER:
        assert settings.adapter_url is not None
        reader = AdapterMetricsReader(
            settings.adapter_url,
            timeout_s=settings.request_timeout_s,
            ca_file=settings.adapter_ca_file,
            insecure_skip_verify=settings.adapter_insecure_skip_verify,
        )
    else:
        reader = ApiMetricsReader(kube)
    elector = None
    if settings.leader_elect:
        elector = LeaderElector(
            kube,
            namespace=settings.lease_namespace,
            name=settings.lease_name,
            identity=settings.identity,
            lease_duration_s=settings.lease_duration_s,
            renew_deadline_s=settings.renew_deadline_s,
        )
    telemetry = Telemetry()
    telemetry.health.stall_after_s = max(60.0, 3 * settings.retry_period_s + settings.request_timeout_s)
    controller = Controller(settings, kube, reader, telemetry=telemetry, elector=elector, clock=time.time)

    async def cached_autoscalers(namespace: str) -> list[dict[str, Any]]:
        """mode hpa's reads come from the cache (the standby's is warm too): no LIST per HPA read."""
        informer = controller.caches.autoscalers
        if not informer.synced.is_set():
            raise RuntimeError(
                f"the {informer.name} cache is not synced yet: {informer.last_error or 'listing'}"
            )
        return [o for o in informer.items() if (o.get("metadata") or {}).get("namespace") == namespace]

    external = publish.handler(cached_autoscalers, time.time, settings.publish_max_age_s)
    runner = web.AppRunner(make_app(telemetry, time.time, external), access_log=None)
    await runner.setup()
    host, port = settings.listen_host_port
    await web.TCPSite(runner, bind_host(host), port).start()
    stop = stop_on_signals()
    logging.getLogger(__name__).info(
        "infscale controller %s: each object at least every %g s, metrics from %s every %g s, "
        "/metrics on %s, policy core %s",
        settings.identity,
        settings.tick_s,
        settings.metrics_source,
        settings.metrics_interval_s,
        settings.listen,
        _core(),
    )
    try:
        await run(controller, stop, retry_period_s=settings.retry_period_s)
    finally:
        await runner.cleanup()
        await reader.close()
        await api.close()
    return 0


def _core() -> str:
    """Which policy core decides: the sources, or the compiled build (INFSCALE_COMPILED_CORE)."""
    from autoscaler.compiledcore import compiled

    modules = compiled()
    return f"compiled by mypyc ({len(modules)} modules)" if modules else "from its Python sources"


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from(args)
    except ValidationError as exc:
        return report("infscale controller", exc, {dest: flag for flag, dest, _ in _FLAGS})
    configure_logging(settings.log_level)
    try:
        return asyncio.run(_serve(settings))
    except KubeconfigError as exc:  # started without a cluster, or a broken kubeconfig: one line
        print(f"infscale controller: {exc}", file=sys.stderr)
        return 1
