"""`infscale adapter`: run the External Metrics API server.

Quick start, no config file (plain HTTP, no auth, development only):

    infscale adapter --insecure-dev --listen 127.0.0.1:8443 \\
        --endpoints http://10.0.0.5:8000/metrics,http://10.0.0.6:8000/metrics --engine vllm

On a cluster: `--tls-cert-file/--tls-private-key-file` and a catalog (`--catalog FILE` or a
`catalog:` section in `--config FILE`). Every flag also reads from `INFSCALE_ADAPTER_<NAME>` and
from the config file; flags win (adapter/settings.py).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from common.listen import bind_host
from common.settings_errors import report
from common.signals import stop_on_signals

if TYPE_CHECKING:
    from cryptography import x509

    from adapter.frontproxy import RequestHeaderConfig
    from adapter.settings import AdapterSettings

log = logging.getLogger("infscale.adapter")

# flag -> (settings field, type, help); every default is None/absent so only given flags override
_FLAGS: list[tuple[str, str, Any, str]] = [
    ("--config", "config_file", Path, "YAML/JSON config file with any of these settings"),
    ("--listen", "listen", str, "host:port to serve on (default 0.0.0.0:6443)"),
    ("--tls-cert-file", "tls_cert_file", Path, "serving certificate (PEM); reloaded when it changes"),
    ("--tls-private-key-file", "tls_private_key_file", Path, "key of the serving certificate"),
    ("--tls-reload-interval-s", "tls_reload_interval_s", float, "how often to check the files (default 10)"),
    ("--kubeconfig", "kubeconfig", Path, "kubeconfig for TokenReview/SAR (default: in-cluster)"),
    (
        "--requestheader-client-ca-file",
        "requestheader_client_ca_file",
        Path,
        "front-proxy CA (default: ConfigMap)",
    ),
    (
        "--requestheader-allowed-names",
        "requestheader_allowed_names",
        str,
        "allowed front-proxy CNs, comma-separated",
    ),
    ("--requestheader-username-headers", "requestheader_username_headers", str, "default X-Remote-User"),
    ("--requestheader-group-headers", "requestheader_group_headers", str, "default X-Remote-Group"),
    (
        "--requestheader-extra-headers-prefix",
        "requestheader_extra_headers_prefix",
        str,
        "default X-Remote-Extra-",
    ),
    ("--requestheader-uid-headers", "requestheader_uid_headers", str, "default none"),
    ("--client-ca-file", "client_ca_file", Path, "CA of x509 client users (CN = user, O = groups)"),
    (
        "--authentication-refresh-s",
        "authentication_refresh_s",
        float,
        "ConfigMap re-read period (default 60)",
    ),
    ("--auth-cache-ttl-s", "auth_cache_ttl_s", float, "TokenReview/SAR cache TTL, ≤ 10 (default 10)"),
    ("--auth-timeout-s", "auth_timeout_s", float, "TokenReview/SAR timeout (default 10)"),
    (
        "--auth-failed-token-burst",
        "auth_failed_token_burst",
        float,
        "invalid bearer tokens reviewed per client before the rate applies (default 10)",
    ),
    (
        "--auth-failed-tokens-per-s",
        "auth_failed_tokens_per_s",
        float,
        "then this many a second per client; more get 429 (default 1)",
    ),
    (
        "--auth-cache-size",
        "auth_cache_size",
        int,
        "entries in each auth cache: tokens, decisions, certificates, clients (default 4096)",
    ),
    ("--backend-timeout-s", "backend_timeout_s", float, "metric read timeout (default 10)"),
    ("--max-connections", "max_connections", int, "client connections open at once (default 1000)"),
    (
        "--header-read-timeout-s",
        "header_read_timeout_s",
        float,
        "TLS handshake plus request head must arrive within this (default 32)",
    ),
    (
        "--idle-timeout-s",
        "idle_timeout_s",
        float,
        "close a kept-alive connection idle this long (default 90)",
    ),
    ("--log-level", "log_level", str, "DEBUG, INFO, WARNING or ERROR (default INFO)"),
    ("--catalog", "catalog_file", Path, "metric catalog file (YAML/JSON; see docs/adapter-sources.md)"),
    ("--endpoints", "endpoints", str, "quick start: engine /metrics URLs, comma-separated"),
    ("--engine", "engine", str, "quick start: engine preset of --endpoints (default vllm)"),
]
_SWITCHES: list[tuple[str, str, str]] = [
    ("--insecure-dev", "insecure_dev", "NO authentication or authorization; plain HTTP unless TLS is set"),
    ("--self-signed-dev", "self_signed_dev", "serve a throwaway self-signed certificate (development)"),
    ("--access-log", "access_log", "log every request"),
]
_DELEGATE_FLAGS: list[tuple[str, str, Any, str]] = [
    ("--delegate-url", "url", str, "forward reads of unknown metrics to this external-metrics server"),
    ("--delegate-ca-file", "ca_file", Path, "CA of the delegate's serving certificate"),
    ("--delegate-cert-file", "cert_file", Path, "front-proxy client certificate for the delegate"),
    ("--delegate-key-file", "key_file", Path, "its key"),
    ("--delegate-token-file", "token_file", Path, "bearer token file for the delegate"),
    ("--delegate-timeout-s", "timeout_s", float, "delegate timeout (default 5)"),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for flag, field, kind, help_text in _FLAGS:
        parser.add_argument(
            flag, dest=field, type=kind, default=argparse.SUPPRESS, help=help_text, metavar=_metavar(flag)
        )
    for flag, field, help_text in _SWITCHES:
        parser.add_argument(flag, dest=field, action="store_true", default=argparse.SUPPRESS, help=help_text)
    parser.add_argument(
        "--keda-endpoint",
        dest="keda_endpoint",
        action=argparse.BooleanOptionalAction,
        default=argparse.SUPPRESS,
        help="serve /keda/v1/namespaces/{ns}/{metric} for KEDA's metrics-api trigger (default on)",
    )
    group = parser.add_argument_group("delegation (co-existence with KEDA or prometheus-adapter)")
    for flag, field, kind, help_text in _DELEGATE_FLAGS:
        group.add_argument(
            flag,
            dest=f"delegate.{field}",
            type=kind,
            default=argparse.SUPPRESS,
            help=help_text,
            metavar=_metavar(flag),
        )
    group.add_argument(
        "--delegate-insecure-skip-tls-verify",
        dest="delegate.insecure_skip_tls_verify",
        action="store_true",
        default=argparse.SUPPRESS,
        help="do not verify the delegate's certificate (development only)",
    )


def _metavar(flag: str) -> str:
    """`--tls-cert-file` -> FILE, `--auth-timeout-s` -> S, `--listen` -> LISTEN."""
    return flag.rsplit("-", 1)[-1].upper()


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the flags give; delegate flags form one `delegate` section."""
    values = {k: v for k, v in vars(args).items() if k != "command"}
    delegate = {k.removeprefix("delegate."): values.pop(k) for k in list(values) if k.startswith("delegate.")}
    if delegate:
        values["delegate"] = delegate
    return values


