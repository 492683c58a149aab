"""A real Prometheus for integration tests: a generated config with static targets, a private TSDB in a
temporary directory, an ephemeral port. Skips the test when the binary (Debian package `prometheus`)
is absent."""

from __future__ import annotations

import re
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


def prometheus_version() -> tuple[int, int]:
    """(major, minor) of the installed binary (call after checking PROMETHEUS)."""
    assert PROMETHEUS is not None
    out = subprocess.run([PROMETHEUS, "--version"], capture_output=True, text=True, check=True)
    found = re.search(r"version (\d+)\.(\d+)", out.stdout + out.stderr)
    assert found, out.stdout + out.stderr
    return int(found.group(1)), int(found.group(2))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def backfill(workdir: Path, openmetrics: str) -> None:
    """Write samples (OpenMetrics text ending in `# EOF`) into workdir/prometheus-data with promtool, the
    TSDB `prometheus(workdir, [])` then serves: past samples at exact times, no scraping involved."""
    (workdir / "samples.om").write_text(openmetrics, encoding="utf-8")
    subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--quiet",
            str(workdir / "samples.om"),
            str(workdir / "prometheus-data"),
        ],
        check=True,
        capture_output=True,
    )


@contextmanager
def prometheus(
    workdir: Path, targets: Sequence[tuple[str, Mapping[str, str]]], interval_s: float = 0.5
) -> Iterator[str]:
    """Prometheus scraping each metrics URL (with its target labels) every interval_s; yields its URL
    once it answers /-/ready."""
    if PROMETHEUS is None:
        pytest.skip("prometheus binary not installed (apt-get install prometheus)")
    interval = f"{round(interval_s * 1000)}ms"
    timeout = interval  # the most Prometheus allows: a scrape that misses it marks its series stale
    jobs = []
    for k, (metrics_url, labels) in enumerate(targets):
        parsed = httpx.URL(metrics_url)
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
    log = workdir / "prometheus.log"
    for _attempt in range(3):  # another process may take the free port before Prometheus binds it
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with log.open("w") as log_file:
            process = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={workdir / 'prometheus-data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdout=subprocess.DEVNULL,
                stderr=log_file,
            )
        if _wait_ready(process, url):
            break
    else:
        raise AssertionError(f"prometheus did not start:\n{log.read_text()[-2000:]}")
    try:
        yield url
    finally:
        _stop(process)


def _wait_ready(process: subprocess.Popen[bytes], url: str) -> bool:
    """True once /-/ready answers 200; False if the process exits first (e.g. the port was taken) or
    never gets ready (it is stopped then)."""
    for _ in range(300):  # hang guard of ~30 s; ready in about a second
        if process.poll() is not None:
            return False
        try:
            if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    _stop(process)
    return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
