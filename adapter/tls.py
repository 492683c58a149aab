"""Serving TLS: the certificate the aggregator verifies, reloaded when its files change.

Pipeline position: the CLI builds a `ServingTLS` and hands its `context` to the aiohttp site.
One `ssl.SSLContext` lives for the whole process; a rotated certificate (cert-manager renews into
the mounted Secret) is loaded into that same context, so new handshakes use it and open connections
keep theirs. Client certificates are requested but not required (`CERT_OPTIONAL`): the aggregator
presents its front-proxy certificate, kubelet probes present none.

`self_signed_dev` makes a throwaway certificate for local use behind an explicit flag.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import ipaddress
import logging
import os
import ssl
import tempfile
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

log = logging.getLogger(__name__)


class TLSConfigError(ValueError):
    """Certificate or key files that cannot be used; the message names the file."""


def _check_pair(cert_file: Path, key_file: Path) -> None:
    """Load the pair into a scratch context first: a failed load into the live context could
    leave it with the new certificate and the old key."""
    scratch = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        scratch.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise TLSConfigError(f"cannot load TLS certificate {cert_file} with key {key_file}: {exc}") from exc


def _fingerprint(*files: Path) -> str:
    digest = hashlib.sha256()
    for f in files:
        try:
            digest.update(f.read_bytes())
        except OSError as exc:
            digest.update(f"unreadable {exc.errno}".encode())
    return digest.hexdigest()


class ServingTLS:
    """The server's SSLContext, its certificate files and the CAs trusted for client certificates."""

    def __init__(self, cert_file: Path, key_file: Path, client_ca_pem: bytes | None = None) -> None:
        self.cert_file, self.key_file = Path(cert_file), Path(key_file)
        _check_pair(self.cert_file, self.key_file)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_alpn_protocols(["http/1.1"])  # aiohttp speaks HTTP/1.1 only; never offer h2
        ctx.load_cert_chain(self.cert_file, self.key_file)
        ctx.verify_mode = ssl.CERT_NONE
        self.context = ctx
        self._loaded = _fingerprint(self.cert_file, self.key_file)
        self._client_cas: set[bytes] = set()
        if client_ca_pem:
            self.add_client_ca(client_ca_pem)

    def add_client_ca(self, pem: bytes | None) -> None:
        """Trust `pem` for client certificates from now on. A running SSLContext cannot forget a CA,
        so removal is enforced by the front-proxy check in adapter/auth.py, not here."""
        if not pem:
            return
        certs = x509.load_pem_x509_certificates(pem)
        for cert in certs:
            der = cert.public_bytes(serialization.Encoding.DER)
            if der not in self._client_cas:
                self.context.load_verify_locations(cadata=der)
                self._client_cas.add(der)
        self.context.verify_mode = ssl.CERT_OPTIONAL

    def reload_if_changed(self) -> bool:
        """Load the certificate files again if their contents changed; True if a new pair is live.

        A half-written rotation (certificate and key not matching yet) keeps the old pair and is
        retried on the next call.
        """
        current = _fingerprint(self.cert_file, self.key_file)
        if current == self._loaded:
            return False
        try:
            _check_pair(self.cert_file, self.key_file)
        except TLSConfigError as exc:
            log.warning("keeping the current serving certificate: %s", exc)
            return False
        try:
            # the files can change again after the check (the volume swaps its symlink at any
            # moment); a failed live load may leave the new certificate with the old key, and the
            # fingerprint left unchanged makes the next check load the pair again
            self.context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            log.warning("serving certificate changed while loading it; retrying at the next check: %s", exc)
            return False
        self._loaded = current
        log.info("serving certificate reloaded from %s", self.cert_file)
        return True

    async def watch(self, interval_s: float) -> None:
        """Poll the files every `interval_s` (a Secret volume update is an atomic symlink swap, which
        inotify on the file itself would miss)."""
        while True:
            await asyncio.sleep(interval_s)
            self.reload_if_changed()


def generate_self_signed(hosts: Sequence[str], valid_days: int = 365) -> tuple[bytes, bytes]:
    """A self-signed serving certificate (PEM) for `hosts` (DNS names or IP addresses) and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "infscale-adapter-dev")])
    alt_names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt_names.append(x509.DNSName(host))
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=valid_days))
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


DEV_HOSTS = ("localhost", "127.0.0.1", "::1")


def self_signed_dev(hosts: Sequence[str] = DEV_HOSTS, directory: Path | None = None) -> tuple[Path, Path]:
    """Write a fresh self-signed certificate and key (mode 0600) and return their paths.

    Development only: nothing can verify it, so clients must skip verification or pin it.
    """
    cert_pem, key_pem = generate_self_signed(hosts)
    where = (
        Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="infscale-adapter-tls-"))
    )
    cert_file, key_file = where / "tls.crt", where / "tls.key"
    cert_file.write_bytes(cert_pem)
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key_pem)
    sha = hashlib.sha256(x509.load_pem_x509_certificate(cert_pem).public_bytes(serialization.Encoding.DER))
    log.warning(
        "SELF-SIGNED DEV CERTIFICATE for %s written to %s (sha256 %s); no client can verify it. "
        "Development only: on a cluster, mount a certificate the APIService caBundle trusts.",
        ", ".join(hosts),
        cert_file,
        sha.hexdigest(),
    )
    return cert_file, key_file