def run(args: argparse.Namespace) -> int:
    from adapter.catalogconfig import CatalogError
    from adapter.settings import AdapterSettings, SettingsFileError

    try:
        settings = AdapterSettings(**overrides(args))
        settings.catalog_settings()  # fail here, with the field named, not after start-up
    except ValidationError as exc:
        return report("infscale adapter", exc)
    except (SettingsFileError, CatalogError) as exc:
        print(f"infscale adapter: {exc}", file=sys.stderr)
        return 2
    from adapter.logs import configure

    configure(settings.log_level)  # one line per record: control characters escaped
    from adapter.memory import tune_allocator

    tune_allocator()  # freed buffers go back to the kernel (adapter/memory.py)
    # the scrape source's parse thread holds the GIL ~0.3 s for a 10,000-series pod; at Python's
    # 5 ms switch interval each wake-up of the event loop waited up to 5 ms for it (/healthz p99
    # under `python -m bench attack flood` 156 -> 48-86 ms at load ~5)
    sys.setswitchinterval(0.0005)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per scrape would drown the rest
    try:
        asyncio.run(serve(settings))
    except StartupError as exc:
        log.error("%s", exc)
        return 1
    return 0


class StartupError(Exception):
    """The server cannot start (port taken, certificate unreadable, kube-apiserver unreachable)."""


