"""`infscale controller` settings: flags and INFSCALE_CONTROLLER_* environment, defaults written once here.

Precedence, highest first: command-line flags, environment, the defaults below.
"""

from __future__ import annotations

import os
import socket
from enum import StrEnum
from pathlib import Path
from typing import Self
from uuid import uuid4

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from autoscaler.policy.spec import DEFAULT_DOWNSCALE_STABILIZATION_S, DEFAULT_TOLERANCE
from common.listen import ListenAddress, parse_listen

ENV_PREFIX = "INFSCALE_CONTROLLER_"


class MetricsSource(StrEnum):
    API = "api"  # the kube-apiserver's aggregated External Metrics API, as the HPA reads it
    ADAPTER = "adapter"  # straight from the adapter's URL (one hop less, no aggregation layer)


def _default_identity() -> str:
    # the pod name (hostname) plus a random suffix: a restarted pod is a new candidate
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid4().hex[:8]}"


class ControllerSettings(BaseSettings):
    """Everything `infscale controller` needs. Defaults are the values below."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    kubeconfig: Path | None = None  # None: in-cluster service account, else ~/.kube/config
    namespace: str | None = None  # watch InferenceAutoscalers in this namespace only; None: all

    # each object is reconciled on every change it cares about, and at least this often (upstream's
    # --horizontal-pod-autoscaler-sync-period): the resync bounds how late a window's end is acted on
    tick_s: float = Field(default=15.0, gt=0, le=600)
    # each resync falls on a multiple of this (rounded down: never later than tick_s), so objects
    # falling due close together share one wake-up of the process, which costs more than a steady
    # reconcile's own work; 0 (or not shorter than tick_s): each object tick_s after its last reconcile
    resync_align_s: float = Field(default=0.25, ge=0)
    concurrency: int = Field(default=16, ge=1, le=1000)  # objects reconciled at once
    request_timeout_s: float = Field(default=5.0, gt=0)  # per kube-apiserver / adapter request
    scale_conflict_retries: int = Field(default=3, ge=0, le=10)  # 409 on /scale: re-read, decide again
    # a status whose only change is the policy state (forecasts, windows) is written at most this often;
    # counts, conditions and scale writes are written at once, and an unchanged status never
    status_interval_s: float = Field(default=15.0, ge=0)

    # metrics
    metrics_source: MetricsSource = MetricsSource.API
    adapter_url: str | None = (
        None  # required with metrics_source=adapter, e.g. https://infscale-adapter.infscale.svc
    )
    adapter_ca_file: Path | None = None  # verify the adapter's certificate with this CA
    adapter_insecure_skip_verify: bool = False
    max_metric_age_s: float | None = Field(default=60.0, gt=0)  # older samples count as missing
    # one read per (namespace, metric) every metrics_interval_s, each autoscaler's series picked out
    # of it (metriccache.py); stretched so that no more than metrics_max_reads_per_s are made
    metrics_batch: bool = True  # false: one read per autoscaler and metric, at its reconcile
    metrics_interval_s: float = Field(default=0.5, gt=0, le=600)
    metrics_max_reads_per_s: float = Field(default=20.0, gt=0)

    # cluster flags of the HPA, applied to every object
    tolerance: float = Field(default=DEFAULT_TOLERANCE, ge=0)
    downscale_stabilization_s: int = Field(default=DEFAULT_DOWNSCALE_STABILIZATION_S, ge=0)

    # learned cold starts
    cold_start_samples: int = Field(default=32, ge=1, le=256)  # newest startups kept per target
    max_startup_s: float = Field(default=3600.0, gt=0)  # longer creation -> ready is not a startup

    # leader election (client-go's defaults)
    leader_elect: bool = True
    lease_name: str = "infscale-controller"
    lease_namespace: str = "infscale-system"
    lease_duration_s: float = Field(default=15.0, gt=0)
    renew_deadline_s: float = Field(default=10.0, gt=0)
    retry_period_s: float = Field(default=2.0, gt=0)
    identity: str = Field(default_factory=_default_identity)
    # the controller's own pod (the downward API sets both): where a missing CRD is reported
    pod_name: str | None = Field(default_factory=lambda: os.environ.get("POD_NAME") or None)
    pod_namespace: str | None = Field(default_factory=lambda: os.environ.get("POD_NAMESPACE") or None)

    # telemetry, health, and mode hpa's infscale_desired_replicas (publish.py)
    listen: ListenAddress = "0.0.0.0:8080"
    publish_max_age_s: float = Field(default=60.0, gt=0)  # older recommendations are not served
    log_level: str = "INFO"

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if not self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError(
                "leader election needs retry_period_s < renew_deadline_s < lease_duration_s, got "
                f"{self.retry_period_s:g} < {self.renew_deadline_s:g} < {self.lease_duration_s:g}"
            )
        if self.metrics_source is MetricsSource.ADAPTER and not self.adapter_url:
            raise ValueError("adapter_url is required when metrics_source is 'adapter'")
        return self

    @property
    def listen_host_port(self) -> tuple[str, int]:
        """(host, port); host "" is every interface (common/listen.py)."""
        return parse_listen(self.listen)
