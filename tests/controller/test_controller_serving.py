"""The controller's edges over real HTTP: /metrics and the probes, the adapter reader (httpx against the
fake's External Metrics path), and `infscale controller` as a process against the fake kube-apiserver."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer
from controller_harness import FAST, NAME, NS, QUEUE, T0, autoscaler, environment, only
from fake_apiserver import FakeKube, serve

from autoscaler.controller.kubetime import rfc3339
from autoscaler.controller.metrics import AdapterMetricsReader
from autoscaler.controller.settings import ControllerSettings
from autoscaler.controller.telemetry import make_app
from autoscaler.policy.spec import MetricSpec, TargetType
from common.clock import ManualClock


async def test_metrics_and_probes() -> None:
    async with environment() as env:
        env.start(
            2, autoscaler(behavior=FAST, cold_start={"weightsGB": 140, "storageGBps": 10}, prediction={})
        )
        controller = env.controller()
        probe_clock = ManualClock(T0)
        async with TestClient(TestServer(make_app(controller.telemetry, probe_clock))) as http:
            assert (await http.get("/readyz")).status == 503  # before the first tick
            env.queue(24)
            only(await controller.step())
            assert (await http.get("/readyz")).status == 200
            assert (await http.get("/healthz")).status == 200
            text = await (await http.get("/metrics")).text()
            assert 'infscale_desired_replicas{autoscaler="llama",namespace="serving"} 6.0' in text
            assert 'infscale_current_replicas{autoscaler="llama",namespace="serving"} 6.0' in text
            assert (
                'infscale_forecast_value{autoscaler="llama",metric="infscale_queue_size",namespace="serving"}'
                in text
            )
            assert (
                'infscale_cold_start_seconds{autoscaler="llama",namespace="serving",source="model"} 14.0'
                in text
            )
            assert 'infscale_scales_total{autoscaler="llama",direction="up",namespace="serving"} 1.0' in text
            assert "infscale_tick_duration_seconds_count 1.0" in text
            assert (
                'infscale_decisions_total{autoscaler="llama",namespace="serving",reason="ValidMetricFound"}'
                in text
            )

            probe_clock.set(T0 + 3600)  # no tick for an hour: liveness fails
            assert (await http.get("/healthz")).status == 503

            env.fake.delete_autoscaler(NS, NAME)  # deleted: its series go
            only_none = await controller.step()
            assert only_none == []
            assert "infscale_desired_replicas{" not in await (await http.get("/metrics")).text()


async def test_metric_value_is_published_without_prediction_too() -> None:
    async with environment() as env:
        env.start(2, autoscaler(behavior=FAST))  # reactive: no forecasts
        controller = env.controller()
        env.fake.set_metric(NS, QUEUE, 20, "4500m", labels={"deployment": NAME}, timestamp=rfc3339(T0))
        only(await controller.step())
        assert controller.telemetry.metric_value.labels(NS, NAME, QUEUE)._value.get() == 24.5


async def test_adapter_reader_over_http() -> None:
    fake = FakeKube()
    fake.set_metric(NS, QUEUE, "1500m", 2, labels={"deployment": NAME}, timestamp=rfc3339(T0 - 4))
    fake.set_metric(NS, QUEUE + "_other", 9, labels={"deployment": "other"})
    metric = MetricSpec(QUEUE, TargetType.VALUE, 1000, selector=f"deployment={NAME}")
    async with serve(fake) as kube:
        base = str(kube.api.configuration.host)
        reader = AdapterMetricsReader(base, timeout_s=2, token_file=None)
        try:
            reading = await reader.read(NS, metric, T0)
            assert (reading.values_milli, reading.age_s) == ((1500, 2000), 4.0)
            missing = await reader.read(NS, MetricSpec("nope", TargetType.VALUE, 1000), T0)
            assert missing.values_milli is None and "404" in missing.error and "nope" in missing.error
        finally:
            await reader.close()
    assert ("GET", f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/{QUEUE}") in fake.log


async def test_adapter_reader_sends_the_service_account_token(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("Authorization", ""))
        return httpx.Response(503, json={"kind": "Status", "message": "backend down"})

    reader = AdapterMetricsReader(
        "https://adapter.example", timeout_s=1, token_file=token, transport=httpx.MockTransport(answer)
    )
    reading = await reader.read(NS, MetricSpec(QUEUE, TargetType.VALUE, 1000), T0)
    await reader.close()
    assert seen == ["Bearer s3cret"]
    assert reading.values_milli is None and "503 backend down" in reading.error


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        pytest.param(
            502, b'["not", "a", "Status"]', '502 ["not", "a", "Status"]', id="error with JSON not an object"
        ),
        pytest.param(500, b"<html>oops</html>", "500 <html>oops</html>", id="error that is not JSON"),
        pytest.param(200, b"[1, 2]", "not an ExternalMetricValueList", id="200 with a JSON array"),
    ],
)
async def test_adapter_reader_odd_answers_are_failed_reads(status: int, body: bytes, error: str) -> None:
    reader = AdapterMetricsReader(
        "https://adapter.example",
        timeout_s=1,
        token_file=None,
        transport=httpx.MockTransport(lambda request: httpx.Response(status, content=body)),
    )
    try:
        reading = await reader.read(NS, MetricSpec(QUEUE, TargetType.VALUE, 1000), T0)
    finally:
        await reader.close()
    assert reading.values_milli is None and error in reading.error


async def test_adapter_reader_parses_an_answer_again_only_when_its_bytes_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from autoscaler.controller import metrics

    parsed: list[int] = []
    real = metrics.parse_items
    monkeypatch.setattr(metrics, "parse_items", lambda data, now: parsed.append(1) or real(data, now))
    values = ["3", "3", "5"]

    def answer(request: httpx.Request) -> httpx.Response:
        item = {
            "metricName": QUEUE,
            "metricLabels": {"app": NAME},
            "timestamp": rfc3339(T0),
            "value": values.pop(0),
        }
        return httpx.Response(200, json={"kind": "ExternalMetricValueList", "items": [item]})

    reader = AdapterMetricsReader(
        "https://adapter.example", timeout_s=1, token_file=None, transport=httpx.MockTransport(answer)
    )
    try:
        answers = [await reader.read_items(NS, QUEUE, "", T0 + t) for t in (1.0, 2.0, 3.0)]
    finally:
        await reader.close()
    assert [a.items[0].value_milli for a in answers if a.items] == [3000, 3000, 5000]
    assert [a.read_at for a in answers] == [T0 + 1.0, T0 + 2.0, T0 + 3.0]  # each read's own time
    assert answers[1].items is answers[0].items and len(parsed) == 2  # the same bytes: not parsed again


class FlakyElector:
    """Leader election whose kube reads blow up twice with an unexpected error, then stop the run."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop, self.calls = stop, 0

    def leading(self, now: float) -> bool:
        return False

    async def tick(self, now: float) -> bool:
        self.calls += 1
        if self.calls <= 2:
            raise RuntimeError("unexpected lease document")
        self.stop.set()
        return False

    async def release(self, now: float) -> None:
        return None