async def serve(settings: AdapterSettings, stop: asyncio.Event | None = None) -> None:
    """Run until SIGTERM/SIGINT (or `stop` is set)."""
    from aiohttp import web

    from adapter.auth import Access, DelegatedAccess, InsecureDevAccess, KubeReviewer
    from adapter.catalog import build_catalog
    from adapter.connections import ConnectionLimits, start_site
    from adapter.delegate import Delegate
    from adapter.frontproxy import read_request_header_configmap, refresh_request_header
    from adapter.identity import ReviewFailed
    from adapter.server import ServerConfig, create_app
    from adapter.sources import SourceError
    from adapter.telemetry import Telemetry
    from adapter.tls import ServingTLS, TLSConfigError, self_signed_dev

    stop = stop_on_signals(stop)
    catalog_settings = settings.catalog_settings()
    background: list[Callable[[], Awaitable[None]]] = []
    async with AsyncExitStack() as stack:
        kube = None
        if not settings.insecure_dev or catalog_settings.kubernetes is not None:
            from adapter.sources.discovery import kube_api_client  # loads the Kubernetes client

            try:
                kube = await stack.enter_async_context(kube_api_client(settings.kubeconfig))
            except Exception as exc:
                raise StartupError(
                    f"no Kubernetes API access (needed for auth and pod discovery): {exc}"
                ) from exc

        # serving TLS
        tls: ServingTLS | None = None
        if settings.tls_enabled:
            if settings.self_signed_dev:
                cert, key = self_signed_dev()
            else:
                assert settings.tls_cert_file and settings.tls_private_key_file  # checked by the settings
                cert, key = settings.tls_cert_file, settings.tls_private_key_file
            try:
                tls = ServingTLS(cert, key)
            except TLSConfigError as exc:
                raise StartupError(str(exc)) from exc
            if not settings.self_signed_dev:
                watched, interval = tls, settings.tls_reload_interval_s
                background.append(lambda: watched.watch(interval))

        # who may ask
        access: Access
        if settings.insecure_dev:
            access = InsecureDevAccess()
            if tls is None:
                log.warning(
                    "INSECURE DEV MODE: plain HTTP on %s; metric values and requests are unencrypted",
                    settings.listen,
                )
        else:
            assert kube is not None and tls is not None  # the settings demand both
            request_header = await _request_header(settings, kube, read_request_header_configmap)
            client_cas = await _client_cas(settings, kube)
            delegated = DelegatedAccess(
                KubeReviewer(kube, settings.auth_timeout_s),
                request_header,
                cache_ttl_s=settings.auth_cache_ttl_s,
                client_cas=client_cas,
                failed_token_burst=settings.auth_failed_token_burst,
                failed_tokens_per_s=settings.auth_failed_tokens_per_s,
                cache_size=settings.auth_cache_size,
            )
            access = delegated
            if request_header is not None:
                tls.add_client_ca(request_header.ca_pem)
            for ca in client_cas:
                from cryptography.hazmat.primitives.serialization import Encoding

                tls.add_client_ca(ca.public_bytes(Encoding.PEM))
            if settings.requestheader_client_ca_file is None:
                serving_tls = tls

                def apply_tls(config: RequestHeaderConfig | None) -> None:
                    if config is not None:
                        serving_tls.add_client_ca(config.ca_pem)

                async def load() -> RequestHeaderConfig | None:
                    return await read_request_header_configmap(kube, settings.auth_timeout_s)

                refresh_s = settings.authentication_refresh_s
                background.append(
                    lambda: refresh_request_header(
                        load, [apply_tls, delegated.set_request_header], refresh_s, request_header
                    )
                )
            if request_header is None:
                log.warning(
                    "front-proxy authentication is OFF (no request-header CA): the aggregator's requests "
                    "will be refused; only bearer tokens%s are accepted",
                    " and client certificates" if client_cas else "",
                )

        telemetry = Telemetry()
        try:
            backend = await stack.enter_async_context(
                build_catalog(catalog_settings, telemetry, kube_client=kube)
            )
        except (ReviewFailed, SourceError) as exc:
            raise StartupError(str(exc)) from exc
        limits = ConnectionLimits(
            max_connections=settings.max_connections,
            header_read_timeout_s=settings.header_read_timeout_s,
            idle_timeout_s=settings.idle_timeout_s,
        )
        delegate = None
        if settings.delegate is not None:
            try:
                delegate = await stack.enter_async_context(Delegate(settings.delegate))
            except ValueError as exc:  # a TLS file that cannot be used, named
                raise StartupError(str(exc)) from exc
        app = create_app(
            backend,
            access,
            telemetry,
            delegate=delegate,
            config=ServerConfig(
                backend_timeout_s=settings.backend_timeout_s,
                keda_endpoint=settings.keda_endpoint,
                connections=limits,
            ),
            background=background,
        )
        runner = web.AppRunner(
            app,
            access_log=logging.getLogger("aiohttp.access") if settings.access_log else None,
            # a backstop only: the guard's own timers close idle and unfinished connections first
            keepalive_timeout=limits.idle_timeout_s + limits.header_read_timeout_s,
        )
        await runner.setup()
        host, port = settings.listen_address()
        try:
            site = await start_site(runner, bind_host(host), port, ssl_context=tls.context if tls else None)
        except OSError as exc:
            await runner.cleanup()
            raise StartupError(f"cannot listen on {settings.listen}: {exc}") from exc
        scheme = "https" if tls else "http"
        log.info("serving external.metrics.k8s.io/v1beta1 on %s://%s:%d", scheme, host, port)
        try:
            await stop.wait()
        finally:
            log.info("shutting down")
            site.close()
            await runner.cleanup()


