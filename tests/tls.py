"""Certificates for TLS tests, made in the test with ``cryptography``: a CA and what it signs.

:class:`TestCa` issues server certificates (for an IP address, as the tests' listeners are on
127.0.0.1) and client certificates (a subject of the test's choosing), valid from now or
already expired. Each certificate is written as three PEM files under the CA's directory:
``<name>.crt`` (the certificate), ``<name>.key`` (its private key, optionally encrypted) and
``<name>.pem`` (key and certificate together: what ``ssl.keystore.location`` takes).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_NAME_OIDS = {
    "CN": NameOID.COMMON_NAME,
    "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
    "O": NameOID.ORGANIZATION_NAME,
    "L": NameOID.LOCALITY_NAME,
    "ST": NameOID.STATE_OR_PROVINCE_NAME,
    "C": NameOID.COUNTRY_NAME,
}


def subject(**attributes: str) -> x509.Name:
    """``subject(C="US", O="Acme", OU="ops", CN="alice")``: attributes in certificate order (most general first)."""
    return x509.Name([x509.NameAttribute(_NAME_OIDS[k], v) for k, v in attributes.items()])


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path
    pem: Path  # key + certificate, for ssl.keystore.location


class TestCa:
    """A self-signed CA that writes what it issues under ``directory``."""

    __test__ = False  # not a pytest test class

    def __init__(self, directory: Path, name: str = "strait test CA") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.name = subject(CN=name)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        self.pem = directory / f"{name.replace(' ', '-')}.crt"
        self.pem.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self,
        file_name: str,
        name: x509.Name,
        *,
        ip: str | None = None,
        client: bool = False,
        expired: bool = False,
        key_password: str | None = None,
    ) -> Issued:
        """A certificate for ``name`` (with ``ip`` as its subject alternative name for a server), for
        TLS clients only when ``client`` (else for servers and clients: a node is both); ``expired``:
        valid only until yesterday."""
        key = ec.generate_private_key(ec.SECP256R1())
        # A node's certificate serves its listeners and is its client certificate towards other nodes.
        usages = (
            [ExtendedKeyUsageOID.CLIENT_AUTH]
            if client
            else [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
        )
        now = datetime.datetime.now(datetime.UTC)
        start, end = (
            (now - datetime.timedelta(days=3), now - datetime.timedelta(days=1))
            if expired
            else (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=2))
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if ip is not None:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]), critical=False
            )
        cert = builder.sign(self.key, hashes.SHA256())
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(key_password.encode())
            if key_password is not None
            else serialization.NoEncryption()
        )
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        issued = Issued(
            self.directory / f"{file_name}.crt",
            self.directory / f"{file_name}.key",
            self.directory / f"{file_name}.pem",
        )
        issued.cert.write_bytes(cert_pem)
        issued.key.write_bytes(key_pem)
        issued.pem.write_bytes(key_pem + cert_pem)
        return issued
