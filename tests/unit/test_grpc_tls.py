"""The gRPC door's TLS pieces that need no network: the front's choice of backend, the mode names, and
the certificate the broker makes once and keeps."""

from __future__ import annotations

import datetime
import stat
from pathlib import Path

import pytest
from cryptography import x509

from txmq.common import errors
from txmq.server.grpc_front import Backend, _Relay, backend_for
from txmq.server.tls import TlsMode, load_key_pair, self_signed

HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
CLIENT_HELLO_START = bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01])


def test_a_tls_handshake_goes_to_the_tls_backend_anything_else_to_plaintext() -> None:
    assert backend_for(CLIENT_HELLO_START) is Backend.TLS
    assert backend_for(CLIENT_HELLO_START[:1]) is Backend.TLS  # one byte is enough to decide
    assert backend_for(HTTP2_PREFACE) is Backend.PLAINTEXT
    assert backend_for(b"P") is Backend.PLAINTEXT
    assert backend_for(b"\x00garbage") is Backend.PLAINTEXT  # grpc itself refuses it


@pytest.mark.parametrize("text", ["off", "permissive", "ON", " Permissive "])
def test_tls_modes_parse(text: str) -> None:
    assert TlsMode.parse(text).value == text.strip().lower()


def test_an_unknown_tls_mode_is_refused_with_the_choices() -> None:
    with pytest.raises(errors.InvalidArgument, match="off, permissive or on"):
        TlsMode.parse("yes")


def test_the_self_signed_pair_is_made_once_kept_private_and_reused(tmp_path: Path) -> None:
    first = load_key_pair("", "", tmp_path, "127.0.0.1")
    again = load_key_pair("", "", tmp_path, "127.0.0.1")
    assert again == first  # a restart presents the same certificate
    for name in ("broker.crt", "broker.key"):
        assert stat.S_IMODE((tmp_path / "tls" / name).stat().st_mode) == 0o600
    assert not list((tmp_path / "tls").glob("*.tmp"))


def test_a_key_without_its_certificate_is_made_again(tmp_path: Path) -> None:
    first = load_key_pair("", "", tmp_path, "127.0.0.1")
    (tmp_path / "tls" / "broker.crt").unlink()  # a crash between the two writes
    second = load_key_pair("", "", tmp_path, "127.0.0.1")
    assert second.certificate_pem != first.certificate_pem
    assert (tmp_path / "tls" / "broker.crt").read_bytes() == second.certificate_pem


def test_the_certificate_names_loopback_and_the_listening_host() -> None:
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    pair = self_signed("broker.example", now=now)
    cert = x509.load_pem_x509_certificate(pair.certificate_pem)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.DNSName)) == {"localhost", "broker.example"}
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}
    assert cert.not_valid_before_utc < now < cert.not_valid_after_utc
    by_ip = x509.load_pem_x509_certificate(self_signed("10.1.2.3").certificate_pem)
    ips = by_ip.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "10.1.2.3" in {str(ip) for ip in ips.get_values_for_type(x509.IPAddress)}


def test_the_operators_pair_is_used_as_given_and_half_a_pair_is_refused(tmp_path: Path) -> None:
    pair = self_signed("127.0.0.1")
    (tmp_path / "c.pem").write_bytes(pair.certificate_pem)
    (tmp_path / "k.pem").write_bytes(pair.private_key_pem)
    assert load_key_pair(str(tmp_path / "c.pem"), str(tmp_path / "k.pem"), tmp_path, "") == pair
    assert not (tmp_path / "tls").exists()  # nothing made when the operator gave a pair
    with pytest.raises(errors.InvalidArgument, match="both --tls-cert and --tls-key"):
        load_key_pair(str(tmp_path / "c.pem"), "", tmp_path, "")
    with pytest.raises(errors.InvalidArgument, match="cannot read"):
        load_key_pair(str(tmp_path / "missing.pem"), str(tmp_path / "k.pem"), tmp_path, "")


class _Recorder:
    """A transport that records what the relay writes to it."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.eof = False
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    def close(self) -> None:
        self.closed = True

    def set_write_buffer_limits(self, high: int, low: int) -> None:
        pass


def _side() -> tuple[_Relay, _Recorder]:
    relay, transport = _Relay(), _Recorder()
    relay.connection_made(transport)  # type: ignore[arg-type]
    return relay, transport


def test_bytes_and_an_end_that_arrive_before_the_sides_are_joined_are_relayed_in_order() -> None:
    backend, backend_transport = _side()
    client, client_transport = _side()
    backend.data_received(b"SETTINGS")  # a grpc server speaks first, maybe before create_connection returns
    backend.data_received(b"+more")
    client.data_received(b"PRI")
    client.eof_received()
    backend.join(client)
    client.join(backend)
    assert client_transport.written == [b"SETTINGS+more"]
    assert backend_transport.written == [b"PRI"] and backend_transport.eof
    backend.data_received(b"later")
    assert client_transport.written[-1] == b"later"


def test_a_side_gone_before_the_join_closes_the_other() -> None:
    backend, _ = _side()
    client, client_transport = _side()
    backend.connection_lost(None)  # the backend hung up before the front joined the two
    backend.join(client)
    client.join(backend)
    assert client_transport.closed


def test_when_both_directions_have_ended_both_sides_are_closed() -> None:
    backend, backend_transport = _side()
    client, client_transport = _side()
    backend.join(client)
    client.join(backend)
    client.eof_received()  # the client is done sending
    assert backend_transport.eof and not backend_transport.closed
    backend.data_received(b"answer")  # a half-closed connection may still answer
    assert client_transport.written == [b"answer"]
    backend.eof_received()
    assert client_transport.closed and backend_transport.closed


def test_ends_seen_on_both_sides_before_the_join_close_both_once_joined() -> None:
    backend, backend_transport = _side()
    client, client_transport = _side()
    client.data_received(b"PRI")
    client.eof_received()
    backend.data_received(b"SETTINGS")
    backend.eof_received()
    backend.join(client)
    assert not client_transport.closed  # not before the other side has been joined and written
    client.join(backend)
    assert backend_transport.written == [b"PRI"] and client_transport.written == [b"SETTINGS"]
    assert client_transport.closed and backend_transport.closed
