"""The gRPC door's TLS certificate: the operator's, or a self-signed one the broker makes once and keeps.

RocketMQ 5's Java client connects with TLS unless told otherwise and trusts any certificate (the Apache
proxy answers it with a self-signed one in its default "test mode"); Python and Node clients connect in
plaintext. So a broker without a configured certificate makes one: an ECDSA P-256 key and a certificate
for ``localhost``, ``127.0.0.1``, ``::1`` and the listening host, kept under ``<data dir>/tls/`` so that
restarts present the same certificate (a client that pinned it keeps working).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from txmq.broker.config import TlsMode as TlsMode  # the mode is a broker setting
from txmq.broker.config import check_key_pair_given
from txmq.common import errors
from txmq.common.ports import is_wildcard_host

CERT_FILE = "broker.crt"
KEY_FILE = "broker.key"
SELF_SIGNED_DAYS = 3650


@dataclass(frozen=True, slots=True)
class KeyPair:
    certificate_pem: bytes
    private_key_pem: bytes


def load_key_pair(cert_file: str, key_file: str, data_dir: Path, host: str) -> KeyPair:
    """The operator's certificate and key when both are given, else the kept self-signed pair (made on
    first use). One without the other is an error: a half-configured TLS must not fall back silently."""
    check_key_pair_given(cert_file, key_file)
    if cert_file:
        try:
            return KeyPair(Path(cert_file).read_bytes(), Path(key_file).read_bytes())
        except OSError as exc:
            raise errors.InvalidArgument(f"cannot read the TLS certificate or key: {exc}") from exc
    folder = data_dir / "tls"
    cert_path, key_path = folder / CERT_FILE, folder / KEY_FILE
    if cert_path.exists() and key_path.exists():
        return KeyPair(cert_path.read_bytes(), key_path.read_bytes())
    pair = self_signed(host)
    folder.mkdir(parents=True, exist_ok=True)
    _write_private(key_path, pair.private_key_pem)
    _write_private(cert_path, pair.certificate_pem)
    return pair


def self_signed(host: str, *, now: datetime.datetime | None = None) -> KeyPair:
    """A new ECDSA P-256 key and a self-signed certificate naming the loopback names and ``host``."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError as exc:  # a dependency of txmq; only a broken install lacks it
        raise errors.InvalidArgument(
            "making a self-signed TLS certificate needs the 'cryptography' package "
            "(pip install cryptography), or give --tls-cert and --tls-key"
        ) from exc
    start = now or datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "txmq broker")])
    dns: list[x509.GeneralName] = [x509.DNSName("localhost")]
    ips = {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")}
    if not is_wildcard_host(host):
        try:
            ips.add(ipaddress.ip_address(host.strip("[]")))
        except ValueError:
            dns.append(x509.DNSName(host))
    names = dns + [x509.IPAddress(ip) for ip in sorted(ips, key=str)]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - datetime.timedelta(minutes=5))
        .not_valid_after(start + datetime.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(
        certificate.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` readable by its owner only, whole or not at all (a temp file renamed over)."""
    temp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
