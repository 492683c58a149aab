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
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from common.settings_errors import report

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
    from adapter.startup import StartupError, serve

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