async def _client_cas(settings: AdapterSettings, kube: Any) -> tuple[x509.Certificate, ...]:
    """CAs of x509 client users: `--client-ca-file`, else the kube-system ConfigMap's
    `client-ca-file` (as Go's delegated authentication does), read once at start-up."""
    from adapter.frontproxy import load_ca_bundle, read_client_ca_configmap
    from adapter.identity import ReviewFailed

    if settings.client_ca_file is not None:
        try:
            return load_ca_bundle(settings.client_ca_file.read_bytes(), str(settings.client_ca_file))
        except (OSError, ValueError) as exc:
            raise StartupError(f"client_ca_file {settings.client_ca_file}: {exc}") from exc
    try:
        pem = await read_client_ca_configmap(kube, settings.auth_timeout_s)
        return load_ca_bundle(pem, "ConfigMap client-ca-file") if pem else ()
    except (ReviewFailed, ValueError) as exc:
        raise StartupError(str(exc)) from exc


async def _request_header(
    settings: AdapterSettings,
    kube: Any,
    read_configmap: Callable[[Any, float], Awaitable[RequestHeaderConfig | None]],
) -> RequestHeaderConfig | None:
    """Front-proxy settings from the flags, else from the kube-system ConfigMap."""
    from adapter.frontproxy import RequestHeaderConfig
    from adapter.identity import ReviewFailed

    if settings.requestheader_client_ca_file is not None:
        try:
            return RequestHeaderConfig(
                ca_pem=settings.requestheader_client_ca_file.read_bytes(),
                allowed_names=settings.requestheader_allowed_names,
                username_headers=settings.requestheader_username_headers,
                group_headers=settings.requestheader_group_headers,
                extra_prefixes=settings.requestheader_extra_headers_prefix,
                uid_headers=settings.requestheader_uid_headers,
            )
        except (OSError, ValueError) as exc:
            raise StartupError(
                f"requestheader_client_ca_file {settings.requestheader_client_ca_file}: {exc}"
            ) from exc
    try:
        return await read_configmap(kube, settings.auth_timeout_s)
    except (ReviewFailed, ValueError) as exc:
        raise StartupError(str(exc)) from exc
