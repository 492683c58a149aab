"""The adapter's start-up and life (`infscale adapter` runs it, adapter/cli.py): Kubernetes access,
serving TLS, who may ask (delegated auth, front-proxy and client CAs), the catalog of metric
sources, the delegate, then the server until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from common.listen import bind_host
from common.signals import stop_on_signals

if TYPE_CHECKING:
    from cryptography import x509

    from adapter.frontproxy import RequestHeaderConfig
    from adapter.settings import AdapterSettings

log = logging.getLogger("infscale.adapter")


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
