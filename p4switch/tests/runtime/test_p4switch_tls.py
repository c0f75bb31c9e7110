"""P4Runtime over TLS and mutual TLS with simple_switch_grpc's options: who gets in and who does not.

The certificates come from p4switch.pki (one CA per test, and a second, foreign CA)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc

from p4switch import pki
from p4switch.tests.runtime import harness
from p4switch.tests.runtime.harness import update
from p4switch.tests.runtime.test_p4runtime_l2 import dmac_entry


@pytest.fixture
def ours(tmp_path: Path) -> pki.Pki:
    (tmp_path / "ours").mkdir()
    return pki.make_pki(tmp_path / "ours", servers=["s1"], clients=["sm"])


@pytest.fixture
def foreign(tmp_path: Path) -> pki.Pki:
    (tmp_path / "foreign").mkdir()
    return pki.make_pki(tmp_path / "foreign", servers=["s1"], clients=["sm"], ca_name="someone else's CA")


def server_args(authority: pki.Pki, client_auth: bool) -> list[str]:
    server = authority.servers["s1"]
    args = ["--no-p4", "--", "--grpc-server-ssl", "--grpc-server-cert", str(server.cert),
            "--grpc-server-key", str(server.key)]
    if client_auth:
        args += ["--grpc-server-cacert", str(authority.cacert), "--grpc-server-with-client-auth"]
    return args


def credentials(ca: pki.Pki, client: pki.Credentials | None = None) -> grpc.ChannelCredentials:
    """A client trusting ``ca``'s switches, presenting ``client``'s certificate when given."""
    return grpc.ssl_channel_credentials(ca.cacert.read_bytes(),
                                        client.key.read_bytes() if client else None,
                                        client.cert.read_bytes() if client else None)


def capabilities(address: str, creds: grpc.ChannelCredentials | None) -> grpc.StatusCode:
    """The status of one Capabilities call (OK, or why the connection failed)."""
    channel = grpc.insecure_channel(address) if creds is None else grpc.secure_channel(address, creds)
    with channel:
        try:
            answer = p4r_grpc.P4RuntimeStub(channel).Capabilities(p4r.CapabilitiesRequest(), timeout=60)
        except grpc.RpcError as err:
            return err.code()  # type: ignore[no-any-return]
    assert answer.p4runtime_api_version
    return grpc.StatusCode.OK


def test_tls_client_connects_and_a_plaintext_one_does_not(tmp_path: Path, ours: pki.Pki,
                                                          foreign: pki.Pki) -> None:
    with harness.switch_process(server_args(ours, client_auth=False), tmp_path / "s1") as proc:
        assert "(TLS)" in proc.output[-1]
        assert capabilities(proc.address, credentials(ours)) == grpc.StatusCode.OK
        assert capabilities(proc.address, None) == grpc.StatusCode.UNAVAILABLE
        # the client checks the switch too: a switch certificate from another CA is not trusted
        assert capabilities(proc.address, credentials(foreign)) == grpc.StatusCode.UNAVAILABLE


def test_mutual_tls_admits_only_clients_with_a_certificate_of_its_ca(
        tmp_path: Path, ours: pki.Pki, foreign: pki.Pki, l2fwd: harness.Program) -> None:
    with harness.switch_process(server_args(ours, client_auth=True), tmp_path / "s1") as proc:
        assert "(mutual TLS)" in proc.output[-1]
        assert capabilities(proc.address, credentials(ours)) == grpc.StatusCode.UNAVAILABLE  # no certificate
        foreign_client = grpc.ssl_channel_credentials(ours.cacert.read_bytes(),
                                                      foreign.clients["sm"].key.read_bytes(),
                                                      foreign.clients["sm"].cert.read_bytes())
        assert capabilities(proc.address, foreign_client) == grpc.StatusCode.UNAVAILABLE
        assert capabilities(proc.address, None) == grpc.StatusCode.UNAVAILABLE
        with harness.primary_client(proc.address, l2fwd, credentials(ours, ours.clients["sm"])) as client:
            client.write(update(p4r.Update.INSERT, table_entry=dmac_entry(l2fwd, b"\x02" * 6, b"\x01")))
            assert len(client.read(p4r.Entity(table_entry=p4r.TableEntry()))) == 1
        assert proc.stop() == 0
    log = proc.log_file.read_text()
    assert "P4Runtime (mutual TLS) listening" in log and "can be read by other users" not in log


def test_key_files_readable_by_others_are_warned_about(tmp_path: Path, ours: pki.Pki) -> None:
    os.chmod(ours.servers["s1"].key, 0o644)
    with harness.switch_process(server_args(ours, client_auth=False), tmp_path / "s1") as proc:
        assert proc.stop() == 0
    assert f"the TLS key {ours.servers['s1'].key} can be read by other users" in proc.log_file.read_text()


def test_pki_keys_are_private_and_certificates_name_the_loopback(ours: pki.Pki) -> None:
    from cryptography import x509

    for creds in (*ours.servers.values(), *ours.clients.values()):
        assert os.stat(creds.key).st_mode & 0o777 == 0o600
    server = x509.load_pem_x509_certificate(ours.servers["s1"].cert.read_bytes())
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert sorted(ours.cacert.parent.iterdir()) == sorted(ours.files())  # the CA's key is never written


def test_wrong_tls_files_are_named_and_the_switch_does_not_start(tmp_path: Path, ours: pki.Pki,
                                                                 foreign: pki.Pki) -> None:
    server, stranger = ours.servers["s1"], foreign.servers["s1"]
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    cases = [
        (server.cert, garbage, None, f"--grpc-server-key {garbage} is not an unencrypted PEM private key"),
        (garbage, server.key, None, f"--grpc-server-cert {garbage} is not a PEM certificate"),
        (server.cert, stranger.key, None, f"{stranger.key} is not the key of {server.cert}"),
        (server.cert, server.key, garbage, f"--grpc-server-cacert {garbage} is not a PEM certificate"),
        (server.cert, tmp_path / "missing.key", None, "cannot read TLS file"),
    ]
    for cert, key, cacert, message in cases:
        argv = ["--no-p4", "--", "--grpc-server-addr", "127.0.0.1:0", "--grpc-server-ssl",
                "--grpc-server-cert", str(cert), "--grpc-server-key", str(key)]
        argv += ["--grpc-server-cacert", str(cacert)] if cacert else []
        done = subprocess.run([str(harness.VENV_BIN / "p4switch"), *argv], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2 and message in done.stderr, (message, done.stderr)
        assert "BEGIN" not in done.stderr  # no key or certificate material in the message
