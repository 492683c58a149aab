"""`infscale adapter` settings: flags, environment (`INFSCALE_ADAPTER_*`) and a YAML/JSON config file.

Precedence, highest first: command-line flags, environment, config file, the defaults below (the
one place they are written). The metric catalog is B's `CatalogSettings` (adapter/catalog.py):
inline under `catalog:` in the config file, from `--catalog FILE`, or built by the quick-start flags
`--endpoints URL[,URL…] --engine vllm`.

Example config file (YAML; JSON works too):

    listen: 0.0.0.0:6443
    tls_cert_file: /tls/tls.crt
    tls_private_key_file: /tls/tls.key
    catalog:
      engine: vllm
      kubernetes: {namespace: llm, label_selector: app.kubernetes.io/component=engine}
    delegate:
      url: https://keda-operator-metrics-apiserver.keda.svc:443
      ca_file: /keda-ca/ca.crt
      token_file: /var/run/secrets/kubernetes.io/serviceaccount/token
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Self

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from adapter.auth import MAX_CACHE_TTL_S
from adapter.catalogconfig import CatalogError, CatalogSettings
from adapter.delegate import DelegateSettings
from common.listen import ListenAddress, parse_listen
from common.settings_errors import describe

ENV_PREFIX = "INFSCALE_ADAPTER_"

CommaList = Annotated[tuple[str, ...], NoDecode]  # `a,b` from flags and environment, a list in files


class SettingsFileError(ValueError):
    """A config file that cannot be read; the message names the file."""


class _ConfigFileSource(PydanticBaseSettingsSource):
    """The YAML/JSON config file named by `config_file` (flag) or INFSCALE_ADAPTER_CONFIG_FILE."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None) -> None:
        super().__init__(settings_cls)
        self._path = path

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads the whole file at once

    def __call__(self) -> dict[str, Any]:
        if self._path is None:
            return {}
        try:
            data = yaml.safe_load(self._path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise SettingsFileError(f"config file {self._path}: cannot read it: {exc}") from exc
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise SettingsFileError(f"config file {self._path}: must be a mapping, got {type(data).__name__}")
        return data


class AdapterSettings(BaseSettings):
    """Everything `infscale adapter` needs. Defaults are the values below."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    config_file: Path | None = None
    listen: ListenAddress = "0.0.0.0:6443"  # host:port; [v6]:port

    # TLS: required unless --insecure-dev
    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None
    tls_reload_interval_s: float = Field(default=10.0, gt=0)  # how often the files are checked
    self_signed_dev: bool = False  # a throwaway certificate: development only

    # no authentication, no authorization; plain HTTP unless TLS is configured
    insecure_dev: bool = False

    # authentication and authorization (ignored with insecure_dev)
    kubeconfig: Path | None = None  # None: in-cluster service account, else ~/.kube/config
    requestheader_client_ca_file: Path | None = None  # None: read the kube-system ConfigMap
    requestheader_allowed_names: CommaList = ()
    requestheader_username_headers: CommaList = ("X-Remote-User",)
    requestheader_group_headers: CommaList = ("X-Remote-Group",)
    requestheader_extra_headers_prefix: CommaList = ("X-Remote-Extra-",)
    requestheader_uid_headers: CommaList = ()
    client_ca_file: Path | None = None  # optional: x509 users (CN = user, O = groups)
    authentication_refresh_s: float = Field(default=60.0, gt=0)  # ConfigMap re-read period
    auth_cache_ttl_s: float = Field(default=10.0, ge=0, le=MAX_CACHE_TTL_S)
    auth_timeout_s: float = Field(default=10.0, gt=0)
    # invalid bearer tokens one client may have reviewed: a burst, then this many a second
    auth_failed_token_burst: float = Field(default=10.0, ge=1)
    auth_failed_tokens_per_s: float = Field(default=1.0, gt=0)
    # entries in each auth cache (tokens, access decisions, certificates, failure budgets by client)
    auth_cache_size: int = Field(default=4096, ge=1)

    # serving
    backend_timeout_s: float = Field(default=10.0, gt=0)
    # client connections (adapter/connections.py): k8s.io/apiserver's 32 s and 90 s
    max_connections: int = Field(default=1000, ge=1)
    header_read_timeout_s: float = Field(default=32.0, gt=0)
    idle_timeout_s: float = Field(default=90.0, gt=0)
    keda_endpoint: bool = True  # /keda/v1/namespaces/{ns}/{metric} for KEDA's metrics-api trigger
    access_log: bool = False
    log_level: str = "INFO"

    # where the numbers come from: exactly one of catalog, catalog_file, endpoints
    catalog: CatalogSettings | None = None
    catalog_file: Path | None = None
    endpoints: CommaList = ()  # quick start: engine /metrics URLs, served in every namespace
    engine: str = "vllm"  # quick start: engine preset of those URLs

    delegate: DelegateSettings | None = None  # where reads of unknown metrics go

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        path = None
        if isinstance(init_settings, InitSettingsSource):
            path = init_settings.init_kwargs.get("config_file")
        path = path or os.environ.get(f"{ENV_PREFIX}CONFIG_FILE")
        return init_settings, env_settings, _ConfigFileSource(settings_cls, Path(path) if path else None)

    @field_validator(
        "requestheader_allowed_names",
        "requestheader_username_headers",
        "requestheader_group_headers",
        "requestheader_extra_headers_prefix",
        "requestheader_uid_headers",
        "endpoints",
        mode="before",
    )
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(v.strip() for v in value.split(",") if v.strip())
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        level = value.upper()
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ValueError(f"log_level {value!r} must be one of DEBUG, INFO, WARNING, ERROR")
        return level

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if (self.tls_cert_file is None) != (self.tls_private_key_file is None):
            raise ValueError("tls_cert_file and tls_private_key_file go together: give both or neither")
        if self.self_signed_dev and self.tls_cert_file is not None:
            raise ValueError(
                "self_signed_dev makes its own certificate: drop tls_cert_file/tls_private_key_file"
            )
        if not self.insecure_dev and self.tls_cert_file is None and not self.self_signed_dev:
            raise ValueError(
                "TLS is required: give --tls-cert-file and --tls-private-key-file, or --self-signed-dev "
                "(development), or --insecure-dev (plain HTTP, no auth; development only)"
            )
        given = [
            n for n, v in (("catalog", self.catalog), ("catalog_file", self.catalog_file)) if v is not None
        ]
        if self.endpoints:
            given.append("endpoints")
        if len(given) > 1:
            raise ValueError(f"give exactly one metrics source, got {' and '.join(given)}")
        if not given:
            raise ValueError(
                "no metrics source: give --endpoints URL[,URL…] (quick start), --catalog FILE, "
                "or a catalog: section in the config file"
            )
        if "engine" in self.model_fields_set and not self.endpoints:
            # it would be ignored: a catalog names its own engine
            raise ValueError(
                f"engine {self.engine!r} goes with endpoints (quick start); "
                "with a catalog, set engine: in the catalog"
            )
        return self

    @property
    def tls_enabled(self) -> bool:
        return self.tls_cert_file is not None or self.self_signed_dev

    def listen_address(self) -> tuple[str, int]:
        return parse_listen(self.listen)

    def catalog_settings(self) -> CatalogSettings:
        """The catalog from whichever of the three forms was given; CatalogError names the problem."""
        if self.catalog is not None:
            return self.catalog
        if self.catalog_file is not None:
            return CatalogSettings.from_file(self.catalog_file)
        try:
            return CatalogSettings.quick_start(self.endpoints, self.engine)
        except ValidationError as exc:  # one line, naming the flag, without pydantic's dump and URL
            lines = (
                line if line.startswith("--") else f"--endpoints/--engine: {line}" for line in describe(exc)
            )
            raise CatalogError("; ".join(lines)) from exc
        except ValueError as exc:
            raise CatalogError(f"--endpoints/--engine: {exc}") from exc
