"""Serving TLS: certificate rotation without a restart, the self-signed dev mode, bad files."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import ssl
import stat
from pathlib import Path

import httpx
import pytest
from conftest import (
    Issued,
    Pki,
    ScriptedBackend,
    client_context,
    default_script,
    issue,
    make_ca,
    request_header_config,
    serve,
)
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

import adapter.tls
from adapter.auth import Decision, DelegatedAccess, InsecureDevAccess, TokenReviewResult
from adapter.identity import RequestAttributes, UserInfo
from adapter.server import create_app
from adapter.telemetry import Telemetry
from adapter.tls import ServingTLS, TLSConfigError, self_signed_dev

SERVER = [ExtendedKeyUsageOID.SERVER_AUTH]


async def served_serial(url: str, cafile: Path) -> int:
    """The serial number of the certificate a fresh handshake sees."""
    host, port = url.removeprefix("https://").split(":")
    ctx = ssl.create_default_context(cafile=str(cafile))
    _, writer = await asyncio.open_connection(host, int(port), ssl=ctx, server_hostname="localhost")
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    return x509.load_der_x509_certificate(der).serial_number


def serial(issued: Issued) -> int:
    return x509.load_pem_x509_certificate(issued.cert.read_bytes()).serial_number


def install(issued: Issued, cert: Path, key: Path) -> None:
    shutil.copyfile(issued.cert, cert)
    shutil.copyfile(issued.key, key)


async def test_rotated_certificate_is_served_without_restart(tmp_path: Path) -> None:
    ca = make_ca(tmp_path, "rotation-ca")
    first = issue(tmp_path, "first", ca, cn="a", usages=SERVER, hosts=("localhost",))
    second = issue(tmp_path, "second", ca, cn="a", usages=SERVER, hosts=("localhost",))
    live = tmp_path / "live"
    live.mkdir()
    cert, key = live / "tls.crt", live / "tls.key"
    install(first, cert, key)
    tls = ServingTLS(cert, key)
    async with serve(create_app(ScriptedBackend(), InsecureDevAccess(), Telemetry()), tls.context) as url:
        assert await served_serial(url, ca[0]) == serial(first)
        assert tls.reload_if_changed() is False  # nothing changed
        shutil.copyfile(second.cert, cert)  # half-way through a rotation: new cert, old key
        assert tls.reload_if_changed() is False
        assert await served_serial(url, ca[0]) == serial(first)  # the old pair stays live
        shutil.copyfile(second.key, key)
        assert tls.reload_if_changed() is True
        assert await served_serial(url, ca[0]) == serial(second)


async def test_files_that_change_between_check_and_load_are_retried_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pair can change again between the scratch check and the live load (the Secret volume
    swaps its symlink at any moment); that must not end the reload loop."""
    ca = make_ca(tmp_path, "race-ca")
    first = issue(tmp_path, "first", ca, cn="a", usages=SERVER, hosts=("localhost",))
    second = issue(tmp_path, "second", ca, cn="a", usages=SERVER, hosts=("localhost",))
    third = issue(tmp_path, "third", ca, cn="a", usages=SERVER, hosts=("localhost",))
    live = tmp_path / "live"
    live.mkdir()
    cert, key = live / "tls.crt", live / "tls.key"
    install(first, cert, key)
    tls = ServingTLS(cert, key)
    check = adapter.tls._check_pair

    def check_then_race(cert_file: Path, key_file: Path) -> None:
        check(cert_file, key_file)
        shutil.copyfile(third.cert, cert)  # the next rotation starts: new cert, key not yet

    install(second, cert, key)
    monkeypatch.setattr(adapter.tls, "_check_pair", check_then_race)
    assert tls.reload_if_changed() is False
    monkeypatch.setattr(adapter.tls, "_check_pair", check)
    shutil.copyfile(third.key, key)
    assert tls.reload_if_changed() is True
    async with serve(create_app(ScriptedBackend(), InsecureDevAccess(), Telemetry()), tls.context) as url:
        assert await served_serial(url, ca[0]) == serial(third)


def test_bad_files_name_the_file(tmp_path: Path) -> None:
    garbage = tmp_path / "tls.crt"
    garbage.write_text("not a certificate")
    with pytest.raises(TLSConfigError, match=re.escape(str(garbage))):
        ServingTLS(garbage, tmp_path / "tls.key")
    with pytest.raises(TLSConfigError, match=r"missing\.crt"):
        ServingTLS(tmp_path / "missing.crt", tmp_path / "tls.key")


async def test_self_signed_dev_certificate(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cert, key = self_signed_dev(directory=tmp_path)
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    assert "SELF-SIGNED DEV CERTIFICATE" in caplog.text
    tls = ServingTLS(cert, key)
    async with serve(create_app(ScriptedBackend(), InsecureDevAccess(), Telemetry()), tls.context) as url:
        # only a client that pins this very certificate can verify it
        parsed = x509.load_pem_x509_certificate(cert.read_bytes())
        assert await served_serial(url, cert) == parsed.serial_number
        names = parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert "localhost" in names.get_values_for_type(x509.DNSName)


class _AllowAll:
    async def review_token(self, token: str) -> TokenReviewResult:
        return TokenReviewResult(False)

    async def review_access(self, user: UserInfo, attributes: RequestAttributes) -> Decision:
        return Decision(True)


async def test_a_client_ca_added_at_runtime_is_trusted_by_new_connections(pki: Pki) -> None:
    """The ConfigMap refresh hands a new front-proxy CA to the running server."""
    tls = ServingTLS(pki.server.cert, pki.server.key)  # no client CA yet: certificates not even asked for
    access = DelegatedAccess(_AllowAll(), request_header_config(pki))
    app = create_app(ScriptedBackend(default_script()), access, Telemetry())
    path = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/infscale_queue_size"
    headers = {"X-Remote-User": "system:kube-aggregator"}
    async with serve(app, tls.context) as url:
        async with httpx.AsyncClient(base_url=url, verify=client_context(pki, pki.front_proxy)) as client:
            assert (await client.get(path, headers=headers)).status_code == 401
        tls.add_client_ca(pki.front_proxy_ca.read_bytes())
        async with httpx.AsyncClient(base_url=url, verify=client_context(pki, pki.front_proxy)) as client:
            assert (await client.get(path, headers=headers)).status_code == 200