async def test_run_keeps_electing_after_an_unexpected_election_error() -> None:
    """A leader-election round that raises must not end the election for good (the replica would
    tick on, healthy and never leading again): it is logged, counted and retried."""
    from typing import Any, cast

    from autoscaler.controller.driver import run
    from autoscaler.controller.loop import Controller

    stop = asyncio.Event()
    elector = FlakyElector(stop)
    async with environment() as env:
        controller = Controller(
            ControllerSettings(identity="t", tick_s=0.01),
            env.kube,
            cast(Any, None),
            elector=cast(Any, elector),
            clock=ManualClock(T0),
        )
        await asyncio.wait_for(run(controller, stop, retry_period_s=0), timeout=10)  # hang guard
        assert elector.calls == 3
        assert controller.telemetry.errors.labels("leader_election")._value.get() == 2


@pytest.mark.integration
async def test_infscale_controller_process_scales_and_releases_the_lease(tmp_path: Path) -> None:
    """The console script end to end: kubeconfig -> leader election -> a scale write -> SIGTERM ->
    the lease released. Waits are hang guards on a condition, not timing assumptions."""
    fake = FakeKube()
    fake.add_deployment(NS, NAME, 2)
    for i in range(2):
        fake.add_pod(NS, f"p{i}", labels={"app": NAME}, created=rfc3339(T0), ready_at=rfc3339(T0), node="n")
    fake.add_autoscaler(autoscaler(behavior=FAST))
    async with serve(fake) as kube:
        fake.set_metric(NS, QUEUE, 24, labels={"deployment": NAME})  # no timestamp: no staleness check
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": str(kube.api.configuration.host)}}],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
                    "current-context": "fake",
                }
            )
        )
        env = {
            **os.environ,
            "INFSCALE_CONTROLLER_TICK_S": "0.2",
            "INFSCALE_CONTROLLER_MAX_METRIC_AGE_S": "1e9",
            "INFSCALE_CONTROLLER_LEASE_NAMESPACE": "infscale-system",
        }
        env.pop("KUBERNETES_SERVICE_HOST", None)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "infscale",
            "controller",
            f"--kubeconfig={kubeconfig}",
            "--listen=127.0.0.1:0",
            "--identity=proc",
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            for _ in range(300):  # hang guard: 30 s
                if fake.scale_writes:
                    break
                await asyncio.sleep(0.1)
            assert fake.scale_writes == [(NAME, 6)]
            assert fake.leases[("infscale-system", "infscale-controller")]["spec"]["holderIdentity"] == "proc"
        finally:
            process.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(process.communicate(), timeout=30)
        assert process.returncode == 0, stderr.decode()[-2000:]
        assert fake.leases[("infscale-system", "infscale-controller")]["spec"]["holderIdentity"] == ""


def test_cli_rejects_bad_settings(capsys: pytest.CaptureFixture[str]) -> None:
    from infscale.cli import main

    assert main(["controller", "--tick-seconds", "-1"]) == 2
    assert "infscale controller: --tick-seconds: " in capsys.readouterr().err


@pytest.mark.parametrize(
    ("kubeconfig", "error"),
    [
        pytest.param(None, "no Kubernetes cluster configured", id="no cluster at all"),
        pytest.param("apiVersion: v1\n", "no current-context is set", id="a kubeconfig without a context"),
    ],
)
def test_started_without_a_cluster_is_one_line_and_exit_1(
    kubeconfig: str | None, error: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first thing a new user tries: one line naming the problem, not a traceback."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "KUBECONFIG")}
    env["HOME"] = str(tmp_path)
    args = [sys.executable, "-m", "infscale", "controller", "--no-leader-elect"]
    if kubeconfig is not None:
        (tmp_path / "config").write_text(kubeconfig)
        args.append(f"--kubeconfig={tmp_path / 'config'}")
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("infscale controller: ") and error in lines[0]
