"""A small certificate authority for P4Runtime over TLS: one CA, a certificate per switch (the server side)
and per controller (the client side of mutual TLS), made with ``cryptography``.

The fabric launcher makes one per run (``ibsec-fabric --tls``); tests make their own. The CA's private
key never touches the disk: it signs the certificates in memory and is dropped, so nobody can mint another
certificate the switches would trust. Private keys are written 0600 (created so, never readable first).
Server certificates name 127.0.0.1 and localhost, the addresses switches serve P4Runtime on."""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=30)
CA_KEY_USAGE = x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                             data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                             encipher_only=False, decipher_only=False)
SERVER_NAMES = (x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost"))


@dataclass(frozen=True)
class Credentials:
    """A certificate (PEM) and its private key (PEM, mode 0600)."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    cacert: Path
    servers: dict[str, Credentials]
    clients: dict[str, Credentials]

    def files(self) -> list[Path]:
        creds = [*self.servers.values(), *self.clients.values()]
        return [self.cacert, *(path for c in creds for path in (c.cert, c.key))]


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o600)  # an existing file keeps its mode through O_CREAT: set it
        f.write(pem)


class _Authority:
    def __init__(self, name: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = _name(name)
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
                     .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                     .add_extension(CA_KEY_USAGE, critical=True)
                     .sign(self.key, hashes.SHA256()))

    def issue(self, common_name: str, server: bool) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(self.name)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(list(SERVER_NAMES)), critical=False)
        return builder.sign(self.key, hashes.SHA256()), key


def make_pki(directory: Path, servers: Iterable[str], clients: Iterable[str], prefix: str = "tls-",
             ca_name: str = "p4switch run CA") -> Pki:
    """A fresh CA and certificates for ``servers`` and ``clients`` in ``directory`` (which must exist):
    PREFIXca.pem, PREFIX<name>.pem and PREFIX<name>.key."""
    authority = _Authority(ca_name)
    cacert = directory / f"{prefix}ca.pem"
    cacert.write_bytes(authority.cert.public_bytes(serialization.Encoding.PEM))
    made: dict[bool, dict[str, Credentials]] = {True: {}, False: {}}
    for names, server in ((servers, True), (clients, False)):
        for name in names:
            cert, key = authority.issue(name, server)
            creds = Credentials(directory / f"{prefix}{name}.pem", directory / f"{prefix}{name}.key")
            _write_key(creds.key, key)
            creds.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
            made[server][name] = creds
    return Pki(cacert, made[True], made[False])
