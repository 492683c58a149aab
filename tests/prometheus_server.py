"""A real Prometheus for integration tests: a generated config with static targets, a private TSDB in a
temporary directory, an ephemeral port. Skips the test when the binary (Debian package `prometheus`)
is absent."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml

PROMETHEUS = shutil.which("prometheus")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def prometheus(
    workdir: Path, targets: Sequence[tuple[str, Mapping[str, str]]], interval_s: float = 0.5
) -> Iterator[str]:
    """Prometheus scraping each metrics URL (with its target labels) every interval_s; yields its URL
    once it answers /-/ready."""
    if PROMETHEUS is None:
        pytest.skip("prometheus binary not installed (apt-get install prometheus)")
    interval = f"{round(interval_s * 1000)}ms"
    timeout = f"{round(interval_s * 800)}ms"
    jobs = []
    for k, (url, labels) in enumerate(targets):
        parsed = httpx.URL(url)
        jobs.append(
            {
                "job_name": f"target-{k}",
                "scrape_interval": interval,
                "scrape_timeout": timeout,
                "metrics_path": parsed.path,
                "static_configs": [{"targets": [f"{parsed.host}:{parsed.port}"], "labels": dict(labels)}],
            }
        )
    config = workdir / "prometheus.yml"
    config.write_text(yaml.safe_dump({"global": {"scrape_interval": interval}, "scrape_configs": jobs}))
    port = free_port()
    with (workdir / "prometheus.log").open("w") as log:
        process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'prometheus-data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):  # hang guard of ~30 s; ready in about a second
            if process.poll() is not None:
                raise AssertionError(
                    f"prometheus exited with {process.returncode}: see {workdir}/prometheus.log"
                )
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        else:
            raise AssertionError("prometheus never became ready")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
